//! Target IDs (`gfx90a:xnack+`, `gfx942:sramecc+:xnack-`) and which code objects run on which
//! GPU: a code object's target ID against the targets a user or a machine names, generic
//! processors included (LLVM's AMDGPUUsage, "Target IDs" and "Generic processors").

use std::fmt;

/// The processors each generic processor covers, as LLVM's AMDGPUUsage lists them
/// (`../shared/reference/gpu-code-formats.md` §4.2). A generic processor not listed here is
/// kept by [`Keep::verdict`]: what it covers is not known, and keeping code costs only bytes.
/// `gfx9-4-generic` also covers gfx940 and gfx941 (LLVM 19, before they were dropped).
const GENERIC: &[(&str, &[&str])] = &[
    ("gfx9-generic", &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"]),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    ("gfx10-1-generic", &["gfx1010", "gfx1011", "gfx1012", "gfx1013"]),
    ("gfx10-3-generic", &["gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"]),
    ("gfx11-generic", &["gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"]),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
    ("gfx12-5-generic", &["gfx1250", "gfx1251"]),
];

/// The target-ID features each processor supports, as LLVM's AMDGPUUsage processor table lists
/// them ("Target Features Supported", the two that are part of a target ID); a processor not
/// listed supports none (`gfx1100:xnack+` is not a target ID: clang refuses it).
const FEATURES: &[(&str, &[&str])] = &[
    ("gfx801", &["xnack"]),
    ("gfx810", &["xnack"]),
    ("gfx900", &["xnack"]),
    ("gfx902", &["xnack"]),
    ("gfx904", &["xnack"]),
    ("gfx906", &["sramecc", "xnack"]),
    ("gfx908", &["sramecc", "xnack"]),
    ("gfx909", &["xnack"]),
    ("gfx90a", &["sramecc", "xnack"]),
    ("gfx90c", &["xnack"]),
    ("gfx940", &["sramecc", "xnack"]),
    ("gfx941", &["sramecc", "xnack"]),
    ("gfx942", &["sramecc", "xnack"]),
    ("gfx950", &["sramecc", "xnack"]),
    ("gfx1010", &["xnack"]),
    ("gfx1011", &["xnack"]),
    ("gfx1012", &["xnack"]),
    ("gfx1013", &["xnack"]),
    ("gfx9-generic", &["xnack"]),
    ("gfx9-4-generic", &["sramecc", "xnack"]),
    ("gfx10-1-generic", &["xnack"]),
];

/// The processors a generic processor's code runs on, if LLVM's table names it.
/// Ex) `gfx9-4-generic` → gfx940, gfx941, gfx942, gfx950
pub fn generic_covers(processor: &str) -> Option<&'static [&'static str]> {
    GENERIC.iter().find(|(g, _)| *g == processor).map(|(_, covered)| *covered)
}

/// The generic processor whose code runs on `processor`, if LLVM's table has one.
/// Ex) `gfx942` → `gfx9-4-generic`; `gfx90a` → none
pub fn generic_of(processor: &str) -> Option<&'static str> {
    GENERIC.iter().find(|(_, covered)| covered.contains(&processor)).map(|(generic, _)| *generic)
}

/// The target-ID features `processor` supports. Ex) `gfx90a` → sramecc, xnack; `gfx1100` → none
pub fn supported_features(processor: &str) -> &'static [&'static str] {
    FEATURES.iter().find(|(p, _)| *p == processor).map_or(&[], |(_, features)| *features)
}

/// The processor of a target ID as text (an archive's name, a TOC entry), where the text is
/// not kept as a [`TargetId`]. Ex) `gfx90a:xnack+` → `gfx90a`
pub fn processor_of(target: &str) -> &str {
    target.split_once(':').map_or(target, |(processor, _)| processor)
}

/// The feature settings of a target ID as text; a part without a sign is not one.
fn features_of(target: &str) -> impl Iterator<Item = Feature<'_>> {
    target.split(':').skip(1).filter_map(|part| {
        part.strip_suffix('+')
            .map(|name| Feature { name, on: true })
            .or_else(|| part.strip_suffix('-').map(|name| Feature { name, on: false }))
    })
}

/// Whether `name` is an AMDGPU processor LLVM knows (generic processors included): the one
/// test of "is this a GPU processor", where a name comes from a file name, an extra or a flag.
/// Ex) `gfx942`, `gfx9-4-generic`; not `gfx9999`, `sm_90`, `gfx110x`
pub fn is_known_processor(name: &str) -> bool {
    (0..=0xff).any(|mach| super::mach_name(mach) == Some(name))
}

