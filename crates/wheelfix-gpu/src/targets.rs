//! Which code objects run on which GPU: a target id (`gfx90a:xnack+`) against the processors a
//! user asks for, generic processors included (LLVM's AMDGPUUsage, "Generic processors").

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

/// The processors a generic processor's code runs on, if LLVM's table names it.
/// Ex) `gfx9-4-generic` → gfx940, gfx941, gfx942, gfx950
pub fn generic_covers(processor: &str) -> Option<&'static [&'static str]> {
    GENERIC.iter().find(|(g, _)| *g == processor).map(|(_, covered)| *covered)
}

/// A requested GPU target: a processor, with the target-id features it runs with, if given.
/// Ex) `gfx942`, `gfx90a:xnack-`
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requested {
    pub processor: String,
    /// `(feature, on)`, e.g. `("xnack", false)` for `xnack-`.
    pub features: Vec<(String, bool)>,
}

impl fmt::Display for Requested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, on) in &self.features {
            write!(f, ":{name}{}", if *on { '+' } else { '-' })?;
        }
        Ok(())
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
}

impl Requested {
    /// Parse a target a user names; only AMDGPU processors LLVM knows are accepted.
    pub fn parse(text: &str) -> Result<Requested, TargetError> {
        let mut parts = text.trim().split(':');
        let processor = parts.next().unwrap_or_default().to_ascii_lowercase();
        if !is_known_processor(&processor) {
            return Err(TargetError::UnknownProcessor(text.to_string()));
        }
        let mut features = Vec::new();
        for part in parts {
            let (name, on) = match part.strip_suffix('+') {
                Some(name) => (name, true),
                None => match part.strip_suffix('-') {
                    Some(name) => (name, false),
                    None => {
                        return Err(TargetError::FeatureWithoutSign { text: text.to_string(), part: part.to_string() });
                    }
                },
            };
            if !matches!(name, "xnack" | "sramecc") {
                return Err(TargetError::UnknownFeature { text: text.to_string(), name: name.to_string() });
            }
            features.push((name.to_string(), on));
        }
        Ok(Requested { processor, features })
    }
}

fn is_known_processor(name: &str) -> bool {
    (0..=0xff).any(|mach| super::mach_name(mach) == Some(name))
}

/// A target id split: processor and features. Ex) `gfx90a:xnack+` → (`gfx90a`, [(xnack, +)])
fn split_target(target: &str) -> (&str, Vec<(&str, bool)>) {
    let mut parts = target.split(':');
    let processor = parts.next().unwrap_or_default();
    let features = parts
        .filter_map(|p| p.strip_suffix('+').map(|n| (n, true)).or_else(|| p.strip_suffix('-').map(|n| (n, false))))
        .collect();
    (processor, features)
}

/// What to keep of a bundle: code objects that run on any of the requested targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep {
    pub targets: Vec<Requested>,
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
    pub fn new(targets: Vec<Requested>) -> Keep {
        Keep { targets }
    }

    /// The verdict on a code object of target id `target` (`gfx942:sramecc+:xnack-`).
    pub fn verdict(&self, target: &str) -> Verdict {
        let (processor, features) = split_target(target);
        if processor.ends_with("-generic") && !self.targets.iter().any(|r| r.processor == processor) {
            return match GENERIC.iter().find(|(g, _)| *g == processor) {
                None => Verdict::Unknown,
                Some((_, covered)) if self.targets.iter().any(|r| runs_with(r, covered, &features)) => Verdict::Runs,
                Some(_) => Verdict::Drop,
            };
        }
        if self.targets.iter().any(|r| runs_with(r, &[processor], &features)) { Verdict::Runs } else { Verdict::Drop }
    }

    /// A keep of every processor LLVM knows: nothing is dropped (what `split` reads).
    pub fn everything() -> Keep {
        let names = (0..=0xff).filter_map(super::mach_name);
        Keep::new(names.filter_map(|n| Requested::parse(n).ok()).collect())
    }

    /// Whether a code object of `target` is kept.
    pub fn keeps(&self, target: &str) -> bool {
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
    pub targets: Vec<String>,
    /// What its bundles hold, full target ids; empty for bundles emptied of device code.
    pub has: Vec<String>,
}

/// Coverage, judged per binary: every file that carries offload bundles (a runtime's own
/// library apart) must hold, for each requested target, a code object that runs on it (the
/// same processor, a feature variant, or a generic target that covers it; a generic of unknown
/// coverage is given the benefit of the doubt). A binary whose bundles were emptied covers
/// nothing.
pub fn uncovered(gpu: &[super::GpuCode], requested: &[Requested]) -> Vec<Uncovered> {
    let mut by_file: std::collections::BTreeMap<&str, Vec<&String>> = std::collections::BTreeMap::new();
    for code in gpu.iter().filter(|c| c.container.holds_bundles() && !is_runtime_library(&c.file)) {
        by_file.entry(&code.file).or_default().extend(&code.targets);
    }
    let mut out = Vec::new();
    for (file, has) in by_file {
        let targets: Vec<String> = requested
            .iter()
            .filter(|r| {
                let alone = Keep::new(vec![(*r).clone()]);
                !has.iter().any(|t| alone.verdict(t) != Verdict::Drop)
            })
            .map(|r| r.to_string())
            .collect();
        if !targets.is_empty() {
            let mut has: Vec<String> = has.into_iter().cloned().collect();
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
fn runs_with(requested: &Requested, processors: &[&str], features: &[(&str, bool)]) -> bool {
    processors.contains(&requested.processor.as_str())
        && features.iter().all(|(name, on)| requested.features.iter().all(|(n, o)| n != name || o == on))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(targets: &[&str]) -> Keep {
        Keep::new(targets.iter().map(|t| Requested::parse(t).unwrap()).collect())
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
            assert_eq!(k.verdict(t), Verdict::Runs, "{t}");
        }
        assert_eq!(k.verdict("gfx942"), Verdict::Drop);
        assert_eq!(k.verdict("gfx90c"), Verdict::Drop);
    }

    #[test]
    fn a_feature_request_drops_the_other_setting() {
        let k = keep(&["gfx90a:xnack-"]);
        assert!(k.keeps("gfx90a"));
        assert!(k.keeps("gfx90a:xnack-"));
        assert!(!k.keeps("gfx90a:xnack+"));
    }

    #[test]
    fn generic_targets_cover_their_processors() {
        assert!(keep(&["gfx950"]).keeps("gfx9-4-generic"));
        assert!(keep(&["gfx942"]).keeps("gfx9-4-generic:xnack-"));
        assert!(!keep(&["gfx90a"]).keeps("gfx9-4-generic"));
        assert!(keep(&["gfx1151"]).keeps("gfx11-generic"));
        assert!(!keep(&["gfx1200"]).keeps("gfx11-generic"));
        assert!(keep(&["gfx1201"]).keeps("gfx12-generic"));
        assert!(keep(&["gfx9-4-generic"]).keeps("gfx9-4-generic"));
        assert_eq!(keep(&["gfx942"]).verdict("gfx13-generic"), Verdict::Unknown);
    }

    #[test]
    fn requests_are_checked() {
        assert!(Requested::parse("gfx9999").is_err());
        assert!(Requested::parse("sm_90").is_err());
        assert!(Requested::parse("gfx90a:xnack").is_err());
        assert!(Requested::parse("gfx90a:foo+").is_err());
        assert_eq!(Requested::parse("GFX90A:xnack+").unwrap().to_string(), "gfx90a:xnack+");
    }
}
