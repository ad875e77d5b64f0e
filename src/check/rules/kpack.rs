//! kpack: every split host's wrappers find their code objects, as the runtime looks for them
//! ([`crate::gpu::resolve`]), in the archives its extras install; archives and markers that
//! do not read back.

use std::collections::{BTreeMap, BTreeSet};

use crate::extra::{DeviceExtra, device_extras};
use crate::gpu::TargetId;

use super::*;
use crate::check::facts::Dist;
use crate::check::{Finding, Kind, Severity};

/// A split set (`wheelfix split`, TheRock's device wheels): for each `device-<target>` extra of
/// a host with kpack-split binaries, every wrapper of every such binary finds, in the archives
/// of the device wheels that extra requires, its code object for a device of the target, as the
/// kpack runtime looks for it ([`crate::gpu::resolve`]: feature variants and generic targets
/// included) in one of the device's modes; each of those device wheels requires the host back
/// at its exact version.
pub(in crate::check) fn split_set_findings(dists: &[Dist]) -> Vec<Finding> {
    use crate::gpu::resolve::{Lookup, Resolution, Toc, device_modes};
    let mut findings = Vec::new();
    // Every key some archive of the set holds code for: a wrapper with code for some processor
    // but not this one was built so (a translation unit compiled for fewer targets, as in
    // onnxruntime-rocm, whose fat wheel lacks the same code), not lost in a split.
    let keys_with_code: BTreeSet<&str> = dists
        .iter()
        .flat_map(|d| d.wheel.iter().flat_map(|w| w.kpack_tocs.values()))
        .flat_map(|toc| toc.iter().filter(|(_, targets)| !targets.is_empty()).map(|(key, _)| key.as_str()))
        .collect();
    for host in dists {
        let Some(w) = host.wheel.as_ref().filter(|w| !w.kpack_kernels.is_empty()) else { continue };
        let file = vec![host.path.display().to_string()];
        for (extra, device) in host.metadata.provides_extra.iter().filter_map(|e| Some((e, DeviceExtra::parse(e)?))) {
            let Some(target) = device.processor() else { continue };
            let devices = devices_of(host, extra, dists);
            findings.extend(one_way_pins(host, extra, &devices));
            // The archives the extra installs, by install path (the first wheel's, where two
            // install one path: `path-conflict` says so).
            let mut tocs: BTreeMap<&str, (&Dist, &Toc)> = BTreeMap::new();
            for d in &devices {
                for (path, toc) in d.wheel.iter().flat_map(|dw| &dw.kpack_tocs) {
                    tocs.entry(path.as_str()).or_insert((*d, toc));
                }
            }
            let toc_at = |path: &str| tocs.get(path).map(|(_, toc)| *toc);
            let modes = device_modes(target);
            for (binary, kernel, wrappers) in &w.kpack_kernels {
                let paths = w.kpack_refs.iter().find(|(b, _)| b == binary).map(|(_, p)| p.clone()).unwrap_or_default();
                let lookup = Lookup { binary, kernel_name: kernel, search_paths: &paths };
                // A wrapper is served when some mode of the device finds it.
                let found =
                    |i: usize| modes.iter().find_map(|m| Some(lookup.resolve(i, m, toc_at)).filter(Resolution::found));
                let archives: Vec<String> = {
                    let mut list: Vec<String> = modes.iter().flat_map(|m| lookup.archive_paths(m)).collect();
                    list.retain(|p| tocs.contains_key(p.as_str()));
                    list.dedup();
                    list
                };
                // TheRock's per-target-id archives for one mode of a feature only: the devices in
                // the other mode find none.
                let named: Vec<String> =
                    archives.iter().filter_map(|p| archive_target(p).map(|t| t.to_string())).collect();
                if let Some(message) = unserved_mode(target, &named) {
                    findings.push(Finding {
                        kind: Kind::KpackModeUnserved,
                        severity: Severity::Warning,
                        message: format!("{}: `{extra}`: {binary}: {message}", host.file_name),
                        files: file.clone(),
                    });
                }
                let Some(first) = archives.first() else {
                    let names: Vec<&str> = devices.iter().map(|d| d.file_name.as_str()).collect();
                    let bare = lookup.archive_paths(&TargetId::from_code(target));
                    findings.push(Finding {
                        kind: Kind::KpackUnresolved,
                        severity: Severity::Error,
                        message: format!(
                            "{}: `{extra}` installs {}, which holds no archive {binary} looks for ({}): installed with [{extra}], its first kernel launch fails (hipErrorInvalidImage). Either the build made no {target} code for this binary (as a fat wheel, it would fail the same way), or the device wheel is not from this host's split",
                            host.file_name,
                            if names.is_empty() { "no wheel of the set".to_string() } else { names.join(", ") },
                            bare.first().map(|c| format!("site-packages/{c}")).unwrap_or_else(|| "outside site-packages".into())
                        ),
                        files: file.clone(),
                    });
                    continue;
                };
                let missing: Vec<String> = (0..*wrappers)
                    .filter(|i| found(*i).is_none())
                    .map(|i| crate::gpu::resolve::key(kernel, i))
                    .collect();
                let (built_without, lost): (Vec<String>, Vec<String>) =
                    missing.into_iter().partition(|key| keys_with_code.contains(key.as_str()));
                let (d, _) = tocs[first.as_str()];
                let missing =
                    MissingKernels { host, device: d, archive: first, binary, wrappers: *wrappers, target, extra };
                findings.extend(missing.findings(&lost, &built_without));
            }
        }
    }
    findings
}

