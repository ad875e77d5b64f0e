//! What `show` reports: a plain data structure (serialised as JSON) and its text rendering.
//!
//! Why one file: the report's types and the text that renders them, one section per
//! part of `show`'s output; the judgements it states are made in `policy` and `analysis`.

pub mod auditwheel;
pub mod doctor;
pub mod json;
pub mod outcome;
pub mod page;
pub mod release;
pub mod split;
pub mod thin;
pub mod variants;

pub use json::JSON_VERSION;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::analysis::linkage::is_loader;
use crate::analysis::{Analysis, BinaryFormats, Note};
use crate::gpu::GpuCode;
use crate::plan::tags::{Basis, TagRequest, true_tags};
use crate::policy::claims::{ClaimCheck, check_claims};
use crate::policy::judgement::{Disposition, Judged, Judgement};
use crate::policy::verdict::{Blockers, Requirement, compare_versions};
use crate::version::VersionChange;
use crate::wheel::platform_tag::{PlatformTag, join_tags};
use crate::wheel::{RecordFinding, RecordProblem, Wheel};

/// One external library and what happens to it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalReport {
    /// `whitelisted` | `excluded` | `vendor` | `dependency` | `not-found`
    pub disposition: String,
    pub path: Option<String>,
    pub needed_by: Vec<String>,
    pub reason: String,
    /// The wheel that provides a `dependency`: {`name`, `version`, `wheel`, `path`}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provided_by: Option<crate::analysis::site::Provider>,
}

/// One versioned dependency in the JSON.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConstraintReport {
    pub file: String,
    pub library: String,
    pub version: String,
    pub symbols: Vec<String>,
    /// `file` is this machine's copy of an external library, counted because repair would
    /// vendor it (not a member of the wheel).
    pub external: bool,
}

impl From<&Requirement> for ConstraintReport {
    fn from(r: &Requirement) -> Self {
        ConstraintReport {
            file: r.file.clone(),
            library: r.library.clone(),
            version: r.version.clone(),
            symbols: r.symbols.clone(),
            external: r.external,
        }
    }
}

/// What keeps the wheel from one more compatible policy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlockerReport {
    pub tag: String,
    pub summary: String,
    /// Distinct symbol versions the policy lacks, most constraining first.
    pub missing_versions: Vec<String>,
    /// Each dependency behind them (only for `next_policy`; empty in `policy_upgrades`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<ConstraintReport>,
    pub libs_to_eliminate: Vec<String>,
    pub blacklisted_symbols: BTreeMap<String, Vec<String>>,
    pub isa: Vec<String>,
    pub pyfpe: bool,
    pub ucs2: bool,
}

impl BlockerReport {
    fn new(tag: String, b: &Blockers, detailed: bool) -> Self {
        let mut missing_versions: Vec<String> = Vec::new();
        for r in &b.versions {
            if !missing_versions.contains(&r.version) {
                missing_versions.push(r.version.clone());
            }
        }
        BlockerReport {
            tag,
            summary: b.summary(),
            missing_versions,
            versions: if detailed { b.versions.iter().map(ConstraintReport::from).collect() } else { Vec::new() },
            libs_to_eliminate: b.libs_to_eliminate.clone(),
            blacklisted_symbols: b.blacklisted_symbols.clone(),
            isa: b.isa.clone(),
            pyfpe: b.pyfpe,
            ucs2: b.ucs2,
        }
    }
}

