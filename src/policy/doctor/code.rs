//! Each binary's device code on each GPU, as the runtime loads it: a fat or thin binary bundle
//! by bundle (each bundle is a translation unit's kernels, and needs a code object of its own),
//! a split binary wrapper by wrapper through its kpack markers ([`crate::gpu::resolve`]), both
//! with `HSA_OVERRIDE_GFX_VERSION` applied as the runtime applies it. Split hosts that find no
//! archive for a GPU beside device wheels for another are one problem: the wrong GPU's code.

use std::collections::BTreeMap;

use super::fixes::{Fixes, Install, pinned};
use super::{BinaryVerdict, Kind, Problem, Served, Severity, name_of, owner_name};
use crate::analysis::installed::{Distribution, Environment, InstalledBinary};
use crate::analysis::machine::{Gpu, Machine};
use crate::extra::{DeviceExtra, device_project_target};
use crate::gpu::GpuCode;
use crate::gpu::resolve::modes_of;
use crate::gpu::targets::{Keep, TargetId};

/// How much of a binary's device code runs on one device.
struct Coverage {
    /// Units (bundles, or HIP wrappers) in all, and those with no code object that runs there.
    all: usize,
    missing: usize,
    /// What serves it, for people. Ex) `gfx942 in the binary`, `archive p/.kpack/k_gfx942.kpack`
    how: String,
    /// kpack: no archive is installed where the markers lead; the path looked for first.
    unresolved: Option<String>,
    /// kpack: the installed archives read, and what is wrong with each.
    archives: Vec<(String, Vec<String>)>,
}

impl Coverage {
    fn runs(&self) -> bool {
        self.missing == 0 && self.unresolved.is_none() && self.archives.iter().all(|(_, p)| p.is_empty())
    }
}

/// The device code doctor judges in a binary: a package's AMD code, or a split host's markers
/// (also those the runtime cannot use: they are a problem, never code to pass over).
fn judged_code(b: &InstalledBinary) -> Vec<&GpuCode> {
    b.gpu
        .iter()
        .filter(|c| c.is_package_amd_code() || !c.kpack_search_paths.is_empty() || !c.kpack_marker_problems.is_empty())
        .collect()
}

/// The target IDs of a binary's code objects, AMD's, in one set.
fn amd_targets(code: &[&GpuCode]) -> Vec<TargetId> {
    let mut targets: Vec<TargetId> =
        code.iter().flat_map(|c| c.targets.iter()).filter(|t| t.is_amdgpu()).cloned().collect();
    targets.sort();
    targets.dedup();
    targets
}

/// A fat binary's code on `agent`: every bundle needs a code object that runs there; code
/// objects outside bundles count as one unit.
fn bundle_coverage(code: &[&GpuCode], agent: &TargetId) -> Coverage {
    let keep = Keep::new(modes_of(agent));
    let mut units: Vec<Vec<&TargetId>> = Vec::new();
    for c in code {
        if c.bundle_targets.is_empty() {
            units.push(c.targets.iter().filter(|t| t.is_amdgpu()).collect());
        } else {
            units.extend(c.bundle_targets.iter().map(|b| b.iter().collect()));
        }
    }
    units.retain(|u| !u.is_empty());
    let missing = units.iter().filter(|u| !u.iter().any(|t| keep.runs(*t))).count();
    let mut runs: Vec<&str> = units.iter().flatten().filter(|t| keep.runs(**t)).map(|t| t.as_str()).collect::<Vec<_>>();
    runs.sort();
    runs.dedup();
    let how = match (runs.is_empty(), missing) {
        (true, _) => "no code object for it".to_string(),
        (false, 0) => format!("{} in the binary", runs.join(", ")),
        (false, m) => format!("{} in the binary; {m} of {} bundles have none", runs.join(", "), units.len()),
    };
    Coverage {
        all: units.len().max(1),
        missing: if units.is_empty() { 1 } else { missing },
        how,
        unresolved: None,
        archives: Vec::new(),
    }
}

