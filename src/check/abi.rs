//! One ROCm ABI per release set: the ROCm libraries a set's binaries link, by SONAME major,
//! must come from one ROCm release line, and the line its local labels name. A set labelled
//! `+rocm7.1.0` that holds a wheel linking `libamdhip64.so.6` and `librocblas.so.4` (built for
//! ROCm 6) installs with exit 0 and fails at import on a ROCm 7 host.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

const ROCM_ABI: &str = include_str!("../../policies/rocm-abi.json");

/// The ROCm release lines and the library majors each ships (`policies/rocm-abi.json`).
#[derive(Debug, Deserialize)]
pub struct AbiTable {
    lines: Vec<ReleaseLine>,
}

#[derive(Debug, Deserialize)]
struct ReleaseLine {
    /// The first release of the line. Ex) `7.0`
    from: String,
    /// Library file name without its version → SONAME major. Ex) `libamdhip64.so` → 7
    sonames: BTreeMap<String, u64>,
}

/// A ROCm library a binary links, split at its major. Ex) `libamdhip64.so.6` → (`libamdhip64.so`, 6)
pub fn split_soname(soname: &str) -> Option<(&str, u64)> {
    let at = soname.find(".so.")?;
    let (base, rest) = soname.split_at(at + 3);
    let major = rest.strip_prefix('.')?.split('.').next()?.parse().ok()?;
    Some((base, major))
}

impl AbiTable {
    /// The table wheelfix carries.
    pub fn builtin() -> &'static AbiTable {
        static TABLE: std::sync::OnceLock<AbiTable> = std::sync::OnceLock::new();
        TABLE
            .get_or_init(|| serde_json::from_str(ROCM_ABI).expect("policies/rocm-abi.json is a table of release lines"))
    }

    /// Whether the table judges this library. Ex) `libamdhip64.so.7` → true; `libz.so.1` → false
    pub fn knows(&self, soname: &str) -> bool {
        split_soname(soname).is_some_and(|(base, _)| self.lines.iter().any(|l| l.sonames.contains_key(base)))
    }

    /// The release lines (their `from` versions) that ship at least one of `sonames` and
    /// contradict none: each library the line lists is at the major it ships. Ex)
    /// {`libamdhip64.so.7`} → [`7.0`, `10.0`]; {`libhipblas.so.3`} → [`7.0`, `10.0`], not `5.0`,
    /// which lists no hipBLAS
    pub fn lines_shipping(&self, sonames: &BTreeSet<String>) -> Vec<&str> {
        let split: Vec<(&str, u64)> = sonames.iter().filter_map(|s| split_soname(s)).collect();
        self.lines
            .iter()
            .filter(|line| {
                split.iter().any(|(base, _)| line.sonames.contains_key(*base))
                    && split.iter().all(|(base, major)| line.sonames.get(*base).is_none_or(|m| m == major))
            })
            .map(|line| line.from.as_str())
            .collect()
    }

    /// A line's place in the table, oldest first.
    pub fn line_rank(&self, from: &str) -> usize {
        self.lines.iter().position(|l| l.from == from).unwrap_or(usize::MAX)
    }

    /// The line a ROCm release belongs to. Ex) [7, 1, 0] → `7.0`; [10, 1, 0] → `10.0`
    pub fn line_of(&self, release: &[u64]) -> Option<&str> {
        let key = |v: &str| v.split('.').map(|p| p.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
        self.lines
            .iter()
            .filter(|l| key(&l.from).as_slice() <= release)
            .max_by_key(|l| key(&l.from))
            .map(|l| l.from.as_str())
    }

    /// The library majors of one line, written for people. Ex) `libamdhip64.so.7, librocblas.so.5`
    pub fn describe(&self, from: &str, bases: &BTreeSet<&str>) -> String {
        let Some(line) = self.lines.iter().find(|l| l.from == from) else { return String::new() };
        line.sonames
            .iter()
            .filter(|(base, _)| bases.contains(base.as_str()))
            .map(|(base, major)| format!("{base}.{major}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Write a release line for people. Ex) `7.0` → `ROCm 7.x`
pub fn line_text(from: &str) -> String {
    format!("ROCm {}.x", from.split('.').next().unwrap_or(from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_loads_and_places_releases_and_libraries() {
        let t = AbiTable::builtin();
        assert_eq!(split_soname("libamdhip64.so.6.4.43482"), Some(("libamdhip64.so", 6)));
        assert_eq!(split_soname("libfoo.so"), None);
        assert!(t.knows("librocblas.so.4") && !t.knows("libz.so.1"));
        assert_eq!(t.line_of(&[7, 1, 0]), Some("7.0"));
        assert_eq!(t.line_of(&[10, 1, 0]), Some("10.0"));
        assert_eq!(t.line_of(&[6, 4]), Some("6.0"));
        assert_eq!(t.line_of(&[4, 5]), None);
        let six: BTreeSet<String> = ["libamdhip64.so.6".into(), "librocblas.so.4".into()].into();
        assert_eq!(t.lines_shipping(&six), vec!["6.0"]);
        let mixed: BTreeSet<String> = ["libamdhip64.so.7".into(), "librocblas.so.4".into()].into();
        assert!(t.lines_shipping(&mixed).is_empty());
        let seven: BTreeSet<String> = ["libamdhip64.so.7".into()].into();
        assert_eq!(t.lines_shipping(&seven), vec!["7.0", "10.0"]);
        let blas: BTreeSet<String> = ["libhipblas.so.3".into()].into();
        assert_eq!(t.lines_shipping(&blas), vec!["7.0", "10.0"], "not 5.x, which lists no hipBLAS");
    }
}