/// The `show --json` object for one wheel. See the guide's JSON page (docs/src/json.md) and schemas/show.schema.json for the contract.
/// It reads back from that JSON (a field the JSON leaves out when empty reads as empty), so
/// that scripts and tests in Rust take the report typed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(default)]
pub struct ShowReport {
    pub version: u32,
    /// The wheel's file name; for installed files, the path shown.
    pub wheel: String,
    /// Installed files (a directory or a file shown), not a wheel: no tags are claimed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub installed: bool,
    /// A variant wheel's label and properties (PEP 825).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantReport>,
    /// Platform tags the file name claims.
    pub tags: Vec<PlatformTag>,
    /// Platform tags the WHEEL file's `Tag:` lines claim.
    pub wheel_tags: Vec<PlatformTag>,
    pub arch: Option<String>,
    pub libc: Option<String>,
    pub pure: bool,
    /// The most compatible tag the symbol versions allow (auditwheel's `sym_tag`).
    pub symbol_tag: Option<String>,
    /// The tag the wheel honestly meets as it is.
    pub platform_tag: Option<String>,
    /// The tag after `repair` vendored the external libraries.
    pub repaired_tag: Option<String>,
    /// The platform tags `retag` would write.
    pub retag_tags: Vec<PlatformTag>,
    pub claims: Vec<ClaimCheck>,
    pub constraints: Vec<ConstraintReport>,
    /// What blocks the next more compatible policy.
    pub next_policy: Option<BlockerReport>,
    /// Every more compatible policy and what blocks it, most compatible first.
    pub policy_upgrades: Vec<BlockerReport>,
    pub external_libs: BTreeMap<String, ExternalReport>,
    /// Library → every version the binaries need from it.
    pub versioned_symbols: BTreeMap<String, Vec<String>>,
    pub host_binaries: usize,
    /// Kernel database files by the processor they are for ([`crate::analysis::databases`]):
    /// files (as `objects`) and bytes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_databases: BTreeMap<String, crate::gpu::Count>,
    /// The wheel's download size (its file) and installed size (its members' sizes).
    pub size: WheelSize,
    /// Host binaries by format (ELF, PE, Mach-O), device code not counted.
    pub binaries: BinaryFormats,
    /// Where RECORD disagrees with the archive (`show --verify` also compares every hash): the
    /// first thousand, in order.
    pub record: Vec<RecordFinding>,
    /// How many more disagreements there are than `record` lists.
    #[serde(skip_serializing_if = "is_zero")]
    pub record_truncated: usize,
    /// Every disagreement, counted by kind. Ex) `3 size, 1 not-in-archive`
    #[serde(skip)]
    pub record_summary: String,
    /// Whether every member's hash was compared with RECORD.
    pub hashes_checked: bool,
    /// GPU architectures the wheel carries device code for, base names sorted. Ex) [`gfx942`, `gfx950`]
    pub gpu_targets: Vec<String>,
    /// Device code per file.
    pub gpu: Vec<GpuCode>,
    /// Device code and no host binary: no platform tag can say what it is for.
    pub gpu_only: bool,
    /// `--expect-gpu-target` names that the device code lacks (only when checked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_gpu_targets: Vec<String>,
    /// Binaries whose offload bundles hold no code for an `--expect-gpu-target` (only when
    /// checked): coverage is judged per binary, and a runtime's own kernels never count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uncovered_gpu_targets: Vec<crate::gpu::targets::Uncovered>,
    /// Where each kpack-split binary's device code must be installed, per GPU processor: for
    /// the processors of the wheel's own archives and every `--expect-gpu-target`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kpack_archives: Vec<KpackArchiveNeed>,
    /// The kpack-split binaries (install path, search paths) and the archives the wheel holds
    /// (install paths): what `kpack_archives` is worked out from.
    #[serde(skip)]
    kpack_refs: (Vec<(String, Vec<String>)>, BTreeSet<String>),
    /// Installed files: the directory their names are relative to, where an archive the
    /// files shown do not include may still lie.
    #[serde(skip)]
    root: Option<std::path::PathBuf>,
    /// Why no policy was applied to a wheel that has host binaries, if none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unaudited: Option<String>,
    pub notes: Vec<Note>,
    /// Why pip refuses to install the wheel, in pip's words (absent when it installs it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub installer_problems: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A variant wheel's label, and the properties its `variant.json` names.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VariantReport {
    pub label: String,
    /// Ex) `amd :: gfx_arch :: gfx942`
    pub properties: Vec<String>,
    /// Why its variant.json cannot be read: installers cannot choose the wheel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VariantReport {
    fn of(wheel: &Wheel) -> Option<VariantReport> {
        let label = wheel.filename.variant.clone()?;
        Some(match crate::wheel::variant::read(&wheel.archive, &label) {
            Ok(metadata) => VariantReport {
                properties: crate::wheel::variant::VariantMetadata::property_lines(&metadata.variants[&label]),
                label,
                error: None,
            },
            Err(e) => VariantReport { label, properties: Vec::new(), error: Some(e.to_string()) },
        })
    }
}

/// What a report says of its input besides the analysis: a wheel's name, tags and sizes, or
/// those of installed files.
struct Subject<'a> {
    name: String,
    tags: Vec<PlatformTag>,
    wheel_tags: Vec<PlatformTag>,
    kernel_databases: BTreeMap<String, crate::gpu::Count>,
    size: WheelSize,
    installer_problems: Vec<String>,
    requires: &'a [crate::wheel::requirement::Requirement],
    /// Where a file of the analysis is installed (relative to site-packages).
    install_path: &'a dyn Fn(&str) -> Option<String>,
    installed: bool,
    root: Option<std::path::PathBuf>,
}

/// Where a kpack-split binary looks for its device code for one GPU processor.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KpackArchiveNeed {
    /// The binary's install path. Ex) `p/lib/_k.so`
    pub file: String,
    pub arch: String,
    /// The install paths it searches, in order. Ex) [`p/.kpack/k_gfx942.kpack`]
    pub paths: Vec<String>,
    /// Whether this wheel installs one of them (otherwise another wheel of the set must).
    pub in_wheel: bool,
}

impl ShowReport {
    /// The report for a wheel that could not be analysed.
    pub fn failed(wheel: &str, error: String) -> Self {
        ShowReport { version: JSON_VERSION, wheel: wheel.to_string(), error: Some(error), ..Default::default() }
    }

    pub fn new(wheel: &Wheel, analysis: &Analysis, judgement: &Judgement) -> Self {
        let subject = Subject {
            name: wheel.filename.to_string(),
            tags: wheel.filename.platform_tags.clone(),
            wheel_tags: wheel.wheel_info.platform_tags(),
            kernel_databases: crate::analysis::databases::by_target(wheel),
            size: WheelSize { download: wheel.archive.download_size(), installed: wheel.archive.installed_size() },
            installer_problems: wheel.installer_problems.clone(),
            requires: &wheel.metadata.requires_dist,
            install_path: &|member| wheel.install_path(member),
            installed: false,
            root: None,
        };
        let mut report = Self::of(subject, analysis, judgement);
        report.variant = VariantReport::of(wheel);
        report
    }

    /// The report on installed files (a directory, or one file): `name` is what was shown; the
    /// files are named relative to it. They claim no tags: the tags are what they meet.
    pub fn of_installed(
        name: &str,
        root: &std::path::Path,
        files: &[(String, u64)],
        analysis: &Analysis,
        judgement: &Judgement,
    ) -> Self {
        let mut kernel_databases: BTreeMap<String, crate::gpu::Count> = BTreeMap::new();
        for (file, size) in files {
            if let Some(db) = crate::analysis::databases::database(file) {
                kernel_databases.entry(db.target.to_string()).or_default().add(*size);
            }
        }
        let subject = Subject {
            name: name.to_string(),
            tags: Vec::new(),
            wheel_tags: Vec::new(),
            kernel_databases,
            size: WheelSize { download: 0, installed: files.iter().map(|(_, size)| size).sum() },
            installer_problems: Vec::new(),
            requires: &[],
            install_path: &|file| Some(file.to_string()),
            installed: true,
            root: Some(root.to_path_buf()),
        };
        Self::of(subject, analysis, judgement)
    }

