//! The verdict: which policy a wheel meets, and why — a pure function of the facts about its
//! binaries and of the policies.
//!
//! The combination follows auditwheel (`wheel_abi.py`): each check yields the most compatible
//! policy it allows, and the wheel gets the least compatible of those. Policies are addressed by
//! their index in [`PolicySet::policies`]: 0 is the most compatible, the last is `linux`, so
//! "less compatible" means "larger index".

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::disposition::Disposition;
use super::{Policy, PolicySet};
use crate::analysis::Analysis;
use crate::elf::{ElfFacts, x86_isa_level};

/// One versioned dependency and the symbols that use it.
/// Ex) `cupy/cuda/cub.so` needs `GLIBCXX_3.4.21` from `libstdc++.so.6` for 3 symbols.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub file: String,
    pub library: String,
    pub version: String,
    pub symbols: Vec<String>,
    /// True when `file` is an external library that would be vendored, not a wheel member.
    pub external: bool,
}

/// Why a wheel does not meet one policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Blockers {
    pub policy: String,
    /// Versioned dependencies the policy does not allow.
    pub versions: Vec<Requirement>,
    /// External libraries the policy does not whitelist (they would have to be vendored).
    pub libs_to_eliminate: Vec<String>,
    /// Library → blacklisted symbols referenced.
    pub blacklisted_symbols: BTreeMap<String, Vec<String>>,
    /// Files that need an x86-64 micro-architecture level above the baseline.
    pub isa: Vec<String>,
    pub pyfpe: bool,
    pub ucs2: bool,
}

impl Blockers {
    /// One line that says the most important reason the policy is not met: the wheel's own
    /// symbol versions, then external libraries the policy does not allow (as the wheel is, they
    /// are the blocker; their own symbol versions matter only once repair vendors them), then
    /// those.
    pub fn summary(&self) -> String {
        let describe = |r: &Requirement| {
            let count = self.versions.iter().filter(|x| x.version == r.version && x.external == r.external).count();
            let more = if count > 1 { format!(" (and {} more files)", count - 1) } else { String::new() };
            let symbol = r.symbols.first().map(|s| format!(" for `{s}`")).unwrap_or_default();
            let which = if r.external { " (it would be vendored)" } else { "" };
            format!("`{}`{which} needs {}{symbol}{more}", r.file, r.version)
        };
        if let Some(r) = self.versions.iter().find(|r| !r.external) {
            return describe(r);
        }
        if let Some(lib) = self.libs_to_eliminate.first() {
            return format!(
                "it needs the external library {lib}, which the policy does not allow (repair would vendor it)"
            );
        }
        if let Some(r) = self.versions.first() {
            return describe(r);
        }
        if let Some((lib, syms)) = self.blacklisted_symbols.iter().next() {
            return format!("it references blacklisted symbols of {lib}: {}", syms.join(", "));
        }
        if let Some(file) = self.isa.first() {
            return format!("{file} needs an ISA extension beyond the baseline");
        }
        if self.pyfpe {
            return "it uses the PyFPE_jbuf function (PEP 513)".into();
        }
        if self.ucs2 {
            return "it is compiled against a narrow unicode (UCS2) Python".into();
        }
        "the policy is not met".into()
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
            && self.libs_to_eliminate.is_empty()
            && self.blacklisted_symbols.is_empty()
            && self.isa.is_empty()
            && !self.pyfpe
            && !self.ucs2
    }
}

/// The outcome, as policy indices into the set, plus the reasons.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// From symbol versions alone (auditwheel's `sym_tag`).
    pub symbol: usize,
    /// As the wheel is: symbols, external libraries, blacklist, ISA, PyFPE, UCS2.
    pub overall: usize,
    /// Ignoring external libraries that `repair` would vendor.
    pub repairable: usize,
    pub reference: usize,
    pub blacklist: usize,
    pub machine: usize,
    pub pyfpe: bool,
    pub ucs2: bool,
    /// Every versioned dependency of the wheel's binaries.
    pub requirements: Vec<Requirement>,
    /// External libraries that would be vendored for each policy, by policy index.
    pub grafted: Vec<BTreeSet<String>>,
}

