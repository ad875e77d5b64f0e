//! The rules `check` holds a set to, each over the distributions read: selectors and extras,
//! versions and pins, wheels, providers, requirements, interpreters, ROCm ABIs, kpack archives.
//! One file of over 600 lines (about 1,150 of code, then the unit tests of the kpack rules):
//! each rule is one function over the same facts and the few helpers they share (architecture
//! directories, projects in reach); none calls another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::extra::{DeviceExtra, device_extras, device_project_target};
use crate::gpu::TargetId;
use crate::version::ordering_hazards;
use crate::wheel::name::PackageName;
use crate::wheel::requirement::required_projects;

use super::facts::{Dist, TagFacts, WheelFacts, is_metapackage};
use super::{Finding, Kind, Severity};

/// A platform family of a wheel's platform tag. Ex) `manylinux_2_28_x86_64` → `linux`
pub(super) fn os_family(platform: &str) -> &str {
    ["linux", "win", "macosx"].into_iter().find(|f| platform.contains(f)).unwrap_or(platform)
}

pub(super) fn selector_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    // The operating systems the set's platform wheels are for.
    let set_families: BTreeSet<&str> = dists.iter().filter_map(|d| d.platform.as_deref()).map(os_family).collect();
    let present: BTreeMap<&str, BTreeSet<Option<&str>>> = dists.iter().fold(BTreeMap::new(), |mut m, d| {
        m.entry(d.project.as_str()).or_default().insert(d.platform.as_deref());
        m
    });
    let versions: BTreeMap<&str, BTreeSet<&str>> = dists.iter().fold(BTreeMap::new(), |mut m, d| {
        m.entry(d.project.as_str()).or_default().insert(d.version.as_str());
        m
    });
    for d in dists {
        if device_extras(&d.metadata.provides_extra).next().is_none() {
            continue;
        }
        let file = vec![d.path.display().to_string()];
        let requirements = &d.metadata.requires_dist;
        // The device packages this selector is about: those its extras name, and every present
        // package of the same family (`rocm-sdk-device-*`).
        let device_requirements: Vec<&crate::wheel::requirement::Requirement> =
            requirements.iter().filter(|r| r.marker_extras.iter().any(|e| DeviceExtra::parse(e).is_some())).collect();
        let families: BTreeSet<String> = device_requirements
            .iter()
            .filter_map(|r| {
                device_project_target(r.package.as_str()).map(|t| r.package.as_str().trim_end_matches(t).to_string())
            })
            .collect();
        let devices: Vec<&str> = present
            .keys()
            .copied()
            .filter(|p| device_project_target(p).is_some() && families.iter().any(|f| p.starts_with(f.as_str())))
            // A platform selector (`py3-none-win_amd64`) is about that platform's device wheels.
            .filter(|p| d.platform.is_none() || present[p].contains(&d.platform.as_deref()))
            // A set of two releases: another release's device wheels (a processor this one was
            // not built for) are not this one's to name.
            .filter(|p| versions[p].iter().any(|v| device_requirements.iter().any(|r| admits(r, v))))
            .collect();
        findings.extend(device_extra_findings(d, &devices, &file));
        // Only the device extras: extras the project had before a split (`test`, `all`) are
        // judged as they were on the fat wheel, not as a selector's.
        for r in requirements.iter().filter(|r| r.extra.as_deref().and_then(DeviceExtra::parse).is_some()) {
            findings.extend(extra_requirement_findings(d, r, &present, &set_families, &file));
        }
    }
    findings
}

/// A selector's extras for the device packages of its families: one `device-<target>` each,
/// and `device-all` naming them all.
fn device_extra_findings(d: &Dist, devices: &[&str], file: &[String]) -> Vec<Finding> {
    let requirements = &d.metadata.requires_dist;
    let mut findings = Vec::new();
    for device in devices {
        let extra = DeviceExtra::of(device_project_target(device).unwrap_or_default());
        // A family's device wheel (`gfx11`, `gfx120x`, TheRock's `gfx12-0`: no processor) may
        // come only with its processors' extras, as TheRock's packaging chain has it.
        let family_brought = extra.processor().is_none()
            && requirements.iter().any(|r| {
                r.package == **device
                    && r.extra.as_deref().and_then(DeviceExtra::parse).is_some_and(|e| e.processor().is_some())
            });
        let extra = extra.to_string();
        if !family_brought && !requirements.iter().any(|r| r.under_extra(&extra) && r.package == **device) {
            findings.push(Finding {
                kind: Kind::MissingExtra,
                severity: Severity::Error,
                message: format!(
                    "{} {} has no extra `{extra}` for {device}, which the set contains",
                    d.project, d.version
                ),
                files: file.to_vec(),
            });
        }
        let all = DeviceExtra::All.to_string();
        if device_extras(&d.metadata.provides_extra).any(|e| e.is_all())
            && !requirements.iter().any(|r| r.under_extra(&all) && r.package == **device)
        {
            findings.push(Finding {
                kind: Kind::DeviceAllIncomplete,
                severity: Severity::Error,
                message: format!("{} {}: `{all}` does not include {device}", d.project, d.version),
                files: file.to_vec(),
            });
        }
    }
    findings
}

