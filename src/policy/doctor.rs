//! `doctor`'s judgement of an installed environment on a machine's GPUs: for each binary with
//! device code and each GPU, whether a code object the runtime would load is there (in the
//! binary, or in the kpack archive its marker leads to, by the target-id compatibility rules);
//! whether the kernel databases a library ships cover the GPU; whether the environment holds
//! one ROCm ABI; whether the loader finds every library. Each problem names the file, the
//! distribution that owns it, and the fix as a command where there is one.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::installed::{Distribution, Environment, InstalledBinary};
use crate::analysis::machine::{Gpu, Machine};
use crate::extra::{DeviceExtra, device_extras};
use crate::gpu::targets::{Keep, Verdict};
use crate::gpu::{GpuCode, TargetId};

pub use super::problem::{Kind, Severity};

/// One problem, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Problem {
    /// Ex) `no-code-for-gpu`, `kpack-unresolved`, `kpack-archive-damaged`
    pub kind: Kind,
    pub severity: Severity,
    /// The GPU (its target id) it concerns, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The file, relative to site-packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The distribution that owns it: `name==version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    pub message: String,
    /// What to run, or do, to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// One binary with device code, on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Served {
    /// The GPU's target id.
    pub gpu: String,
    pub runs: bool,
    /// What serves it, or what is missing. Ex) `gfx942 in its offload bundles`
    pub how: String,
}

/// A binary with device code, and its verdict on each GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BinaryVerdict {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// `bundles` (a fat or thin build), `kpack` (split: code in archives), or `code-objects`.
    pub form: String,
    /// The target IDs it carries (a split binary: none, its archives hold them).
    pub targets: Vec<TargetId>,
    pub gpus: Vec<Served>,
}

/// The diagnosis of one environment.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Diagnosis {
    /// site-packages.
    pub site: String,
    pub gpus: Vec<Gpu>,
    pub distributions: Vec<Distribution>,
    /// How many host binaries were read.
    pub binaries_read: usize,
    pub binaries: Vec<BinaryVerdict>,
    pub problems: Vec<Problem>,
    pub notes: Vec<String>,
}

impl Diagnosis {
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|p| p.severity == Severity::Error).count()
    }

    /// The first line a person reads. Ex) `ready for gfx942`, `ready for gfx942 (1 warning)`,
    /// `3 problems` (errors: what makes the exit status 1)
    pub fn summary(&self) -> String {
        let errors = self.errors();
        if errors > 0 {
            return crate::log::plural(errors, "problem");
        }
        let mut gpus: Vec<&str> = self.gpus.iter().map(|g| g.processor.as_str()).collect();
        gpus.dedup();
        let warnings = self.problems.len();
        let warned =
            if warnings > 0 { format!(" ({})", crate::log::plural(warnings, "warning")) } else { String::new() };
        format!("ready for {}{warned}", gpus.join(", "))
    }
}

fn owner_name(env: &Environment, owner: Option<usize>) -> Option<String> {
    owner.map(|i| {
        let d = &env.site.distributions[i];
        format!("{}=={}", d.name, d.version)
    })
}

/// Judge `env` on the GPUs of `machine`.
pub fn diagnose(env: &Environment, machine: &Machine) -> Diagnosis {
    let mut problems = Vec::new();
    let mut notes = machine.notes.clone();
    if machine.gpus.is_empty() {
        problems.push(Problem {
            kind: Kind::NoGpu,
            severity: Severity::Error,
            gpu: None,
            file: None,
            distribution: None,
            message: format!("no GPU the runtime would use ({})", machine.source),
            fix: Some("name the GPU to check for with --gpu (e.g. --gpu gfx942)".into()),
        });
    }
    let mut binaries = Vec::new();
    for b in &env.binaries {
        let Some(verdict) = binary_verdict(env, b, machine, &mut problems) else { continue };
        binaries.push(verdict);
    }
    override_problems(env, machine, &mut problems);
    database_problems(env, machine, &mut problems);
    abi_problems(env, &mut problems);
    loader_problems(env, &mut problems, &mut notes);
    for (path, why) in &env.unreadable {
        notes.push(format!("{path}: not read ({why})"));
    }
    for (dist_info, why) in &env.site.unreadable {
        notes.push(format!("{dist_info}: not read ({why})"));
    }
    problems.sort_by(|a, b| (a.severity, &a.file, &a.kind).cmp(&(b.severity, &b.file, &b.kind)));
    problems.dedup();
    Diagnosis {
        site: env.site.root.display().to_string(),
        gpus: machine.gpus.clone(),
        distributions: env.site.distributions.clone(),
        binaries_read: env.binaries.len(),
        binaries,
        problems,
        notes,
    }
}