/// Undefined symbols that make a Python extension incompatible with every tag (PEP 513).
const PYFPE_SYMBOLS: [&str; 3] = ["PyFPE_jbuf", "PyFPE_dummy", "PyFPE_counter"];

impl Verdict {
    pub fn compute(set: &PolicySet, input: &Analysis, disable_isa_check: bool) -> Verdict {
        let linux = set.policies.len() - 1;
        let grafted: Vec<BTreeSet<String>> = set.policies.iter().map(|p| grafted_libs(p, input)).collect();
        let requirements = wheel_requirements(input);

        // Symbols: per policy, the wheel's needs plus those of the libraries it would graft.
        let mut symbol = linux;
        let mut any_tagged = false;
        for (index, policy) in set.policies.iter().enumerate() {
            if policy.is_linux() {
                continue;
            }
            any_tagged = true;
            let needs = requirements_with_grafts(&requirements, &grafted[index], input);
            symbol = symbol.min(index.max(best_symbol_match(set, &needs)));
        }
        if !any_tagged {
            symbol = best_symbol_match(set, &requirements);
        }

        let reference = (0..linux).find(|&i| grafted[i].is_empty()).unwrap_or(linux);
        let blacklist = (0..linux).find(|&i| blacklist_hits(&set.policies[i], input).is_empty()).unwrap_or(linux);
        let machine = if disable_isa_check { 0 } else { machine_policy(set, input, &grafted) };
        let extension_uses = |pred: &dyn Fn(&str) -> bool| {
            input.binaries.iter().any(|b| b.is_extension && uses(input.binary(b).1, pred))
        };
        let pyfpe = extension_uses(&|n| PYFPE_SYMBOLS.contains(&n));
        let ucs2 = extension_uses(&|n| n.starts_with("PyUnicodeUCS2_"));
        let flags = if pyfpe || ucs2 { linux } else { 0 };
        let repairable = symbol.max(blacklist).max(machine).max(flags);
        Verdict {
            symbol,
            overall: repairable.max(reference),
            repairable,
            reference,
            blacklist,
            machine,
            pyfpe,
            ucs2,
            requirements,
            grafted,
        }
    }

    /// The dependencies that set the symbol verdict: those the next more compatible policy
    /// does not allow, newest first. Empty when the symbol verdict is the most compatible policy.
    pub fn constraints(&self, set: &PolicySet, input: &Analysis) -> Vec<Requirement> {
        if self.symbol == 0 {
            return Vec::new();
        }
        let next = self.symbol - 1;
        let needs = requirements_with_grafts(&self.requirements, &self.grafted[next], input);
        disallowed(set, next, &needs)
    }

    /// Everything that keeps the wheel from meeting the policy at `index`.
    pub fn blockers(&self, set: &PolicySet, input: &Analysis, index: usize) -> Blockers {
        let policy = &set.policies[index];
        let mut blockers = Blockers { policy: policy.name.clone(), ..Blockers::default() };
        if policy.is_linux() {
            return blockers;
        }
        let needs = requirements_with_grafts(&self.requirements, &self.grafted[index], input);
        blockers.versions = disallowed(set, index, &needs);
        blockers.libs_to_eliminate = self.grafted[index].iter().cloned().collect();
        blockers.blacklisted_symbols = blacklist_hits(policy, input);
        if index < self.machine {
            blockers.isa = isa_offenders(input, &self.grafted);
        }
        blockers.pyfpe = self.pyfpe;
        blockers.ucs2 = self.ucs2;
        blockers
    }
}

impl Verdict {
    /// The versioned dependencies behind [`Verdict::symbol`], as auditwheel reports them: the
    /// wheel's own plus those of the libraries vendored for the policy that decided it (auditwheel
    /// walks from the least compatible policy and keeps the first that gives the best result).
    pub fn deciding_requirements(&self, set: &PolicySet, input: &Analysis) -> Vec<Requirement> {
        for index in (0..set.policies.len()).rev().filter(|&i| !set.policies[i].is_linux()) {
            let needs = requirements_with_grafts(&self.requirements, &self.grafted[index], input);
            if index.max(best_symbol_match(set, &needs)) == self.symbol {
                return needs;
            }
        }
        self.requirements.clone()
    }
}

