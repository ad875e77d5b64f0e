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
//!   read at all: a wheel is never skipped in silence;
//! - libraries a wheel takes from another wheel (an RPATH entry that leaves it): each must be in
//!   the set, per platform and architecture directory, and its project among the wheel's
//!   requirements;
//! - sets that cannot install: a requirement between distributions of the set that no file of
//!   the set meets (a label mismatch), exact pins no one Python can install together, two
//!   metapackages of one name in one directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::AnalyzeOptions;
use crate::analysis::site::SitePackages;
use crate::examine::ExamineOptions;
use crate::policy::Policies;
use crate::progress::NoProgress;
use crate::version::ordering_hazards;
use crate::wheel::name::PackageName;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::requirement::required_projects;
use crate::wheel::{CoreMetadata, RecordFindings, Wheel};

/// How bad a finding is: errors fail `check` (exit 1); warnings only with `--strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// What to do about a kind of finding, where one thing does it (the finding's message says
/// the rest). Ex) `undeclared-provider` → add the provider to Requires-Dist
pub fn fix(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "unresolved-provider" => {
            "publish the wheel that provides the library in the same index, vendor it (`wheelfix repair`), or `--exclude` it if every environment provides it"
        }
        "undeclared-provider" => "add the providing project to the wheel's Requires-Dist, so installers bring it",
        "no-local-version" => {
            "`wheelfix retag --rocm-version X.Y.Z` labels every wheel of the set (`--mark-pure` for pure ones)"
        }
        "loose-pin" => {
            "pin exactly, with the local label (`wheelfix retag --rocm-version` rewrites the pins of the set)"
        }
        "stale-record" => "`wheelfix retag` writes a true RECORD",
        "tag-mismatch" => "`wheelfix retag` makes the file name and WHEEL agree",
        "tag-not-met" => {
            "`wheelfix retag` writes the tag the binaries meet (or `repair` vendors what keeps them from it)"
        }
        "filename-conflict" => {
            "give each build its own file name (a per-architecture or per-platform label), or publish each in its own index (a per-architecture upload directory or base URL)"
        }
        "resolve-upstream" => {
            "for uv: the release page's uv command (the set's index as --extra-index-url); check it with --site-first"
        }
        "local-label-order" => "label with wheelfix's `+rocmX.Y.Z`, whose order follows ROCm's",
        "duplicate-metapackage" => "remove the metapackages the newest build replaces",
        "missing-extra" | "device-all-incomplete" => {
            "rebuild the selector with `wheelfix metapackage` from the set as it is"
        }
        "no-code-for-architecture" | "wrong-architecture" => {
            "build with `--offload-arch` for the index's architecture, or publish the wheel only in indexes of the architectures it has code for"
        }
        "self-requirement" => {
            "drop the requirement on itself; an extra that gathers others is `name[a,b]; extra == \"all\"`"
        }
        "unmarked-platform-extra" => {
            "add the platform marker (`; sys_platform == \"linux\"`) to the extra's requirements, or publish the missing platform's files"
        }
        _ => return None,
    })
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    /// A stable identifier. Ex) `filename-conflict`
    pub kind: &'static str,
    pub severity: Severity,
    pub message: String,
    pub files: Vec<String>,
}

/// How a wheel's platform tag is known. Ex) measured: its binaries meet `manylinux_2_28_x86_64`
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagFacts {
    /// The file name's platform tags. Ex) `manylinux_2_28_x86_64`
    pub tag: String,
    /// `measured` when wheelfix read its binaries' symbol versions and they meet the tag;
    /// `claimed` when nothing could be measured (no host binary, a Windows or macOS wheel) or
    /// the binaries need a newer tag than the name claims.
    pub basis: &'static str,
    /// The most compatible tag its binaries meet, when they were judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<String>,
    /// Why, for people. Ex) `no host binary to measure`
    pub note: String,
}

/// What a release page shows of one distribution, read in `check`'s one pass over it.
#[derive(Debug, Clone, Serialize)]
pub struct DistFacts {
    pub path: String,
    pub file_name: String,
    /// Normalised name.
    pub project: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    /// Wheels only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<TagFacts>,
    /// GPU processors its device code is for. Ex) [`gfx950`]
    pub gpu_targets: Vec<String>,
    /// Uncompressed device-code bytes in offload bundles, by processor.
    pub device_bytes: BTreeMap<String, u64>,
    /// Nothing but its `.dist-info`, and requirements: a metapackage.
    pub metapackage: bool,
    /// Projects it requires (normalised), every extra included.
    pub requires: Vec<String>,
    /// Its `Provides-Extra` names. Ex) [`device-gfx950`]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<String>,
}

/// A release set as `check` reads it: its findings, and the facts of every distribution it
/// could read (what `index` puts on the release page).
pub struct Survey {
    pub findings: Vec<Finding>,
    pub dists: Vec<DistFacts>,
}

/// One distribution of the set, as `check` sees it.
struct Dist {
    path: PathBuf,
    file_name: String,
    /// Normalised name.
    project: String,
    version: String,
    metadata: CoreMetadata,
    /// Platform family of a wheel (`linux_x86_64`, `win_amd64`), `None` for `any` and sdists.
    platform: Option<String>,
    /// A wheel with no host binary and no device code.
    pure: bool,
    /// Why pip refuses to install it.
    installer_problems: Vec<String>,
    /// What only a wheel has, read in the same pass.
    wheel: Option<WheelFacts>,
    size: u64,
}

