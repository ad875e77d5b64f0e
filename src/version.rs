//! Local version labels: append `+rocm<version>` (or any label) to a wheel's version, keep the
//! batch's exact pins consistent, and warn where local labels sort against their ROCm order.
//!
//! Rules ([PEP 440 local versions](https://peps.python.org/pep-0440/#local-version-identifiers)):
//! `14.2.0` → `14.2.0+rocm10.1.0`; `2.15.0a0+git31a77fc` → `2.15.0a0+git31a77fc.rocm10.1.0` (the
//! git hash stays visible); `0.33.0+rocm101` (upstream's own marker) and a version that already
//! ends in the label are left alone.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::str::FromStr;

use pep440_rs::{LocalSegment, Version};
use serde::Serialize;

use crate::wheel::DistVersion;
use crate::wheel::name::PackageName;
use crate::wheel::requirement::Requirement;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum VersionError {
    #[error("`{0}` is not a valid PEP 440 version: {1}")]
    Invalid(String, String),
    #[error("the local label `{label}` is not in PEP 440 normal form (it would become `{normal}`); pass `{normal}`")]
    LabelNotNormal { label: String, normal: String },
    #[error("the local label `{0}` is empty or not a valid local version label")]
    BadLabel(String),
    #[error("--rocm-version `{0}` is not a ROCm release version (Ex: 10.1.0, 7.14.0a20260519)")]
    BadRocmVersion(String),
}

/// The label to append. Ex) `rocm10.1.0` (`--rocm-version 10.1.0`), `cu128`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalLabel {
    pub label: String,
    /// The alphabetic start of the label (`rocm`, `cu`): a version whose local segment already
    /// starts with it carries its own marker.
    pub family: String,
}

impl LocalLabel {
    /// Validate a label: it must be what PEP 440 normalisation would write.
    pub fn new(label: &str) -> Result<Self, VersionError> {
        let probe = format!("0+{label}");
        let version = Version::from_str(&probe).map_err(|_| VersionError::BadLabel(label.to_string()))?;
        let normal = local_text(version.local());
        if normal != label {
            return Err(VersionError::LabelNotNormal { label: label.to_string(), normal });
        }
        let family: String = label.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        Ok(LocalLabel { label: label.to_string(), family })
    }

    /// `--rocm-version 10.1.0` → `rocm10.1.0`; the version must be a PEP 440 public version
    /// (an empty one would append a bare `rocm`).
    pub fn rocm(version: &str) -> Result<Self, VersionError> {
        let public = Version::from_str(version)
            .ok()
            .filter(|v| !v.is_local() && version.starts_with(|c: char| c.is_ascii_digit()));
        if public.is_none() {
            return Err(VersionError::BadRocmVersion(version.to_string()));
        }
        Self::new(&format!("rocm{version}"))
    }
}

/// What happens to one wheel's version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct VersionDecision {
    pub version: DistVersion,
    /// The new version, `None` when it stays.
    pub new_version: Option<DistVersion>,
    pub reason: String,
}

/// Why a wheel may be marked: what it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Host binaries or device code.
    Compiled,
    /// Pure Python (no host binary, no device code).
    Pure,
    /// A metapackage `wheelfix metapackage` wrote: its version already names its ROCm release
    /// and the digest of its pins, and it is never relabelled (a rerun gives the same bytes).
    Metapackage,
}

/// Decide for one version, given that the wheel should be marked.
pub fn mark(dist_version: &DistVersion, label: &LocalLabel) -> Result<VersionDecision, VersionError> {
    let (version, parsed) = (dist_version.text.as_str(), &dist_version.parsed);
    let local = local_text(parsed.local());
    let keep = |reason: String| VersionDecision { version: dist_version.clone(), new_version: None, reason };
    if !local.is_empty() {
        if local == label.label || local.ends_with(&format!(".{}", label.label)) {
            return Ok(keep(format!("already marked `+{local}`")));
        }
        if !label.family.is_empty() && local.split('.').any(|seg| seg.starts_with(&label.family)) {
            return Ok(keep(format!("upstream's own {} marker `+{local}` is kept", label.family)));
        }
    }
    let new =
        if parsed.is_local() { format!("{version}.{}", label.label) } else { format!("{version}+{}", label.label) };
    let mut reason = if parsed.is_local() {
        format!("`+{}` appended to the existing local segment `+{local}`", label.label)
    } else {
        format!("`+{}` added", label.label)
    };
    let original_local = version.split_once('+').map(|(_, l)| l).unwrap_or("");
    if original_local != local {
        reason.push_str(&format!(" (note: `+{original_local}` is not in normal form, PEP 440 reads it as `+{local}`)"));
    }
    let new = DistVersion::parse(&new).map_err(|e| VersionError::Invalid(new.clone(), e.to_string()))?;
    Ok(VersionDecision { version: dist_version.clone(), new_version: Some(new), reason })
}

