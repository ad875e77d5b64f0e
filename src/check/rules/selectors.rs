//! Selectors, metapackages and their extras: a `device-<target>` extra for every device
//! package of the set, `device-all` with them all, each requirement met on every operating
//! system the set serves; one metapackage of a name per index; no project requiring itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::extra::{DeviceExtra, device_extras, device_project_target};

use super::*;
use crate::check::facts::{Dist, is_metapackage};
use crate::check::{Finding, Kind, Severity};

pub(in crate::check) fn selector_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// Two metapackages of one name in one directory: one index would serve both, and installers
/// take the higher version, which for two builds of one release is the order of their
/// digests (`10.1.0+gfx950.424e84fe` against `…9b0c71d2`), so a rebuild can lose to the build it
/// replaced.
pub(in crate::check) fn metapackage_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// A distribution that requires itself: resolvers loop on it (a `rocm` selector shipped
/// `Requires-Dist: rocm==…` and pip stopped with a RecursionError). The one form that is no
/// loop is an extra that aggregates other extras of its own project
/// (`rocm[device-gfx942,device-gfx950]; extra == "device-all"`).
pub(in crate::check) fn self_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// Per host of the set's device wheels, the targets they serve (`gfx942`, `gfx11`): a device
/// wheel's host is the project it requires with no extra that is not itself a device project.
/// Also, per device project, its host.
fn served_targets(dists: &[Dist]) -> (BTreeMap<&str, BTreeSet<&str>>, BTreeMap<&str, &str>) {
    let mut served: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut host_of: BTreeMap<&str, &str> = BTreeMap::new();
    for d in dists {
        let Some(target) = device_project_target(&d.project) else { continue };
        let hosts = d.metadata.requires_dist.iter().filter(|r| r.marker_extras.is_empty());
        for r in hosts.filter(|r| device_project_target(r.package.as_str()).is_none()) {
            if let Some(host) = dists.iter().find(|h| h.project == r.package.as_str()) {
                served.entry(host.project.as_str()).or_default().insert(target);
                host_of.insert(d.project.as_str(), host.project.as_str());
            }
        }
    }
    (served, host_of)
}

/// A glibc version: (major, minor).
type Glibc = (u32, u32);

/// The lowest glibc any wheel of `project` the selector `s` can reach installs on (a wheel
/// with several tags installs where its oldest does).
fn glibc_floor(dists: &[Dist], s: &Dist, project: &str) -> Option<(u32, u32)> {
    let family = s.platform.as_deref().map(os_family);
    dists
        .iter()
        .filter(|d| d.project == project)
        .filter(|d| family.is_none_or(|f| d.platform.as_deref().is_none_or(|p| os_family(p) == f)))
        .filter_map(|d| d.wheel.as_ref()?.filename_tags.iter().filter_map(|t| t.glibc()).min())
        .min()
}

/// What each GPU's extra of a selector pulls, against what serves that GPU: a project with
/// device wheels for other GPUs only, pulled by the extra (or by the selector itself, so by
/// every GPU's), is an error; one project whose glibc floor is above that of everything else
/// a GPU's extra pulls is a warning, naming the GPUs it raises.
pub(in crate::check) fn serving_findings(dists: &[Dist]) -> Vec<Finding> {
    let (served, host_of) = served_targets(dists);
    let mut findings = Vec::new();
    for s in dists.iter().filter(|d| is_metapackage(d)) {
        let extras: Vec<DeviceExtra> = device_extras(&s.metadata.provides_extra).filter(|e| !e.is_all()).collect();
        if extras.is_empty() {
            continue;
        }
        let file = vec![s.path.display().to_string()];
        // Project → the extras that pull it for GPUs it has no code for; → the extras whose
        // floor it alone raises, and to what.
        let mut unserved: BTreeMap<&str, (bool, Vec<String>)> = BTreeMap::new();
        let mut raised: BTreeMap<&str, (Glibc, Glibc, Vec<String>)> = BTreeMap::new();
        for extra in &extras {
            let name = extra.to_string();
            let target = name.strip_prefix("device-").unwrap_or(&name);
            let pulled: Vec<(&str, bool)> = s
                .metadata
                .requires_dist
                .iter()
                .filter(|r| r.marker_extras.is_empty() || r.under_extra(&name))
                .map(|r| (r.package.as_str(), r.marker_extras.is_empty()))
                .collect();
            for &(project, always) in &pulled {
                if let Some(targets) = served.get(project)
                    && !targets.contains(target)
                {
                    let entry = unserved.entry(project).or_insert((always, Vec::new()));
                    entry.1.push(target.to_string());
                }
            }
            // A host and its device wheels are one project here: theirs is one floor.
            let floors: Vec<(&str, (u32, u32))> = pulled
                .iter()
                .filter_map(|&(p, _)| Some((host_of.get(p).copied().unwrap_or(p), glibc_floor(dists, s, p)?)))
                .collect();
            let Some(&(top, floor)) = floors.iter().max_by_key(|(_, f)| *f) else { continue };
            let rest = floors.iter().filter(|(p, _)| *p != top).map(|(_, f)| *f).max();
            if let Some(rest) = rest
                && floor > rest
            {
                let entry = raised.entry(top).or_insert((floor, rest, Vec::new()));
                entry.2.push(target.to_string());
            }
        }
        for (project, (always, targets)) in unserved {
            let how = if always { "requires it for every GPU" } else { "its extras pull it" };
            let has = crate::gpu::targets::natural_order(served[project].iter().copied());
            findings.push(Finding {
                kind: Kind::ExtraPullsOtherGpu,
                severity: Severity::Error,
                message: format!(
                    "{} {} {how}, but {project} has device code for {} only: the commands for {} install it for nothing, and its tags and glibc stand in their way",
                    s.project,
                    s.version,
                    has.join(", "),
                    targets.join(", ")
                ),
                files: file.clone(),
            });
        }
        for (project, ((major, minor), (rest_major, rest_minor), targets)) in raised {
            findings.push(Finding {
                kind: Kind::FloorRaisedBy,
                severity: Severity::Warning,
                message: format!(
                    "{project} raises the glibc that {}'s command for {} needs to {major}.{minor}; everything else it pulls installs on glibc {rest_major}.{rest_minor}",
                    s.project,
                    targets.join(", ")
                ),
                files: file.clone(),
            });
        }
    }
    findings
}