fn uses(facts: &ElfFacts, pred: &dyn Fn(&str) -> bool) -> bool {
    facts.undefined.iter().any(|s| pred(&s.name))
}

/// The external libraries a policy would have vendored: the closure of the binaries' external
/// needs through libraries that are neither whitelisted by the policy, nor excluded, nor
/// provided by another wheel (a dependency is never vendored, nor is what it needs).
fn grafted_libs(policy: &Policy, input: &Analysis) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if policy.is_linux() {
        return out;
    }
    let mut queue: Vec<&str> = input.external.values().filter(|l| l.direct).map(|l| l.soname.as_str()).collect();
    while let Some(soname) = queue.pop() {
        let Some(lib) = input.external.get(soname) else {
            continue;
        };
        if !Disposition::of(lib, policy).is_grafted() || !out.insert(soname.to_string()) {
            continue;
        }
        queue.extend(lib.needs.iter().map(String::as_str));
    }
    out
}

/// Every `(file, library, version)` the binaries need, with the symbols bound to it.
fn wheel_requirements(input: &Analysis) -> Vec<Requirement> {
    let mut out = Vec::new();
    for binary in &input.binaries {
        let (path, facts) = input.binary(binary);
        for need in &facts.version_needs {
            for version in &need.versions {
                let mut symbols: Vec<String> = facts
                    .undefined
                    .iter()
                    .filter(|s| s.version.as_deref() == Some(version) && s.library.as_deref() == Some(&need.file))
                    .map(|s| s.name.clone())
                    .collect();
                symbols.sort();
                symbols.dedup();
                out.push(Requirement {
                    file: path.to_string(),
                    library: need.file.clone(),
                    version: version.clone(),
                    symbols,
                    external: false,
                });
            }
        }
    }
    // Libraries other wheels provide count as the wheel's own needs, under every policy: the
    // wheel only works on systems where they work.
    for lib in input.external.values() {
        let Some(provider) = &lib.provided_by else { continue };
        for need in &lib.version_needs {
            for version in &need.versions {
                out.push(Requirement {
                    file: format!("{}:{}", provider.wheel, provider.path),
                    library: need.file.clone(),
                    version: version.clone(),
                    symbols: Vec::new(),
                    external: true,
                });
            }
        }
    }
    out
}

fn requirements_with_grafts(wheel: &[Requirement], grafted: &BTreeSet<String>, input: &Analysis) -> Vec<Requirement> {
    let mut all = wheel.to_vec();
    for soname in grafted {
        let Some(lib) = input.external.get(soname) else {
            continue;
        };
        let file = lib.path.clone().unwrap_or_else(|| soname.clone());
        for need in &lib.version_needs {
            for version in &need.versions {
                all.push(Requirement {
                    file: file.clone(),
                    library: need.file.clone(),
                    version: version.clone(),
                    symbols: Vec::new(),
                    external: true,
                });
            }
        }
    }
    all
}

/// The most compatible policy whose version sets allow every requirement (auditwheel's
/// `versioned_symbols_policy`); `linux` always matches.
fn best_symbol_match(set: &PolicySet, needs: &[Requirement]) -> usize {
    set.policies
        .iter()
        .position(|p| needs.iter().all(|r| p.allows_version(&r.version)))
        .unwrap_or(set.policies.len() - 1)
}

/// Requirements the policy at `index` does not allow, most constraining first: those no policy
/// allows, then by the first policy that allows them (newest first), then by version and file.
fn disallowed(set: &PolicySet, index: usize, needs: &[Requirement]) -> Vec<Requirement> {
    let policy = &set.policies[index];
    let first_allowing = |v: &str| set.tagged().position(|p| p.allows_version(v)).unwrap_or(usize::MAX);
    let mut out: Vec<(usize, Requirement)> = needs
        .iter()
        .filter(|r| !policy.allows_version(&r.version))
        .map(|r| (first_allowing(&r.version), r.clone()))
        .collect();
    out.sort_by(|(ia, a), (ib, b)| {
        ib.cmp(ia)
            .then_with(|| compare_versions(&b.version, &a.version))
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.library.cmp(&b.library))
    });
    out.into_iter().map(|(_, r)| r).collect()
}

