//! Each wheel by itself: its tags against WHEEL and its binaries, its RECORD, its layout, its
//! architecture directory, the libraries it takes from other wheels, and files two projects
//! install.

use std::collections::{BTreeMap, BTreeSet};

use crate::wheel::name::PackageName;
use crate::wheel::requirement::required_projects;

use super::*;
use crate::check::facts::{Dist, TagFacts, WheelFacts};
use crate::check::{Finding, Kind, Severity};

pub(in crate::check) fn wheel_findings(dists: &[Dist], strict_record: bool) -> Vec<Finding> {
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
pub(in crate::check) fn provider_findings(dists: &[Dist]) -> Vec<Finding> {
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

/// Files two distributions of the set would both install, on one platform and architecture
/// directory: pip installs the second over the first, and uninstalling either removes it.
pub(in crate::check) fn path_conflict_findings(dists: &[Dist]) -> Vec<Finding> {
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