    fn of(subject: Subject<'_>, analysis: &Analysis, judgement: &Judgement) -> Self {
        let judged = judgement.judged();
        let Subject { name, tags: filename_tags, wheel_tags, installed, install_path, root, .. } = subject;
        let mut report = ShowReport {
            version: JSON_VERSION,
            wheel: name,
            installed,
            root,
            tags: filename_tags.clone(),
            wheel_tags: wheel_tags.clone(),
            arch: analysis.arch.map(|a| a.to_string()),
            libc: judged.map(|j| j.set.libc.as_str().to_string()),
            pure: judgement.is_pure(),
            claims: check_claims(judged, analysis, &filename_tags, &wheel_tags),
            retag_tags: true_tags(judged, analysis, &filename_tags, &TagRequest::default(), Basis::AsIs)
                .unwrap_or_default(),
            host_binaries: analysis.binaries.len(),
            kernel_databases: subject.kernel_databases,
            size: subject.size,
            binaries: analysis.binary_formats,
            record: analysis.record_findings.items().to_vec(),
            record_truncated: analysis.record_findings.truncated(),
            record_summary: analysis.record_findings.summarize(),
            hashes_checked: analysis.hashes_checked,
            unaudited: judgement.unaudited().map(str::to_string),
            gpu_targets: analysis.gpu_targets(),
            gpu: analysis.gpu.clone(),
            gpu_only: judgement.is_pure() && analysis.gpu.iter().any(|g| !g.targets.is_empty()),
            notes: analysis.notes.clone(),
            installer_problems: subject.installer_problems,
            kpack_refs: (
                analysis
                    .gpu
                    .iter()
                    .filter(|g| !g.kpack_search_paths.is_empty())
                    .filter_map(|g| Some((install_path(&g.file)?, g.kpack_search_paths.clone())))
                    .collect(),
                analysis
                    .gpu
                    .iter()
                    .filter(|g| g.container == crate::gpu::Container::KpackArchive)
                    .filter_map(|g| install_path(&g.file))
                    .collect(),
            ),
            ..Default::default()
        };
        report.find_kpack_archives(&[]);
        let Some(judgement) = judged else {
            return report;
        };
        let (set, verdict) = (&judgement.set, &judgement.verdict);
        let tag_of = |index: usize| set.tag(index);
        report.symbol_tag = Some(tag_of(verdict.symbol));
        report.platform_tag = Some(tag_of(verdict.overall));
        report.repaired_tag = Some(tag_of(verdict.repairable));
        report.constraints = verdict.constraints(set, analysis).iter().map(ConstraintReport::from).collect();
        report.policy_upgrades = (0..verdict.overall)
            .map(|i| BlockerReport::new(tag_of(i), &verdict.blockers(set, analysis, i), false))
            .collect();
        // The step a reader takes next: from `linux_<arch>`, the tag its symbol versions meet
        // (what keeps it there is what it needs from outside), not the least compatible
        // manylinux tag, which says nothing about this wheel.
        let next = if set.policies[verdict.overall].is_linux() && verdict.symbol < verdict.overall {
            Some(verdict.symbol)
        } else {
            verdict.overall.checked_sub(1)
        };
        report.next_policy = next.map(|i| BlockerReport::new(tag_of(i), &verdict.blockers(set, analysis, i), true));
        // The loader's own versions (`ld-linux-x86-64.so.2`) are left out, as auditwheel does.
        for r in verdict.requirements.iter().filter(|r| !r.external && !is_loader(&r.library)) {
            report.versioned_symbols.entry(r.library.clone()).or_default().push(r.version.clone());
        }
        for versions in report.versioned_symbols.values_mut() {
            versions.sort_by(|a, b| compare_versions(a, b));
            versions.dedup();
        }

        report.external_libs = external_libs(analysis, judgement, subject.requires, &mut report.notes);
        report
    }

    /// Record which of `expected` GPU targets the wheel's device code lacks: targets no code
    /// object is for, and those some binary with offload bundles has no code for (an emptied
    /// bundle covers nothing; a GPU runtime's built-in kernels never count). A wheel without
    /// embedded device code (pure Python, or kpack-split) lacks nothing.
    pub fn check_gpu_targets(&mut self, expected: &[String]) {
        self.find_kpack_archives(expected);
        if self.installed {
            // Installed files have what is on disk: an archive an expected GPU needs is there or
            // the code is missing.
            let mut missing: Vec<String> = expected
                .iter()
                .filter(|t| self.kpack_archives.iter().any(|n| &n.arch == *t && !n.in_wheel))
                .cloned()
                .collect();
            missing.dedup();
            self.missing_gpu_targets = missing;
        }
        if self.gpu.is_empty() {
            return;
        }
        let requested: Vec<crate::gpu::TargetId> =
            expected.iter().filter_map(|t| crate::gpu::TargetId::parse(t).ok()).collect();
        self.uncovered_gpu_targets = crate::gpu::targets::uncovered(&self.gpu, &requested);
        let uncovered: BTreeSet<&str> =
            self.uncovered_gpu_targets.iter().flat_map(|u| &u.targets).map(|t| t.as_str()).collect();
        for t in expected {
            let lacks =
                (!self.gpu_targets.contains(t) && !self.gpu_targets.is_empty()) || uncovered.contains(t.as_str());
            if lacks && !self.missing_gpu_targets.contains(t) {
                self.missing_gpu_targets.push(t.clone());
            }
        }
    }

