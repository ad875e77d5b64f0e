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
use std::path::PathBuf;

use serde::Serialize;

use crate::analysis::AnalyzeOptions;
use crate::analysis::site::SitePackages;
use crate::examine::ExamineOptions;
use crate::policy::Policies;

pub mod abi;
mod facts;
mod rules;
mod upstream;
mod variants;

use facts::{Dist, Read, dist_facts, read_dist};
pub use facts::{DistFacts, DistVariant, TagFacts};
use rules::{
    abi_findings, architecture_dir, archive_damage_findings, interpreter_findings, kpack_findings,
    metapackage_findings, path_conflict_findings, provider_findings, selector_findings, self_requirement_findings,
    serving_findings, split_set_findings, unmet_requirement_findings, version_findings, wheel_findings,
};
pub use upstream::{ResolutionError, resolution_findings};

use upstream::upstream_findings;

pub use crate::policy::problem::{Kind, Severity};

/// What to do about a kind of finding, where one thing does it ([`Kind::fix`]).
/// Ex) `undeclared-provider` → add the provider to Requires-Dist
pub fn fix(kind: Kind) -> Option<&'static str> {
    kind.fix()
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Finding {
    /// A stable identifier. Ex) `filename-conflict`
    pub kind: Kind,
    pub severity: Severity,
    pub message: String,
    pub files: Vec<String>,
}

/// A release set as `check` reads it: its findings, and the facts of every distribution it
/// could read (what `index` puts on the release page).
pub struct Survey {
    pub findings: Vec<Finding>,
    pub dists: Vec<DistFacts>,
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
    let files = crate::files::collect_files(dirs, &[".whl", ".tar.gz"]);
    if files.is_empty() {
        let findings = vec![Finding {
            kind: Kind::NothingToCheck,
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
                kind: Kind::FilenameConflict,
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
                kind: Kind::InstallerRefuses,
                severity: Severity::Error,
                message: format!("{}: pip refuses to install it: {problem}", d.file_name),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    findings.extend(selector_findings(&dists));
    findings.extend(serving_findings(&dists));
    findings.extend(version_findings(&dists));
    findings.extend(wheel_findings(&dists, options.strict_record));
    findings.extend(provider_findings(&dists));
    findings.extend(unmet_requirement_findings(&dists));
    findings.extend(interpreter_findings(&dists));
    findings.extend(metapackage_findings(&dists));
    findings.extend(self_requirement_findings(&dists));
    findings.extend(abi_findings(&dists));
    findings.extend(kpack_findings(&dists));
    findings.extend(archive_damage_findings(&dists));
    findings.extend(split_set_findings(&dists));
    findings.extend(path_conflict_findings(&dists));
    findings.extend(variants::variant_findings(&dists, &crate::files::collect_files(dirs, &["-variants.json"])));
    for url in &upstream.urls {
        findings.extend(upstream_findings(&dists, &sha256, &crate::upstream::Upstream::new(url, upstream.timeout)));
    }
    findings.sort();
    findings.dedup();
    let dists = dists.iter().map(|d| dist_facts(d, sha256.get(&d.path).cloned().flatten())).collect();
    Survey { findings, dists }
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