/// PEP 440 text of local segments. Ex) [`git31a77fc`, 1] → `git31a77fc.1`
fn local_text(local: &[LocalSegment]) -> String {
    local.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(".")
}

/// One wheel of a batch, as the batch decisions see it.
#[derive(Debug, Clone)]
pub struct BatchMember {
    pub name: PackageName,
    pub version: DistVersion,
    pub content: Content,
    pub requires_dist: Vec<Requirement>,
}

/// Settings of a marking run.
#[derive(Debug, Clone)]
pub struct MarkOptions {
    pub label: LocalLabel,
    pub mark_pure: bool,
    /// Projects left alone, by normalised name.
    pub no_mark: Vec<String>,
}

/// Decide every member of a batch: compiled wheels are marked; pure wheels only with
/// `--mark-pure` or when they require a project the batch marks (transitively).
pub fn decide_batch(members: &[BatchMember], options: &MarkOptions) -> Vec<Result<VersionDecision, VersionError>> {
    let skip: Vec<PackageName> = options.no_mark.iter().map(|n| PackageName::new(n)).collect();
    let mut decisions: Vec<Option<Result<VersionDecision, VersionError>>> = vec![None; members.len()];
    let keep = |m: &BatchMember, reason: &str| {
        Ok(VersionDecision { version: m.version.clone(), new_version: None, reason: reason.into() })
    };
    for (i, m) in members.iter().enumerate() {
        if skip.contains(&m.name) {
            decisions[i] = Some(keep(m, "left alone by --no-mark"));
        } else if m.content == Content::Metapackage {
            decisions[i] = Some(keep(
                m,
                "a wheelfix metapackage or selector: its version and pins are set when it is made, never relabelled (a selector: `wheelfix selector --version 1.0+rocmX.Y.Z`)",
            ));
        } else if m.content == Content::Compiled || options.mark_pure {
            decisions[i] = Some(mark(&m.version, &options.label));
        }
    }
    // Pure wheels that require a marked project follow it, to a fixed point: round by round, a
    // wheel is looked at only when a project it requires was marked in the round before, so a
    // batch of thousands of wheels requiring each other takes time linear in its requirements.
    let is_marked = |d: &Option<Result<VersionDecision, VersionError>>| matches!(d, Some(Ok(d)) if d.new_version.is_some() || d.reason.starts_with("already marked"));
    let mut dependents: HashMap<PackageName, Vec<usize>> = HashMap::new();
    for (i, m) in members.iter().enumerate() {
        if decisions[i].is_none() {
            for r in &m.requires_dist {
                dependents.entry(r.package.clone()).or_default().push(i);
            }
        }
    }
    let mut marked: HashSet<PackageName> =
        members.iter().zip(&decisions).filter(|(_, d)| is_marked(d)).map(|(m, _)| m.name.clone()).collect();
    let mut fresh: Vec<PackageName> = marked.iter().cloned().collect();
    while !fresh.is_empty() {
        let mut candidates: Vec<usize> = fresh
            .iter()
            .filter_map(|n| dependents.get(n))
            .flatten()
            .copied()
            .filter(|&i| decisions[i].is_none())
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let mut newly = Vec::new();
        for i in candidates {
            let m = &members[i];
            let Some(dep) = m.requires_dist.iter().map(|r| &r.package).find(|n| marked.contains(*n)) else {
                continue;
            };
            decisions[i] = Some(mark(&m.version, &options.label).map(|mut d| {
                d.reason = format!("pure Python requiring `{dep}`, which this batch marks: {}", d.reason);
                d
            }));
            if is_marked(&decisions[i]) {
                newly.push(m.name.clone());
            }
        }
        marked.extend(newly.iter().cloned());
        fresh = newly;
    }
    members
        .iter()
        .zip(decisions)
        .map(|(m, d)| {
            d.unwrap_or_else(|| {
                keep(m, "pure Python with no ROCm code and nothing marked to require: nothing to qualify")
            })
        })
        .collect()
}

