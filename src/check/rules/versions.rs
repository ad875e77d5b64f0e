//! Versions and pins: local labels, pins a same-named release elsewhere could meet, label
//! orders that contradict ROCm's, requirements no file of the set meets, and exact pins no one
//! Python installs together.

use std::collections::{BTreeMap, BTreeSet};

use crate::version::ordering_hazards;

use super::*;
use crate::check::facts::Dist;
use crate::check::{Finding, Kind, Severity};

pub(in crate::check) fn version_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// A requirement between distributions of the set that no file of the set meets: installers
/// would go to the upstream index for it, or fail. Ex) `nixl-rocm==1.5.2+rocm10.1.0` while the
/// set holds `nixl-rocm 1.5.2+rocm7.14.0`
pub(in crate::check) fn unmet_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
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
pub(in crate::check) fn other_places(by_project: &ByProject<'_>, project: &str) -> String {
    let places: Vec<String> =
        by_project.get(project).into_iter().flatten().map(|o| o.path.display().to_string()).collect();
    places.join(", ")
}

/// The CPython minor versions a distribution installs on. Ex) `cp311-cp311` → {11}
pub(in crate::check) fn interpreters(d: &Dist) -> BTreeSet<u64> {
    crate::distribution::PYTHONS
        .filter(|&minor| crate::distribution::installs_on(&d.file_name, d.metadata.requires_python.as_deref(), minor))
        .collect()
}

/// Write a set of CPython minor versions. Ex) {11, 12} → `3.11, 3.12`; {9, …, 20} → `3.9 and
/// later`; {} → `no Python`
pub(in crate::check) fn pythons_text(set: &BTreeSet<u64>) -> String {
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
pub(in crate::check) fn interpreter_findings(dists: &[Dist]) -> Vec<Finding> {
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

pub(in crate::check) fn mentions_python(r: &crate::wheel::requirement::Requirement) -> bool {
    r.marker().is_some_and(|m| m.contains("python_") || m.contains("implementation") || m.contains("platform_"))
}