/// Symbol-version order: prefix, then numeric components. Ex) `GLIBC_2.9` < `GLIBC_2.17`
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    /// A component: numbers in numeric order, before any text. (Variant order is the order.)
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Part<'a> {
        Number(u64),
        Text(&'a str),
    }
    fn split(v: &str) -> (&str, Vec<Part<'_>>) {
        let (prefix, rest) = v.split_once('_').unwrap_or((v, ""));
        (prefix, rest.split('.').map(|p| p.parse().map_or(Part::Text(p), Part::Number)).collect())
    }
    let (pa, na) = split(a);
    let (pb, nb) = split(b);
    // Component by component, then the shorter first: a Vec's own order.
    pa.cmp(pb).then_with(|| na.cmp(&nb))
}

/// Library → blacklisted symbols the wheel's binaries reference (undefined, not weak).
fn blacklist_hits(policy: &Policy, input: &Analysis) -> BTreeMap<String, Vec<String>> {
    let mut hits: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for binary in &input.binaries {
        let facts = input.binary(binary).1;
        for (lib, symbols) in &policy.blacklist {
            if !facts.needed.contains(lib) {
                continue;
            }
            for sym in facts.undefined.iter().filter(|s| !s.weak) {
                if symbols.contains("*") || symbols.contains(&sym.name) {
                    hits.entry(lib.clone()).or_default().insert(sym.name.clone());
                }
            }
        }
    }
    hits.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect()
}

fn needs_isa_extension(bits: Option<u32>) -> bool {
    bits.is_some_and(|b| x86_isa_level(b) > 1)
}

/// auditwheel's machine check (x86-64 only): a binary of the wheel that needs more than the
/// baseline ISA makes it `linux`; a library that would be grafted does too, unless some policy
/// whitelists it (then the most compatible such policy).
fn machine_policy(set: &PolicySet, input: &Analysis, grafted: &[BTreeSet<String>]) -> usize {
    let linux = set.policies.len() - 1;
    if set.arch != crate::platform::Arch::X86_64 {
        return 0;
    }
    if input.binaries.iter().any(|b| needs_isa_extension(input.binary(b).1.x86_isa_needed)) {
        return linux;
    }
    let mut result = 0;
    let candidates: BTreeSet<&String> = grafted.iter().flatten().collect();
    for soname in candidates {
        let Some(lib) = input.external.get(soname) else {
            continue;
        };
        if lib.path.is_none() || !needs_isa_extension(lib.x86_isa_needed) {
            continue;
        }
        let whitelisted_by = set.tagged().position(|p| p.lib_whitelist.contains(soname));
        result = result.max(whitelisted_by.unwrap_or(linux));
    }
    result
}