/// The outcome of checking one `Requires-Dist` line against the batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PinRewrite {
    pub requirement: String,
    /// The rewritten requirement; `None` for a warning only.
    pub new_requirement: Option<String>,
    pub message: String,
}

/// Rewrite exact pins (`==` / `===`) that name a batch project at its old version to its new
/// version, keeping extras and markers. `versions` maps normalised names to (old, new).
pub fn rewrite_pins(
    requires_dist: &[Requirement],
    versions: &BTreeMap<PackageName, (DistVersion, DistVersion)>,
) -> Vec<PinRewrite> {
    let mut out = Vec::new();
    for parsed in requires_dist {
        let requirement = &parsed.text;
        let name = &parsed.package;
        let Some((old, new)) = versions.get(name) else { continue };
        let Some(pin) = &parsed.exact else { continue };
        let (op, pinned) = (pin.op, pin.version.as_str());
        let pinned_version = Version::from_str(pinned).ok();
        if pinned == old.text || pinned_version.as_ref() == Some(&old.parsed) {
            if old == new {
                continue;
            }
            out.push(PinRewrite {
                requirement: requirement.clone(),
                new_requirement: parsed.with_pinned_version(&new.text),
                message: format!("pin {op}{pinned} follows {name} to {new}"),
            });
        } else if pinned == new.text {
            continue;
        } else {
            let loose = pinned_version.is_some_and(|p| !p.is_local() && p == old.parsed.clone().without_local());
            let message = if loose {
                format!(
                    "pin {op}{pinned} matches this batch's {name} {new} but also any other {pinned} build (a same-named project could satisfy it): pin the full version"
                )
            } else {
                format!("pin {op}{pinned} does not match this batch's {name} {old}")
            };
            out.push(PinRewrite { requirement: requirement.clone(), new_requirement: None, message });
        }
    }
    out
}

/// Local-version marking for a batch (`--rocm-version`, `--local-version`).
#[derive(Debug, Clone)]
pub struct Marking {
    pub options: MarkOptions,
    /// Wheels already published: their versions join the ordering-hazard check.
    pub index_dir: Option<std::path::PathBuf>,
}

/// What happens to one wheel's version and pins.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct VersionChange {
    pub local_version: Option<VersionDecision>,
    pub pins: Vec<PinRewrite>,
}

impl VersionChange {
    /// The new version, when the wheel gets one.
    pub fn new_version(&self) -> Option<&DistVersion> {
        self.local_version.as_ref().and_then(|d| d.new_version.as_ref())
    }
}

/// The version changes of a batch (`None`: a wheel that failed to open, skipped), and its
/// ordering hazards over the batch and what `published` holds (`(name, version)`).
pub fn decide(
    members: &[Option<BatchMember>],
    marking: Option<&Marking>,
    published: &[(String, String)],
) -> (Vec<Result<VersionChange, VersionError>>, Vec<OrderingHazard>) {
    let Some(marking) = marking else {
        return (members.iter().map(|_| Ok(VersionChange::default())).collect(), Vec::new());
    };
    let present: Vec<(usize, &BatchMember)> =
        members.iter().enumerate().filter_map(|(i, m)| m.as_ref().map(|m| (i, m))).collect();
    let batch: Vec<BatchMember> = present.iter().map(|(_, m)| (*m).clone()).collect();
    let decisions = decide_batch(&batch, &marking.options);
    let mut versions: BTreeMap<PackageName, (DistVersion, DistVersion)> = BTreeMap::new();
    for (m, d) in batch.iter().zip(&decisions) {
        if let Ok(d) = d {
            versions.insert(m.name.clone(), (m.version.clone(), d.new_version.clone().unwrap_or(m.version.clone())));
        }
    }
    let mut changes: Vec<Result<VersionChange, VersionError>> =
        members.iter().map(|_| Ok(VersionChange::default())).collect();
    for ((index, member), decision) in present.iter().zip(decisions) {
        changes[*index] = decision
            .map(|d| VersionChange { local_version: Some(d), pins: rewrite_pins(&member.requires_dist, &versions) });
    }
    // The hazard: this batch's new versions plus what is already published.
    let mut all: Vec<(String, String)> =
        versions.iter().map(|(n, (_, new))| (n.to_string(), new.text.clone())).collect();
    all.extend(published.iter().cloned());
    (changes, ordering_hazards(&all))
}