/// A split binary's code on `agent`: every wrapper's code object found as the runtime looks
/// for it, in a mode the device may be in.
fn kpack_coverage(env: &Environment, b: &InstalledBinary, code: &GpuCode, agent: &TargetId) -> Coverage {
    let (kernel, wrappers) = code.kpack_kernel.clone().unwrap_or_default();
    let lookup = code.kpack_lookup(&b.real_path);
    let toc = |path: &str| env.archives.get(path).and_then(|a| a.as_ref()).map(|a| &a.toc);
    let modes = modes_of(agent);
    let all = wrappers.max(1);
    let missing = (0..all).filter(|i| !modes.iter().any(|mode| lookup.resolve(*i, mode, toc).found())).count();
    let mut archives: Vec<(String, Vec<String>)> = Vec::new();
    for path in modes.iter().flat_map(|m| lookup.archive_paths(m)) {
        if let Some(a) = env.archives.get(&path).and_then(|a| a.as_ref())
            && !archives.iter().any(|(p, _)| *p == path)
        {
            archives.push((path, a.problems.clone()));
        }
    }
    if archives.is_empty() {
        // The processor's own archive, the one every layout has.
        let bare = lookup.archive_paths(&agent.without_features());
        let wanted = bare.first().cloned().unwrap_or_else(|| "(no search path)".into());
        return Coverage {
            all,
            missing: all,
            how: format!("no archive at {wanted}"),
            unresolved: Some(wanted),
            archives,
        };
    }
    let list: Vec<&str> = archives.iter().map(|(p, _)| p.as_str()).collect();
    let how = if archives.iter().any(|(_, p)| !p.is_empty()) {
        format!("archive damaged: {}", list.join(", "))
    } else if missing == 0 {
        format!("archive {}", list.join(", "))
    } else {
        format!("{missing} of {all} code objects ({kernel}#…) missing")
    };
    Coverage { all, missing, how, unresolved: None, archives }
}

/// A binary's coverage on `agent`, whichever its form.
fn coverage(env: &Environment, b: &InstalledBinary, code: &[&GpuCode], agent: &TargetId) -> Coverage {
    match code.iter().find(|c| c.kpack_kernel.is_some()) {
        Some(split) => kpack_coverage(env, b, split, agent),
        None => bundle_coverage(code, agent),
    }
}

/// What the loop over binaries gathers for the rules over the whole environment.
#[derive(Default)]
struct Gathered<'a> {
    /// Per GPU (its index), split binaries that find no archive: (binary, where it looks).
    unresolved: BTreeMap<usize, Vec<(&'a InstalledBinary, String)>>,
    /// Per GPU, binaries whose code runs only without the override (and runs natively).
    hidden: BTreeMap<usize, Vec<&'a InstalledBinary>>,
    /// Per GPU, binaries with both the override's code and the native code.
    both: BTreeMap<usize, Vec<&'a InstalledBinary>>,
}

/// Judge every binary with device code on every GPU; the problems go to `problems`.
pub(super) fn judge_binaries(
    env: &Environment,
    machine: &Machine,
    fixes: &Fixes<'_>,
    problems: &mut Vec<Problem>,
) -> Vec<BinaryVerdict> {
    let mut gathered = Gathered::default();
    let mut verdicts = Vec::new();
    for b in &env.binaries {
        let code = judged_code(b);
        if code.is_empty() {
            continue;
        }
        let owner = b.owner.map(|i| &env.site.distributions[i]);
        marker_problems(env, b, &code, owner, fixes, problems);
        let split = code.iter().any(|c| c.kpack_kernel.is_some() || !c.kpack_search_paths.is_empty());
        let mut gpus = Vec::new();
        for (g, gpu) in machine.gpus.iter().enumerate() {
            let runtime = coverage(env, b, &code, &gpu.requested());
            let native = (gpu.native != gpu.processor).then(|| {
                let agent = TargetId::of(&gpu.native, gpu.requested().features());
                coverage(env, b, &code, &agent)
            });
            // Its kernels load, all or some (a warning names the others); none from a damaged archive.
            let undamaged = runtime.archives.iter().all(|(_, p)| p.is_empty());
            let runs = runtime.missing < runtime.all && undamaged;
            let served = Served { gpu: gpu.target_id.clone(), runs, how: runtime.how.clone() };
            match &native {
                Some(native) if native.runs() && !runtime.runs() => {
                    gathered.hidden.entry(g).or_default().push(b);
                    gpus.push(Served {
                        runs: false,
                        how: format!("{}; {} code is installed", served.how, gpu.native),
                        ..served
                    });
                    continue;
                }
                Some(native) if native.runs() => gathered.both.entry(g).or_default().push(b),
                _ => {}
            }
            let marker_unusable = code.iter().any(|c| !c.kpack_marker_problems.is_empty());
            if marker_unusable {
                // Said above, with its fix: where a marker that cannot be used leads is moot.
            } else if let Some(wanted) = &runtime.unresolved {
                gathered.unresolved.entry(g).or_default().push((b, wanted.clone()));
            } else if split {
                kpack_problems(env, b, &runtime, gpu, owner, fixes, problems);
            } else if runtime.missing > 0 {
                problems.push(no_code_problem(env, b, &code, &runtime, gpu, owner, fixes));
            }
            gpus.push(served);
        }
        let form = if split {
            "kpack"
        } else if code.iter().any(|c| c.container.holds_bundles()) {
            "bundles"
        } else {
            "code-objects"
        };
        let targets = if split { Vec::new() } else { amd_targets(&code) };
        verdicts.push(BinaryVerdict {
            file: b.path.clone(),
            distribution: owner_name(env, b.owner),
            form: form.to_string(),
            targets,
            gpus,
        });
    }
    unresolved_problems(env, machine, &gathered, fixes, problems);
    override_problems(machine, &gathered, env, problems);
    verdicts
}