/// A target ID as LLVM writes it: a processor, then the settings of the target features it
/// was built for or runs with, each `:<feature>+` or `:<feature>-`. Ex) `gfx942`,
/// `gfx90a:xnack+`, `gfx942:sramecc+:xnack-`; for NVIDIA code, its architecture (`sm_90`).
///
/// Kept as written: a target ID read from a code object or a bundle entry is what the file
/// says (order and all), compared and sorted as text so that reports list targets as before;
/// one a person names is checked by [`TargetId::parse`] and written in LLVM's spelling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TargetId(String);

/// One target feature's setting in a target ID. Ex) `xnack+` → (`xnack`, on)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature<'a> {
    pub name: &'a str,
    pub on: bool,
}

impl TargetId {
    /// A target ID as a file names it (a code object's header, a bundle entry, an archive's
    /// table of contents), unchecked: the reports say what the file says.
    pub fn from_code(text: impl Into<String>) -> TargetId {
        TargetId(text.into())
    }

    /// Parse a target ID a person names, by LLVM's rules: a processor LLVM knows (any case),
    /// then features it supports, each once, with `+` or `-`.
    /// Ex) `gfx942`, `GFX90A:xnack+`; not `gfx9999`, `gfx90a:xnack`, `gfx90a:xnack+:xnack-`,
    /// `gfx1100:xnack+`
    pub fn parse(text: &str) -> Result<TargetId, TargetError> {
        let mut parts = text.trim().split(':');
        let lower = parts.next().unwrap_or_default().to_ascii_lowercase();
        let Some(processor) = (0..=0xff).filter_map(super::mach_name).find(|name| *name == lower) else {
            return Err(TargetError::UnknownProcessor(text.to_string()));
        };
        let mut features: Vec<Feature<'static>> = Vec::new();
        for part in parts {
            let (name, on) = match (part.strip_suffix('+'), part.strip_suffix('-')) {
                (Some(name), _) => (name, true),
                (_, Some(name)) => (name, false),
                _ => return Err(TargetError::FeatureWithoutSign { text: text.to_string(), part: part.to_string() }),
            };
            let Some(name) = ["sramecc", "xnack"].into_iter().find(|known| *known == name) else {
                return Err(TargetError::UnknownFeature { text: text.to_string(), name: name.to_string() });
            };
            if !supported_features(processor).contains(&name) {
                return Err(TargetError::UnsupportedFeature { text: text.to_string(), processor, name });
            }
            if features.iter().any(|f| f.name == name) {
                return Err(TargetError::FeatureTwice { text: text.to_string(), name });
            }
            features.push(Feature { name, on });
        }
        Ok(TargetId::of(processor, features))
    }