/// The AMD device code of a binary the verdict is about: not a GPU runtime's built-in kernels,
/// not NVIDIA code.
fn amd_code(b: &InstalledBinary) -> Vec<&GpuCode> {
    b.gpu.iter().filter(|c| c.is_package_amd_code()).collect()
}

fn binary_verdict(
    env: &Environment,
    b: &InstalledBinary,
    machine: &Machine,
    problems: &mut Vec<Problem>,
) -> Option<BinaryVerdict> {
    let code = amd_code(b);
    if code.is_empty() {
        return None;
    }
    let distribution = owner_name(env, b.owner);
    let owner = b.owner.map(|i| &env.site.distributions[i]);
    let split = code.iter().find(|c| c.kpack_kernel.is_some());
    let targets: BTreeSet<TargetId> =
        code.iter().flat_map(|c| c.targets.iter()).filter(|t| t.is_amdgpu()).cloned().collect();
    let form = if split.is_some() {
        "kpack"
    } else if code.iter().any(|c| c.container.holds_bundles()) {
        "bundles"
    } else {
        "code-objects"
    };
    let subject = Subject { file: &b.path, real_path: &b.real_path, distribution: distribution.clone() };
    for c in &code {
        for marker in &c.kpack_marker_problems {
            problems.push(Problem {
                kind: Kind::KpackMarkerUnusable,
                severity: Severity::Error,
                gpu: None,
                file: Some(b.path.clone()),
                distribution: distribution.clone(),
                message: format!("the runtime cannot use {marker}"),
                fix: owner.map(reinstall),
            });
        }
    }
    let mut gpus = Vec::new();
    for gpu in &machine.gpus {
        let keep = Keep::new(vec![gpu.requested()]);
        let served = match split {
            Some(c) => kpack_served(env, &subject, c, gpu, owner, problems),
            None => {
                let runs: Vec<&TargetId> = targets.iter().filter(|t| keep.runs(*t)).collect();
                if runs.is_empty() {
                    problems.push(subject.problem(
                        Kind::NoCodeForGpu,
                        Severity::Error,
                        gpu,
                        format!(
                            "holds device code for {} and none that runs on {}: its first kernel launch fails (hipErrorInvalidImage, \"invalid device function\")",
                            targets.iter().cloned().collect::<Vec<_>>().join(", "),
                            gpu.target_id
                        ),
                        owner.map(|d| build_for(d, gpu)),
                    ));
                    Served { gpu: gpu.target_id.clone(), runs: false, how: "no code object for it".into() }
                } else {
                    let list: Vec<&str> = runs.iter().map(|s| s.as_str()).collect();
                    Served { gpu: gpu.target_id.clone(), runs: true, how: format!("{} in the binary", list.join(", ")) }
                }
            }
        };
        gpus.push(served);
    }
    Some(BinaryVerdict {
        file: b.path.clone(),
        distribution,
        form: form.to_string(),
        targets: targets.into_iter().collect(),
        gpus,
    })
}