/// The facts `check` lints a wheel for.
struct WheelFacts {
    filename_tags: Vec<PlatformTag>,
    python_abi_pairs: Vec<String>,
    tag_lines: Vec<String>,
    root_is_purelib: Option<bool>,
    gpu_targets: Vec<String>,
    /// Its device code in offload bundles, per file: what coverage of an architecture is judged on.
    bundled: Vec<crate::elf::gpu::GpuCode>,
    record_findings: RecordFindings,
    /// Libraries it needs from other wheels.
    cross: Vec<crate::analysis::linkage::CrossNeed>,
    /// Every file's install path (for the libraries other wheels need from it).
    install_paths: std::collections::HashSet<String>,
    /// It holds nothing but its `.dist-info` (a metapackage, when it requires something).
    metadata_only: bool,
    tag: TagFacts,
    device_bytes: BTreeMap<String, u64>,
    /// The ROCm libraries each of its binaries links that `policies/rocm-abi.json` knows, by
    /// SONAME (binaries that link none left out). Ex) [{`libamdhip64.so.7`, `librocblas.so.5`}]
    rocm_sonames: Vec<BTreeSet<String>>,
    /// Its kpack-split binaries: install path and the search paths of their archives.
    kpack_refs: Vec<(String, Vec<String>)>,
    /// Its kpack archives by install path, with the processors their tables of contents list.
    kpack_archives: BTreeMap<String, Vec<String>>,
}

/// What reading one file gave: its sha256 (when the file could be read at all), the
/// distribution, and a finding when it could not be read as one.
struct Read {
    path: PathBuf,
    sha256: Option<String>,
    dist: Option<Dist>,
    unreadable: Option<Finding>,
}

/// The upstream indexes a set is compared with (`--upstream`), and how long each request may take.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    pub urls: Vec<String>,
    pub timeout: std::time::Duration,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        UpstreamOptions { urls: Vec::new(), timeout: std::time::Duration::from_secs(30) }
    }
}

/// Lint every wheel and sdist under `dirs`, with `check`'s defaults.
pub fn check(dirs: &[PathBuf], options: &AnalyzeOptions, policies: &Policies) -> Vec<Finding> {
    let examine =
        ExamineOptions { analyze: options, policies, plat: None, strict_record: false, disable_isa_check: false };
    survey(dirs, &examine, &SitePackages::default(), &UpstreamOptions::default()).findings
}