    /// Work out where each kpack-split binary's archive lies for the processors of the wheel's
    /// own archives and `expected`, and whether the wheel holds it.
    fn find_kpack_archives(&mut self, expected: &[String]) {
        let (refs, held) = &self.kpack_refs;
        let root = self.root.as_deref();
        if refs.is_empty() {
            return;
        }
        let mut arches: BTreeSet<String> = self
            .gpu
            .iter()
            .filter(|g| g.container == crate::gpu::Container::KpackArchive)
            .flat_map(|g| g.targets.iter().map(|t| t.processor().to_string()))
            .collect();
        arches.extend(expected.iter().cloned());
        let arches: Vec<String> = crate::gpu::targets::natural_order(arches.iter().map(String::as_str))
            .into_iter()
            .map(String::from)
            .collect();
        self.kpack_archives = refs
            .iter()
            .flat_map(|(file, search)| {
                arches.iter().map(move |arch| {
                    let lookup = crate::gpu::resolve::Lookup { binary: file, kernel_name: "", search_paths: search };
                    let paths = lookup.paths_named(arch);
                    let on_disk = |p: &String| root.is_some_and(|root| root.join(p).is_file());
                    let in_wheel = paths.iter().any(|p| held.contains(p) || on_disk(p));
                    KpackArchiveNeed { file: file.clone(), arch: arch.clone(), paths, in_wheel }
                })
            })
            .collect();
    }

    /// The error for a wheel whose device code lacks an expected GPU target.
    pub fn missing_gpu_targets_message(&self) -> Option<String> {
        if self.missing_gpu_targets.is_empty() {
            return None;
        }
        let mut message = format!(
            "wheelfix: error: {} has device code for {} but none for {}",
            self.wheel,
            if self.gpu_targets.is_empty() { "no GPU target".to_string() } else { self.gpu_targets.join(", ") },
            self.missing_gpu_targets.join(", ")
        );
        for u in &self.uncovered_gpu_targets {
            let has =
                if u.has.is_empty() { "no device code at all (emptied bundles)".to_string() } else { u.has.join(", ") };
            message.push_str(&format!("\n  {}: none for {} (it holds {has})", u.file, u.targets.join(", ")));
        }
        Some(message)
    }