/// A split binary on one GPU: every wrapper's code object (`<kernel_name>#<i>`) found as the
/// kpack runtime finds it ([`crate::gpu::resolve`]), in a mode the GPU may be in, and the
/// archives it is read from intact.
fn kpack_served(
    env: &Environment,
    b: &Subject<'_>,
    code: &GpuCode,
    gpu: &Gpu,
    owner: Option<&Distribution>,
    problems: &mut Vec<Problem>,
) -> Served {
    use crate::gpu::resolve::{Resolution, modes_of};
    let (kernel, wrappers) = code.kpack_kernel.clone().unwrap_or_default();
    let lookup = code.kpack_lookup(b.real_path);
    let toc = |path: &str| env.archives.get(path).and_then(|a| a.as_ref()).map(|a| &a.toc);
    let modes = modes_of(&gpu.requested());
    let all = wrappers.max(1);
    // Per wrapper, the first mode's resolution that finds it, else the last mode's.
    let resolved: Vec<Resolution> = (0..all)
        .map(|i| {
            let mut tried = modes.iter().map(|mode| lookup.resolve(i, mode, toc));
            let first = tried.next().expect("a target has a mode");
            if first.found() { first } else { tried.find(Resolution::found).unwrap_or(first) }
        })
        .collect();
    let candidates: Vec<String> = modes.iter().flat_map(|m| lookup.archive_paths(m)).collect();
    let installed: Vec<(&String, &crate::analysis::installed::ArchiveFacts)> = {
        let mut seen = Vec::new();
        for p in &candidates {
            if let Some(a) = env.archives.get(p).and_then(|a| a.as_ref())
                && !seen.iter().any(|(q, _)| *q == p)
            {
                seen.push((p, a));
            }
        }
        seen
    };
    if installed.is_empty() {
        // The processor's own archive, the one every layout has.
        let bare = lookup.archive_paths(&crate::gpu::TargetId::from_code(gpu.processor.as_str()));
        let wanted = bare.first().or(candidates.first()).cloned().unwrap_or_else(|| "(no search path)".into());
        problems.push(b.problem(
            Kind::KpackUnresolved,
            Severity::Error,
            gpu,
            format!(
                "its device code was split out (kpack) and no archive for {} is installed: it looks for {wanted}; its first kernel launch fails (kpack_load_code_object failed, hipErrorInvalidImage)",
                gpu.processor
            ),
            owner.map(|d| device_extra(d, gpu)),
        ));
        return Served { gpu: gpu.target_id.clone(), runs: false, how: format!("no archive at {wanted}") };
    }
    for (path, archive) in &installed {
        for p in &archive.problems {
            problems.push(Problem {
                kind: Kind::KpackArchiveDamaged,
                severity: Severity::Error,
                gpu: Some(gpu.target_id.clone()),
                file: Some(path.to_string()),
                distribution: env.site.owner(path).map(|d| format!("{}=={}", d.name, d.version)),
                message: format!("{p}: the kernels of {} in it cannot load", b.file),
                fix: env.site.owner(path).map(reinstall),
            });
        }
    }
    let missing = resolved.iter().filter(|r| !r.found()).count();
    let archive_list: Vec<String> = installed.iter().map(|(p, _)| p.to_string()).collect();
    if missing == 0 {
        return Served { gpu: gpu.target_id.clone(), runs: true, how: format!("archive {}", archive_list.join(", ")) };
    }
    if installed.iter().any(|(_, a)| !a.problems.is_empty()) {
        // The damage, reported above, is why: an object whose frame does not decode is none.
        return Served {
            gpu: gpu.target_id.clone(),
            runs: false,
            how: format!("archive damaged: {}", archive_list.join(", ")),
        };
    }
    let (severity, what) = if missing == all {
        (Severity::Error, "none of its".to_string())
    } else {
        (Severity::Warning, format!("{missing} of its {all}"))
    };
    problems.push(b.problem(
        Kind::KpackKernelMissing,
        severity,
        gpu,
        format!(
            "{what} code objects ({kernel}#…) are in {} for {}: those kernels cannot launch (a build made for fewer targets, or an archive of another release)",
            archive_list.join(", "),
            gpu.target_id
        ),
        owner.map(|d| device_extra(d, gpu)),
    ));
    Served { gpu: gpu.target_id.clone(), runs: missing < all, how: format!("{missing} of {all} code objects missing") }
}

/// The binary a problem is about: its file and the distribution that owns it.
struct Subject<'a> {
    file: &'a str,
    /// Its real path, where the runtime resolves its kpack search paths from.
    real_path: &'a str,
    distribution: Option<String>,
}

impl Subject<'_> {
    fn problem(&self, kind: Kind, severity: Severity, gpu: &Gpu, message: String, fix: Option<String>) -> Problem {
        Problem {
            kind,
            severity,
            gpu: Some(gpu.target_id.clone()),
            file: Some(self.file.to_string()),
            distribution: self.distribution.clone(),
            message,
            fix,
        }
    }
}

/// `pip install --force-reinstall --no-deps 'name==version'`: a damaged install made whole.
fn reinstall(d: &Distribution) -> String {
    format!("pip install --force-reinstall --no-deps '{}=={}'", d.name, d.version)
}