/// One requirement under an extra: the set contains what it requires, for every operating
/// system the set serves or under a marker that says which.
fn extra_requirement_findings(
    d: &Dist,
    r: &crate::wheel::requirement::Requirement,
    present: &BTreeMap<&str, BTreeSet<Option<&str>>>,
    set_families: &BTreeSet<&str>,
    file: &[String],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(platforms) = present.get(r.package.as_str()) else {
        findings.push(Finding {
            kind: Kind::AbsentPin,
            severity: Severity::Error,
            message: format!(
                "{} {}: extra `{}` requires {}, which the set does not contain",
                d.project,
                d.version,
                r.extra.as_deref().unwrap_or(""),
                r.package
            ),
            files: file.to_vec(),
        });
        return findings;
    };
    let families: BTreeSet<&str> = platforms.iter().flatten().map(|p| os_family(p)).collect();
    if r.sys_platform.is_none()
        && d.platform.is_none()
        && !platforms.contains(&None)
        && let Some(lacking) = set_families.difference(&families).next()
    {
        findings.push(Finding {
                kind: Kind::UnmarkedPlatformExtra,
                severity: Severity::Error,
                message: format!(
                    "{} {}: extra `{}` requires {}, which the set has only for {}, with no platform marker: on {lacking} the extra cannot resolve",
                    d.project,
                    d.version,
                    r.extra.as_deref().unwrap_or(""),
                    r.package,
                    families.iter().copied().collect::<Vec<_>>().join(", ")
                ),
                files: file.to_vec(),
            });
    }
    if let Some(sys) = &r.sys_platform {
        let family = match sys.as_str() {
            "linux" => "linux",
            "win32" => "win",
            "darwin" => "macosx",
            other => other,
        };
        let available = platforms.iter().any(|p| p.is_none_or(|p| p.starts_with(family)));
        if !available {
            findings.push(Finding {
                kind: Kind::PlatformMarker,
                severity: Severity::Error,
                message: format!(
                    "{} {}: {} is required on sys_platform == \"{sys}\", but the set has it only for {}",
                    d.project,
                    d.version,
                    r.package,
                    platforms.iter().map(|p| p.unwrap_or("any")).collect::<Vec<_>>().join(", ")
                ),
                files: file.to_vec(),
            });
        }
    }
    findings
}

pub(super) fn version_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let in_set: BTreeSet<&str> = dists.iter().map(|d| d.project.as_str()).collect();
    // Projects of the set with a local label: a pure wheel requiring one is marked with it.
    let labelled: BTreeSet<&str> =
        dists.iter().filter(|d| d.metadata.version.parsed.is_local()).map(|d| d.project.as_str()).collect();
    // Pure projects the set carries without a local label (left unmarked on purpose).
    let unmarked_pure: BTreeSet<&str> =
        dists.iter().filter(|d| d.pure && !d.metadata.version.parsed.is_local()).map(|d| d.project.as_str()).collect();
    for d in dists {
        let file = vec![d.path.display().to_string()];
        let local = d.metadata.version.parsed.is_local();
        let requires_labelled = d.metadata.requires_dist.iter().any(|r| labelled.contains(r.package.as_str()));
        if !local && d.pure && !requires_labelled {
            // The version rules leave a pure wheel that requires nothing marked unmarked on
            // purpose (the seeds' triton_kernels 1.0.0): worth knowing, not a broken release.
            findings.push(Finding {
                kind: Kind::NoLocalVersion,
                severity: Severity::Warning,
                message: format!(
                    "{} {} (pure Python) has no local version label: a same-named release on PyPI can take its place; --mark-pure marks it",
                    d.project, d.version
                ),
                files: file.clone(),
            });
        } else if !local {
            findings.push(Finding {
                kind: Kind::NoLocalVersion,
                severity: Severity::Error,
                message: format!(
                    "{} {} has no local version label: a same-named release on PyPI can take its place",
                    d.project, d.version
                ),
                files: file.clone(),
            });
        }
        for r in &d.metadata.requires_dist {
            let text = &r.text;
            // `bitsandbytes[test]; extra == "dev"` inside bitsandbytes names its own extras.
            if !in_set.contains(r.package.as_str()) || r.package.as_str() == d.project {
                continue;
            }
            let exact = r.pinned.as_deref().is_some_and(|v| v.contains('+') && !v.contains('*'));
            if !exact {
                // An exact pin of a pure project the set left unmarked cannot carry a label.
                let unmarked =
                    unmarked_pure.contains(r.package.as_str()) && r.pinned.as_deref().is_some_and(|v| !v.contains('*'));
                findings.push(Finding {
                    kind: Kind::LoosePin,
                    severity: if unmarked { Severity::Warning } else { Severity::Error },
                    message: format!(
                        "{} {}: `{text}` is not an exact pin with the local label; PyPI's {} could satisfy it",
                        d.project, d.version, r.package
                    ),
                    files: file.clone(),
                });
            }
        }
    }
    let versions: Vec<(String, String)> = dists.iter().map(|d| (d.project.clone(), d.version.clone())).collect();
    for hazard in ordering_hazards(&versions) {
        findings.push(Finding {
            kind: Kind::LocalLabelOrder,
            severity: Severity::Error,
            message: hazard.message,
            files: Vec::new(),
        });
    }
    findings
}

/// The GPU architecture a directory names. Ex) `site/gfx950/torch-….whl` → `gfx950`
pub(super) fn architecture_dir(path: &Path) -> Option<String> {
    path.parent()?.components().rev().find_map(|c| {
        let s = c.as_os_str().to_str()?;
        (s.starts_with("gfx") && s.len() > 3 && s[3..].chars().all(|c| c.is_ascii_alphanumeric()))
            .then(|| s.to_string())
    })
}

pub(super) fn wheel_findings(dists: &[Dist], strict_record: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for d in dists {
        let Some(w) = &d.wheel else { continue };
        let file = vec![d.path.display().to_string()];
        if let Some(first) = w.record_findings.first() {
            findings.push(Finding {
                kind: Kind::StaleRecord,
                severity: if strict_record { Severity::Error } else { Severity::Warning },
                message: format!(
                    "{}: RECORD disagrees with the archive ({}; first: {} `{}`); pip installs it, but nothing can verify those files: rebuild, or `wheelfix retag` writes a true RECORD",
                    d.file_name,
                    w.record_findings.summarize(),
                    first.problem.as_str(),
                    first.file
                ),
                files: file.clone(),
            });
        }
        findings.extend(tag_findings(d, w, &file));
        for (member, f) in &w.not_loadable {
            findings.push(Finding {
                kind: Kind::NotLoadable,
                severity: Severity::Error,
                message: format!("{}: {member} breaks the loader's rule `{}`: {}", d.file_name, f.rule, f.message),
                files: file.clone(),
            });
        }
        if let Some(arch) = architecture_dir(&d.path) {
            findings.extend(architecture_findings(d, w, &arch, &file));
        }
    }
    findings
}