/// Replace the value of the first `Version:` header and whole `Requires-Dist:` values in a
/// METADATA text, keeping every other byte (line endings and the description included).
pub fn rewrite_metadata(text: &str, new_version: Option<&str>, pins: &[PinRewrite]) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut in_headers = true;
    let mut version_done = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let ending = &line[body.len()..];
        if in_headers && body.is_empty() {
            in_headers = false;
        }
        if in_headers && let Some((key, value)) = body.split_once(':') {
            let value = value.trim();
            if !version_done
                && key.eq_ignore_ascii_case("Version")
                && let Some(v) = new_version
            {
                out.push_str(&format!("{key}: {v}{ending}"));
                version_done = true;
                continue;
            }
            if key.eq_ignore_ascii_case("Requires-Dist")
                && let Some(pin) = pins.iter().find(|p| p.requirement == value && p.new_requirement.is_some())
            {
                out.push_str(&format!("{key}: {}{ending}", pin.new_requirement.as_deref().unwrap_or(value)));
                continue;
            }
        }
        out.push_str(line);
    }
    out
}

/// Two labels of one project and public version whose PEP 440 order contradicts their ROCm
/// order (`+rocm10.1.0` sorts below `+rocm7.14.0`, ROCm/TheRock#7183).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderingHazard {
    pub project: String,
    pub higher_rocm: String,
    pub lower_rocm: String,
    pub message: String,
}

/// Check every pair of `(project, version)` for the ordering hazard.
pub fn ordering_hazards(versions: &[(String, String)]) -> Vec<OrderingHazard> {
    // (project, public version) → every local variant: parsed, its ROCm release, as written.
    type Variant = (Version, Vec<u64>, String);
    let mut groups: BTreeMap<(String, String), Vec<Variant>> = BTreeMap::new();
    for (name, version) in versions {
        let Ok(parsed) = Version::from_str(version) else { continue };
        let Some(rocm) = rocm_release(parsed.local()) else { continue };
        let public = parsed.clone().without_local().to_string();
        let entry = groups.entry((PackageName::new(name).to_string(), public)).or_default();
        if !entry.iter().any(|(_, _, v)| v == version) {
            entry.push((parsed, rocm, version.clone()));
        }
    }
    let mut out = Vec::new();
    for ((project, _), list) in groups {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                let rocm_order = a.1.cmp(&b.1);
                let pep_order = a.0.cmp(&b.0);
                if rocm_order != Ordering::Equal && pep_order != rocm_order {
                    let (hi, lo) = if rocm_order == Ordering::Greater { (a, b) } else { (b, a) };
                    out.push(OrderingHazard {
                        project: project.clone(),
                        higher_rocm: hi.2.clone(),
                        lower_rocm: lo.2.clone(),
                        message: format!(
                            "{project} {} sorts below {} under PEP 440 (local labels compare as strings), so pip prefers the older ROCm build",
                            hi.2, lo.2
                        ),
                    });
                }
            }
        }
    }
    out
}