/// The device wheel of a split distribution for `gpu`, through its extra when it has one.
fn device_extra(d: &Distribution, gpu: &Gpu) -> String {
    let extra = DeviceExtra::of(&gpu.processor);
    if d.provides_extra.iter().any(|e| extra == *e) {
        format!("pip install '{}[{extra}]=={}'", d.name, d.version)
    } else {
        let extras: Vec<String> = device_extras(&d.provides_extra).map(|e| e.to_string()).collect();
        if extras.is_empty() {
            format!(
                "{}=={} has no device wheel for {}: install a build of it that has {} code",
                d.name, d.version, gpu.processor, gpu.processor
            )
        } else {
            format!(
                "{}=={} has no device wheel for {} (its device extras: {}): install a build of it that has {} code",
                d.name,
                d.version,
                gpu.processor,
                extras.join(", "),
                gpu.processor
            )
        }
    }
}

/// A build of `d` for the GPU's processor, from the index that serves it: the command, with
/// the one part only the user knows left for them to fill in.
fn build_for(d: &Distribution, gpu: &Gpu) -> String {
    format!(
        "install a build of {} {} with {} code, e.g. from its release's {} index: pip install --force-reinstall --no-deps --index-url INDEX '{}=={}'",
        d.name, d.version, gpu.processor, gpu.processor, d.name, d.version
    )
}

/// `HSA_OVERRIDE_GFX_VERSION` set although the environment has code for the real GPU: the
/// runtime loads another processor's code in its place.
fn override_problems(env: &Environment, machine: &Machine, problems: &mut Vec<Problem>) {
    let Some((_, value)) = machine.environment.iter().find(|(n, _)| n == "HSA_OVERRIDE_GFX_VERSION") else { return };
    for gpu in machine.gpus.iter().filter(|g| g.native != g.processor) {
        let native = Keep::new(vec![TargetId::of(&gpu.native, gpu.requested().features())]);
        let with_native = env
            .binaries
            .iter()
            .find(|b| amd_code(b).iter().any(|c| c.targets.iter().any(|t| native.verdict(t) == Verdict::Runs)));
        if let Some(b) = with_native {
            problems.push(Problem {
                kind: Kind::OverrideHidesNative,
                severity: Severity::Warning,
                gpu: Some(gpu.target_id.clone()),
                file: Some(b.path.clone()),
                distribution: owner_name(env, b.owner),
                message: format!(
                    "HSA_OVERRIDE_GFX_VERSION={value} makes the runtime load {} code on this {}, but a native {} build is installed (this file has {} code): unset, it runs the code made for it",
                    gpu.processor, gpu.native, gpu.native, gpu.native
                ),
                fix: Some("unset HSA_OVERRIDE_GFX_VERSION".into()),
            });
        }
    }
}

/// A library that ships kernel databases (Tensile, hipBLASLt, MIOpen, AOTriton, …) for some
/// processors and none for the GPU: it falls back to slow paths or fails to find a kernel.
fn database_problems(env: &Environment, machine: &Machine, problems: &mut Vec<Problem>) {
    use crate::analysis::databases;
    for d in &env.site.distributions {
        let mut by_library: BTreeMap<&str, BTreeSet<TargetId>> = BTreeMap::new();
        let mut families: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for f in &d.files {
            if let Some(db) = databases::database(f) {
                by_library.entry(db.library).or_default().insert(db.target);
            } else if let Some((library, family)) = databases::family_database(f) {
                families.entry(library).or_default().insert(family);
            }
        }
        for (library, targets) in &by_library {
            for gpu in &machine.gpus {
                let keep = Keep::new(vec![gpu.requested()]);
                let covered = targets.iter().any(|t| keep.verdict(t) == Verdict::Runs)
                    || families.get(library).is_some_and(|f| f.iter().any(|f| databases::in_family(&gpu.processor, f)));
                if !covered {
                    problems.push(Problem {
                        kind: Kind::NoDatabaseForGpu,
                        severity: Severity::Error,
                        gpu: Some(gpu.target_id.clone()),
                        file: None,
                        distribution: Some(format!("{}=={}", d.name, d.version)),
                        message: format!(
                            "{}'s {library} kernel databases are for {} and none is for {}: its kernels for it are not found",
                            d.name,
                            targets.iter().cloned().collect::<Vec<_>>().join(", "),
                            gpu.processor
                        ),
                        fix: Some(device_extra(d, gpu)),
                    });
                }
            }
        }
    }
}