/// The name and WHEEL agree, claim no more than the binaries meet, and a platform wheel is
/// installed as one.
fn tag_findings(d: &Dist, w: &WheelFacts, file: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let filename_tags: BTreeSet<String> =
        w.python_abi_pairs.iter().flat_map(|pair| w.filename_tags.iter().map(move |p| format!("{pair}-{p}"))).collect();
    let wheel_tags: BTreeSet<String> = w.tag_lines.iter().cloned().collect();
    if filename_tags != wheel_tags {
        let list = |v: Vec<&String>| {
            if v.is_empty() { "-".into() } else { v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ") }
        };
        findings.push(Finding {
            kind: Kind::TagMismatch,
            severity: Severity::Error,
            message: format!(
                "{}: the file name and WHEEL disagree (only in the name: {}; only in WHEEL: {})",
                d.file_name,
                list(filename_tags.difference(&wheel_tags).collect()),
                list(wheel_tags.difference(&filename_tags).collect())
            ),
            files: file.to_vec(),
        });
    }
    // A name that claims more than the binaries meet: pip installs it where it cannot load.
    if let (TagFacts { basis: "claimed", measured: Some(_), note, .. }, true) =
        (&w.tag, !w.filename_tags.iter().any(|t| t.is_linux() || t.is_any()))
    {
        findings.push(Finding {
            kind: Kind::TagNotMet,
            severity: Severity::Error,
            message: format!(
                "{}: the name claims {} but {note}: pip installs it on hosts where it cannot load",
                d.file_name, w.tag.tag
            ),
            files: file.to_vec(),
        });
    }
    if d.platform.is_some() && w.root_is_purelib == Some(true) {
        findings.push(Finding {
            kind: Kind::PurelibPlatformWheel,
            severity: Severity::Error,
            message: format!("{}: a platform wheel whose WHEEL says Root-Is-Purelib: true", d.file_name),
            files: file.to_vec(),
        });
    }
    findings
}

/// A wheel in an architecture's index holds device code for that architecture, in every
/// bundle, and none only for others.
fn architecture_findings(d: &Dist, w: &WheelFacts, arch: &str, file: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    if let Ok(requested) = crate::gpu::TargetId::parse(arch)
        && (w.gpu_targets.is_empty() || w.gpu_targets.iter().any(|t| t == arch))
    {
        for u in crate::gpu::targets::uncovered(&w.bundled, &[requested]) {
            let holds = if u.has.is_empty() {
                "no device code at all: its offload bundles were emptied (`thin --allow-missing` of a build without it?)".to_string()
            } else {
                format!("code for {} only", u.has.join(", "))
            };
            findings.push(Finding {
                kind: Kind::NoCodeForArchitecture,
                severity: Severity::Error,
                message: format!(
                    "{}: {} has offload bundles but no code object that runs on {arch}, the architecture of its index; it holds {holds}. Installed there, it fails with hipErrorNoBinaryForGpu",
                    d.file_name, u.file
                ),
                files: file.to_vec(),
            });
        }
    }
    if !w.gpu_targets.is_empty() && !w.gpu_targets.iter().any(|t| t == arch) {
        findings.push(Finding {
            kind: Kind::WrongArchitecture,
            severity: Severity::Error,
            message: format!(
                "{} is in the {arch} index but its device code is for {}",
                d.file_name,
                w.gpu_targets.join(", ")
            ),
            files: file.to_vec(),
        });
    }
    findings
}

/// Each library a wheel needs from another wheel resolves inside the set, among the wheels of
/// its platform and architecture directory (or of no architecture directory), and the wheel's
/// requirements name the providing project.
pub(super) fn provider_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let by_project = by_project(dists);
    // The wheels that install each path, found once.
    let mut installing: std::collections::HashMap<&str, Vec<&Dist>> = std::collections::HashMap::new();
    for o in dists {
        for path in o.wheel.iter().flat_map(|w| &w.install_paths) {
            installing.entry(path.as_str()).or_default().push(o);
        }
    }
    for d in dists {
        let Some(w) = &d.wheel else { continue };
        let arch = architecture_dir(&d.path);
        let beside = |o: &&Dist| {
            !std::ptr::eq(*o, d)
                && o.project != d.project
                && o.wheel.is_some()
                && (o.platform.is_none() || o.platform == d.platform)
                && architecture_dir(&o.path).is_none_or(|a| Some(&a) == arch.as_ref())
        };
        // What an install of it brings, followed only for a wheel that needs another's library.
        let mut declared = None;
        for need in &w.cross {
            let found = need.entries.iter().find_map(|e| {
                let dir = e.dir.as_deref()?;
                let install = crate::wheel::join_path(dir, &need.soname);
                installing.get(install.as_str())?.iter().copied().find(beside)
            });
            let first = &need.entries[0];
            let declares = |declared: &mut Option<BTreeSet<PackageName>>, provider: &Dist| {
                declared
                    .get_or_insert_with(|| {
                        required_projects(&d.metadata.requires_dist, |name| {
                            let of = by_project.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
                            of.iter().map(|o| o.metadata.requires_dist.as_slice()).collect()
                        })
                    })
                    .contains(&PackageName::new(&provider.project))
            };
            match found {
                None => findings.push(Finding {
                    kind: Kind::UnresolvedProvider,
                    severity: Severity::Error,
                    message: match &first.dir {
                        Some(dir) => format!(
                            "{}: {} needs {}, {}, but no wheel of the set{} provides it",
                            d.file_name,
                            first.file,
                            need.soname,
                            match need.entries.len() {
                                1 => format!("on `{}` (site-packages/{dir})", first.entry),
                                n => format!("on {n} entries that leave the wheel (`{}`, …)", first.entry),
                            },
                            arch.as_ref().map(|a| format!(" for {a}")).unwrap_or_default()
                        ),
                        None => format!(
                            "{}: {} needs {} on `{}`, which climbs above site-packages: no wheel can provide it",
                            d.file_name, first.file, need.soname, first.entry
                        ),
                    },
                    files: vec![d.path.display().to_string()],
                }),
                Some(provider) if !declares(&mut declared, provider) => findings.push(Finding {
                    kind: Kind::UndeclaredProvider,
                    severity: Severity::Error,
                    message: format!(
                        "{}: {} comes from {} ({}), which its requirements do not name: installers will not bring it",
                        d.file_name, need.soname, provider.project, provider.file_name
                    ),
                    files: vec![d.path.display().to_string(), provider.path.display().to_string()],
                }),
                Some(_) => {}
            }
        }
    }
    findings
}