/// The device wheels `extra` of `host` brings, on the host's platform: of the versions the
/// requirement admits (a set of several releases holds other versions of the same device
/// projects, each for its own host).
fn devices_of<'a>(host: &Dist, extra: &str, dists: &'a [Dist]) -> Vec<&'a Dist> {
    host.metadata
        .requires_dist
        .iter()
        .filter(|r| r.under_extra(extra))
        .flat_map(|r| dists.iter().filter(move |d| d.project == r.package.as_str() && admits(r, &d.version)))
        .filter(|d| d.platform.is_none() || d.platform == host.platform)
        .collect()
}

/// The device wheels an extra brings that do not require the host back at its exact version.
fn one_way_pins(host: &Dist, extra: &str, devices: &[&Dist]) -> Vec<Finding> {
    let pins_back = |d: &Dist| {
        d.metadata
            .requires_dist
            .iter()
            .any(|r| r.package.as_str() == host.project && r.pinned.as_deref() == Some(host.version.as_str()))
    };
    devices
        .iter()
        .filter(|d| !pins_back(d))
        .map(|d| Finding {
            kind: Kind::DevicePinOneWay,
            severity: Severity::Error,
            message: format!(
                "{}: {} requires it for `{extra}`, but it does not require {}=={}: installed alone or beside another version, its archives serve a host they were not split from",
                d.file_name, host.file_name, host.project, host.version
            ),
            files: vec![d.path.display().to_string()],
        })
        .collect()
}

/// A split host's binary whose wrappers lack code for `target` in the archive (`archive`, of
/// the device wheel `device`) that its extra `extra` installs.
struct MissingKernels<'a> {
    host: &'a Dist,
    device: &'a Dist,
    archive: &'a str,
    binary: &'a str,
    wrappers: usize,
    target: &'a str,
    extra: &'a str,
}

impl MissingKernels<'_> {
    /// The findings for the wrappers whose code was lost (no processor has it in the set) and
    /// those built without the target (others have it).
    fn findings(&self, lost: &[String], built_without: &[String]) -> Vec<Finding> {
        let MissingKernels { host, device: d, archive: path, binary, wrappers, target, extra } = *self;
        let files = vec![host.path.display().to_string(), d.path.display().to_string()];
        let mut findings = Vec::new();
        if let Some(first) = lost.first() {
            findings.push(Finding {
                kind: Kind::KpackKernelMissing,
                severity: Severity::Error,
                message: format!(
                    "{}: {binary} has {} of {wrappers} wrappers ({first}, …) with no code object for {target} in {} ({path}), nor for any processor in any archive of the set: installed with [{extra}], those kernels fail to load (hipErrorInvalidImage). The device wheel is not from this host's split, or its code was lost",
                    host.file_name,
                    lost.len(),
                    d.file_name
                ),
                files: files.clone(),
            });
        }
        if let Some(first) = built_without.first() {
            findings.push(Finding {
                kind: Kind::KpackKernelNotBuilt,
                severity: Severity::Warning,
                message: format!(
                    "{}: {binary} has {} of {wrappers} wrappers ({first}, …) with code for other processors but none for {target} in {} ({path}): those translation units were built without {target}, and their kernels do not run there (as in the fat wheel)",
                    host.file_name,
                    built_without.len(),
                    d.file_name
                ),
                files,
            });
        }
        findings
    }
}