    /// The human rendering, deterministic.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.installed {
            let _ = writeln!(out, "{} (installed files: {})", self.wheel, self.binaries_text());
        } else {
            let _ = writeln!(out, "{}", self.wheel);
        }
        if let Some(error) = &self.error {
            let _ = writeln!(out, "  error: {error}");
            return out;
        }
        // Installed files claim no tags: what they meet is all there is to say.
        let stay = if self.installed {
            String::new()
        } else {
            format!("; the tags stay as they are ({})", join_tags(&self.tags))
        };
        for problem in &self.installer_problems {
            let _ = writeln!(out, "  pip refuses to install it: {problem}");
        }
        if let Some(v) = &self.variant {
            let what = match (&v.error, v.properties.is_empty()) {
                (Some(e), _) => format!("its variant.json cannot be read: {e}"),
                (None, true) => "no properties: the fallback every machine may take".to_string(),
                (None, false) => v.properties.join(", "),
            };
            let _ = writeln!(out, "  variant `{}` (PEP 825): {what}", v.label);
        }
        if self.gpu_only {
            let _ = writeln!(
                out,
                "  GPU-only: device code for {} and no host binary; no platform tag can express a GPU architecture{stay}",
                self.gpu_targets.join(", "),
            );
            self.write_gpu(&mut out);
            self.write_record(&mut out);
            self.write_notes(&mut out);
            return out;
        }
        if self.pure {
            let _ = writeln!(out, "  pure: no host binaries for any platform{stay}");
            self.write_gpu(&mut out);
            self.write_record(&mut out);
            self.write_notes(&mut out);
            return out;
        }
        if self.platform_tag.is_none() {
            let why = self.unaudited.as_deref().unwrap_or("?");
            let _ = writeln!(out, "  no policy applies: {why}{stay}");
            let _ = writeln!(out, "  binaries:      {}", self.binaries_text());
            self.write_gpu(&mut out);
            self.write_record(&mut out);
            self.write_notes(&mut out);
            return out;
        }
        let platform = self.platform_tag.as_deref().unwrap_or("?");
        let _ = writeln!(out, "  platform tag:  {platform}");
        let _ = writeln!(out, "  symbol tag:    {}", self.symbol_tag.as_deref().unwrap_or("?"));
        if self.repaired_tag.as_deref() != Some(platform) {
            let _ = writeln!(out, "  after repair:  {}", self.repaired_tag.as_deref().unwrap_or("?"));
        }
        if !self.installed {
            self.write_claims(&mut out);
            let _ = writeln!(out, "  retag writes:  {}", join_tags(&self.retag_tags));
        }

        if !self.constraints.is_empty() {
            let _ = writeln!(out, "\n  Set by these symbol versions (newest first):");
            write_requirements(&mut out, &self.constraints);
        }
        if let Some(next) = &self.next_policy {
            let which = if self.symbol_tag.as_deref() == Some(next.tag.as_str())
                && self.platform_tag.as_deref() != self.symbol_tag.as_deref()
            {
                "the tag its symbol versions meet"
            } else {
                "the next more compatible tag"
            };
            write_next_policy(&mut out, next, which);
        }
        self.write_external_libs(&mut out);
        self.write_gpu(&mut out);
        self.write_record(&mut out);
        self.write_notes(&mut out);
        out
    }

    /// Ex) `12 PE, 1 ELF`
    fn binaries_text(&self) -> String {
        let b = &self.binaries;
        let parts: Vec<String> = [(b.elf, "ELF"), (b.pe, "PE"), (b.mach_o, "Mach-O")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, f)| format!("{n} {f}"))
            .collect();
        if parts.is_empty() { "none".into() } else { parts.join(", ") }
    }

    /// RECORD's disagreements with the archive: a summary, then the first few.
    fn write_record(&self, out: &mut String) {
        if self.record.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n  RECORD disagrees with the archive: {} (pip installs it; retag and repair write a true RECORD)",
            self.record_summary.clone()
        );
        if self.record.iter().all(|f| matches!(f.problem, RecordProblem::NoHash)) {
            let _ = writeln!(out, "    RECORD has no hashes: nothing in this wheel could be verified");
        }
        for f in self.record.iter().take(5) {
            let detail = match (&f.recorded, &f.actual) {
                (Some(r), Some(a)) => format!(": recorded {r}, actual {a}"),
                (Some(r), None) => format!(": recorded {r}"),
                (None, Some(a)) => format!(": actual {a}"),
                (None, None) => String::new(),
            };
            let _ = writeln!(out, "    {} {}{detail}", f.problem.as_str(), f.file);
        }
        if self.record.len() + self.record_truncated > 5 {
            let _ = writeln!(out, "    ... and {} more", self.record.len() + self.record_truncated - 5);
        }
    }

    fn write_claims(&self, out: &mut String) {
        for claim in &self.claims {
            let place = claim.claimed_in.join(" and ");
            match &claim.reason {
                None => {
                    let _ = writeln!(out, "  claims {} ({place}): honoured", claim.tag);
                }
                Some(reason) => {
                    let _ = writeln!(out, "  claims {} ({place}): not honoured, {reason}", claim.tag);
                }
            }
        }
    }

    fn write_external_libs(&self, out: &mut String) {
        if self.external_libs.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n  External libraries:");
        let width = self.external_libs.keys().map(String::len).max().unwrap_or(0);
        for (soname, lib) in &self.external_libs {
            let path = match (lib.disposition.as_str(), lib.path.as_deref()) {
                ("vendor" | "excluded", Some(p)) => format!(" [{p}]"),
                _ => String::new(),
            };
            let _ = writeln!(out, "    {soname:width$}  {:<11}  {}{path}", lib.disposition, lib.reason);
        }
    }

    fn write_gpu(&self, out: &mut String) {
        if self.gpu.is_empty() && self.kernel_databases.is_empty() {
            return;
        }
        let natural =
            |targets: &[String]| crate::gpu::targets::natural_order(targets.iter().map(String::as_str)).join(", ");
        let objects: usize = self.gpu.iter().map(|g| g.objects).sum();
        let targets = match (
            self.gpu_targets.is_empty(),
            self.gpu.iter().any(|g| g.is_runtime_code() && !g.targets.is_empty()),
        ) {
            (false, _) => natural(&self.gpu_targets),
            (true, true) => "none of the wheel's own (only a GPU runtime's built-in kernels)".to_string(),
            (true, false) => "no embedded targets".to_string(),
        };
        let _ = writeln!(
            out,
            "\n  GPU code: {targets} ({} in {})",
            plural(objects, "code object"),
            plural(self.gpu.len(), "file")
        );
        // What thinning changes: the wheel's download and what it installs.
        if self.installed {
            let _ = writeln!(out, "  size: {} installed", human_bytes(self.size.installed));
        } else {
            let _ = writeln!(
                out,
                "  size: {} download, {} installed",
                human_bytes(self.size.download),
                human_bytes(self.size.installed)
            );
        }
        let bytes = crate::gpu::device_bytes(&self.gpu);
        if !bytes.is_empty() {
            let order: Vec<String> = bytes.keys().cloned().collect();
            let sizes: Vec<String> = crate::gpu::targets::natural_order(order.iter().map(String::as_str))
                .into_iter()
                .map(|t| format!("{t} {}", human_bytes(bytes[t])))
                .collect();
            let _ = writeln!(out, "  device code in bundles, uncompressed: {}", sizes.join(", "));
        }
        if !self.kernel_databases.is_empty() {
            let dbs = &self.kernel_databases;
            let sizes: Vec<String> = crate::gpu::targets::natural_order(dbs.keys().map(String::as_str))
                .into_iter()
                .map(|t| format!("{t} {} ({})", human_bytes(dbs[t].bytes), plural(dbs[t].objects, "file")))
                .collect();
            let _ = writeln!(out, "  kernel databases: {}", sizes.join(", "));
        }
        // Every file: a summary that hides some (the ROCm libraries behind CUDA ones) misleads.
        for code in &self.gpu {
            let covs: Vec<String> = code.code_object_versions.iter().map(|v| format!("v{v}")).collect();
            let cov = if covs.is_empty() { String::new() } else { format!(", code object {}", covs.join("/")) };
            let targets = if code.targets.is_empty() {
                "-".to_string()
            } else {
                crate::gpu::targets::natural_order(code.targets.iter().map(|t| t.as_str())).join(" ")
            };
            let (file, kind) = (&code.file, container_name(code));
            let runtime = if code.is_runtime_code() {
                " (a GPU runtime's built-in kernels: not counted as the wheel's device code)"
            } else {
                ""
            };
            let _ =
                writeln!(out, "    {file}  {kind} ({}): {targets}{cov}{runtime}", plural(code.objects, "code object"));
            for note in &code.notes {
                let _ = writeln!(out, "      {note}");
            }
        }
        for need in &self.kpack_archives {
            let place = need.paths.first().map(String::as_str).unwrap_or("(outside site-packages)");
            let held = match (need.in_wheel, self.installed) {
                (true, false) => "in this wheel",
                (false, false) => "not in this wheel: another wheel of the set must install it",
                (true, true) => "installed",
                (false, true) => "missing: not installed",
            };
            let _ = writeln!(out, "  kpack: {} needs for {}: {place} ({held})", need.file, need.arch);
        }
        for missing in &self.missing_gpu_targets {
            let _ = writeln!(out, "  missing: no device code for {missing}");
        }
    }

    fn write_notes(&self, out: &mut String) {
        if self.notes.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n  Notes:");
        for note in self.notes.iter().take(20) {
            let _ = writeln!(out, "    {}: {}", note.file, note.message);
        }
        if self.notes.len() > 20 {
            let _ = writeln!(out, "    ... and {} more", self.notes.len() - 20);
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Requirements grouped by version, newest first: each with its file count and the top files.
fn write_requirements(out: &mut String, requirements: &[ConstraintReport]) {
    let mut by_version: Vec<(&str, Vec<&ConstraintReport>)> = Vec::new();
    for r in requirements {
        match by_version.iter_mut().find(|(v, _)| *v == r.version) {
            Some((_, list)) => list.push(r),
            None => by_version.push((&r.version, vec![r])),
        }
    }
    for (version, list) in by_version.iter().take(5) {
        let symbols: usize = list.iter().map(|r| r.symbols.len()).sum();
        let mut libraries: Vec<&str> = list.iter().map(|r| r.library.as_str()).collect();
        libraries.sort();
        libraries.dedup();
        let mut files: Vec<&str> = list.iter().map(|r| r.file.as_str()).collect();
        files.sort();
        files.dedup();
        // A version can be required with no symbol using it (a `.gnu.version_r` entry alone):
        // the loader still checks it.
        let symbols =
            if symbols == 0 { "a version requirement no symbol uses".to_string() } else { plural(symbols, "symbol") };
        let _ =
            writeln!(out, "    {version} from {}: {}, {symbols}", libraries.join(", "), plural(files.len(), "file"));
        for r in list.iter().take(3) {
            let shown: Vec<&str> = r.symbols.iter().take(3).map(String::as_str).collect();
            let more = if r.symbols.len() > 3 { format!(", +{} more", r.symbols.len() - 3) } else { String::new() };
            let syms = if shown.is_empty() { String::new() } else { format!(": {}{more}", shown.join(", ")) };
            let whose = if r.external { " (this machine's copy, counted because repair would vendor it)" } else { "" };
            let _ = writeln!(out, "      {}{whose}{syms}", r.file);
        }
        if list.len() > 3 {
            let _ = writeln!(out, "      ... and {}", more(list.len() - 3, "file"));
        }
    }
    if by_version.len() > 5 {
        let _ = writeln!(out, "    ... and {}", more(by_version.len() - 5, "version"));
    }
}

/// A member of the wheel whose file name is `soname`, if any.
/// Why a library on an RPATH that leaves the wheel is not found, what probably provides it,
/// and how to check.
fn outside_reason(
    entries: &[crate::analysis::linkage::OutsideEntry],
    soname: &str,
    requires: &[crate::wheel::requirement::Requirement],
) -> String {
    use crate::analysis::site::{probable_provider, requirement_naming};
    let o = &entries[0];
    if entries.iter().all(|e| e.dir.is_none()) {
        return format!(
            "not in the wheel; `{}` of {} climbs above site-packages, where no wheel can provide {soname}",
            o.entry, o.file
        );
    }
    // The requirement that names the library itself (`cuda-toolkit[cupti]` for libcupti), else
    // the one that names the only directory.
    let probable = requirement_naming(soname, requires).or_else(|| match entries {
        [one] => one.dir.as_deref().and_then(|dir| probable_provider(dir, requires)),
        _ => None,
    });
    let probable = probable.map(|r| format!("; Requires-Dist `{r}` probably provides it")).unwrap_or_default();
    let place = match entries {
        [one] => format!(
            "`{}` of {} leads to site-packages/{}, outside the wheel",
            one.entry,
            one.file,
            one.dir.as_deref().unwrap_or_default()
        ),
        many => format!(
            "{} RPATH/RUNPATH entries of {} lead out of the wheel ({})",
            many.len(),
            o.file,
            many.iter().map(|e| format!("`{}`", e.entry)).collect::<Vec<_>>().join(", ")
        ),
    };
    format!("not in the wheel: {place}{probable}; verify with --with-wheels <that wheel>")
}

/// What blocks the next more compatible policy, as text.
fn write_next_policy(out: &mut String, next: &BlockerReport, which: &str) {
    let _ = writeln!(out, "\n  What blocks {}, {which}:", next.tag);
    if !next.missing_versions.is_empty() {
        let _ = writeln!(out, "    symbol versions it lacks: {}", next.missing_versions.join(", "));
    }
    if !next.libs_to_eliminate.is_empty() {
        let _ = writeln!(out, "    external libraries it does not allow: {}", next.libs_to_eliminate.join(", "));
    }
    for (lib, syms) in &next.blacklisted_symbols {
        let _ = writeln!(out, "    blacklisted symbols from {lib}: {}", syms.join(", "));
    }
    for file in &next.isa {
        let _ = writeln!(out, "    ISA extension: {file}");
    }
    if next.pyfpe {
        let _ = writeln!(out, "    uses PyFPE_jbuf (PEP 513): no manylinux tag is possible");
    }
    if next.ucs2 {
        let _ = writeln!(out, "    compiled against a UCS2 (narrow unicode) Python: no manylinux tag is possible");
    }
}

/// One wheel of `show`: its report, and its version decision and pins when marking.
pub type ShowEntry = (ShowReport, Option<VersionChange>);

/// `show --json`: one entry per wheel; the version fields only when marking.
pub fn show_json(entries: &[ShowEntry]) -> String {
    let entries: Vec<ShowJsonEntry> = entries
        .iter()
        .map(|(report, change)| ShowJsonEntry { report: report.clone(), version_change: change.clone() })
        .collect();
    json::to_text(&entries)
}

/// One entry of `show --json`: the report, and the version fields when marking.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowJsonEntry {
    #[serde(flatten)]
    pub report: ShowReport,
    #[serde(flatten)]
    pub version_change: Option<VersionChange>,
}

/// `show`'s text: each wheel's report and version change, separated by an empty line.
pub fn show_text(entries: &[ShowEntry]) -> String {
    let text: Vec<String> = entries
        .iter()
        .map(|(report, change)| {
            let mut text = report.to_text();
            if let Some(change) = change {
                text.push_str(&outcome::version_text(change));
            }
            text
        })
        .collect();
    text.join("\n")
}

/// One external library in the report: what happens to it ([`Judged::dispositions`], relative
/// to the policy the wheel gets once repaired) and why; notes about the wheel that provides it.
/// Every external library the report lists ([`Judged::dispositions`]) with what happens to it
/// and why; `requires` (the wheel's requirements) name the wheels that may provide one.
pub fn external_libs(
    analysis: &Analysis,
    judged: &Judged,
    requires: &[crate::wheel::requirement::Requirement],
    notes: &mut Vec<Note>,
) -> BTreeMap<String, ExternalReport> {
    judged
        .dispositions
        .iter()
        .map(|(soname, disposition)| {
            (soname.clone(), external_report(analysis, judged, requires, soname, disposition, notes))
        })
        .collect()
}

fn external_report(
    analysis: &Analysis,
    judged: &Judged,
    requires: &[crate::wheel::requirement::Requirement],
    soname: &str,
    disposition: &Disposition,
    notes: &mut Vec<Note>,
) -> ExternalReport {
    let lib = &analysis.external[soname];
    let mut note = |note: Note| {
        if !notes.contains(&note) {
            notes.push(note);
        }
    };
    let reason = match disposition {
        Disposition::Dependency(p) => {
            let mut reason = format!("provided by {} {} ({}) at {}", p.name, p.version, p.wheel, p.path);
            if !lib.declared {
                reason.push_str(&format!(
                    "; warning: the wheel's Requires-Dist does not name {}, so installers will not bring it",
                    p.name
                ));
                note(Note {
                    file: p.wheel.clone(),
                    message: format!(
                        "warning: provides libraries to this wheel, but no requirement of the wheel names {} (undeclared provider)",
                        p.name
                    ),
                });
            }
            if let Some(message) = less_compatible(&judged.set, judged.verdict.overall, p) {
                note(Note { file: p.wheel.clone(), message });
            }
            reason
        }
        Disposition::Excluded(why) => why.clone(),
        Disposition::LibPython => "libpython: manylinux wheels must not link it; repair removes the dependency".into(),
        Disposition::Whitelisted { policy } => format!("{policy} allows it from the system"),
        Disposition::Vendor { policy } => format!("not allowed by {policy}; repair would copy it into the wheel"),
        Disposition::NotFound => not_found_reason(analysis, soname, requires),
    };
    ExternalReport {
        disposition: disposition.kind().to_string(),
        path: lib.path.clone(),
        needed_by: lib.needed_by.iter().cloned().collect(),
        reason,
        provided_by: lib.provided_by.clone(),
    }
}

/// Why a library the binaries need was not found: a path the loader opens as it is, an RPATH
/// entry that leads out of the wheel, or nowhere; and a copy the loader might reuse.
fn not_found_reason(analysis: &Analysis, soname: &str, requires: &[crate::wheel::requirement::Requirement]) -> String {
    let lib = &analysis.external[soname];
    let hint = in_wheel_elsewhere(analysis, soname)
        .map(|p| format!("; the wheel has `{p}`, but it is not on the search path of the files that need it"))
        .unwrap_or_default();
    let mut reason = if lib.path_like {
        format!(
            "`{soname}` is a path, not a name: the loader opens it {}, never in a search directory",
            if soname.starts_with('/') {
                "there, and it is not on this machine"
            } else {
                "relative to the working directory of the process"
            }
        )
    } else if lib.outside.is_empty() {
        format!("not in the wheel and not found on this machine{hint}")
    } else {
        outside_reason(&lib.outside, soname, requires)
    };
    if let Some(p) = &lib.same_soname_in {
        reason.push_str(&format!(
            "; {} {}, which the wheel requires, ships it at {}: the loader reuses it only if {} has loaded it first (no RPATH of this wheel reaches it)",
            p.name, p.version, p.path, p.name
        ));
    }
    reason
}

/// A note when a providing wheel's tags are all less compatible than the consumer's tag: where
/// the consumer installs, the provider may not.
fn less_compatible(
    set: &crate::policy::PolicySet,
    consumer: usize,
    provider: &crate::analysis::site::Provider,
) -> Option<String> {
    let tags: Vec<PlatformTag> = provider.platform_tags.iter().map(|t| PlatformTag::parse(t)).collect();
    (!set.installs_where(&tags, consumer)).then(|| {
        format!(
            "its tags ({}) are less compatible than this wheel's {}: where this wheel installs, {} may not",
            provider.platform_tags.join("."),
            set.tag(consumer),
            provider.name
        )
    })
}

fn in_wheel_elsewhere<'a>(analysis: &'a Analysis, soname: &str) -> Option<&'a str> {
    analysis.binaries.iter().map(|b| analysis.binary(b).0).find(|p| p.rsplit('/').next() == Some(soname))
}