/// The distributions of `project` an install from `d`'s index can see: those of its
/// architecture directory, or of none (an index per architecture is the seeds' layout).
pub(super) fn in_reach<'a>(by_project: &ByProject<'a>, d: &Dist, project: &str) -> Vec<&'a Dist> {
    let arch = architecture_dir(&d.path);
    by_project
        .get(project)
        .map(|list| {
            list.iter()
                .copied()
                .filter(|o| architecture_dir(&o.path).is_none_or(|a| Some(&a) == arch.as_ref()))
                .collect()
        })
        .unwrap_or_default()
}

/// The set's distributions by project, made once: the rules that follow requirements look a
/// project up here instead of walking the whole set for each requirement (a set of thousands
/// of wheels that pin each other would take minutes).
pub(super) type ByProject<'a> = BTreeMap<&'a str, Vec<&'a Dist>>;

pub(super) fn by_project(dists: &[Dist]) -> ByProject<'_> {
    let mut map: ByProject<'_> = BTreeMap::new();
    for d in dists {
        map.entry(d.project.as_str()).or_default().push(d);
    }
    map
}

/// A requirement between distributions of the set that no file of the set meets: installers
/// would go to the upstream index for it, or fail. Ex) `nixl-rocm==1.5.2+rocm10.1.0` while the
/// set holds `nixl-rocm 1.5.2+rocm7.14.0`
pub(super) fn unmet_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let projects = by_project(dists);
    for d in dists {
        for r in &d.metadata.requires_dist {
            if !projects.contains_key(r.package.as_str()) || r.package.as_str() == d.project || r.specifiers().is_none()
            {
                continue;
            }
            let candidates = in_reach(&projects, d, r.package.as_str());
            if candidates.iter().any(|o| r.admits(&o.metadata.version.parsed)) {
                continue;
            }
            let held: BTreeSet<String> = candidates.iter().map(|o| o.version.clone()).collect();
            let held = if held.is_empty() {
                format!("none in reach of its index (only in {})", other_places(&projects, r.package.as_str()))
            } else {
                held.into_iter().collect::<Vec<_>>().join(", ")
            };
            let mut files = vec![d.path.display().to_string()];
            files.extend(candidates.iter().map(|o| o.path.display().to_string()));
            findings.push(Finding {
                kind: Kind::UnmetRequirement,
                severity: Severity::Error,
                message: format!(
                    "{} {} requires `{}`, which no file of the set meets (the set has {} {held}): installers look for it upstream, or fail",
                    d.project, d.version, r.text, r.package
                ),
                files,
            });
        }
    }
    findings
}

/// Where else a project's files lie. Ex) `site/gfx1100/nixl-….whl`
pub(super) fn other_places(by_project: &ByProject<'_>, project: &str) -> String {
    let places: Vec<String> =
        by_project.get(project).into_iter().flatten().map(|o| o.path.display().to_string()).collect();
    places.join(", ")
}

/// The CPython minor versions a distribution installs on. Ex) `cp311-cp311` → {11}
pub(super) fn interpreters(d: &Dist) -> BTreeSet<u64> {
    crate::distribution::PYTHONS
        .filter(|&minor| crate::distribution::installs_on(&d.file_name, d.metadata.requires_python.as_deref(), minor))
        .collect()
}

/// Write a set of CPython minor versions. Ex) {11, 12} → `3.11, 3.12`; {9, …, 20} → `3.9 and
/// later`; {} → `no Python`
pub(super) fn pythons_text(set: &BTreeSet<u64>) -> String {
    let (Some(&first), Some(&last)) = (set.first(), set.last()) else {
        return "no Python".into();
    };
    if last == *crate::distribution::PYTHONS.end() && set.len() as u64 == last - first + 1 {
        return format!("3.{first} and later");
    }
    set.iter().map(|m| format!("3.{m}")).collect::<Vec<_>>().join(", ")
}

/// A distribution whose exact pins cannot all be installed on one interpreter (with it): its
/// base pins, and the base pins with each extra's. Ex) a metapackage pinning a cp311-only wheel
/// beside cp312-only ones. Pins under other markers (`python_version`, `sys_platform`) are
/// never all active at once and are left out.
pub(super) fn interpreter_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let projects = by_project(dists);
    for d in dists {
        let pinned: Vec<&crate::wheel::requirement::Requirement> = d
            .metadata
            .requires_dist
            .iter()
            .filter(|r| r.exact.is_some() && r.package.as_str() != d.project)
            .filter(|r| r.marker().is_none() || (r.extra.is_some() && r.sys_platform.is_none() && !mentions_python(r)))
            .collect();
        if pinned.is_empty() {
            continue;
        }
        let mut groups: BTreeMap<Option<&str>, Vec<&crate::wheel::requirement::Requirement>> = BTreeMap::new();
        groups.insert(None, pinned.iter().filter(|r| r.extra.is_none()).copied().collect());
        for r in pinned.iter().filter(|r| r.extra.is_some()) {
            groups.entry(r.extra.as_deref()).or_default().push(r);
        }
        let base = groups[&None].clone();
        for (extra, own) in &groups {
            let mut all = base.clone();
            if extra.is_some() {
                all.extend(own.iter().copied());
            }
            let mut common = interpreters(d);
            let mut each = Vec::new();
            for r in &all {
                let found = in_reach(&projects, d, r.package.as_str());
                let meeting: Vec<&&Dist> = found.iter().filter(|o| r.admits(&o.metadata.version.parsed)).collect();
                if meeting.is_empty() {
                    continue; // unmet-requirement says so
                }
                let pythons: BTreeSet<u64> = meeting.iter().flat_map(|o| interpreters(o)).collect();
                common = common.intersection(&pythons).copied().collect();
                each.push(format!("{} on {}", r.package, pythons_text(&pythons)));
            }
            if common.is_empty() && !each.is_empty() {
                let with = extra.map(|e| format!(" with extra `{e}`")).unwrap_or_default();
                findings.push(Finding {
                    kind: Kind::NoCommonPython,
                    severity: Severity::Error,
                    message: format!(
                        "{} {}{with} pins files no one Python can install together (it installs on {}; {}): every install of it fails",
                        d.project,
                        d.version,
                        pythons_text(&interpreters(d)),
                        each.join("; ")
                    ),
                    files: vec![d.path.display().to_string()],
                });
            }
        }
    }
    findings
}