/// The ROCm release a local label names. Ex) `git31a77fc.rocm10.1.0` → [10, 1, 0]
pub fn rocm_release(local: &[LocalSegment]) -> Option<Vec<u64>> {
    let start = local.iter().position(|s| matches!(s, LocalSegment::String(t) if t.starts_with("rocm")))?;
    let LocalSegment::String(first) = &local[start] else { return None };
    let digits: String = first["rocm".len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
    let mut release = vec![digits.parse::<u64>().ok()?];
    for seg in &local[start + 1..] {
        match seg {
            LocalSegment::Number(n) => release.push(*n),
            LocalSegment::String(s) => {
                // `0a20260519`: the leading digits still belong to the release.
                let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
                if let Ok(n) = d.parse() {
                    release.push(n);
                }
                break;
            }
        }
    }
    Some(release)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rocm() -> LocalLabel {
        LocalLabel::rocm("10.1.0").unwrap()
    }

    fn v(text: &str) -> DistVersion {
        DistVersion::parse(text).unwrap()
    }

    /// The new version's text.
    fn new_text(d: &VersionDecision) -> Option<&str> {
        d.new_version.as_ref().map(|v| v.text.as_str())
    }

    #[test]
    fn the_version_table() {
        let cases = [
            ("14.2.0", Some("14.2.0+rocm10.1.0")),
            ("2.15.0a0+git31a77fc", Some("2.15.0a0+git31a77fc.rocm10.1.0")),
            ("0.1.29.dev0+g1a2b3c4.d20261109", Some("0.1.29.dev0+g1a2b3c4.d20261109.rocm10.1.0")),
            ("0.33.0+rocm101", None),
            ("3.9.0+gitaad2a60d.rocm10.1.0", None),
            ("10.1.0+rocm10.1.0", None),
            ("1.0.post1", Some("1.0.post1+rocm10.1.0")),
        ];
        for (input, expected) in cases {
            let d = mark(&v(input), &rocm()).unwrap();
            assert_eq!(new_text(&d), expected, "{input}: {}", d.reason);
        }
        assert!(mark(&v("0.33.0+rocm101"), &rocm()).unwrap().reason.contains("upstream's own rocm marker"));
        assert!(mark(&v("3.9.0+gitaad2a60d.rocm10.1.0"), &rocm()).unwrap().reason.contains("already marked"));
    }

    #[test]
    fn running_twice_changes_nothing() {
        let once = mark(&v("2.15.0a0+git31a77fc"), &rocm()).unwrap().new_version.unwrap();
        assert_eq!(mark(&once, &rocm()).unwrap().new_version, None);
    }

    #[test]
    fn labels_that_normalisation_would_change_are_refused() {
        for (label, normal) in
            [("ROCm10.1", "rocm10.1"), ("rocm-10", "rocm.10"), ("rocm_10", "rocm.10"), ("rocm.010", "rocm.10")]
        {
            assert_eq!(
                LocalLabel::new(label),
                Err(VersionError::LabelNotNormal { label: label.into(), normal: normal.into() }),
                "{label}"
            );
        }
        assert!(LocalLabel::new("").is_err());
        assert!(LocalLabel::new("a+b").is_err());
        assert_eq!(LocalLabel::new("cu128").unwrap().family, "cu");
        // A non-normal existing local is kept as written, with a note.
        let d = mark(&v("1.0+Ubuntu-1"), &rocm()).unwrap();
        assert_eq!(new_text(&d), Some("1.0+Ubuntu-1.rocm10.1.0"));
        assert!(d.reason.contains("ubuntu.1"), "{}", d.reason);
    }

    #[test]
    fn pure_wheels_follow_what_they_require() {
        let member = |name: &str, version: &str, content, requires: &[&str]| BatchMember {
            name: PackageName::new(name),
            version: v(version),
            content,
            requires_dist: requires.iter().map(|s| Requirement::parse(s)).collect(),
        };
        let members = [
            member("nixl_rocm", "1.5.2", Content::Compiled, &[]),
            member("nixl", "1.5.2", Content::Pure, &["nixl-rocm==1.5.2"]),
            member("nixl-meta", "1.0", Content::Pure, &["nixl"]),
            member("triton_kernels", "1.0.0", Content::Pure, &["numpy"]),
            member("vllm", "0.33.0+rocm101", Content::Compiled, &[]),
            member("skipme", "1.0", Content::Compiled, &[]),
        ];
        let options = MarkOptions { label: rocm(), mark_pure: false, no_mark: vec!["SkipMe".into()] };
        let d: Vec<Option<String>> =
            decide_batch(&members, &options).into_iter().map(|d| new_text(&d.unwrap()).map(str::to_string)).collect();
        assert_eq!(
            d,
            [
                Some("1.5.2+rocm10.1.0".into()),
                Some("1.5.2+rocm10.1.0".into()),
                Some("1.0+rocm10.1.0".into()),
                None,
                None,
                None
            ]
        );
        let options = MarkOptions { mark_pure: true, ..options };
        assert_eq!(new_text(decide_batch(&members, &options)[3].as_ref().unwrap()), Some("1.0.0+rocm10.1.0"));
    }

    #[test]
    fn exact_pins_follow_their_project() {
        let versions: BTreeMap<PackageName, (DistVersion, DistVersion)> = [
            (PackageName::new("triton"), (v("3.9.0+gitaad2a60d"), v("3.9.0+gitaad2a60d.rocm10.1.0"))),
            (PackageName::new("amd-aiter"), (v("0.1.29"), v("0.1.29+rocm10.1.0"))),
        ]
        .into();
        let requires = [
            "triton==3.9.0+gitaad2a60d".to_string(),
            "triton[tests] === 3.9.0+gitaad2a60d ; python_version >= \"3.10\"".to_string(),
            "amd_aiter (==0.1.29)".to_string(),
            "triton>=3.0".to_string(),
            "triton==3.8.0".to_string(),
            "triton==3.9.0".to_string(),
            "numpy==2.0".to_string(),
        ];
        let requires: Vec<Requirement> = requires.iter().map(|r| Requirement::parse(r)).collect();
        let rewrites = rewrite_pins(&requires, &versions);
        let new: Vec<Option<&str>> = rewrites.iter().map(|r| r.new_requirement.as_deref()).collect();
        assert_eq!(
            new,
            [
                Some("triton==3.9.0+gitaad2a60d.rocm10.1.0"),
                Some("triton[tests] === 3.9.0+gitaad2a60d.rocm10.1.0 ; python_version >= \"3.10\""),
                Some("amd_aiter (==0.1.29+rocm10.1.0)"),
                None,
                None
            ]
        );
        assert!(rewrites[3].message.contains("does not match"), "{}", rewrites[3].message);
        assert!(rewrites[4].message.contains("pin the full version"), "{}", rewrites[4].message);
    }

    #[test]
    fn metadata_rewrite_keeps_every_other_byte() {
        let text = "Metadata-Version: 2.1\r\nName: torch\r\nVersion: 2.15.0a0+git31a77fc\r\nRequires-Dist: triton==3.9.0+gitaad2a60d; platform_system == \"Linux\"\r\n\r\nVersion: in the description stays\r\n";
        let pins = vec![PinRewrite {
            requirement: "triton==3.9.0+gitaad2a60d; platform_system == \"Linux\"".into(),
            new_requirement: Some("triton==3.9.0+gitaad2a60d.rocm10.1.0; platform_system == \"Linux\"".into()),
            message: String::new(),
        }];
        let out = rewrite_metadata(text, Some("2.15.0a0+git31a77fc.rocm10.1.0"), &pins);
        assert_eq!(
            out,
            "Metadata-Version: 2.1\r\nName: torch\r\nVersion: 2.15.0a0+git31a77fc.rocm10.1.0\r\nRequires-Dist: triton==3.9.0+gitaad2a60d.rocm10.1.0; platform_system == \"Linux\"\r\n\r\nVersion: in the description stays\r\n"
        );
    }

    #[test]
    fn rocm_10_below_rocm_7_is_a_hazard() {
        let versions = vec![
            ("torch".to_string(), "2.12.0+rocm10.1.0".to_string()),
            ("torch".to_string(), "2.12.0+rocm7.14.0".to_string()),
            ("torch".to_string(), "2.12.0+rocm7.2.0".to_string()),
            ("triton".to_string(), "3.9.0+gitaad2a60d.rocm7.14.0".to_string()),
        ];
        let hazards = ordering_hazards(&versions);
        assert_eq!(hazards.len(), 2, "{hazards:?}");
        assert!(hazards.iter().all(|h| h.higher_rocm == "2.12.0+rocm10.1.0"));
        // rocm7.14.0 vs rocm7.2.0: `rocm7` equal, then 14 > 2 numerically: no hazard.
        assert!(ordering_hazards(&versions[1..]).is_empty());
    }
}