/// A split binary whose markers or wrappers the runtime cannot use.
fn marker_problems(
    env: &Environment,
    b: &InstalledBinary,
    code: &[&GpuCode],
    owner: Option<&Distribution>,
    fixes: &Fixes<'_>,
    problems: &mut Vec<Problem>,
) {
    for marker in code.iter().flat_map(|c| &c.kpack_marker_problems) {
        let mut p = Problem::new(Kind::KpackMarkerUnusable, format!("{marker}: its kernels cannot load"))
            .in_file(&b.path, owner_name(env, b.owner));
        if let Some(d) = owner {
            p = p.fixed_by(fixes.install(&[d], &[pinned(&d.name, None, &d.version)], Install::Reinstall));
        }
        problems.push(p);
    }
}

/// A split binary whose archives are installed but damaged or short of its code objects.
fn kpack_problems(
    env: &Environment,
    b: &InstalledBinary,
    coverage: &Coverage,
    gpu: &Gpu,
    owner: Option<&Distribution>,
    fixes: &Fixes<'_>,
    problems: &mut Vec<Problem>,
) {
    // One problem per damaged archive (one fix reinstalls it), its first few faults named.
    for (path, damage) in coverage.archives.iter().filter(|(_, d)| !d.is_empty()) {
        let archive_owner = env.site.owner(path);
        let mut faults: Vec<&str> = damage.iter().take(3).map(String::as_str).collect();
        let more = format!("and {} more", damage.len().saturating_sub(3));
        if damage.len() > 3 {
            faults.push(&more);
        }
        let mut problem = Problem::new(
            Kind::KpackArchiveDamaged,
            format!("{}: the kernels of {} in it cannot load", faults.join("; "), b.path),
        )
        .on_gpu(gpu)
        .in_file(path, archive_owner.map(name_of));
        if let Some(d) = archive_owner {
            problem = problem.fixed_by(fixes.install(&[d], &[pinned(&d.name, None, &d.version)], Install::Reinstall));
        }
        problems.push(problem);
    }
    if coverage.archives.iter().any(|(_, p)| !p.is_empty()) || coverage.missing == 0 {
        return;
    }
    let (severity, what) = if coverage.missing == coverage.all {
        (Severity::Error, "none of its".to_string())
    } else {
        (Severity::Warning, format!("{} of its {}", coverage.missing, coverage.all))
    };
    let archives: Vec<&str> = coverage.archives.iter().map(|(p, _)| p.as_str()).collect();
    let mut problem = Problem::new(
        Kind::KpackKernelMissing,
        format!(
            "{what} code objects are in {} for {}: those kernels cannot launch (a build made for fewer targets, or an archive of another release)",
            archives.join(", "),
            gpu.target_id
        ),
    )
    .with_severity(severity)
    .on_gpu(gpu)
    .in_file(&b.path, owner_name(env, b.owner));
    if let Some(d) = owner {
        problem = problem.fixed_by(device_fix(d, gpu, fixes));
    }
    problems.push(problem);
}