/// The HIP runtime's sonames the binaries need, and the ones installed: several majors in one
/// process cannot both load (`libamdhip64.so.6` beside `.so.7`).
fn abi_problems(env: &Environment, problems: &mut Vec<Problem>) {
    const HIP: &str = "libamdhip64.so.";
    let mut needed: BTreeMap<String, Vec<&InstalledBinary>> = BTreeMap::new();
    for b in &env.binaries {
        for n in b.facts.needed.iter().filter(|n| n.starts_with(HIP)) {
            needed.entry(n.clone()).or_default().push(b);
        }
    }
    if needed.len() < 2 {
        return;
    }
    let describe = |soname: &str, list: &[&InstalledBinary]| {
        let mut dists: Vec<String> = list.iter().filter_map(|b| owner_name(env, b.owner)).collect();
        dists.sort();
        dists.dedup();
        format!("{soname}: {}", if dists.is_empty() { list[0].path.clone() } else { dists.join(", ") })
    };
    // The ABI most binaries need is the environment's; the others were built for another ROCm.
    let (main, _) = needed.iter().max_by_key(|(s, l)| (l.len(), s.as_str())).expect("two or more");
    let parts: Vec<String> = needed.iter().map(|(s, l)| describe(s, l)).collect();
    for (soname, list) in needed.iter().filter(|(s, _)| *s != main) {
        let major = soname.strip_prefix(HIP).unwrap_or(soname);
        let main_major = main.strip_prefix(HIP).unwrap_or(main);
        for b in list {
            problems.push(Problem {
                kind: Kind::RocmAbiMixed,
                severity: Severity::Error,
                gpu: None,
                file: Some(b.path.clone()),
                distribution: owner_name(env, b.owner),
                message: format!(
                    "built for ROCm {major} ({soname}) in an environment of ROCm {main_major} ({main}); one process cannot load both ({})",
                    parts.join("; ")
                ),
                fix: b.owner.map(|i| {
                    let d = &env.site.distributions[i];
                    format!("install the build of {} for ROCm {main_major} (its +rocm{main_major}… release)", d.name)
                }),
            });
        }
    }
}

/// Libraries the loader finds nowhere. One that is in the environment, outside the search path
/// of the binary that needs it, loads only if a package preloads it (as `rocm_sdk` does): a
/// note, not a problem.
fn loader_problems(env: &Environment, problems: &mut Vec<Problem>, notes: &mut Vec<String>) {
    // One problem per library the loader finds nowhere, naming every file that needs it: an
    // environment without ROCm misses the same few libraries in a hundred files.
    // Soname → (binary, the file that needs it, the binary's owner).
    type Needing<'a> = Vec<(&'a str, &'a str, Option<usize>)>;
    let mut unfound: std::collections::BTreeMap<&str, Needing<'_>> = Default::default();
    for b in &env.binaries {
        for (soname, by) in &b.unfound {
            if let Some(paths) = env.file_names.get(soname) {
                notes.push(format!(
                    "{}: {soname} (needed by {by}) is not on the loader's path but is installed at {}: it loads only if something preloads it",
                    b.path,
                    paths.join(", ")
                ));
                continue;
            }
            unfound.entry(soname).or_default().push((&b.path, by, b.owner));
        }
    }
    for (soname, needing) in unfound {
        let rocm = crate::exclude::ExcludeList::new(true, &[]).is_ok_and(|l| l.reason(soname, None).is_some());
        let (first, by, owner) = needing[0];
        let who = if needing.len() == 1 {
            format!("needed by {by}")
        } else {
            let others = needing.len() - 1;
            format!("needed by {by} and {others} other file{}", if others == 1 { "" } else { "s" })
        };
        problems.push(Problem {
            kind: Kind::LibraryNotFound,
            severity: Severity::Error,
            gpu: None,
            file: Some(first.to_string()),
            distribution: owner_name(env, owner),
            message: format!(
                "the loader finds {soname} ({who}) nowhere: importing {} fails{}",
                if needing.len() == 1 { "it" } else { "them" },
                if rocm { "; it is ROCm's, which the environment must provide" } else { "" }
            ),
            fix: Some(if rocm {
                format!("install the ROCm that provides {soname} (system packages, or ROCm's Python wheels), or point LD_LIBRARY_PATH at its lib directory")
            } else {
                format!("install the package that provides {soname}, or repair the wheel so it carries it (wheelfix repair)")
            }),
        });
    }
}
