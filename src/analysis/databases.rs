//! Kernel databases: files that hold one GPU target's kernels by their install path (Tensile's
//! `rocblas/library/TensileLibrary_gfx942.co`, MIOpen's `miopen/db/gfx942130.kdb`, AOTriton's
//! `aotriton.images/amd-gfx942/…`), as the rules of `policies/kernel-databases.json` (kpack's
//! handlers' rules, as data) name them. `split` moves them into the device wheel of their
//! target, `thin --prune-files` drops other targets', `show` counts their bytes per target.
//! A file no rule matches stays where it is. A family directory (`amd-gfx11xx`, `gfx120x`)
//! names no processor ([`family_database`]): `split` moves it only into a device wheel that
//! takes its whole family.

use std::sync::OnceLock;

use serde::Deserialize;

use crate::gpu::targets::is_known_processor;

const RULES_JSON: &str = include_str!("../../policies/kernel-databases.json");

#[derive(Debug, Deserialize)]
struct Rules {
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    library: String,
    #[serde(default)]
    under: Option<String>,
    #[serde(default)]
    prefixes: Vec<String>,
    #[serde(default)]
    suffixes: Vec<String>,
    target: Where,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Where {
    Name,
    Directory,
    NameOrDirectory,
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Rules> = OnceLock::new();
    &RULES.get_or_init(|| serde_json::from_str(RULES_JSON).expect("policies/kernel-databases.json parses")).rules
}

/// A kernel database file: the library it belongs to and the processor it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    pub library: &'static str,
    /// Its processor. Ex) `gfx942`
    pub target: crate::gpu::TargetId,
}

/// The kernel database a file installed at `path` is, if a rule names it and its target is one
/// processor (a family directory, `gfx11xx`, is none).
pub fn database(path: &str) -> Option<Database> {
    match find(path)? {
        (library, Named::Processor(target)) => {
            Some(Database { library, target: crate::gpu::TargetId::from_code(target) })
        }
        (_, Named::Family(_)) => None,
    }
}

/// The library and family of a kernel database file in a family directory. Ex)
/// `torch/lib/aotriton.images/amd-gfx11xx/flash/k.aks2` → (`aotriton`, `gfx11xx`)
pub fn family_database(path: &str) -> Option<(&'static str, String)> {
    match find(path)? {
        (library, Named::Family(family)) => Some((library, family)),
        (_, Named::Processor(_)) => None,
    }
}

/// Whether `processor` is of `family` (`gfx11xx`: the processors of `gfx11` and two more
/// characters). Ex) (`gfx1101`, `gfx11xx`) → true; (`gfx1151`, `gfx110x`) → false
pub fn in_family(processor: &str, family: &str) -> bool {
    let stem = family.trim_end_matches('x');
    processor.len() == family.len() && processor.starts_with(stem) && !processor.contains('-')
}

/// What a rule finds a file is for.
enum Named {
    Processor(String),
    /// A family directory. Ex) `gfx11xx`
    Family(String),
}

fn find(path: &str) -> Option<(&'static str, Named)> {
    let name = path.rsplit('/').next().unwrap_or(path);
    for rule in rules() {
        if !rule.suffixes.is_empty() && !rule.suffixes.iter().any(|s| name.ends_with(s.as_str())) {
            continue;
        }
        if !rule.prefixes.is_empty() && !rule.prefixes.iter().any(|p| name.starts_with(p.as_str())) {
            continue;
        }
        let below = match &rule.under {
            Some(under) => match segment_end(path, under) {
                Some(at) => Some(&path[at..]),
                None => continue,
            },
            None => None,
        };
        let from_name = || processor_in_name(name).map(Named::Processor);
        let from_dir = || below.and_then(target_in_directories);
        let target = match rule.target {
            Where::Name => from_name(),
            Where::Directory => from_dir(),
            Where::NameOrDirectory => from_name().or_else(from_dir),
        };
        // A rule that matches names the file's library, target or not: the first rule decides.
        return target.map(|target| (rule.library.as_str(), target));
    }
    None
}

/// Where `under` ends in `path`, when it starts a path segment. Ex) (`p/lib/rocblas/library/x`,
/// `rocblas/library/`) → the offset of `x`
fn segment_end(path: &str, under: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = path[from..].find(under) {
        let at = from + i;
        if at == 0 || path.as_bytes()[at - 1] == b'/' {
            return Some(at + under.len());
        }
        from = at + 1;
    }
    None
}

/// The first processor LLVM knows named in a file name: at each `gfx`, the longest known
/// processor (MIOpen writes the CU count right after it: `gfx90878` is gfx908 with 78 CUs).
fn processor_in_name(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("gfx") {
        let at = from + i;
        let rest = &lower[at..];
        let longest = rest.char_indices().map(|(k, c)| k + c.len_utf8()).take(12).collect::<Vec<_>>();
        for end in longest.into_iter().rev() {
            let candidate = &rest[..end];
            if is_known_processor(candidate) {
                return Some(candidate.to_string());
            }
        }
        from = at + 3;
    }
    None
}