    /// The target ID of `processor` with `features`, in LLVM's order (features sorted by name,
    /// as `clang --offload-arch` and the runtime spell them). Ex) (`gfx942`, xnack-, sramecc+)
    /// → `gfx942:sramecc+:xnack-`
    pub fn of<'a>(processor: &str, features: impl IntoIterator<Item = Feature<'a>>) -> TargetId {
        let mut features: Vec<Feature<'a>> = features.into_iter().collect();
        features.sort_by_key(|f| f.name);
        let mut text = processor.to_string();
        for f in features {
            text.push(':');
            text.push_str(f.name);
            text.push(if f.on { '+' } else { '-' });
        }
        TargetId(text)
    }

    /// The processor: the target ID before its first `:`. Ex) `gfx90a:xnack+` → `gfx90a`
    pub fn processor(&self) -> &str {
        processor_of(&self.0)
    }

    /// The feature settings, as written; a part without a sign is not one.
    /// Ex) `gfx942:sramecc+:xnack-` → sramecc on, xnack off
    pub fn features(&self) -> impl Iterator<Item = Feature<'_>> {
        features_of(&self.0)
    }

    /// Whether it names any feature setting. Ex) `gfx90a:xnack+`; not `gfx90a`
    pub fn has_features(&self) -> bool {
        self.0.contains(':')
    }

    /// Whether it is AMDGPU code (`gfx…`), not NVIDIA's (`sm_90`, `compute_90`).
    pub fn is_amdgpu(&self) -> bool {
        self.0.starts_with("gfx")
    }

    /// Whether its processor is a generic one (`gfx9-4-generic`), whose code runs on several.
    pub fn is_generic(&self) -> bool {
        self.processor().ends_with("-generic")
    }

    /// The processor alone, as a target ID. Ex) `gfx90a:xnack+` → `gfx90a`
    pub fn without_features(&self) -> TargetId {
        TargetId(self.processor().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The target IDs whose code a device of this target ID loads from kpack archives, most
    /// specific first, as ROCm's kpack runtime tries them (`for_each_compatible_target`): every
    /// subset of its features by descending size, the features' order kept, then the bare
    /// processor. Ex) `gfx942:sramecc+:xnack-` → itself, `gfx942:sramecc+`, `gfx942:xnack-`,
    /// `gfx942`
    pub fn compatible_targets(&self) -> Vec<TargetId> {
        let features: Vec<Feature<'_>> = self.features().collect();
        let n = features.len().min(8);
        let mut masks: Vec<u32> = (0..1u32 << n).collect();
        // Descending size; within one size, descending mask: the first feature's bit is the high one.
        masks.sort_by_key(|m| (std::cmp::Reverse(m.count_ones()), std::cmp::Reverse(*m)));
        masks
            .into_iter()
            .map(|mask| {
                let mut text = self.processor().to_string();
                for (i, f) in features.iter().enumerate().take(n) {
                    if mask & (1 << (n - 1 - i)) != 0 {
                        text.push(':');
                        text.push_str(f.name);
                        text.push(if f.on { '+' } else { '-' });
                    }
                }
                TargetId(text)
            })
            .collect()
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for TargetId {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<TargetId, TargetError> {
        TargetId::parse(text)
    }
}

impl std::borrow::Borrow<str> for TargetId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TargetId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for TargetId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for TargetId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Why a target a user names is not one. Messages name the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("`{0}` is not an AMDGPU processor LLVM knows (e.g. gfx942, gfx90a, gfx1100)")]
    UnknownProcessor(String),
    #[error("`{text}`: feature `{part}` must end in + or -")]
    FeatureWithoutSign { text: String, part: String },
    #[error("`{text}`: unknown target feature `{name}` (xnack, sramecc)")]
    UnknownFeature { text: String, name: String },
    #[error("`{text}`: {processor} has no `{name}` setting (LLVM refuses it){}", supported_hint(processor))]
    UnsupportedFeature { text: String, processor: &'static str, name: &'static str },
    #[error("`{text}`: `{name}` is set twice; a target ID gives each feature one setting")]
    FeatureTwice { text: String, name: &'static str },
}

/// `; its features: xnack, sramecc` or `; it has none`, for a feature a processor lacks.
fn supported_hint(processor: &str) -> String {
    match supported_features(processor) {
        [] => "; it has no target features".to_string(),
        features => format!("; its features: {}", features.join(", ")),
    }
}

/// What to keep of a bundle: code objects that run on any of the requested targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep {
    pub targets: Vec<TargetId>,
}

/// Whether one code object stays, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It runs on a requested target.
    Runs,
    /// It runs on none of them.
    Drop,
    /// What it runs on is not known (a generic processor wheelfix has no table for): kept.
    Unknown,
}

impl Keep {
    pub fn new(targets: Vec<TargetId>) -> Keep {
        Keep { targets }
    }

    /// The verdict on a code object of target ID `target` (`gfx942:sramecc+:xnack-`): a
    /// [`TargetId`], or the text a bundle entry or a table of contents names it by.
    pub fn verdict<T: AsRef<str> + ?Sized>(&self, target: &T) -> Verdict {
        let text = target.as_ref();
        let processor = processor_of(text);
        let features: Vec<Feature<'_>> = features_of(text).collect();
        if processor.ends_with("-generic") && !self.targets.iter().any(|r| r.processor() == processor) {
            return match generic_covers(processor) {
                None => Verdict::Unknown,
                Some(covered) if self.targets.iter().any(|r| runs_with(r, covered, &features)) => Verdict::Runs,
                Some(_) => Verdict::Drop,
            };
        }
        if self.targets.iter().any(|r| runs_with(r, &[processor], &features)) { Verdict::Runs } else { Verdict::Drop }
    }

    /// Whether code of `target` runs on one of the targets: [`Verdict::Runs`].
    pub fn runs<T: AsRef<str> + ?Sized>(&self, target: &T) -> bool {
        self.verdict(target) == Verdict::Runs
    }

    /// A keep of every processor LLVM knows: nothing is dropped (what `split` reads).
    pub fn everything() -> Keep {
        let names = (0..=0xff).filter_map(super::mach_name);
        Keep::new(names.map(TargetId::from_code).collect())
    }

    /// Whether a code object of `target` is kept.
    pub fn keeps<T: AsRef<str> + ?Sized>(&self, target: &T) -> bool {
        self.verdict(target) != Verdict::Drop
    }
}