pub(super) fn mentions_python(r: &crate::wheel::requirement::Requirement) -> bool {
    r.marker().is_some_and(|m| m.contains("python_") || m.contains("implementation") || m.contains("platform_"))
}

/// A distribution that requires itself: resolvers loop on it (a `rocm` selector shipped
/// `Requires-Dist: rocm==…` and pip stopped with a RecursionError). The one form that is no
/// loop is an extra that aggregates other extras of its own project
/// (`rocm[device-gfx942,device-gfx950]; extra == "device-all"`).
pub(super) fn self_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for d in dists {
        for r in d.metadata.requires_dist.iter().filter(|r| r.package.as_str() == d.project) {
            let aggregates =
                r.extra.is_some() && r.extras().next().is_some() && r.extras().all(|e| Some(e) != r.extra.as_deref());
            if !aggregates {
                findings.push(Finding {
                    kind: Kind::SelfRequirement,
                    severity: Severity::Error,
                    message: format!(
                        "{} requires itself (`Requires-Dist: {}`): resolvers loop on it; only an extra that gathers other extras of the project may name it",
                        d.file_name, r.text
                    ),
                    files: vec![d.path.display().to_string()],
                });
            }
        }
    }
    findings
}

/// One ROCm ABI per index: the ROCm libraries the wheels an index serves link (by SONAME
/// major) all come from one ROCm release line (`rocm-abi-mix`), and a wheel's `+rocm…` label
/// names a line that ships the majors it links (`rocm-abi-label`).
pub(super) fn abi_findings(dists: &[Dist]) -> Vec<Finding> {
    use crate::check::abi::{AbiTable, line_text, split_soname};
    let table = AbiTable::builtin();
    // Each wheel that links ROCm, the libraries it links, and the lines it can serve: those one
    // of its binaries fits (a wheel with one backend per ROCm, as bitsandbytes ships, serves each).
    let linking: Vec<(&Dist, BTreeSet<String>, Vec<&str>)> = dists
        .iter()
        .filter_map(|d| {
            let per_binary = &d.wheel.as_ref()?.rocm_sonames;
            if per_binary.is_empty() {
                return None;
            }
            let all: BTreeSet<String> = per_binary.iter().flatten().cloned().collect();
            let mut lines: Vec<&str> = per_binary.iter().flat_map(|b| table.lines_shipping(b)).collect();
            lines.sort_by_key(|l| table.line_rank(l));
            lines.dedup();
            Some((d, all, lines))
        })
        .collect();
    let lines_text = |lines: &[&str]| match lines {
        [] => "no one ROCm release".to_string(),
        lines => lines.iter().map(|l| line_text(l)).collect::<Vec<_>>().join(" or "),
    };
    let listed = |sonames: &BTreeSet<String>| sonames.iter().cloned().collect::<Vec<_>>().join(", ");
    let mut findings = Vec::new();
    for (d, sonames, lines) in &linking {
        let Some(release) = crate::version::rocm_release(d.metadata.version.parsed.local()) else { continue };
        let Some(line) = table.line_of(&release) else { continue };
        if !lines.contains(&line) {
            let bases: BTreeSet<&str> = sonames.iter().filter_map(|s| split_soname(s)).map(|(b, _)| b).collect();
            findings.push(Finding {
                kind: Kind::RocmAbiLabel,
                severity: Severity::Error,
                message: format!(
                    "{} is labelled for ROCm {} but links {} ({}); {} ships {}: on a host with the ROCm its label names it fails to load. Rebuild it against that ROCm, or label it with the ROCm it was built for",
                    d.file_name,
                    release.iter().map(u64::to_string).collect::<Vec<_>>().join("."),
                    listed(sonames),
                    lines_text(lines),
                    line_text(line),
                    table.describe(line, &bases)
                ),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    // The wheels each index serves: those of an architecture directory with those of none.
    let arches: BTreeSet<Option<String>> = linking.iter().map(|(d, _, _)| architecture_dir(&d.path)).collect();
    let places: Vec<Option<String>> =
        if arches.iter().all(Option::is_none) { vec![None] } else { arches.into_iter().flatten().map(Some).collect() };
    for place in places {
        let served: Vec<&(&Dist, BTreeSet<String>, Vec<&str>)> = linking
            .iter()
            .filter(|(d, _, _)| architecture_dir(&d.path).is_none_or(|a| Some(&a) == place.as_ref()))
            .collect();
        let common = served
            .iter()
            .map(|(_, _, lines)| lines.clone())
            .reduce(|a, b| a.into_iter().filter(|l| b.contains(l)).collect());
        if served.len() < 2 || common.is_none_or(|c| !c.is_empty()) {
            continue;
        }
        // Group the wheels by the release lines their libraries fit.
        let mut by_lines: BTreeMap<Vec<&str>, Vec<String>> = BTreeMap::new();
        for (d, sonames, lines) in &served {
            by_lines.entry(lines.clone()).or_default().push(format!("{} ({})", d.file_name, listed(sonames)));
        }
        let groups: Vec<String> =
            by_lines.iter().map(|(lines, wheels)| format!("{}: {}", lines_text(lines), wheels.join(", "))).collect();
        let place_text = place.as_ref().map(|a| format!("the {a} index")).unwrap_or_else(|| "the set".into());
        findings.push(Finding {
            kind: Kind::RocmAbiMixed,
            severity: Severity::Error,
            message: format!(
                "{place_text} mixes ROCm ABIs, and one environment holds one ROCm: {}. Rebuild the odd ones against the set's ROCm, or publish them in a separate index",
                groups.join("; ")
            ),
            files: served.iter().map(|(d, _, _)| d.path.display().to_string()).collect(),
        });
    }
    findings
}

/// A kpack archive's table of contents: key → target ids.
/// A split set (`wheelfix split`, TheRock's device wheels): for each `device-<target>` extra of
/// a host with kpack-split binaries, every wrapper of every such binary finds, in the archives
/// of the device wheels that extra requires, its code object for a device of the target, as the
/// kpack runtime looks for it ([`crate::gpu::resolve`]: feature variants and generic targets
/// included) in one of the device's modes; each of those device wheels requires the host back
/// at its exact version.
pub(super) fn split_set_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// Whether a requirement admits a distribution's version; a version or specifier that does not
/// parse is admitted (what else would the requirement bring).
fn admits(requirement: &crate::wheel::requirement::Requirement, version: &str) -> bool {
    match (requirement.specifiers(), version.parse::<pep440_rs::Version>()) {
        (Some(specifiers), Ok(version)) => specifiers.contains(&version),
        _ => true,
    }
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

/// Files two distributions of the set would both install, on one platform and architecture
/// directory: pip installs the second over the first, and uninstalling either removes it.
pub(super) fn path_conflict_findings(dists: &[Dist]) -> Vec<Finding> {
    // (platform, architecture directory, install path) → (project, dist index).
    type Place<'a> = (Option<&'a str>, Option<String>, &'a str);
    let mut owners: BTreeMap<Place<'_>, BTreeSet<(&str, usize)>> = BTreeMap::new();
    for (i, d) in dists.iter().enumerate() {
        let Some(w) = &d.wheel else { continue };
        for path in &w.install_paths {
            let place = (d.platform.as_deref(), architecture_dir(&d.path), path.as_str());
            owners.entry(place).or_default().insert((d.project.as_str(), i));
        }
    }
    let mut findings = Vec::new();
    let mut reported = BTreeSet::new();
    for ((_, _, path), list) in &owners {
        let projects: BTreeSet<&str> = list.iter().map(|(p, _)| *p).collect();
        if projects.len() < 2 || !reported.insert(projects.clone()) {
            continue;
        }
        let count =
            owners.iter().filter(|(_, l)| l.iter().map(|(p, _)| *p).collect::<BTreeSet<_>>() == projects).count();
        findings.push(Finding {
            kind: Kind::PathConflict,
            severity: Severity::Error,
            message: format!(
                "{} install the same file{} ({path}{}): installed together, one overwrites the other, and uninstalling either removes it",
                projects.iter().copied().collect::<Vec<_>>().join(" and "),
                if count == 1 { "" } else { "s" },
                if count == 1 { String::new() } else { format!(" and {} more", count - 1) }
            ),
            files: list.iter().map(|(_, i)| dists[*i].path.display().to_string()).collect(),
        });
    }
    findings
}

/// kpack archives whose frames do not read back as their table says (empty or junk frames,
/// ordinals or offsets out of range, code for another processor under a key): the kernels they
/// should hold fail to load on the user's GPU.
/// Archives that do not read back as their tables say, and split hosts whose wrappers or
/// markers the runtime cannot use: either way, kernels that cannot load.
pub(super) fn archive_damage_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let shown = |problems: &[String]| {
        let first: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
        let more = if problems.len() > 3 { format!(" (and {} more)", problems.len() - 3) } else { String::new() };
        format!("{}{more}", first.join("; "))
    };
    for d in dists {
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

/// When a binary finds only target-id archives of a processor (TheRock's per-target-id
/// layout) and they hold one mode of a feature: the devices in the other mode find none.
/// Ex) only `gfx90a:xnack+`: a gfx90a with XNACK off (the driver's default) finds no archive.
fn unserved_mode(processor: &str, found: &[String]) -> Option<String> {
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
pub(super) fn kpack_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// Two metapackages of one name in one directory: one index would serve both, and installers
/// take the higher version, which for two builds of one release is the order of their
/// digests (`10.1.0+gfx950.424e84fe` against `…9b0c71d2`), so a rebuild can lose to the build it
/// replaced.
pub(super) fn metapackage_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut by_place: BTreeMap<(PathBuf, &str), Vec<&Dist>> = BTreeMap::new();
    for d in dists {
        if is_metapackage(d) {
            let dir = d.path.parent().map(Path::to_path_buf).unwrap_or_default();
            by_place.entry((dir, d.project.as_str())).or_default().push(d);
        }
    }
    let mut findings = Vec::new();
    for ((dir, project), list) in by_place {
        if list.len() < 2 {
            continue;
        }
        let mut sorted = list.clone();
        sorted.sort_by(|a, b| a.metadata.version.parsed.cmp(&b.metadata.version.parsed));
        let winner = sorted.last().expect("two or more");
        findings.push(Finding {
            kind: Kind::DuplicateMetapackage,
            severity: Severity::Error,
            message: format!(
                "{} metapackages of {project} in {} ({}): installers take {}, the highest version, which is not necessarily the newest build; keep only the build you mean to publish",
                list.len(),
                dir.display(),
                list.iter().map(|d| d.version.as_str()).collect::<Vec<_>>().join(", "),
                winner.version
            ),
            files: list.iter().map(|d| d.path.display().to_string()).collect(),
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wheel::metadata::CoreMetadata;

    /// A distribution of a set: its file under `dir/`, its METADATA, and what its wheel holds.
    fn dist(path: &str, metadata: &str, wheel: Option<WheelFacts>) -> Dist {
        let metadata = CoreMetadata::parse(metadata).unwrap();
        let file_name = path.rsplit('/').next().unwrap().to_string();
        Dist {
            path: PathBuf::from(path),
            file_name,
            project: metadata.package.as_str().to_string(),
            version: metadata.version.text.clone(),
            metadata,
            platform: Some("linux_x86_64".into()),
            pure: false,
            installer_problems: Vec::new(),
            wheel,
            size: 1,
        }
    }

    fn wheel() -> WheelFacts {
        WheelFacts {
            filename_tags: Vec::new(),
            python_abi_pairs: Vec::new(),
            tag_lines: Vec::new(),
            root_is_purelib: Some(false),
            gpu_targets: Vec::new(),
            bundled: Vec::new(),
            record_findings: Default::default(),
            cross: Vec::new(),
            install_paths: Default::default(),
            metadata_only: false,
            tag: TagFacts { tag: "linux_x86_64".into(), basis: "claimed", measured: None, note: String::new() },
            device_bytes: BTreeMap::new(),
            rocm_sonames: Vec::new(),
            kpack_refs: Vec::new(),
            kpack_archives: BTreeMap::new(),
            kpack_kernels: Vec::new(),
            kpack_tocs: BTreeMap::new(),
            kpack_damage: Vec::new(),
            kpack_marker_problems: Vec::new(),
            not_loadable: Vec::new(),
            variant: None,
        }
    }

    /// A split host of `pkg` 1.0 whose binary `pkg/lib/k.so` has `wrappers` wrappers and looks
    /// for `pkg/.kpack/pkg_@GFXARCH@.kpack`; extra `device-gfx90a` requires `pkg-device-gfx90a`.
    fn host(wrappers: usize) -> Dist {
        let mut w = wheel();
        w.kpack_refs = vec![("pkg/lib/k.so".into(), vec!["../.kpack/pkg_@GFXARCH@.kpack".into()])];
        w.kpack_kernels = vec![("pkg/lib/k.so".into(), "lib/k.so".into(), wrappers)];
        let metadata = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nProvides-Extra: device-gfx90a\nRequires-Dist: pkg-device-gfx90a==1.0; extra == \"device-gfx90a\"\n";
        dist("set/pkg-1.0-py3-none-linux_x86_64.whl", metadata, Some(w))
    }

    /// The gfx90a device wheel: archives (install path → key → target ids), pinning the host
    /// back or not.
    /// A table of contents: key → target ids.
    type Toc<'a> = &'a [(&'a str, &'a [&'a str])];

    fn device(archives: &[(&str, Toc<'_>)], pins_back: bool) -> Dist {
        let mut w = wheel();
        for (path, toc) in archives {
            let toc = toc
                .iter()
                .map(|(k, ts)| (k.to_string(), ts.iter().map(|t| TargetId::from_code(*t)).collect()))
                .collect();
            w.kpack_tocs.insert(path.to_string(), toc);
        }
        let pin = if pins_back { "Requires-Dist: pkg==1.0\n" } else { "Requires-Dist: pkg\n" };
        let metadata = format!("Metadata-Version: 2.1\nName: pkg-device-gfx90a\nVersion: 1.0\n{pin}");
        dist("set/pkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl", &metadata, Some(w))
    }

    fn kinds(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.kind.name()).collect()
    }

    #[test]
    fn a_split_host_resolves_in_per_processor_and_per_target_id_archives() {
        let keys: &[(&str, &[&str])] =
            &[("lib/k.so#0", &["gfx90a:xnack+", "gfx90a:xnack-"]), ("lib/k.so#1", &["gfx90a"])];
        let per_processor = device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true);
        assert_eq!(kinds(&split_set_findings(&[host(2), per_processor])), Vec::<&str>::new());
        // TheRock's names: an archive per target id, found by the target ids its TOC lists.
        let per_id = device(
            &[
                ("pkg/.kpack/pkg_gfx90a:xnack+.kpack", &[("lib/k.so#0", &["gfx90a:xnack+"])]),
                ("pkg/.kpack/pkg_gfx90a:xnack-.kpack", &[("lib/k.so#0", &["gfx90a:xnack-"])]),
                ("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#1", &["gfx90a"])]),
            ],
            true,
        );
        assert_eq!(kinds(&split_set_findings(&[host(2), per_id])), Vec::<&str>::new());
    }

    #[test]
    fn a_split_host_whose_device_wheel_lacks_its_code_or_pin_is_named() {
        // An archive at another path: unresolved.
        let elsewhere = device(&[("pkg/lib/.kpack/k.so_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], true);
        let found = split_set_findings(&[host(1), elsewhere]);
        assert_eq!(kinds(&found), ["kpack-unresolved"]);
        assert!(found[0].message.contains("site-packages/pkg/.kpack/pkg_gfx90a.kpack"), "{}", found[0].message);
        // A wrapper with no code anywhere in the set: lost; the device wheel does not pin back.
        let short = device(&[("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], false);
        let found = split_set_findings(&[host(2), short]);
        assert_eq!(kinds(&found), ["device-pin-one-way", "kpack-kernel-missing"]);
        assert!(found[1].message.contains("1 of 2 wrappers (lib/k.so#1"), "{}", found[1].message);
        // Code for another processor only under that key: built without gfx90a, a warning.
        let mut other = device(&[("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], true);
        let toc = BTreeMap::from([("lib/k.so#1".to_string(), vec![TargetId::from_code("gfx942")])]);
        other.wheel.as_mut().unwrap().kpack_tocs.insert("pkg/.kpack/pkg_gfx942.kpack".into(), toc);
        assert_eq!(kinds(&split_set_findings(&[host(2), other])), ["kpack-kernel-not-built"]);
    }

    #[test]
    fn a_set_of_two_releases_checks_each_host_against_its_own_device_wheels() {
        let keys: &[(&str, &[&str])] = &[("lib/k.so#0", &["gfx90a"])];
        let older_host = {
            let mut h = host(1);
            h.metadata = CoreMetadata::parse(
                "Metadata-Version: 2.1\nName: pkg\nVersion: 0.9\nProvides-Extra: device-gfx90a\nRequires-Dist: pkg-device-gfx90a==0.9; extra == \"device-gfx90a\"\n",
            )
            .unwrap();
            h.version = "0.9".into();
            h
        };
        let older_device = {
            let mut d = device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true);
            d.metadata = CoreMetadata::parse(
                "Metadata-Version: 2.1\nName: pkg-device-gfx90a\nVersion: 0.9\nRequires-Dist: pkg==0.9\n",
            )
            .unwrap();
            d.version = "0.9".into();
            d
        };
        let set = [host(1), device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true), older_host, older_device];
        assert_eq!(kinds(&split_set_findings(&set)), Vec::<&str>::new());
    }

    #[test]
    fn a_mode_served_alone_is_named_with_the_devices_that_miss_it() {
        assert_eq!(unserved_mode("gfx90a", &[]), None);
        assert_eq!(unserved_mode("gfx90a", &["gfx90a".into(), "gfx90a:xnack+".into()]), None);
        assert_eq!(unserved_mode("gfx90a", &["gfx90a:xnack+".into(), "gfx90a:xnack-".into()]), None);
        let only_on = unserved_mode("gfx90a", &["gfx90a:xnack+".into()]).unwrap();
        assert!(only_on.contains("xnack+ only") && only_on.contains("XNACK off"), "{only_on}");
        let only_off = unserved_mode("gfx942", &["gfx942:sramecc-".into()]).unwrap();
        assert!(only_off.contains("sramecc- only") && only_off.contains("SRAMECC on"), "{only_off}");
    }

    #[test]
    fn two_projects_installing_one_file_conflict_once() {
        let mut a = wheel();
        a.install_paths = ["pkg/x.so", "pkg/y.so"].iter().map(|p| p.to_string()).collect();
        let mut b = wheel();
        b.install_paths = a.install_paths.clone();
        let one = dist("set/a-1.0-py3-none-linux_x86_64.whl", "Name: a\nVersion: 1.0\n", Some(a));
        let two = dist("set/b-1.0-py3-none-linux_x86_64.whl", "Name: b\nVersion: 1.0\n", Some(b));
        let found = path_conflict_findings(&[one, two]);
        assert_eq!(kinds(&found), ["path-conflict"]);
        assert!(
            found[0].message.starts_with("a and b install the same files (pkg/x.so and 1 more)"),
            "{}",
            found[0].message
        );
        // Another platform's wheel of b installs elsewhere.
        let mut c = wheel();
        c.install_paths = ["pkg/x.so".to_string()].into_iter().collect();
        let mut other = dist("set/b-1.0-py3-none-win_amd64.whl", "Name: b\nVersion: 1.0\n", Some(c));
        other.platform = Some("win_amd64".into());
        let mut d = wheel();
        d.install_paths = ["pkg/x.so".to_string()].into_iter().collect();
        let one = dist("set/a-1.0-py3-none-linux_x86_64.whl", "Name: a\nVersion: 1.0\n", Some(d));
        assert!(path_conflict_findings(&[one, other]).is_empty());
    }

    #[test]
    fn device_targets_and_architecture_dirs() {
        assert_eq!(architecture_dir(Path::new("site/gfx950/x.whl")).as_deref(), Some("gfx950"));
        assert_eq!(architecture_dir(Path::new("site/linux/x.whl")), None);
    }

    #[test]
    fn a_family_wheel_may_come_with_its_processors_extras_alone() {
        let host = |extras: &str| {
            let text = format!(
                "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nProvides-Extra: device-gfx1100\nRequires-Dist: pkg-device-gfx1100==1.0; extra == \"device-gfx1100\"\n{extras}Provides-Extra: device-all\nRequires-Dist: pkg-device-gfx1100==1.0; extra == \"device-all\"\nRequires-Dist: pkg-device-gfx11==1.0; extra == \"device-all\"\n"
            );
            dist("set/pkg-1.0-py3-none-linux_x86_64.whl", &text, None)
        };
        let device = |target: &str| {
            let text =
                format!("Metadata-Version: 2.1\nName: pkg-device-{target}\nVersion: 1.0\nRequires-Dist: pkg==1.0\n");
            dist(&format!("set/pkg_device_{target}-1.0-py3-none-linux_x86_64.whl"), &text, None)
        };
        let chained = host("Requires-Dist: pkg-device-gfx11==1.0; extra == \"device-gfx1100\"\n");
        let found = selector_findings(&[chained, device("gfx1100"), device("gfx11")]);
        assert_eq!(kinds(&found), Vec::<&str>::new(), "TheRock's packaging chain");
        // Brought by no processor's extra: only `device-all` installs it.
        let found = selector_findings(&[host(""), device("gfx1100"), device("gfx11")]);
        assert_eq!(kinds(&found), ["missing-extra"]);
        // A processor's wheel is its own extra's, whatever else brings it.
        let stray = host("Requires-Dist: pkg-device-gfx1101==1.0; extra == \"device-gfx1100\"\n");
        let found = selector_findings(&[stray, device("gfx1100"), device("gfx11"), device("gfx1101")]);
        assert!(kinds(&found).contains(&"missing-extra"), "{found:?}");
    }

    #[test]
    fn another_releases_device_wheels_are_not_this_hosts_missing_extras() {
        let host = |version: &str, targets: &[&str]| {
            let mut text = format!("Metadata-Version: 2.1\nName: pkg\nVersion: {version}\n");
            for t in targets {
                text.push_str(&format!(
                    "Provides-Extra: device-{t}\nRequires-Dist: pkg-device-{t}=={version}; extra == \"device-{t}\"\n"
                ));
            }
            dist(&format!("set/pkg-{version}-py3-none-linux_x86_64.whl"), &text, None)
        };
        let device = |target: &str, version: &str| {
            let text = format!(
                "Metadata-Version: 2.1\nName: pkg-device-{target}\nVersion: {version}\nRequires-Dist: pkg=={version}\n"
            );
            dist(&format!("set/pkg_device_{target}-{version}-py3-none-linux_x86_64.whl"), &text, None)
        };
        // Release 2.0 added gfx1101: release 1.0's host has no extra for it, and need not.
        let set = [
            host("1.0", &["gfx1100"]),
            device("gfx1100", "1.0"),
            host("2.0", &["gfx1100", "gfx1101"]),
            device("gfx1100", "2.0"),
            device("gfx1101", "2.0"),
        ];
        assert_eq!(kinds(&selector_findings(&set)), Vec::<&str>::new());
        // The same release's device wheel without an extra is named.
        let short = [host("1.0", &["gfx1100"]), device("gfx1100", "1.0"), device("gfx1101", "1.0")];
        assert_eq!(kinds(&selector_findings(&short)), ["missing-extra"]);
    }
}
