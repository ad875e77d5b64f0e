//! `wheelfix check`: lint a release set (one or more directories of wheels and sdists) for the
//! failures a ROCm release has seen:
//! - one file name with different bytes in two places (the `rocm` sdist built on Linux and on
//!   Windows, uploaded under one name, ROCm/TheRock#5347);
//! - a selector or metapackage whose `device-*` extras do not match the device packages present;
//! - distributions without a local version label, and pins a same-named PyPI project could satisfy;
//! - local labels whose string order contradicts their ROCm order (ROCm/TheRock#7183);
//! - a wheel in an architecture's directory (`…/gfx950/…`) with device code but none for it;
//! - platform wheels that say `Root-Is-Purelib: true`, and file-name tags WHEEL does not list;
//! - RECORDs that disagree with their archive (every member is hashed), and files that cannot be
//!   read at all: a wheel is never skipped in silence.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rayon::prelude::*;
use serde::Serialize;

use crate::analysis::{AnalyzeOptions, analyze};
use crate::progress::NoProgress;
use crate::version::{ordering_hazards, requirement_name};
use crate::wheel::{CoreMetadata, Wheel, WheelFilename, normalize_name};

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    /// A stable identifier. Ex) `filename-conflict`
    pub kind: &'static str,
    pub message: String,
    pub files: Vec<String>,
}

/// One distribution of the set, as `check` sees it.
struct Dist {
    path: PathBuf,
    file_name: String,
    project: String,
    version: String,
    metadata: CoreMetadata,
    /// Platform family of a wheel (`linux_x86_64`, `win_amd64`), `None` for `any` and sdists.
    platform: Option<String>,
    is_wheel: bool,
}

/// Lint every wheel and sdist under `dirs`.
pub fn check(dirs: &[PathBuf], options: &AnalyzeOptions) -> Vec<Finding> {
    let files = super::collect_files(dirs, &[".whl", ".tar.gz"]);
    let mut findings = Vec::new();

    // The same file name with different bytes.
    let hashes: Vec<(PathBuf, Result<String, String>)> =
        files.par_iter().map(|p| (p.clone(), super::file_sha256(p).map_err(|e| e.to_string()))).collect();
    let mut by_name: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (path, hash) in &hashes {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Ok(hash) = hash {
            by_name.entry(name).or_default().entry(hash.clone()).or_default().push(path.display().to_string());
        }
    }
    for (name, variants) in &by_name {
        if variants.len() > 1 {
            findings.push(Finding {
                kind: "filename-conflict",
                message: format!(
                    "{name} exists with {} different contents: an upload would overwrite one with the other",
                    variants.len()
                ),
                files: variants.values().flatten().cloned().collect(),
            });
        }
    }

    let read: Vec<Result<Dist, Finding>> = files.par_iter().map(|p| read_dist(p)).collect();
    let mut dists = Vec::new();
    for r in read {
        match r {
            Ok(d) => dists.push(d),
            Err(f) => findings.push(f),
        }
    }
    findings.extend(selector_findings(&dists));
    findings.extend(version_findings(&dists));
    findings.extend(wheel_findings(&dists, options));
    findings.sort();
    findings.dedup();
    findings
}

fn read_dist(path: &Path) -> Result<Dist, Finding> {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unreadable = |message: String| Finding { kind: "unreadable", message, files: vec![path.display().to_string()] };
    let is_wheel = file_name.ends_with(".whl");
    let platform = if is_wheel {
        let filename = WheelFilename::parse(&file_name).map_err(|e| unreadable(e.to_string()))?;
        super::platform_family(&filename.platform_tags)
    } else {
        None
    };
    let text = super::read_core_metadata(path).map_err(|e| unreadable(format!("{file_name}: {e}")))?;
    let metadata = CoreMetadata::parse(&String::from_utf8_lossy(&text));
    Ok(Dist {
        path: path.to_path_buf(),
        project: normalize_name(&metadata.name),
        version: metadata.version.clone(),
        platform,
        metadata,
        file_name,
        is_wheel,
    })
}

/// A requirement split into name, the exact pinned version (if `==`/`===`), extra and platform.
struct Requirement {
    name: String,
    pinned: Option<String>,
    extra: Option<String>,
    /// `linux` / `win32` / `darwin` from a `sys_platform == "…"` marker.
    sys_platform: Option<String>,
}

fn parse_requirement(text: &str) -> Requirement {
    let (spec, marker) = text.split_once(';').unwrap_or((text, ""));
    let name = normalize_name(requirement_name(spec.trim()));
    let pinned =
        spec.split_once("==").map(|(_, v)| v.trim_start_matches('=').trim().trim_end_matches(')').trim().to_string());
    let quoted_after = |key: &str| -> Option<String> {
        let at = marker.find(key)?;
        let rest = &marker[at + key.len()..];
        let start = rest.find(['"', '\''])? + 1;
        let end = rest[start..].find(['"', '\''])? + start;
        Some(rest[start..end].to_string())
    };
    Requirement { name, pinned, extra: quoted_after("extra"), sys_platform: quoted_after("sys_platform") }
}