/// The first directory beneath an anchor that names a processor, `gfx942` or `gfx90a-xnack+`
/// (Tensile's spelling), or a family, `gfx11xx` or `gfx120x`.
fn target_in_directories(below: &str) -> Option<Named> {
    let mut parts: Vec<&str> = below.split('/').collect();
    parts.pop(); // the file name
    let dir = parts.into_iter().find(|p| p.starts_with("gfx"))?;
    let processor = dir.split('-').next().unwrap_or(dir);
    if is_known_processor(processor) {
        return Some(Named::Processor(processor.to_string()));
    }
    // A family: digits, then one or more `x` for the rest of a processor's name.
    let digits = &processor[3..];
    let stem = digits.trim_end_matches('x');
    let family = !stem.is_empty()
        && stem.len() < digits.len()
        && (3..=4).contains(&digits.len())
        && stem.chars().all(|c| c.is_ascii_digit());
    family.then(|| Named::Family(processor.to_string()))
}

/// A wheel's kernel database files, by the processor they are for: files and bytes.
pub fn by_target(wheel: &crate::wheel::Wheel) -> std::collections::BTreeMap<String, crate::gpu::Count> {
    let mut found: std::collections::BTreeMap<String, crate::gpu::Count> = Default::default();
    for (member, db) in in_wheel(wheel) {
        found.entry(db.target.to_string()).or_default().add(member.size);
    }
    found
}

/// Every kernel database file of a wheel, by its member.
pub fn in_wheel(wheel: &crate::wheel::Wheel) -> Vec<(&crate::wheel::archive::Member, Database)> {
    wheel
        .archive
        .members()
        .iter()
        .filter(|m| !m.is_dir())
        .filter_map(|m| Some((m, database(&wheel.install_path(&m.name)?)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Option<String> {
        database(path).map(|d| d.target.to_string())
    }

    #[test]
    fn kpacks_naming_rules() {
        assert_eq!(target("torch/lib/rocblas/library/TensileLibrary_gfx942.co").as_deref(), Some("gfx942"));
        assert_eq!(target("torch/lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco").as_deref(), Some("gfx90a"));
        assert_eq!(target("torch/lib/hipblaslt/library/gfx950/TensileManifest.txt"), None, "not a Tensile extension");
        assert_eq!(target("torch/lib/hipblaslt/library/gfx950/Fallback.dat").as_deref(), Some("gfx950"));
        assert_eq!(target("torch/lib/rocblas/library/TensileLibrary_fallback.dat"), None, "no target: the host's");
        assert_eq!(target("torch/share/miopen/db/gfx942130.kdb").as_deref(), Some("gfx942"));
        assert_eq!(target("torch/share/miopen/db/gfx90878.HIP.fdb.txt").as_deref(), Some("gfx908"));
        assert_eq!(target("torch/share/miopen/db/gfx1030_36.db.txt").as_deref(), Some("gfx1030"));
        assert_eq!(target("torch/share/miopen/db/gfx908_ConvAsm1x1U_decoder.ktn.model").as_deref(), Some("gfx908"));
        assert_eq!(target("torch/lib/libMIOpenCKGroupedConv_gfx1201.so").as_deref(), Some("gfx1201"));
        assert_eq!(target("x/lib/libdevice_conv_operations_gfx950_xnackp.a").as_deref(), Some("gfx950"));
        assert_eq!(target("x/lib/libdevice_conv_operations.a"), None);
        assert_eq!(target("torch/lib/aotriton.images/amd-gfx942/flash/attn_fwd/k.aks2").as_deref(), Some("gfx942"));
        assert_eq!(target("torch/lib/aotriton.images/amd-gfx11xx/flash/k.aks2"), None, "a family is no processor");
        let family = |p: &str| family_database(p).map(|(_, f)| f);
        assert_eq!(family("torch/lib/aotriton.images/amd-gfx11xx/flash/k.aks2").as_deref(), Some("gfx11xx"));
        assert_eq!(family("torch/lib/aotriton.images/amd-gfx120x/k.aks2").as_deref(), Some("gfx120x"));
        assert_eq!(family("torch/lib/aotriton.images/amd-gfx942/k.aks2"), None);
        assert_eq!(family("torch/lib/aotriton.images/amd-gfxyz/k.aks2"), None);
        assert!(in_family("gfx1101", "gfx11xx") && in_family("gfx1151", "gfx11xx"));
        assert!(in_family("gfx1201", "gfx120x") && !in_family("gfx1151", "gfx110x"));
        assert!(!in_family("gfx90a", "gfx11xx") && !in_family("gfx9-4-generic", "gfx9xx"));
        assert_eq!(target("r/lib/hipdnn_plugins/engines/arch_content/rocke/gfx1100/k.bin").as_deref(), Some("gfx1100"));
        assert_eq!(target("torch/lib/librocblas.so.5"), None);
        assert_eq!(target("notrocblas/library/TensileLibrary_gfx942.co"), None, "segments, not substrings");
    }
}