fn isa_offenders(input: &Analysis, grafted: &[BTreeSet<String>]) -> Vec<String> {
    let mut out: Vec<String> = input
        .binaries
        .iter()
        .map(|b| input.binary(b))
        .filter(|(_, f)| needs_isa_extension(f.x86_isa_needed))
        .map(|(path, f)| format!("{path} (x86-64-v{})", x86_isa_level(f.x86_isa_needed.unwrap_or(0))))
        .collect();
    let candidates: BTreeSet<&String> = grafted.iter().flatten().collect();
    for soname in candidates {
        if let Some(lib) = input.external.get(soname)
            && needs_isa_extension(lib.x86_isa_needed)
        {
            out.push(format!("{soname} (x86-64-v{})", x86_isa_level(lib.x86_isa_needed.unwrap_or(0))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::UndefinedSymbol;
    use crate::policy::judgement::Judged;
    use crate::testing::{analysis, elf, external, judge};

    fn tag(j: &Judged, index: usize) -> String {
        j.tag(index).to_string()
    }

    #[test]
    fn the_newest_symbol_version_sets_the_tag() {
        let a =
            analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.17"), ("libc.so.6", "GLIBC_2.2.5")]))], vec![]);
        let j = judge(&a);
        assert_eq!(tag(&j, j.verdict.symbol), "manylinux_2_17_x86_64");
        assert_eq!(tag(&j, j.verdict.overall), "manylinux_2_17_x86_64");
        let c = j.verdict.constraints(&j.set, &a);
        assert_eq!((c[0].file.as_str(), c[0].version.as_str()), ("pkg/_core.so", "GLIBC_2.17"));
        // A version no policy lists (gaps and unknown versions of known prefixes): linux.
        let a = analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.43")]))], vec![]);
        let j = judge(&a);
        assert_eq!(j.verdict.symbol, j.linux());
        // Unknown prefixes are not checked.
        let a = analysis(vec![("pkg/_core.so", elf(&[("libssl.so.3", "OPENSSL_3.0.0")]))], vec![]);
        assert_eq!(tag(&judge(&a), 0), "manylinux_2_5_x86_64");
        assert_eq!(judge(&a).verdict.overall, 0);
    }

    #[test]
    fn an_external_library_blocks_every_tag_until_it_is_vendored() {
        let lib = external("libfoo.so.1", Some("/usr/lib/libfoo.so.1"), &[("libc.so.6", "GLIBC_2.28")]);
        let a =
            analysis(vec![("pkg/_core.so", elf(&[("libfoo.so.1", "FOO_1"), ("libc.so.6", "GLIBC_2.17")]))], vec![lib]);
        let j = judge(&a);
        assert_eq!(j.verdict.overall, j.linux(), "as it is: the library is not allowed");
        // Vendored, its own GLIBC_2.28 counts (auditwheel counts a grafted library's versions).
        assert_eq!(tag(&j, j.verdict.repairable), "manylinux_2_28_x86_64");
        assert_eq!(tag(&j, j.verdict.symbol), "manylinux_2_28_x86_64");
        let b = j.verdict.blockers(&j.set, &a, 0);
        assert_eq!(b.libs_to_eliminate, ["libfoo.so.1"]);
        assert_eq!(j.repair_target(None), j.verdict.repairable);
    }

    #[test]
    fn excluded_libraries_never_block_and_whitelisted_ones_are_allowed() {
        let mut rocm = external("libamdhip64.so.7", None, &[]);
        rocm.excluded = Some("ROCm library".into());
        let mut libstdcxx = external("libstdc++.so.6", Some("/usr/lib/libstdc++.so.6"), &[]);
        libstdcxx.needs = vec![];
        let a = analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.17")]))], vec![rocm, libstdcxx]);
        let j = judge(&a);
        assert_eq!(tag(&j, j.verdict.overall), "manylinux_2_17_x86_64");
        assert!(j.verdict.grafted.iter().all(|g| g.is_empty()));
    }

    #[test]
    fn blacklisted_symbols_count_unless_weak_and_isa_levels_above_the_baseline_are_linux() {
        let mut facts = elf(&[("libz.so.1", "ZLIB_1.2.0")]);
        facts.undefined.push(UndefinedSymbol { name: "zcalloc".into(), version: None, library: None, weak: false });
        let a = analysis(vec![("pkg/_core.so", facts.clone())], vec![]);
        let j = judge(&a);
        assert_eq!(j.verdict.blacklist, j.linux());
        facts.undefined.last_mut().unwrap().weak = true;
        let j = judge(&analysis(vec![("pkg/_core.so", facts)], vec![]));
        assert_eq!(j.verdict.blacklist, 0);
        let mut v3 = elf(&[]);
        v3.x86_isa_needed = Some(1 << 2);
        let j = judge(&analysis(vec![("pkg/_core.so", v3)], vec![]));
        assert_eq!(j.verdict.machine, j.linux());
        assert_eq!(j.verdict.overall, j.linux());
    }

    #[test]
    fn pyfpe_in_an_extension_is_linux() {
        let mut facts = elf(&[]);
        facts.undefined.push(UndefinedSymbol { name: "PyFPE_jbuf".into(), version: None, library: None, weak: false });
        facts.init_functions.push("PyInit__core".into());
        let j = judge(&analysis(vec![("pkg/_core.so", facts)], vec![]));
        assert!(j.verdict.pyfpe);
        assert_eq!(j.verdict.overall, j.linux());
    }

    #[test]
    fn compares_versions_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("GLIBC_2.9", "GLIBC_2.17"), Less);
        assert_eq!(compare_versions("GLIBCXX_3.4.21", "GLIBCXX_3.4"), Greater);
        assert_eq!(compare_versions("GLIBC_2.17", "GLIBC_PRIVATE"), Less);
    }
}