/// A wheel's sizes, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WheelSize {
    /// The wheel file.
    pub download: u64,
    /// The sum of its members' sizes: what pip writes to disk.
    pub installed: u64,
}

/// Text for a terminal with every control character but newline and tab made visible
/// (`\x1b` → `\u{1b}`), and every bidirectional override (`U+202E`): names, paths and messages
/// read from wheels, archives and markers reach the report, and an escape sequence among them
/// must not set the title, clear the screen or colour what follows, nor reorder what is shown.
/// The one place text output passes before it is printed; each field put into a line passes
/// [`field`] first, so that none starts a line of its own.
pub fn escape_text(text: &str) -> std::borrow::Cow<'_, str> {
    made_visible(text, true)
}

/// One field of a text line (a file name, a kernel name, a project's metadata, a message that
/// quotes them): [`escape_text`]'s rule with newlines and tabs made visible too.
/// Ex) `a\nfix: curl … | sh` → `a\u{a}fix: curl … | sh`
pub fn field(text: &str) -> std::borrow::Cow<'_, str> {
    made_visible(text, false)
}

/// Whether a character would change what a terminal shows around it: a control character
/// (newline and tab unless `lines`), or a bidirectional embedding, override or isolate.
fn hidden(c: char, lines: bool) -> bool {
    is_bidi_control(c) || (c.is_control() && !(lines && (c == '\n' || c == '\t')))
}