/// The GPU target a device package is for. Ex) `rocm-sdk-device-gfx950` → `gfx950`
fn device_target(project: &str) -> Option<&str> {
    let (_, target) = project.rsplit_once("-device-")?;
    target.starts_with("gfx").then_some(target)
}

fn selector_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let present: BTreeMap<&str, BTreeSet<Option<&str>>> = dists.iter().fold(BTreeMap::new(), |mut m, d| {
        m.entry(d.project.as_str()).or_default().insert(d.platform.as_deref());
        m
    });
    for d in dists {
        let device_extras: Vec<&String> =
            d.metadata.provides_extra.iter().filter(|e| e.starts_with("device-")).collect();
        if device_extras.is_empty() {
            continue;
        }
        let file = vec![d.path.display().to_string()];
        let requirements: Vec<Requirement> = d.metadata.requires_dist.iter().map(|r| parse_requirement(r)).collect();
        // The device packages this selector is about: those its extras name, and every present
        // package of the same family (`rocm-sdk-device-*`).
        let families: BTreeSet<String> = requirements
            .iter()
            .filter(|r| r.extra.as_deref().is_some_and(|e| e.starts_with("device-")))
            .filter_map(|r| device_target(&r.name).map(|t| r.name.trim_end_matches(t).to_string()))
            .collect();
        let devices: Vec<&str> = present
            .keys()
            .copied()
            .filter(|p| device_target(p).is_some() && families.iter().any(|f| p.starts_with(f.as_str())))
            .collect();
        for device in &devices {
            let target = device_target(device).unwrap_or_default();
            let extra = format!("device-{target}");
            if !requirements.iter().any(|r| r.extra.as_deref() == Some(&extra) && r.name == *device) {
                findings.push(Finding {
                    kind: "missing-extra",
                    message: format!(
                        "{} {} has no extra `{extra}` for {device}, which the set contains",
                        d.project, d.version
                    ),
                    files: file.clone(),
                });
            }
            if d.metadata.provides_extra.iter().any(|e| e == "device-all")
                && !requirements.iter().any(|r| r.extra.as_deref() == Some("device-all") && r.name == *device)
            {
                findings.push(Finding {
                    kind: "device-all-incomplete",
                    message: format!("{} {}: `device-all` does not include {device}", d.project, d.version),
                    files: file.clone(),
                });
            }
        }
        for r in requirements.iter().filter(|r| r.extra.is_some()) {
            let Some(platforms) = present.get(r.name.as_str()) else {
                findings.push(Finding {
                    kind: "absent-pin",
                    message: format!(
                        "{} {}: extra `{}` requires {}, which the set does not contain",
                        d.project,
                        d.version,
                        r.extra.as_deref().unwrap_or(""),
                        r.name
                    ),
                    files: file.clone(),
                });
                continue;
            };
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
                        kind: "platform-marker",
                        message: format!(
                            "{} {}: {} is required on sys_platform == \"{sys}\", but the set has it only for {}",
                            d.project,
                            d.version,
                            r.name,
                            platforms.iter().map(|p| p.unwrap_or("any")).collect::<Vec<_>>().join(", ")
                        ),
                        files: file.clone(),
                    });
                }
            }
        }
    }
    findings
}

fn version_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let in_set: BTreeSet<&str> = dists.iter().map(|d| d.project.as_str()).collect();
    for d in dists {
        let file = vec![d.path.display().to_string()];
        let local = pep440_rs::Version::from_str(&d.version).is_ok_and(|v| v.is_local());
        if !local {
            findings.push(Finding {
                kind: "no-local-version",
                message: format!(
                    "{} {} has no local version label: a same-named release on PyPI can take its place",
                    d.project, d.version
                ),
                files: file.clone(),
            });
        }
        for text in &d.metadata.requires_dist {
            let r = parse_requirement(text);
            if !in_set.contains(r.name.as_str()) {
                continue;
            }
            let exact = r.pinned.as_deref().is_some_and(|v| v.contains('+') && !v.contains('*'));
            if !exact {
                findings.push(Finding {
                    kind: "loose-pin",
                    message: format!(
                        "{} {}: `{text}` is not an exact pin with the local label; PyPI's {} could satisfy it",
                        d.project, d.version, r.name
                    ),
                    files: file.clone(),
                });
            }
        }
    }
    let versions: Vec<(String, String)> = dists.iter().map(|d| (d.project.clone(), d.version.clone())).collect();
    for hazard in ordering_hazards(&versions) {
        findings.push(Finding { kind: "local-label-order", message: hazard.message, files: Vec::new() });
    }
    findings
}