/// GPU processor names in the order people read them: by family, then by number
/// (`gfx900`, `gfx906`, `gfx90a`, `gfx942`, `gfx1030`, `gfx1100`, `gfx1250`), not as strings
/// (which put `gfx1100` before `gfx900`).
pub fn natural_order<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut list: Vec<&str> = names.into_iter().collect();
    let key = |name: &str| {
        let digits = name.strip_prefix("gfx").unwrap_or(name);
        // A generic target (`gfx9-generic`, `gfx10-3-generic`) leads its family.
        if let Some((family, _)) = digits.split_once('-')
            && let Ok(family) = family.parse::<u32>()
        {
            return (!name.starts_with("gfx"), family, 0, name.to_string());
        }
        // `gfx90a`: family 9, the rest `0a`; `gfx1100`: family 11, `00`.
        let family_len = if digits.len() >= 4 { 2 } else { 1 };
        let family = digits.get(..family_len).and_then(|f| f.parse::<u32>().ok()).unwrap_or(u32::MAX);
        let rest = u32::from_str_radix(digits.get(family_len..).unwrap_or(""), 16).unwrap_or(u32::MAX);
        (!name.starts_with("gfx"), family, rest, name.to_string())
    };
    list.sort_by_key(|n| key(n));
    list.dedup();
    list
}

/// The libraries of a GPU runtime itself (ROCr, HIP, profilers), stems before `.so`: their
/// built-in kernels (ROCr's blit kernels, for thirty-odd targets) run the runtime, not the
/// package, so they never count as a package's device code for a target.
const RUNTIME_LIBRARIES: &[&str] =
    &["libhsa-runtime64", "libamdhip64", "libhsa-amd-aqlprofile64", "librocprofiler-sdk", "librocprofiler64"];

/// Whether `file` (a path in a wheel) is a GPU runtime's own library. Ex) `rocm/lib/libhsa-runtime64.so.1`
pub fn is_runtime_library(file: &str) -> bool {
    let base = file.rsplit('/').next().unwrap_or(file);
    RUNTIME_LIBRARIES.iter().any(|stem| base.strip_prefix(stem).is_some_and(|rest| rest.starts_with(".so")))
}

/// A file whose offload bundles hold no code object that runs on some requested targets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Uncovered {
    pub file: String,
    /// The requested targets it has no code for. Ex) [`gfx950`]
    pub targets: Vec<TargetId>,
    /// What its bundles hold, full target IDs; empty for bundles emptied of device code.
    pub has: Vec<TargetId>,
}

/// Coverage, judged per binary: every file that carries offload bundles (a runtime's own
/// library apart) must hold, for each requested target, a code object that runs on it (the
/// same processor, a feature variant, or a generic target that covers it; a generic of unknown
/// coverage is given the benefit of the doubt). A binary whose bundles were emptied covers
/// nothing.
pub fn uncovered(gpu: &[super::GpuCode], requested: &[TargetId]) -> Vec<Uncovered> {
    let mut by_file: std::collections::BTreeMap<&str, Vec<&TargetId>> = std::collections::BTreeMap::new();
    for code in gpu.iter().filter(|c| c.container.holds_bundles() && !is_runtime_library(&c.file)) {
        by_file.entry(&code.file).or_default().extend(&code.targets);
    }
    let mut out = Vec::new();
    for (file, has) in by_file {
        let targets: Vec<TargetId> = requested
            .iter()
            .filter(|r| {
                let alone = Keep::new(vec![(*r).clone()]);
                !has.iter().any(|t| alone.keeps(t))
            })
            .cloned()
            .collect();
        if !targets.is_empty() {
            let mut has: Vec<TargetId> = has.into_iter().cloned().collect();
            has.sort();
            has.dedup();
            out.push(Uncovered { file: file.to_string(), targets, has });
        }
    }
    out
}