/// A bidirectional embedding, override, isolate or mark: it reorders the text around it.
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

fn made_visible(text: &str, lines: bool) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| hidden(c, lines)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c, lines) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A size for people. Ex) `40.2 MB`, `512 B`
pub fn human_bytes(n: u64) -> String {
    // Decimal units, as pip prints download sizes: one convention across the tool.
    let n = n as f64;
    match n {
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.1} MB", n / 1e6),
        n if n >= 1e3 => format!("{:.1} kB", n / 1e3),
        n => format!("{n} B"),
    }
}

pub(crate) use crate::log::plural;

/// Ex) (1, `file`) → `1 more file`; (3, `file`) → `3 more files`
fn more(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 more {noun}") } else { format!("{n} more {noun}s") }
}

pub(crate) fn container_name(code: &GpuCode) -> String {
    serde_json::to_value(code.container).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::site::Provider;
    use crate::testing::{analysis, elf, external, judge};

    #[test]
    fn each_library_is_reported_as_the_judgement_disposes_of_it() {
        let vendored = external("libfoo.so.1", Some("/usr/lib/libfoo.so.1"), &[]);
        let whitelisted = external("libm.so.6", Some("/lib/libm.so.6"), &[]);
        let missing = external("libgone.so.3", None, &[]);
        let mut rocm = external("libamdhip64.so.7", Some("/opt/rocm/lib/libamdhip64.so.7"), &[]);
        rocm.excluded = Some("ROCm provides it".into());
        let mut provided = external("libcublas.so.13", None, &[]);
        provided.provided_by = Some(Provider {
            name: "nvidia-cublas".into(),
            version: "13.0".into(),
            wheel: "nvidia_cublas-13.0-py3-none-manylinux_2_27_x86_64.whl".into(),
            path: "nvidia/cublas/lib/libcublas.so.13".into(),
            platform_tags: vec!["manylinux_2_27_x86_64".into()],
        });
        let needs = [("libfoo.so.1", "F_1"), ("libm.so.6", "GLIBC_2.2.5"), ("libgone.so.3", "G_1")];
        let mut facts = elf(&needs);
        facts.needed.extend(["libamdhip64.so.7".to_string(), "libcublas.so.13".to_string()]);
        let a = analysis(vec![("pkg/_core.so", facts)], vec![vendored, whitelisted, missing, rocm, provided]);
        let judged = judge(&a);
        let mut notes = Vec::new();
        let libs = external_libs(&a, &judged, &[], &mut notes);
        let kinds: Vec<(&str, &str)> = libs.iter().map(|(s, l)| (s.as_str(), l.disposition.as_str())).collect();
        assert_eq!(
            kinds,
            [
                ("libamdhip64.so.7", "excluded"),
                ("libcublas.so.13", "dependency"),
                ("libfoo.so.1", "vendor"),
                ("libgone.so.3", "not-found"),
                ("libm.so.6", "whitelisted"),
            ]
        );
        assert_eq!(libs["libamdhip64.so.7"].reason, "ROCm provides it");
        assert!(libs["libfoo.so.1"].reason.starts_with("not allowed by manylinux_"), "{}", libs["libfoo.so.1"].reason);
        assert_eq!(libs["libgone.so.3"].reason, "not in the wheel and not found on this machine");
        // A provider the requirements do not name is a warning, in the reason and as a note.
        assert!(libs["libcublas.so.13"].reason.contains("does not name nvidia-cublas"));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].message.contains("undeclared provider"));
    }
}