/// kpack archives whose frames do not read back as their table says (empty or junk frames,
/// ordinals or offsets out of range, code for another processor under a key): the kernels they
/// should hold fail to load on the user's GPU.
/// Archives that do not read back as their tables say, and split hosts whose wrappers or
/// markers the runtime cannot use: either way, kernels that cannot load.
pub(in crate::check) fn archive_damage_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let shown = |problems: &[String]| {
        let first: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
        let more = if problems.len() > 3 { format!(" (and {} more)", problems.len() - 3) } else { String::new() };
        format!("{}{more}", first.join("; "))
    };
    for d in dists {
        // A per-target-id archive (`…_gfx90a:xnack+.kpack`) whose code objects are for another
        // mode: a device in the mode its name says finds it, loads them, and they fail.
        for (path, toc) in d.wheel.iter().flat_map(|w| &w.kpack_tocs) {
            let Some(named) = archive_target(path).filter(|t| t.features().next().is_some()) else { continue };
            let keep = crate::gpu::targets::Keep::new(crate::gpu::resolve::modes_of(&named));
            let mut wrong: Vec<String> =
                toc.values().flatten().filter(|t| !keep.runs(*t)).map(|t| t.to_string()).collect();
            wrong.sort();
            wrong.dedup();
            if !wrong.is_empty() {
                findings.push(Finding {
                    kind: Kind::KpackArchiveDamaged,
                    severity: Severity::Error,
                    message: format!(
                        "{}: the kpack archive {path} is named for {named} but holds code for {}: a {named} device finds it, and its kernels fail to load (hipErrorInvalidImage)",
                        d.file_name,
                        wrong.join(", ")
                    ),
                    files: vec![d.path.display().to_string()],
                });
            }
        }
        for (path, problems) in d.wheel.iter().flat_map(|w| &w.kpack_damage) {
            findings.push(Finding {
                kind: Kind::KpackArchiveDamaged,
                severity: Severity::Error,
                message: format!(
                    "{}: the kpack archive {path} does not read back as its table of contents says: {}; the kernels it should hold cannot load",
                    d.file_name,
                    shown(problems)
                ),
                files: vec![d.path.display().to_string()],
            });
        }
        for (path, problems) in d.wheel.iter().flat_map(|w| &w.kpack_marker_problems) {
            findings.push(Finding {
                kind: Kind::KpackMarkerUnusable,
                severity: Severity::Error,
                message: format!(
                    "{}: {path} has its device code split out, but {}; the kernels of those wrappers cannot load",
                    d.file_name,
                    shown(problems)
                ),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    findings
}

/// The target ID an archive's name ends with. Ex) `p/.kpack/libk.so_gfx90a:xnack+.kpack` →
/// `gfx90a:xnack+`; a name that ends with none (`rocm.kpack`) → `None`.
fn archive_target(path: &str) -> Option<TargetId> {
    let stem = path.rsplit('/').next()?.strip_suffix(".kpack")?;
    let (_, target) = stem.rsplit_once('_')?;
    TargetId::parse(target).ok()
}

/// When a binary finds only target-id archives of a processor (TheRock's per-target-id
/// layout) and they hold one mode of a feature: the devices in the other mode find none.
/// Ex) only `gfx90a:xnack+`: a gfx90a with XNACK off (the driver's default) finds no archive.
pub(super) fn unserved_mode(processor: &str, found: &[String]) -> Option<String> {
    if found.is_empty() || found.iter().any(|n| n == processor) {
        return None;
    }
    for feature in ["xnack", "sramecc"] {
        let on = found.iter().any(|n| n.contains(&format!("{feature}+")));
        let off = found.iter().any(|n| n.contains(&format!("{feature}-")));
        if on != off {
            let (has, lacks, mode) = if on { ('+', '-', "off") } else { ('-', '+', "on") };
            return Some(format!(
                "its {processor} archives are for {feature}{has} only ({}): a {processor} with {} {mode} finds no archive named {processor}, {processor}:{feature}{lacks} or for its full target id, and its first kernel launch fails (hipErrorInvalidImage)",
                found.join(", "),
                feature.to_uppercase(),
            ));
        }
    }
    None
}

/// Each kpack-split binary finds its archive for the architecture of every index that serves
/// it: a wheel of an architecture directory for that one, a wheel outside them for each of
/// the set's architecture directories, and, in a set without any, for the processors of the
/// archives the set holds.
pub(in crate::check) fn kpack_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut archives: ArchivesByPath<'_> = BTreeMap::new();
    for d in dists {
        for (path, targets) in d.wheel.iter().flat_map(|w| &w.kpack_archives) {
            archives.entry(path.as_str()).or_default().push((d, targets));
        }
    }
    let set_arches: BTreeSet<String> = dists.iter().filter_map(|d| architecture_dir(&d.path)).collect();
    // A generic target's code sits in the archives of the processors it covers (the runtime
    // asks for the agent's processor first): it names no archive of its own.
    let archive_arches: BTreeSet<String> = archives
        .values()
        .flatten()
        .flat_map(|(_, targets)| targets.iter().filter(|t| !t.is_generic()).map(|t| t.processor().to_string()))
        .collect();
    // The archive names the runtime may look for on a device of a processor: every target ID
    // compatible with one of its modes, most specific first (TheRock writes an archive per
    // target ID, `foo_gfx90a:xnack+.kpack`).
    let names_of = |arch: &str| -> Vec<String> {
        let mut names = vec![arch.to_string()];
        for mode in crate::gpu::resolve::device_modes(arch) {
            for name in mode.compatible_targets().into_iter().map(|t| t.to_string()) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    };
    let mut findings = Vec::new();
    for d in dists {
        let Some(w) = d.wheel.as_ref().filter(|w| !w.kpack_refs.is_empty()) else { continue };
        // A host whose extras name its device wheels is checked by those ([`split_set_findings`]).
        let split_host =
            !w.kpack_kernels.is_empty() && device_extras(&d.metadata.provides_extra).any(|e| e.target().is_some());
        if split_host {
            continue;
        }
        let arches: Vec<String> = match architecture_dir(&d.path) {
            Some(a) => vec![a],
            None if !set_arches.is_empty() => set_arches.iter().cloned().collect(),
            None => archive_arches.iter().cloned().collect(),
        };
        if arches.is_empty() {
            let (first, paths) = &w.kpack_refs[0];
            findings.push(Finding {
                kind: Kind::KpackUnresolved,
                severity: Severity::Error,
                message: format!(
                    "{}: {} kpack-split binar{} ({first}, …) look for their device code in `{}`, and the set holds no kpack archive for any GPU: installed, the first kernel launch fails (hipErrorInvalidImage). Publish the wheels that carry the archives (the device wheels) beside it",
                    d.file_name,
                    w.kpack_refs.len(),
                    if w.kpack_refs.len() == 1 { "y" } else { "ies" },
                    paths.join("`, `")
                ),
                files: vec![d.path.display().to_string()],
            });
            continue;
        }
        for arch in &arches {
            findings.extend(arch_findings(d, &w.kpack_refs, arch, &names_of(arch), &archives));
        }
    }
    findings
}

/// The set's kpack archives by install path, each with the distributions that hold one there
/// and its target ids.
type ArchivesByPath<'a> = BTreeMap<&'a str, Vec<(&'a Dist, &'a Vec<TargetId>)>>;

/// Whether `d`'s kpack-split binaries (`refs`: binary, search paths) find their archive for
/// `arch` under one of its `names` (the processor's, or its target ids'), and every mode of it.
fn arch_findings(
    d: &Dist,
    refs: &[(String, Vec<String>)],
    arch: &str,
    names: &[String],
    archives: &ArchivesByPath<'_>,
) -> Vec<Finding> {
    use crate::gpu::resolve::Lookup;
    let mut findings = Vec::new();
    let archive_paths = |binary: &str, paths: &[String], name: &str| {
        Lookup { binary, kernel_name: "", search_paths: paths }.paths_named(name)
    };
    // The archive names of `arch` a binary finds (the processor's, or target IDs').
    let found = |binary: &String, paths: &Vec<String>| -> Vec<String> {
        names
            .iter()
            .filter(|name| {
                archive_paths(binary, paths, name).iter().any(|c| {
                    archives.get(c.as_str()).is_some_and(|list| {
                        list.iter().any(|(o, targets)| {
                            architecture_dir(&o.path).is_none_or(|a| a == arch)
                                && (targets.is_empty() || targets.iter().any(|t| t.processor() == arch))
                        })
                    })
                })
            })
            .cloned()
            .collect()
    };
    let unresolved: Vec<(&String, Vec<String>)> = refs
        .iter()
        .filter(|(binary, paths)| found(binary, paths).is_empty())
        .map(|(binary, paths)| (binary, archive_paths(binary, paths, arch)))
        .collect();
    for (binary, paths) in refs {
        if let Some(message) = unserved_mode(arch, &found(binary, paths)) {
            findings.push(Finding {
                kind: Kind::KpackModeUnserved,
                severity: Severity::Warning,
                message: format!("{}: {binary}: {message}", d.file_name),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    let Some((first, candidates)) = unresolved.first() else { return findings };
    let looked =
        candidates.first().map(|c| format!("site-packages/{c}")).unwrap_or_else(|| "outside site-packages".into());
    findings.push(Finding {
        kind: Kind::KpackUnresolved,
        severity: Severity::Error,
        message: format!(
            "{}: {} kpack-split binar{} ({first}, …) find no device code for {arch}: {first} looks for {looked}, which no file of the set for {arch} installs. Installed there, the first kernel launch fails (hipErrorInvalidImage); publish the wheel that carries the {arch} archive in the {arch} index",
            d.file_name,
            unresolved.len(),
            if unresolved.len() == 1 { "y" } else { "ies" },
        ),
        files: vec![d.path.display().to_string()],
    });
    findings
}