/// A fat or thin binary with no code (or not in every bundle) for the GPU.
fn no_code_problem(
    env: &Environment,
    b: &InstalledBinary,
    code: &[&GpuCode],
    coverage: &Coverage,
    gpu: &Gpu,
    owner: Option<&Distribution>,
    fixes: &Fixes<'_>,
) -> Problem {
    let targets: Vec<String> = amd_targets(code).iter().map(|t| t.to_string()).collect();
    let message = if coverage.missing == coverage.all {
        format!(
            "holds device code for {} and none that runs on {}: its first kernel launch fails (hipErrorInvalidImage, \"invalid device function\")",
            targets.join(", "),
            gpu.target_id
        )
    } else {
        format!(
            "{} of its {} offload bundles have no code that runs on {} (it has {}): their kernels fail to launch (hipErrorInvalidImage), the others run",
            coverage.missing,
            coverage.all,
            gpu.target_id,
            targets.join(", ")
        )
    };
    let severity = if coverage.missing == coverage.all { Severity::Error } else { Severity::Warning };
    let mut problem = Problem::new(Kind::NoCodeForGpu, message)
        .with_severity(severity)
        .on_gpu(gpu)
        .in_file(&b.path, owner_name(env, b.owner));
    if let Some(d) = owner {
        problem = problem.fixed_by(fixes.build_for(d, &gpu.processor));
    }
    problem
}

/// The device wheel of a split host `d` for `gpu`, through its extra when it has one.
pub(super) fn device_fix(d: &Distribution, gpu: &Gpu, fixes: &Fixes<'_>) -> String {
    let extra = DeviceExtra::of(&gpu.processor);
    if d.provides_extra.iter().any(|e| extra == *e) {
        return fixes.install(&[d], &[pinned(&d.name, Some(&extra.to_string()), &d.version)], Install::Pinned);
    }
    let extras: Vec<String> = crate::extra::device_extras(&d.provides_extra).map(|e| e.to_string()).collect();
    let has = if extras.is_empty() { String::new() } else { format!(" (its device extras: {})", extras.join(", ")) };
    format!(
        "{}=={} has no device wheel for {}{has}: install a build of it that has {} code",
        d.name, d.version, gpu.processor, gpu.processor
    )
}

/// Split hosts that find no archive: device wheels installed for another GPU are named as
/// such, with the one command that installs this GPU's (through the selector installed, if
/// one is); the others, each with its host's extra.
fn unresolved_problems(
    env: &Environment,
    machine: &Machine,
    gathered: &Gathered<'_>,
    fixes: &Fixes<'_>,
    problems: &mut Vec<Problem>,
) {
    let dists = &env.site.distributions;
    for (&g, list) in &gathered.unresolved {
        let gpu = &machine.gpus[g];
        let hosts: Vec<&Distribution> = {
            let mut hosts: Vec<&Distribution> = list.iter().filter_map(|(b, _)| b.owner.map(|i| &dists[i])).collect();
            hosts.sort_by(|a, b| a.name.cmp(&b.name));
            hosts.dedup_by(|a, b| a.name == b.name);
            hosts
        };
        // Device wheels of these hosts: for other processors only, the wrong GPU's code; one
        // for this GPU installed and still unresolved is its own problem, said per binary.
        let device_wheels = |this: bool| -> Vec<&Distribution> {
            dists
                .iter()
                .filter(|d| device_project_target(&d.name).is_some_and(|t| (t == gpu.processor) == this))
                .filter(|d| d.requires_dist.iter().any(|r| hosts.iter().any(|h| r.package.as_str() == h.name)))
                .collect()
        };
        let wrong = device_wheels(false);
        if !wrong.is_empty() && device_wheels(true).is_empty() {
            problems.push(wrong_gpu_problem(env, gpu, &hosts, &wrong, fixes));
            continue;
        }
        for (b, wanted) in list {
            let owner = b.owner.map(|i| &dists[i]);
            let mut problem = Problem::new(
                Kind::KpackUnresolved,
                format!(
                    "its device code was split out (kpack) and no archive for {} is installed: it looks for {wanted}; its first kernel launch fails (kpack_load_code_object failed, hipErrorInvalidImage)",
                    gpu.processor
                ),
            )
            .on_gpu(gpu)
            .in_file(&b.path, owner_name(env, b.owner));
            if let Some(d) = owner {
                problem = problem.fixed_by(device_fix(d, gpu, fixes));
            }
            problems.push(problem);
        }
    }
}