/// Lint every wheel and sdist under `dirs`, examined as `options` says (the run's settings:
/// `--disable-isa-ext-check` judges without the ISA check, `--strict-record` makes a stale
/// RECORD an error) beside the wheels of `site` (`--with-wheels`: libraries they provide are
/// no missing provider), against `upstream` too; keep what was read of each.
pub fn survey(
    dirs: &[PathBuf],
    options: &ExamineOptions<'_>,
    site: &SitePackages,
    upstream: &UpstreamOptions,
) -> Survey {
    let files = crate::wheel::inputs::collect_files(dirs, &[".whl", ".tar.gz"]);
    if files.is_empty() {
        let findings = vec![Finding {
            kind: "nothing-to-check",
            severity: Severity::Error,
            message: format!(
                "no wheel or sdist under {}: nothing was checked",
                dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            files: Vec::new(),
        }];
        return Survey { findings, dists: Vec::new() };
    }
    // A stale RECORD is a finding here, never a reason to set the wheel aside.
    let lenient = ExamineOptions { strict_record: false, ..*options };
    let read: Vec<Read> = crate::parallel::map(&files, |p| read_dist(p, &lenient, site));
    let mut findings = Vec::new();

    // The same file name with different bytes where both would be uploaded to one place: one
    // directory, or directories of no GPU architecture (a Linux and a Windows build of one
    // release, ROCm/TheRock#5347). Architecture directories (`gfx942/`, `gfx1100/`) are one
    // index each: the same file name in two of them is the seeds' layout.
    // (file name, architecture directory) → sha256 → the files of that content.
    type Place = (String, Option<String>);
    let mut by_place: BTreeMap<Place, BTreeMap<String, Vec<&Read>>> = BTreeMap::new();
    for r in &read {
        let name = r.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(hash) = &r.sha256 {
            let place = (name, architecture_dir(&r.path));
            by_place.entry(place).or_default().entry(hash.clone()).or_default().push(r);
        }
    }
    for ((name, arch), variants) in &by_place {
        if variants.len() > 1 {
            let place = arch.as_ref().map(|a| format!(" in the {a} index")).unwrap_or_default();
            let firsts: Vec<&Read> = variants.values().map(|v| v[0]).collect();
            let detail = match (firsts[0].dist.as_ref(), firsts[1].dist.as_ref()) {
                (Some(a), Some(b)) => content_differences(a, b),
                _ => String::new(),
            };
            findings.push(Finding {
                kind: "filename-conflict",
                severity: Severity::Error,
                message: format!(
                    "{name} exists with {} different contents{place}: an upload would overwrite one with the other{detail}",
                    variants.len()
                ),
                files: variants.values().flatten().map(|r| r.path.display().to_string()).collect(),
            });
        }
    }

    let mut dists = Vec::new();
    let mut sha256 = BTreeMap::new();
    for r in read {
        findings.extend(r.unreadable);
        if let Some(d) = &r.dist {
            sha256.insert(d.path.clone(), r.sha256.clone());
        }
        dists.extend(r.dist);
    }
    for d in &dists {
        for problem in &d.installer_problems {
            findings.push(Finding {
                kind: "installer-refuses",
                severity: Severity::Error,
                message: format!("{}: pip refuses to install it: {problem}", d.file_name),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    findings.extend(selector_findings(&dists));
    findings.extend(version_findings(&dists));
    findings.extend(wheel_findings(&dists, options.strict_record));
    findings.extend(provider_findings(&dists));
    findings.extend(unmet_requirement_findings(&dists));
    findings.extend(interpreter_findings(&dists));
    findings.extend(metapackage_findings(&dists));
    findings.extend(self_requirement_findings(&dists));
    findings.extend(abi_findings(&dists));
    findings.extend(kpack_findings(&dists));
    for url in &upstream.urls {
        findings.extend(upstream_findings(&dists, &super::upstream::Upstream::new(url, upstream.timeout)));
    }
    findings.sort();
    findings.dedup();
    let dists = dists.iter().map(|d| facts(d, sha256.get(&d.path).cloned().flatten())).collect();
    Survey { findings, dists }
}

fn facts(d: &Dist, sha256: Option<String>) -> DistFacts {
    let mut requires: Vec<String> = d.metadata.requires_dist.iter().map(|r| r.package.to_string()).collect();
    requires.sort();
    requires.dedup();
    DistFacts {
        path: d.path.display().to_string(),
        file_name: d.file_name.clone(),
        project: d.project.clone(),
        version: d.version.clone(),
        sha256,
        size: d.size,
        requires_python: d.metadata.requires_python.clone(),
        tag: d.wheel.as_ref().map(|w| w.tag.clone()),
        gpu_targets: d.wheel.as_ref().map(|w| w.gpu_targets.clone()).unwrap_or_default(),
        device_bytes: d.wheel.as_ref().map(|w| w.device_bytes.clone()).unwrap_or_default(),
        metapackage: is_metapackage(d),
        requires,
        extras: d.metadata.provides_extra.clone(),
    }
}

fn is_metapackage(d: &Dist) -> bool {
    d.wheel.as_ref().is_some_and(|w| w.metadata_only) && !d.metadata.requires_dist.is_empty()
}

/// How the wheel's platform tag is known: measured from its binaries, or only claimed.
fn tag_facts(wheel: &Wheel, judgement: &crate::policy::judgement::Judgement) -> TagFacts {
    use crate::policy::judgement::Judgement;
    let tag = wheel.filename.platform_tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(".");
    let claimed = |note: String| TagFacts { tag: tag.clone(), basis: "claimed", measured: None, note };
    match judgement {
        Judgement::Pure if wheel.filename.platform_tags.iter().all(PlatformTag::is_any) => {
            claimed("pure: no platform".into())
        }
        Judgement::Pure => claimed("no host binary to measure".into()),
        Judgement::Unaudited(reason) => claimed(reason.clone()),
        Judgement::Judged(j) => {
            let (overall, repairable) = (j.verdict.overall, j.verdict.repairable);
            // The least compatible policy the name claims (a name lists one policy's aliases).
            let claim = wheel.filename.platform_tags.iter().filter_map(|t| j.set.index_of(t)).max();
            let measured = |basis: &'static str, note: String, index: usize| TagFacts {
                tag: tag.clone(),
                basis,
                measured: Some(j.tag(index).to_string()),
                note,
            };
            match claim {
                Some(index) if index >= overall => measured(
                    "measured",
                    if index == overall {
                        "its binaries' symbol versions meet it".into()
                    } else {
                        format!("its binaries meet {}, more than the name says", j.tag(overall))
                    },
                    overall,
                ),
                // Libraries from outside the wheel (other wheels, the system) keep it from the tag
                // as it stands; its own symbol versions meet it.
                Some(index) if index >= repairable => {
                    let outside = &j.verdict.grafted[index];
                    let first = outside.iter().next().map(|l| format!(" ({l}…)")).unwrap_or_default();
                    measured(
                        "measured",
                        format!(
                            "its symbol versions meet it; {} librar{} it needs{first} must come from other wheels or the system",
                            outside.len(),
                            if outside.len() == 1 { "y" } else { "ies" }
                        ),
                        repairable,
                    )
                }
                _ => measured("claimed", format!("its binaries need {}", j.tag(repairable)), repairable),
            }
        }
    }
}

/// Read one file once: a wheel opened whole and its members scanned (device code, RECORD), or
/// an sdist's PKG-INFO; the file's sha256 from the same open file.
fn read_dist(path: &Path, options: &ExamineOptions<'_>, site: &SitePackages) -> Read {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unreadable = |message: String| Finding {
        kind: "unreadable",
        severity: Severity::Error,
        message: format!("{file_name}: {message}"),
        files: vec![path.display().to_string()],
    };
    let opened = if file_name.ends_with(".whl") {
        crate::examine::examine(path, options, site, &NoProgress)
            .map(|e| (e.wheel, e.analysis, e.judgement))
            .map_err(|e| e.to_string())
    } else {
        Err(String::new())
    };
    match opened {
        Ok((wheel, analysis, judgement)) => Read {
            path: path.to_path_buf(),
            sha256: wheel.archive.zip.sha256().ok(),
            dist: Some(Dist {
                path: path.to_path_buf(),
                project: wheel.metadata.package.to_string(),
                version: wheel.metadata.version.text.clone(),
                platform: super::platform_family(&wheel.filename.platform_tags),
                file_name: file_name.clone(),
                pure: analysis.has_no_code(),
                installer_problems: wheel.installer_problems.clone(),
                wheel: Some(WheelFacts {
                    filename_tags: wheel.filename.platform_tags.clone(),
                    python_abi_pairs: wheel.filename.python_abi_pairs(),
                    tag_lines: wheel.wheel_info.tags.clone(),
                    root_is_purelib: wheel.wheel_info.root_is_purelib,
                    gpu_targets: analysis.gpu_targets(),
                    bundled: analysis.gpu.iter().filter(|g| g.container.holds_bundles()).cloned().collect(),
                    cross: crate::analysis::linkage::cross_wheel_needs(&wheel, &analysis)
                        .into_iter()
                        .filter(|n| {
                            !options.policies.system_library(&n.soname)
                                && options.analyze.exclude.reason(&n.soname, None).is_none()
                                && analysis.external.get(&n.soname).is_none_or(|e| e.provided_by.is_none())
                                && !crate::analysis::linkage::found_on_system(&analysis, &n.soname, options.analyze)
                        })
                        .collect(),
                    install_paths: wheel
                        .archive
                        .members()
                        .iter()
                        .filter(|m| !m.is_dir())
                        .filter_map(|m| wheel.install_path(&m.name))
                        .collect(),
                    metadata_only: wheel
                        .archive
                        .members()
                        .iter()
                        .filter(|m| !m.is_dir())
                        .all(|m| m.name.split('/').next().is_some_and(|top| top.ends_with(".dist-info"))),
                    tag: tag_facts(&wheel, &judgement),
                    device_bytes: crate::elf::gpu::device_bytes(&analysis.gpu),
                    kpack_refs: analysis
                        .gpu
                        .iter()
                        .filter(|g| !g.kpack_search_paths.is_empty())
                        .filter_map(|g| Some((wheel.install_path(&g.file)?, g.kpack_search_paths.clone())))
                        .collect(),
                    kpack_archives: analysis
                        .gpu
                        .iter()
                        .filter(|g| g.container == crate::elf::gpu::Container::KpackArchive)
                        .filter_map(|g| Some((wheel.install_path(&g.file)?, g.targets.clone())))
                        .collect(),
                    rocm_sonames: analysis
                        .elf
                        .iter()
                        .map(|e| {
                            let known = e.facts.needed.iter().filter(|n| super::abi::AbiTable::builtin().knows(n));
                            known.cloned().collect::<BTreeSet<String>>()
                        })
                        .filter(|set| !set.is_empty())
                        .collect(),
                    record_findings: analysis.record_findings,
                }),
                size: wheel.archive.zip.identity.len,
                metadata: wheel.metadata,
            }),
            unreadable: None,
        },
        // An sdist; or a wheel that cannot be opened whole, whose metadata the set's other
        // findings may still use.
        Err(wheel_error) => {
            let dist = super::Distribution::read(path);
            let message = if file_name.ends_with(".whl") { Some(wheel_error) } else { dist.as_ref().err().cloned() };
            let sha256 = match &dist {
                Ok(d) => Some(d.sha256.clone()),
                Err(_) => crate::wheel::digest::file_sha256_hex(path).ok(),
            };
            let dist = dist.ok().map(|d| Dist {
                path: path.to_path_buf(),
                project: d.metadata.package.to_string(),
                version: d.metadata.version.text.clone(),
                platform: d.wheel.as_ref().and_then(|f| super::platform_family(&f.platform_tags)),
                metadata: d.metadata,
                file_name: file_name.clone(),
                pure: false,
                installer_problems: d.installer_problems,
                wheel: None,
                size: d.size,
            });
            Read { path: path.to_path_buf(), sha256, dist, unreadable: message.map(unreadable) }
        }
    }
}

/// What differs between two files of one name, for people: version, extras, requirements.
/// Ex) `; linux/rocm-7.1.0.tar.gz has extras device-gfx942, device-all that windows/rocm-7.1.0.tar.gz lacks`
fn content_differences(a: &Dist, b: &Dist) -> String {
    let mut parts = Vec::new();
    if a.version != b.version {
        parts.push(format!("{} is version {}, {} is {}", a.path.display(), a.version, b.path.display(), b.version));
    }
    let only = |x: &Dist, y: &Dist, what: &str, list: fn(&Dist) -> BTreeSet<String>| {
        let (lx, ly) = (list(x), list(y));
        let extra: Vec<String> = lx.difference(&ly).cloned().collect();
        (!extra.is_empty())
            .then(|| format!("{} has {what} {} that {} lacks", x.path.display(), extra.join(", "), y.path.display()))
    };
    let extras = |d: &Dist| d.metadata.provides_extra.iter().cloned().collect();
    let requires = |d: &Dist| d.metadata.requires_dist.iter().map(|r| format!("`{}`", r.text)).collect();
    for (x, y) in [(a, b), (b, a)] {
        parts.extend(only(x, y, "extras", extras));
    }
    if parts.is_empty() {
        for (x, y) in [(a, b), (b, a)] {
            parts.extend(only(x, y, "requirements", requires));
        }
    }
    if parts.is_empty() && a.size != b.size {
        parts.push(format!("same metadata, sizes {} and {} bytes", a.size, b.size));
    }
    if parts.is_empty() { String::new() } else { format!("; {}", parts.join("; ")) }
}

/// The GPU target a device package is for. Ex) `rocm-sdk-device-gfx950` → `gfx950`
fn device_target(project: &str) -> Option<&str> {
    let (_, target) = project.rsplit_once("-device-")?;
    target.starts_with("gfx").then_some(target)
}

/// A platform family of a wheel's platform tag. Ex) `manylinux_2_28_x86_64` → `linux`
fn os_family(platform: &str) -> &str {
    ["linux", "win", "macosx"].into_iter().find(|f| platform.contains(f)).unwrap_or(platform)
}

fn selector_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    // The operating systems the set's platform wheels are for.
    let set_families: BTreeSet<&str> = dists.iter().filter_map(|d| d.platform.as_deref()).map(os_family).collect();
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
        let requirements = &d.metadata.requires_dist;
        // The device packages this selector is about: those its extras name, and every present
        // package of the same family (`rocm-sdk-device-*`).
        let families: BTreeSet<String> = requirements
            .iter()
            .filter(|r| r.extra.as_deref().is_some_and(|e| e.starts_with("device-")))
            .filter_map(|r| {
                device_target(r.package.as_str()).map(|t| r.package.as_str().trim_end_matches(t).to_string())
            })
            .collect();
        let devices: Vec<&str> = present
            .keys()
            .copied()
            .filter(|p| device_target(p).is_some() && families.iter().any(|f| p.starts_with(f.as_str())))
            .collect();
        for device in &devices {
            let target = device_target(device).unwrap_or_default();
            let extra = format!("device-{target}");
            if !requirements.iter().any(|r| r.extra.as_deref() == Some(&extra) && r.package == **device) {
                findings.push(Finding {
                    kind: "missing-extra",
                    severity: Severity::Error,
                    message: format!(
                        "{} {} has no extra `{extra}` for {device}, which the set contains",
                        d.project, d.version
                    ),
                    files: file.clone(),
                });
            }
            if d.metadata.provides_extra.iter().any(|e| e == "device-all")
                && !requirements.iter().any(|r| r.extra.as_deref() == Some("device-all") && r.package == **device)
            {
                findings.push(Finding {
                    kind: "device-all-incomplete",
                    severity: Severity::Error,
                    message: format!("{} {}: `device-all` does not include {device}", d.project, d.version),
                    files: file.clone(),
                });
            }
        }
        for r in requirements.iter().filter(|r| r.extra.is_some()) {
            let Some(platforms) = present.get(r.package.as_str()) else {
                findings.push(Finding {
                    kind: "absent-pin",
                    severity: Severity::Error,
                    message: format!(
                        "{} {}: extra `{}` requires {}, which the set does not contain",
                        d.project,
                        d.version,
                        r.extra.as_deref().unwrap_or(""),
                        r.package
                    ),
                    files: file.clone(),
                });
                continue;
            };
            let families: BTreeSet<&str> = platforms.iter().flatten().map(|p| os_family(p)).collect();
            if r.sys_platform.is_none()
                && d.platform.is_none()
                && !platforms.contains(&None)
                && let Some(lacking) = set_families.difference(&families).next()
            {
                findings.push(Finding {
                    kind: "unmarked-platform-extra",
                    severity: Severity::Error,
                    message: format!(
                        "{} {}: extra `{}` requires {}, which the set has only for {}, with no platform marker: on {lacking} the extra cannot resolve",
                        d.project,
                        d.version,
                        r.extra.as_deref().unwrap_or(""),
                        r.package,
                        families.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                    files: file.clone(),
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
                        kind: "platform-marker",
                        severity: Severity::Error,
                        message: format!(
                            "{} {}: {} is required on sys_platform == \"{sys}\", but the set has it only for {}",
                            d.project,
                            d.version,
                            r.package,
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
                kind: "no-local-version",
                severity: Severity::Warning,
                message: format!(
                    "{} {} (pure Python) has no local version label: a same-named release on PyPI can take its place; --mark-pure marks it",
                    d.project, d.version
                ),
                files: file.clone(),
            });
        } else if !local {
            findings.push(Finding {
                kind: "no-local-version",
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
                    kind: "loose-pin",
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
            kind: "local-label-order",
            severity: Severity::Error,
            message: hazard.message,
            files: Vec::new(),
        });
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

fn wheel_findings(dists: &[Dist], strict_record: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for d in dists {
        let Some(w) = &d.wheel else { continue };
        let file = vec![d.path.display().to_string()];
        if let Some(first) = w.record_findings.first() {
            findings.push(Finding {
                kind: "stale-record",
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
        let filename_tags: BTreeSet<String> = w
            .python_abi_pairs
            .iter()
            .flat_map(|pair| w.filename_tags.iter().map(move |p| format!("{pair}-{p}")))
            .collect();
        let wheel_tags: BTreeSet<String> = w.tag_lines.iter().cloned().collect();
        if filename_tags != wheel_tags {
            let list = |v: Vec<&String>| {
                if v.is_empty() { "-".into() } else { v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ") }
            };
            findings.push(Finding {
                kind: "tag-mismatch",
                severity: Severity::Error,
                message: format!(
                    "{}: the file name and WHEEL disagree (only in the name: {}; only in WHEEL: {})",
                    d.file_name,
                    list(filename_tags.difference(&wheel_tags).collect()),
                    list(wheel_tags.difference(&filename_tags).collect())
                ),
                files: file.clone(),
            });
        }
        // A name that claims more than the binaries meet: pip installs it where it cannot load.
        if let (TagFacts { basis: "claimed", measured: Some(_), note, .. }, true) =
            (&w.tag, !w.filename_tags.iter().any(|t| t.is_linux() || t.is_any()))
        {
            findings.push(Finding {
                kind: "tag-not-met",
                severity: Severity::Error,
                message: format!(
                    "{}: the name claims {} but {note}: pip installs it on hosts where it cannot load",
                    d.file_name, w.tag.tag
                ),
                files: file.clone(),
            });
        }
        if d.platform.is_some() && w.root_is_purelib == Some(true) {
            findings.push(Finding {
                kind: "purelib-platform-wheel",
                severity: Severity::Error,
                message: format!("{}: a platform wheel whose WHEEL says Root-Is-Purelib: true", d.file_name),
                files: file.clone(),
            });
        }
        if let Some(arch) = architecture_dir(&d.path)
            && let Ok(requested) = crate::elf::gpu::targets::Requested::parse(&arch)
            && (w.gpu_targets.is_empty() || w.gpu_targets.contains(&arch))
        {
            for u in crate::elf::gpu::targets::uncovered(&w.bundled, &[requested]) {
                let holds = if u.has.is_empty() {
                    "no device code at all: its offload bundles were emptied (`thin --allow-missing` of a build without it?)".to_string()
                } else {
                    format!("code for {} only", u.has.join(", "))
                };
                findings.push(Finding {
                    kind: "no-code-for-architecture",
                    severity: Severity::Error,
                    message: format!(
                        "{}: {} has offload bundles but no code object that runs on {arch}, the architecture of its index; it holds {holds}. Installed there, it fails with hipErrorNoBinaryForGpu",
                        d.file_name, u.file
                    ),
                    files: file.clone(),
                });
            }
        }
        if let Some(arch) = architecture_dir(&d.path)
            && !w.gpu_targets.is_empty()
            && !w.gpu_targets.contains(&arch)
        {
            findings.push(Finding {
                kind: "wrong-architecture",
                severity: Severity::Error,
                message: format!(
                    "{} is in the {arch} index but its device code is for {}",
                    d.file_name,
                    w.gpu_targets.join(", ")
                ),
                files: file.clone(),
            });
        }
    }
    findings
}

/// Each library a wheel needs from another wheel resolves inside the set, among the wheels of
/// its platform and architecture directory (or of no architecture directory), and the wheel's
/// requirements name the providing project.
fn provider_findings(dists: &[Dist]) -> Vec<Finding> {
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
                    kind: "unresolved-provider",
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
                    kind: "undeclared-provider",
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
fn in_reach<'a>(by_project: &ByProject<'a>, d: &Dist, project: &str) -> Vec<&'a Dist> {
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
type ByProject<'a> = BTreeMap<&'a str, Vec<&'a Dist>>;

fn by_project(dists: &[Dist]) -> ByProject<'_> {
    let mut map: ByProject<'_> = BTreeMap::new();
    for d in dists {
        map.entry(d.project.as_str()).or_default().push(d);
    }
    map
}

/// A requirement between distributions of the set that no file of the set meets: installers
/// would go to the upstream index for it, or fail. Ex) `nixl-rocm==1.5.2+rocm10.1.0` while the
/// set holds `nixl-rocm 1.5.2+rocm7.14.0`
fn unmet_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
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
                kind: "unmet-requirement",
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
fn other_places(by_project: &ByProject<'_>, project: &str) -> String {
    let places: Vec<String> =
        by_project.get(project).into_iter().flatten().map(|o| o.path.display().to_string()).collect();
    places.join(", ")
}

/// The CPython minor versions a distribution installs on. Ex) `cp311-cp311` → {11}
fn interpreters(d: &Dist) -> BTreeSet<u64> {
    super::PYTHONS
        .filter(|&minor| super::installs_on(&d.file_name, d.metadata.requires_python.as_deref(), minor))
        .collect()
}

/// Write a set of CPython minor versions. Ex) {11, 12} → `3.11, 3.12`; {9, …, 20} → `3.9 and
/// later`; {} → `no Python`
fn pythons_text(set: &BTreeSet<u64>) -> String {
    let (Some(&first), Some(&last)) = (set.first(), set.last()) else {
        return "no Python".into();
    };
    if last == *super::PYTHONS.end() && set.len() as u64 == last - first + 1 {
        return format!("3.{first} and later");
    }
    set.iter().map(|m| format!("3.{m}")).collect::<Vec<_>>().join(", ")
}

/// A distribution whose exact pins cannot all be installed on one interpreter (with it): its
/// base pins, and the base pins with each extra's. Ex) a metapackage pinning a cp311-only wheel
/// beside cp312-only ones. Pins under other markers (`python_version`, `sys_platform`) are
/// never all active at once and are left out.
fn interpreter_findings(dists: &[Dist]) -> Vec<Finding> {
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
                    kind: "no-common-python",
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

fn mentions_python(r: &crate::wheel::requirement::Requirement) -> bool {
    r.marker().is_some_and(|m| m.contains("python_") || m.contains("implementation") || m.contains("platform_"))
}

/// A distribution that requires itself: resolvers loop on it (a `rocm` selector shipped
/// `Requires-Dist: rocm==…` and pip stopped with a RecursionError). The one form that is no
/// loop is an extra that aggregates other extras of its own project
/// (`rocm[device-gfx942,device-gfx950]; extra == "device-all"`).
fn self_requirement_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for d in dists {
        for r in d.metadata.requires_dist.iter().filter(|r| r.package.as_str() == d.project) {
            let aggregates =
                r.extra.is_some() && r.extras().next().is_some() && r.extras().all(|e| Some(e) != r.extra.as_deref());
            if !aggregates {
                findings.push(Finding {
                    kind: "self-requirement",
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
fn abi_findings(dists: &[Dist]) -> Vec<Finding> {
    use super::abi::{AbiTable, line_text, split_soname};
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
                kind: "rocm-abi-label",
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
            kind: "rocm-abi-mix",
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

/// Each kpack-split binary finds its archive for the architecture of every index that serves
/// it: a wheel of an architecture directory for that one, a wheel outside them for each of
/// the set's architecture directories, and, in a set without any, for the processors of the
/// archives the set holds.
fn kpack_findings(dists: &[Dist]) -> Vec<Finding> {
    use crate::elf::gpu::kpack::archive_paths;
    let mut archives: BTreeMap<&str, Vec<(&Dist, &Vec<String>)>> = BTreeMap::new();
    for d in dists {
        for (path, targets) in d.wheel.iter().flat_map(|w| &w.kpack_archives) {
            archives.entry(path.as_str()).or_default().push((d, targets));
        }
    }
    let processor = |t: &str| t.split(':').next().unwrap_or(t).to_string();
    let set_arches: BTreeSet<String> = dists.iter().filter_map(|d| architecture_dir(&d.path)).collect();
    let archive_arches: BTreeSet<String> =
        archives.values().flatten().flat_map(|(_, targets)| targets.iter().map(|t| processor(t))).collect();
    let mut findings = Vec::new();
    for d in dists {
        let Some(w) = d.wheel.as_ref().filter(|w| !w.kpack_refs.is_empty()) else { continue };
        let arches: Vec<String> = match architecture_dir(&d.path) {
            Some(a) => vec![a],
            None if !set_arches.is_empty() => set_arches.iter().cloned().collect(),
            None => archive_arches.iter().cloned().collect(),
        };
        if arches.is_empty() {
            let (first, paths) = &w.kpack_refs[0];
            findings.push(Finding {
                kind: "kpack-unresolved",
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
            let unresolved: Vec<(&String, Vec<String>)> = w
                .kpack_refs
                .iter()
                .map(|(binary, paths)| (binary, archive_paths(binary, paths, arch)))
                .filter(|(_, candidates)| {
                    !candidates.iter().any(|c| {
                        archives.get(c.as_str()).is_some_and(|list| {
                            list.iter().any(|(o, targets)| {
                                architecture_dir(&o.path).is_none_or(|a| &a == arch)
                                    && (targets.is_empty() || targets.iter().any(|t| processor(t) == *arch))
                            })
                        })
                    })
                })
                .collect();
            let Some((first, candidates)) = unresolved.first() else { continue };
            let looked = candidates
                .first()
                .map(|c| format!("site-packages/{c}"))
                .unwrap_or_else(|| "outside site-packages".into());
            findings.push(Finding {
                kind: "kpack-unresolved",
                severity: Severity::Error,
                message: format!(
                    "{}: {} kpack-split binar{} ({first}, …) find no device code for {arch}: {first} looks for {looked}, which no file of the set for {arch} installs. Installed there, the first kernel launch fails (hipErrorInvalidImage); publish the wheel that carries the {arch} archive in the {arch} index",
                    d.file_name,
                    unresolved.len(),
                    if unresolved.len() == 1 { "y" } else { "ies" },
                ),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    findings
}

/// Two metapackages of one name in one directory: one index would serve both, and installers
/// take the higher version, which for two builds of one release is the order of their
/// digests (`10.1.0+gfx950.424e84fe` against `…9b0c71d2`), so a rebuild can lose to the build it
/// replaced.
fn metapackage_findings(dists: &[Dist]) -> Vec<Finding> {
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
            kind: "duplicate-metapackage",
            severity: Severity::Error,
            message: format!(
                "{} metapackages of {project} in {} ({}): installers take {}, whichever was built last; remove the ones it replaces",
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

/// What a resolution means for the set whose index is `site`: a distribution of the set's
/// projects taken from elsewhere (`resolve-upstream`), a name `forbid` matches
/// (`resolve-forbidden`), or no resolution (`resolve-failed`); all errors.
pub fn resolution_findings(
    resolution: &super::resolve::Resolution,
    site: &super::upstream::Upstream,
    forbid: &[String],
) -> Result<Vec<Finding>, String> {
    let mut findings = Vec::new();
    if let Some(message) = &resolution.failure {
        // uv searches `--extra-index-url` before `--index-url` and stops at the first index
        // that has a name: given the set's index first, as pip reads it, uv takes the upstream
        // releases of the set's names and an exact labelled pin cannot resolve.
        let site_given_first = resolution
            .command
            .windows(2)
            .any(|w| w[0] == "--index-url" && super::index::directory_url(&w[1]) == site.url);
        let hint = if resolution.resolver.starts_with("uv") && site_given_first {
            "; uv searched the --extra-index-url indexes first, and stops at the first that has a name: the release page's uv command gives the set's index as --extra-index-url (check it with --site-first)"
        } else {
            ""
        };
        findings.push(Finding {
            kind: "resolve-failed",
            severity: Severity::Error,
            message: format!("{} found no resolution: {message}{hint}", resolution.resolver),
            files: Vec::new(),
        });
        return Ok(findings);
    }
    let mut globs = globset::GlobSetBuilder::new();
    for pattern in forbid {
        globs.add(globset::Glob::new(pattern).map_err(|e| format!("--forbid `{pattern}`: {e}"))?);
    }
    let globs = globs.build().map_err(|e| e.to_string())?;
    let by_index = resolution.resolver.starts_with("uv");
    let pages = crate::parallel::map(&resolution.distributions, |d| site.files(&d.name));
    for (d, page) in resolution.distributions.iter().zip(pages) {
        let ours = match page {
            Ok(files) => files,
            Err(e) => return Err(format!("the set's index: {e}")),
        };
        if let Some(files) = ours {
            // uv names the index a distribution came from; pip, the file.
            let from_site = if by_index {
                super::index::directory_url(&d.source) == site.url
            } else {
                files.iter().any(|f| f.url == d.source)
            };
            if !from_site {
                let hint = if by_index {
                    "; uv searches --extra-index-url first and stops at the first index that has a name: give uv the set's index as --extra-index-url (the release page's uv command; --site-first checks it)"
                } else {
                    ""
                };
                findings.push(Finding {
                    kind: "resolve-upstream",
                    severity: Severity::Error,
                    message: format!(
                        "{} took {} {} from {}, not from the set's index {} (which has {} of it){hint}",
                        resolution.resolver,
                        d.name,
                        d.version,
                        d.source,
                        site.url,
                        crate::log::plural(files.len(), "file")
                    ),
                    files: Vec::new(),
                });
            }
        }
        let matched = globs.matches(&d.name);
        if let Some(&first) = matched.first() {
            findings.push(Finding {
                kind: "resolve-forbidden",
                severity: Severity::Error,
                message: format!(
                    "{} took {} {} (from {}), which --forbid `{}` rules out; it came in through {}",
                    resolution.resolver,
                    d.name,
                    d.version,
                    d.source,
                    forbid[first],
                    resolution.chain(&d.name).join(" → ")
                ),
                files: Vec::new(),
            });
        }
    }
    Ok(findings)
}

/// An upstream file could meet requirement `r` as pip chooses: its version meets the
/// specifiers, it is not yanked (unless pinned exactly), and it is no pre-release unless the
/// specifiers name one.
fn upstream_meets(r: &crate::wheel::requirement::Requirement, f: &super::upstream::UpstreamFile) -> bool {
    let names_pre = r.specifiers().is_some_and(|s| s.iter().any(|s| s.version().any_prerelease()));
    r.admits(&f.version) && (!f.yanked || r.exact.is_some()) && (!f.version.any_prerelease() || names_pre)
}

/// The set's projects on an upstream index: `upstream-collision` where a requirement of the set
/// (or, for a project nothing requires, `pip install <name>` itself) could be met by an upstream
/// file; `upstream-shadow` where the upstream has the name but every requirement pins the set's
/// own label. An upstream that cannot be reached is an error finding, never a silent pass.
fn upstream_findings(dists: &[Dist], upstream: &super::upstream::Upstream) -> Vec<Finding> {
    let projects: Vec<&str> = dists.iter().map(|d| d.project.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
    let pages = crate::parallel::map(&projects, |p| upstream.files(p));
    let projects_of_set = by_project(dists);
    // Who requires each project (other than itself), found in one pass.
    let mut required: BTreeMap<&str, Vec<(&Dist, &crate::wheel::requirement::Requirement)>> = BTreeMap::new();
    for d in dists {
        for r in d.metadata.requires_dist.iter().filter(|r| r.package.as_str() != d.project) {
            required.entry(r.package.as_str()).or_default().push((d, r));
        }
    }
    let url = &upstream.url;
    let mut findings = Vec::new();
    let mut unreachable = Vec::new();
    for (project, page) in projects.iter().zip(pages) {
        let files = match page {
            Ok(Some(files)) => files,
            Ok(None) => continue,
            Err(e) => {
                unreachable.push(e);
                continue;
            }
        };
        let ours: Vec<&Dist> = projects_of_set.get(project).cloned().unwrap_or_default();
        let newest_ours = ours.iter().map(|d| &d.metadata.version.parsed).max();
        let our_files: Vec<String> = ours.iter().map(|d| d.path.display().to_string()).collect();
        let requirements: Vec<(&Dist, &crate::wheel::requirement::Requirement)> =
            required.get(project).cloned().unwrap_or_default();
        // The file to name: the highest version, a Linux or pure wheel of it before others.
        let rank = |f: &super::upstream::UpstreamFile| {
            let n = &f.filename;
            if n.ends_with(".whl") && n.contains("linux") {
                3
            } else if n.ends_with("-any.whl") {
                2
            } else if n.ends_with(".whl") {
                0
            } else {
                1
            }
        };
        let newest = |meets: &dyn Fn(&super::upstream::UpstreamFile) -> bool| {
            files
                .iter()
                .filter(|f| meets(f))
                .max_by(|a, b| (&a.version, rank(a), &a.filename).cmp(&(&b.version, rank(b), &b.filename)))
        };
        let ours_text = newest_ours.map(|v| format!("{project} {v}")).unwrap_or_default();
        let mut collided = false;
        if requirements.is_empty() {
            // Installed by name: `pip install <project>` takes the highest version of every index.
            let bare = crate::wheel::requirement::Requirement::parse(project);
            if let Some(best) = newest(&|f| upstream_meets(&bare, f))
                && newest_ours.is_none_or(|v| best.version > *v)
            {
                collided = true;
                findings.push(Finding {
                    kind: "upstream-collision",
                    severity: Severity::Error,
                    message: format!(
                        "`pip install {project}` takes {url}'s {project} {} ({}), a higher version than the set's {}",
                        best.version,
                        best.filename,
                        newest_ours.map(|v| v.to_string()).unwrap_or_default()
                    ),
                    files: our_files.clone(),
                });
            }
        }
        for (d, r) in &requirements {
            if let Some(best) = newest(&|f| upstream_meets(r, f)) {
                collided = true;
                findings.push(Finding {
                    kind: "upstream-collision",
                    severity: Severity::Error,
                    message: format!(
                        "{} {} requires `{}`, which {url}'s {project} {} ({}) meets: an installer can take it instead of the set's {ours_text}",
                        d.project, d.version, r.text, best.version, best.filename
                    ),
                    files: vec![d.path.display().to_string()],
                });
            }
        }
        if !collided {
            let top = files.iter().map(|f| &f.version).max().map(|v| v.to_string()).unwrap_or_default();
            let how = if requirements.is_empty() {
                "the set's version is the higher one, so `pip install` takes it while no upstream release outgrows it"
                    .to_string()
            } else {
                format!(
                    "every requirement on it ({}) pins the set's own label, so installers take the set's",
                    requirements.len()
                )
            };
            findings.push(Finding {
                kind: "upstream-shadow",
                severity: Severity::Warning,
                message: format!(
                    "{url} also has {project} ({}, newest {top}): {how}",
                    crate::log::plural(files.len(), "file")
                ),
                files: our_files,
            });
        }
    }
    if let Some(first) = unreachable.first() {
        findings.push(Finding {
            kind: "upstream-unreachable",
            severity: Severity::Error,
            message: format!(
                "{url}: {} of {} project page(s) could not be read, so nothing was compared for them (first: {first})",
                unreachable.len(),
                projects.len()
            ),
            files: Vec::new(),
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_targets_and_architecture_dirs() {
        assert_eq!(device_target("rocm-sdk-device-gfx950"), Some("gfx950"));
        assert_eq!(device_target("amd-torch-device-gfx1201"), Some("gfx1201"));
        assert_eq!(architecture_dir(Path::new("site/gfx950/x.whl")).as_deref(), Some("gfx950"));
        assert_eq!(architecture_dir(Path::new("site/linux/x.whl")), None);
    }
}