/// A code object built for one of `processors` with `features` runs on `requested`: the same
/// processor, and no feature set the other way (`xnack+` code needs XNACK on; code that names no
/// setting runs either way; a request that names no setting takes every variant).
fn runs_with(requested: &TargetId, processors: &[&str], features: &[Feature<'_>]) -> bool {
    processors.contains(&requested.processor())
        && features.iter().all(|f| requested.features().all(|r| r.name != f.name || r.on == f.on))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(targets: &[&str]) -> Keep {
        Keep::new(targets.iter().map(|t| TargetId::parse(t).unwrap()).collect())
    }

    fn id(text: &str) -> TargetId {
        TargetId::from_code(text)
    }

    #[test]
    fn processors_in_natural_order() {
        let names = ["gfx1100", "gfx90a", "gfx942", "gfx900", "gfx1250", "gfx906", "gfx1030", "sm_90"];
        assert_eq!(
            natural_order(names),
            ["gfx900", "gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1250", "sm_90"]
        );
        let generic = ["gfx942", "gfx10-3-generic", "gfx9-generic", "gfx1030", "gfx90a"];
        assert_eq!(natural_order(generic), ["gfx9-generic", "gfx90a", "gfx942", "gfx10-3-generic", "gfx1030"]);
    }

    #[test]
    fn same_processor_whatever_its_features() {
        let k = keep(&["gfx90a"]);
        for t in ["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-", "gfx90a:sramecc+:xnack-"] {
            assert_eq!(k.verdict(&id(t)), Verdict::Runs, "{t}");
        }
        assert_eq!(k.verdict(&id("gfx942")), Verdict::Drop);
        assert_eq!(k.verdict(&id("gfx90c")), Verdict::Drop);
    }

    #[test]
    fn a_feature_request_drops_the_other_setting() {
        let k = keep(&["gfx90a:xnack-"]);
        assert!(k.keeps(&id("gfx90a")));
        assert!(k.keeps(&id("gfx90a:xnack-")));
        assert!(!k.keeps(&id("gfx90a:xnack+")));
    }

    #[test]
    fn generic_targets_cover_their_processors() {
        assert!(keep(&["gfx950"]).keeps(&id("gfx9-4-generic")));
        assert!(keep(&["gfx942"]).keeps(&id("gfx9-4-generic:xnack-")));
        assert!(!keep(&["gfx90a"]).keeps(&id("gfx9-4-generic")));
        assert!(keep(&["gfx1151"]).keeps(&id("gfx11-generic")));
        assert!(!keep(&["gfx1200"]).keeps(&id("gfx11-generic")));
        assert!(keep(&["gfx1201"]).keeps(&id("gfx12-generic")));
        assert!(keep(&["gfx9-4-generic"]).keeps(&id("gfx9-4-generic")));
        assert_eq!(keep(&["gfx942"]).verdict(&id("gfx13-generic")), Verdict::Unknown);
    }

    #[test]
    fn target_ids_a_person_names_follow_llvm() {
        assert!(TargetId::parse("gfx9999").is_err());
        assert!(TargetId::parse("sm_90").is_err());
        assert!(TargetId::parse("gfx90a:xnack").is_err());
        assert!(TargetId::parse("gfx90a:foo+").is_err());
        assert_eq!(TargetId::parse("GFX90A:xnack+").unwrap().as_str(), "gfx90a:xnack+");
        // LLVM's spelling: features by name.
        assert_eq!(TargetId::parse("gfx942:xnack-:sramecc+").unwrap().as_str(), "gfx942:sramecc+:xnack-");
        // One setting per feature, and only features the processor has.
        assert!(matches!(TargetId::parse("gfx90a:xnack+:xnack-"), Err(TargetError::FeatureTwice { .. })));
        assert!(matches!(TargetId::parse("gfx1100:xnack+"), Err(TargetError::UnsupportedFeature { .. })));
        assert!(matches!(TargetId::parse("gfx900:sramecc+"), Err(TargetError::UnsupportedFeature { .. })));
        assert!(TargetId::parse("gfx1010:xnack-").is_ok());
    }

    #[test]
    fn a_target_id_has_a_processor_and_features() {
        let t = id("gfx942:sramecc+:xnack-");
        assert_eq!(t.processor(), "gfx942");
        let features: Vec<(&str, bool)> = t.features().map(|f| (f.name, f.on)).collect();
        assert_eq!(features, [("sramecc", true), ("xnack", false)]);
        assert!(t.is_amdgpu() && t.has_features() && !t.is_generic());
        assert!(!id("sm_90").is_amdgpu());
        assert!(id("gfx9-4-generic:xnack-").is_generic());
        assert_eq!(id("gfx90a:xnack+").without_features(), id("gfx90a"));
    }

    #[test]
    fn compatible_targets_most_specific_first_as_the_kpack_runtime_tries_them() {
        let list: Vec<String> =
            id("gfx942:sramecc+:xnack-").compatible_targets().iter().map(|t| t.to_string()).collect();
        assert_eq!(list, ["gfx942:sramecc+:xnack-", "gfx942:sramecc+", "gfx942:xnack-", "gfx942"]);
        assert_eq!(id("gfx1201").compatible_targets(), [id("gfx1201")]);
    }
}