/// The GPU architecture a directory names. Ex) `site/gfx950/torch-….whl` → `gfx950`
fn architecture_dir(path: &Path) -> Option<String> {
    path.parent()?.components().rev().find_map(|c| {
        let s = c.as_os_str().to_str()?;
        (s.starts_with("gfx") && s.len() > 3 && s[3..].chars().all(|c| c.is_ascii_alphanumeric()))
            .then(|| s.to_string())
    })
}

fn wheel_findings(dists: &[Dist], options: &AnalyzeOptions) -> Vec<Finding> {
    dists
        .par_iter()
        .filter(|d| d.is_wheel)
        .flat_map_iter(|d| {
            let mut findings = Vec::new();
            let file = vec![d.path.display().to_string()];
            let wheel = match Wheel::open(&d.path) {
                Ok(wheel) => wheel,
                Err(e) => {
                    findings.push(Finding {
                        kind: "unreadable",
                        message: format!("{}: {e}", d.file_name),
                        files: file.clone(),
                    });
                    return findings;
                }
            };
            let analysis = match analyze(&wheel, options, &NoProgress) {
                Ok(analysis) => analysis,
                Err(e) => {
                    findings.push(Finding {
                        kind: "unreadable",
                        message: format!("{}: {e}", d.file_name),
                        files: file.clone(),
                    });
                    return findings;
                }
            };
            if let Some(first) = analysis.record_findings.first() {
                findings.push(Finding {
                    kind: "stale-record",
                    message: format!(
                        "{}: RECORD disagrees with the archive ({}; first: {} `{}`); pip installs it, but nothing can verify those files: rebuild, or `wheelfix retag` writes a true RECORD",
                        d.file_name,
                        crate::wheel::record::summarize(&analysis.record_findings),
                        first.problem.as_str(),
                        first.file
                    ),
                    files: file.clone(),
                });
            }
            let filename_tags: BTreeSet<String> = wheel
                .filename
                .python_abi_pairs()
                .into_iter()
                .flat_map(|pair| {
                    wheel.filename.platform_tags.iter().map(move |p| format!("{pair}-{p}")).collect::<Vec<_>>()
                })
                .collect();
            let wheel_tags: BTreeSet<String> = wheel.wheel_info.tags.iter().cloned().collect();
            if filename_tags != wheel_tags {
                let only_name: Vec<&String> = filename_tags.difference(&wheel_tags).collect();
                let only_wheel: Vec<&String> = wheel_tags.difference(&filename_tags).collect();
                findings.push(Finding {
                    kind: "tag-mismatch",
                    message: format!(
                        "{}: the file name and WHEEL disagree (only in the name: {}; only in WHEEL: {})",
                        d.file_name,
                        if only_name.is_empty() {
                            "-".into()
                        } else {
                            only_name.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        },
                        if only_wheel.is_empty() {
                            "-".into()
                        } else {
                            only_wheel.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        }
                    ),
                    files: file.clone(),
                });
            }
            if d.platform.is_some() && wheel.wheel_info.root_is_purelib == Some(true) {
                findings.push(Finding {
                    kind: "purelib-platform-wheel",
                    message: format!("{}: a platform wheel whose WHEEL says Root-Is-Purelib: true", d.file_name),
                    files: file.clone(),
                });
            }
            if let Some(arch) = architecture_dir(&d.path) {
                let targets: BTreeSet<String> = analysis
                    .gpu
                    .iter()
                    .flat_map(|g| g.base_targets().map(str::to_string).collect::<Vec<_>>())
                    .collect();
                if !targets.is_empty() && !targets.contains(&arch) {
                    findings.push(Finding {
                        kind: "wrong-architecture",
                        message: format!(
                            "{} is in the {arch} index but its device code is for {}",
                            d.file_name,
                            targets.into_iter().collect::<Vec<_>>().join(", ")
                        ),
                        files: file.clone(),
                    });
                }
            }
            findings
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_with_extras_and_markers() {
        let r =
            parse_requirement("rocm-sdk-device-gfx942==7.13.0; extra == \"device-gfx942\" and sys_platform == 'linux'");
        assert_eq!(r.name, "rocm-sdk-device-gfx942");
        assert_eq!(r.pinned.as_deref(), Some("7.13.0"));
        assert_eq!(r.extra.as_deref(), Some("device-gfx942"));
        assert_eq!(r.sys_platform.as_deref(), Some("linux"));
        assert_eq!(device_target("rocm-sdk-device-gfx950"), Some("gfx950"));
        assert_eq!(device_target("amd-torch-device-gfx1201"), Some("gfx1201"));
        assert_eq!(architecture_dir(Path::new("site/gfx950/x.whl")).as_deref(), Some("gfx950"));
        assert_eq!(architecture_dir(Path::new("site/linux/x.whl")), None);
    }
}