/// Device wheels for other GPUs installed where this GPU's are missing: one problem, one fix.
fn wrong_gpu_problem(
    env: &Environment,
    gpu: &Gpu,
    hosts: &[&Distribution],
    wrong: &[&Distribution],
    fixes: &Fixes<'_>,
) -> Problem {
    let mut processors: Vec<&str> = wrong.iter().filter_map(|d| device_project_target(&d.name)).collect();
    processors.sort();
    processors.dedup();
    let installed: Vec<String> = wrong.iter().map(|d| name_of(d)).collect();
    let host_names: Vec<String> = hosts.iter().map(|d| name_of(d)).collect();
    let message = format!(
        "you installed {} code ({}) and none for this {}: the device code of {} was split out and their first kernel launch fails (hipErrorInvalidImage)",
        processors.join(", "),
        installed.join(", "),
        gpu.processor,
        host_names.join(", ")
    );
    let extra = DeviceExtra::of(&gpu.processor).to_string();
    let selector = env.site.distributions.iter().find(|s| is_selector_for(s, &extra, hosts));
    let fix = match selector {
        Some(s) => fixes.install(&[s], &[pinned(&s.name, Some(&extra), &s.version)], Install::Pinned),
        None => {
            let with_extra: Vec<&&Distribution> = hosts
                .iter()
                .filter(|h| h.provides_extra.iter().any(|e| DeviceExtra::of(&gpu.processor) == *e))
                .collect();
            let requirements: Vec<String> =
                with_extra.iter().map(|h| pinned(&h.name, Some(&extra), &h.version)).collect();
            let from: Vec<&Distribution> = with_extra.iter().map(|h| **h).collect();
            if requirements.is_empty() {
                device_fix(hosts[0], gpu, fixes)
            } else {
                fixes.install(&from, &requirements, Install::Pinned)
            }
        }
    };
    Problem::new(Kind::WrongGpuInstalled, message).on_gpu(gpu).fixed_by(fix)
}

/// A selector (or a metapackage) for `extra`: installed with it, it brings every one of
/// `hosts` and, under the extra, a device wheel of each (named after its host: `{host}-device-…`,
/// or a custom name holding the host's). A host whose own extra brings only its own device
/// wheel, or one that requires another host, is not one.
fn is_selector_for(s: &Distribution, extra: &str, hosts: &[&Distribution]) -> bool {
    let provides = s.provides_extra.iter().any(|e| crate::wheel::requirement::normalized_extra(e) == extra);
    let brings = |h: &Distribution| {
        let host = s.requires_dist.iter().any(|r| r.package.as_str() == h.name);
        let device = s.requires_dist.iter().any(|r| {
            let name = r.package.as_str();
            r.under_extra(extra) && device_project_target(name).is_some() && name.contains(h.name.as_str())
        });
        host && device
    };
    provides && !hosts.iter().any(|h| h.name == s.name) && hosts.iter().all(|h| brings(h))
}

/// `HSA_OVERRIDE_GFX_VERSION` set: code the override's processor lacks but the GPU's own has
/// is an error (the override is why it fails); both installed is a warning.
fn override_problems(machine: &Machine, gathered: &Gathered<'_>, env: &Environment, problems: &mut Vec<Problem>) {
    let Some((_, value)) = machine.environment.iter().find(|(n, _)| n == "HSA_OVERRIDE_GFX_VERSION") else { return };
    for (g, gpu) in machine.gpus.iter().enumerate().filter(|(_, g)| g.native != g.processor) {
        let fix = "unset HSA_OVERRIDE_GFX_VERSION";
        if let Some(hidden) = gathered.hidden.get(&g) {
            let b = hidden[0];
            let others =
                if hidden.len() > 1 { format!(" and {} other binaries", hidden.len() - 1) } else { String::new() };
            problems.push(
                Problem::new(
                    Kind::OverrideHidesNative,
                    format!(
                        "HSA_OVERRIDE_GFX_VERSION={value} makes the runtime load {} code on this {}, which this binary{others} do not have, while their {} code is installed: their kernels fail to launch; unset, they run the code made for this GPU",
                        gpu.processor, gpu.native, gpu.native
                    ),
                )
                .with_severity(Severity::Error)
                .on_gpu(gpu)
                .in_file(&b.path, owner_name(env, b.owner))
                .fixed_by(fix),
            );
        } else if let Some(both) = gathered.both.get(&g) {
            let b = both[0];
            problems.push(
                Problem::new(
                    Kind::OverrideHidesNative,
                    format!(
                        "HSA_OVERRIDE_GFX_VERSION={value} makes the runtime load {} code on this {}, but a native {} build is installed (this file has {} code): unset, it runs the code made for it",
                        gpu.processor, gpu.native, gpu.native, gpu.native
                    ),
                )
                .on_gpu(gpu)
                .in_file(&b.path, owner_name(env, b.owner))
                .fixed_by(fix),
            );
        }
    }
}
