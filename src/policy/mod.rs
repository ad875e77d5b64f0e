//! manylinux and musllinux policies, in auditwheel's JSON schema
//! ([PEP 600](https://peps.python.org/pep-0600/), [PEP 656](https://peps.python.org/pep-0656/)).
//!
//! A policy names the symbol versions and libraries a wheel may take from the system. The policy
//! files are auditwheel's, embedded at build time (see `policies/README.md`).

pub mod claims;
pub mod disposition;
pub mod doctor;
pub mod gpus;
pub mod judgement;
pub mod problem;
pub mod verdict;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::platform::{Arch, Libc};
use crate::wheel::platform_tag::PlatformTag;

pub const MANYLINUX_JSON: &str = include_str!("../../policies/manylinux-policy.json");
pub const MUSLLINUX_JSON: &str = include_str!("../../policies/musllinux-policy.json");
pub const ANDROID_JSON: &str = include_str!("../../policies/android-policy.json");

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid policy file {origin}: {problem}")]
    Invalid { origin: String, problem: Box<InvalidPolicy> },
}

/// What is wrong with a policy file.
#[derive(Debug, thiserror::Error)]
pub enum InvalidPolicy {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("it has no `linux` policy with priority 0")]
    NoLinux,
    #[error("the whitelist of {newer} is not a superset of {older}'s")]
    Whitelist { newer: String, older: String },
    #[error("{newer} {arch} {prefix} lacks {missing}, which the more compatible {older} has")]
    SymbolVersions { newer: String, arch: String, prefix: String, missing: String, older: String },
}

/// One entry of a policy file, as written there.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyEntry {
    name: String,
    aliases: Vec<String>,
    priority: u32,
    symbol_versions: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    lib_whitelist: Vec<String>,
    blacklist: BTreeMap<String, Vec<String>>,
}

/// A policy for one architecture. Ex) `manylinux_2_17` for `x86_64`, alias `manylinux2014`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Without the architecture. Ex) `manylinux_2_17`; `linux` for the fallback.
    pub name: String,
    pub aliases: Vec<String>,
    /// Higher is more compatible; `linux` is 0.
    pub priority: u32,
    /// Prefix → full version names. Ex) `GLIBC` → {`GLIBC_2.2.5`, `GLIBC_2.3`, ...}
    pub symbol_versions: BTreeMap<String, BTreeSet<String>>,
    pub lib_whitelist: BTreeSet<String>,
    pub blacklist: BTreeMap<String, BTreeSet<String>>,
}

impl Policy {
    pub fn is_linux(&self) -> bool {
        self.priority == 0
    }

    /// The platform tag. Ex) `manylinux_2_17_x86_64`
    pub fn tag(&self, arch: Arch) -> String {
        format!("{}_{}", self.name, arch)
    }

    /// The tag and its aliases. Ex) [`manylinux_2_17_x86_64`, `manylinux2014_x86_64`]
    pub fn tags(&self, arch: Arch) -> Vec<PlatformTag> {
        std::iter::once(self.tag(arch))
            .chain(self.aliases.iter().map(|a| format!("{a}_{arch}")))
            .map(|t| PlatformTag::parse(&t))
            .collect()
    }

    /// Whether a versioned dependency (`GLIBC_2.28`) is allowed: its prefix is unknown to the
    /// policy (then it is not checked), or the version is in the policy's set for that prefix.
    pub fn allows_version(&self, version: &str) -> bool {
        let prefix = version_prefix(version);
        self.symbol_versions.get(prefix).is_none_or(|set| set.contains(version))
    }
}

/// The part of a version name before the first `_`. Ex) `GLIBCXX_3.4.21` → `GLIBCXX`
pub fn version_prefix(version: &str) -> &str {
    version.split_once('_').map_or(version, |(p, _)| p)
}

/// The policies for one architecture and libc, most compatible first, `linux` last. The
/// policies themselves are shared by every wheel of a run (a batch of thousands of wheels holds
/// one copy of their version sets).
#[derive(Debug, Clone)]
pub struct PolicySet {
    pub arch: Arch,
    pub libc: Libc,
    pub policies: Vec<Arc<Policy>>,
    /// Android: the wheel's own tag, which its policy is written as (auditwheel renames the
    /// policy with the highest API level not above the wheel's to the wheel's tag).
    pub own_tag: Option<PlatformTag>,
}

impl PolicySet {
    /// The non-`linux` policies, most compatible first.
    pub fn tagged(&self) -> impl Iterator<Item = &Policy> {
        self.policies.iter().map(|p| &**p).filter(|p| !p.is_linux())
    }

    pub fn linux(&self) -> &Policy {
        self.policies.last().expect("a policy set always ends with linux")
    }

    /// The tags of the policy at `index`, its aliases included. Ex) [`manylinux_2_17_x86_64`,
    /// `manylinux2014_x86_64`]; `linux_<arch>` for the fallback.
    pub fn tags(&self, index: usize) -> Vec<PlatformTag> {
        let policy = &self.policies[index];
        if policy.is_linux() {
            vec![self.linux_tag()]
        } else if let Some(own) = &self.own_tag {
            vec![own.clone()]
        } else {
            policy.tags(self.arch)
        }
    }

    /// The main tag of the policy at `index`, as text.
    pub fn tag(&self, index: usize) -> String {
        self.tags(index).swap_remove(0).to_string()
    }

    /// `linux_<arch>`: the tag of the fallback.
    pub fn linux_tag(&self) -> PlatformTag {
        PlatformTag::Linux { arch: self.arch.as_str().to_string() }
    }

    /// The policy a platform tag names, through its name or an alias. Ex) `manylinux2014_x86_64`
    pub fn by_tag(&self, tag: &PlatformTag) -> Option<&Policy> {
        if self.own_tag.as_ref() == Some(tag) {
            return self.policies.first().map(|p| &**p);
        }
        let text = tag.to_string();
        let base = text.strip_suffix(self.arch.as_str())?.strip_suffix('_')?;
        self.policies.iter().map(|p| &**p).find(|p| p.name == base || p.aliases.iter().any(|a| a == base))
    }

    /// The index of the policy a tag names (`linux_<arch>` included): the one rule for what a
    /// `--plat` or a claim refers to.
    pub fn index_of(&self, tag: &PlatformTag) -> Option<usize> {
        if *tag == self.linux_tag() {
            return Some(self.policies.len() - 1);
        }
        let policy = self.by_tag(tag)?;
        Some(self.policies.iter().position(|q| **q == *policy).unwrap_or(0))
    }

    /// Whether a wheel tagged `tags` installs everywhere the policy at `consumer` does: one of
    /// its tags is `any`, or names that policy or a more compatible one.
    pub fn installs_where(&self, tags: &[PlatformTag], consumer: usize) -> bool {
        tags.iter().any(|t| t.is_any())
            || tags.iter().filter_map(|t| self.index_of(t)).min().is_some_and(|b| b <= consumer)
    }
}

/// The policies of one architecture and libc, shared.
type SharedPolicies = Arc<Vec<Arc<Policy>>>;

/// Both policy files, parsed: the source of every [`PolicySet`].
#[derive(Debug, Clone)]
pub struct Policies {
    manylinux: Vec<PolicyEntry>,
    musllinux: Vec<PolicyEntry>,
    android: Vec<PolicyEntry>,
    /// The policies of each architecture and libc, made once.
    made: Arc<Mutex<HashMap<(Arch, Libc), SharedPolicies>>>,
}

impl Policies {
    /// The policies embedded in the binary.
    pub fn embedded() -> Self {
        Policies {
            manylinux: parse_file(MANYLINUX_JSON, "manylinux-policy.json (embedded)")
                .expect("embedded policy is valid"),
            musllinux: parse_file(MUSLLINUX_JSON, "musllinux-policy.json (embedded)")
                .expect("embedded policy is valid"),
            android: parse_file(ANDROID_JSON, "android-policy.json (embedded)").expect("embedded policy is valid"),
            made: Arc::default(),
        }
    }

    /// The embedded policies with some files replaced: each file replaces the embedded file of
    /// its family (decided by its policy names).
    pub fn with_files(files: &[impl AsRef<Path>]) -> Result<Self, PolicyError> {
        let mut policies = Self::embedded();
        for path in files {
            let path = path.as_ref();
            let origin = path.display().to_string();
            let text = crate::files::read_text_bounded(path, 64 << 20)
                .map_err(|source| PolicyError::Read { path: origin.clone(), source })?;
            let entries = parse_file(&text, &origin)?;
            if entries.iter().any(|e| e.name.starts_with("musllinux")) {
                policies.musllinux = entries;
            } else if entries.iter().any(|e| e.name.starts_with("android")) {
                policies.android = entries;
            } else {
                policies.manylinux = entries;
            }
        }
        policies.made = Arc::default();
        Ok(policies)
    }

    /// Whether some policy of any family lets the system provide `soname` (`libc.so.6`, `libz.so.1`).
    pub fn system_library(&self, soname: &str) -> bool {
        self.manylinux.iter().chain(&self.musllinux).any(|e| e.lib_whitelist.iter().any(|l| l == soname))
    }

    /// Whether `tag` names a policy (or `linux_<arch>`) of its architecture and libc.
    pub fn knows_tag(&self, tag: &str) -> bool {
        let parsed = PlatformTag::parse(tag);
        if parsed.is_linux() {
            return parsed.arch().is_some();
        }
        if tag.starts_with("android_") {
            // Android tags name their API level; the wheel's own policy judges them.
            return true;
        }
        match (parsed.arch(), parsed.libc()) {
            (Some(arch), Some(libc)) => self.for_platform(arch, libc, &[tag]).index_of(&parsed).is_some(),
            _ => false,
        }
    }

    /// The policies that exist for an architecture (a policy exists for an arch when its
    /// `symbol_versions` names the arch, or it is `linux`), most compatible first.
    ///
    /// musl has no symbol versions, so no binary can show which musllinux policy it meets. Like
    /// auditwheel on a host whose musl version it cannot read, only the newest musllinux policy
    /// is offered, unless `claims` (the wheel's tags, a requested `--plat`) name an older one:
    /// then every policy from that one on, since nothing disproves the claim.
    pub fn for_platform(&self, arch: Arch, libc: Libc, claims: &[&str]) -> PolicySet {
        let mut policies: Vec<Arc<Policy>> = self.made(arch, libc).as_ref().clone();
        if libc == Libc::Musl {
            let newest = policies.iter().filter(|p| !p.is_linux()).map(|p| p.priority).min();
            let claimed = policies
                .iter()
                .filter(|p| !p.is_linux() && claims.iter().any(|c| p.tags(arch).iter().any(|t| t.to_string() == *c)))
                .map(|p| p.priority)
                .max();
            let floor = claimed.max(newest);
            policies.retain(|p| p.is_linux() || floor.is_some_and(|f| p.priority <= f) && Some(p.priority) >= newest);
        }
        if libc == Libc::Glibc {
            for claim in claims {
                if let PlatformTag::Manylinux { major: 2, minor, arch: tag_arch } = PlatformTag::parse(claim)
                    && tag_arch == arch.as_str()
                    && let Some(derived) = derive_minor(&policies, minor)
                {
                    policies.push(Arc::new(derived));
                }
            }
        }
        policies.sort_by_key(|p| std::cmp::Reverse(p.priority));
        PolicySet { arch, libc, policies, own_tag: None }
    }

    /// The policies of the files for one architecture and libc (most compatible first), made
    /// once per run.
    fn made(&self, arch: Arch, libc: Libc) -> SharedPolicies {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.entry((arch, libc))
            .or_insert_with(|| {
                let entries = match libc {
                    Libc::Glibc => &self.manylinux,
                    Libc::Musl => &self.musllinux,
                    Libc::Android => &self.android,
                };
                let mut policies: Vec<Arc<Policy>> = entries
                    .iter()
                    .filter(|e| e.name == "linux" || e.symbol_versions.contains_key(arch.as_str()))
                    .map(|e| Arc::new(to_policy(e, arch, libc)))
                    .collect();
                policies.sort_by_key(|p| std::cmp::Reverse(p.priority));
                Arc::new(policies)
            })
            .clone()
    }

    /// The policies for an Android wheel tagged `android_<api>_<abi>`: the policy with the
    /// highest API level not above the wheel's, written as the wheel's own tag, then `linux`.
    pub fn for_android(&self, arch: Arch, wheel_tag: &str) -> Option<PolicySet> {
        let api: u32 = wheel_tag.strip_prefix("android_")?.split('_').next()?.parse().ok()?;
        let mut set = self.for_platform(arch, Libc::Android, &[]);
        let level = |p: &Policy| p.name.strip_prefix("android_").and_then(|n| n.parse::<u32>().ok());
        let best = set.policies.iter().filter(|p| level(p).is_some_and(|l| l <= api)).max_by_key(|p| level(p))?.clone();
        let linux = set.policies.last().expect("a policy set always ends with linux").clone();
        set.policies = vec![best, linux];
        set.own_tag = Some(PlatformTag::parse(wheel_tag));
        Some(set)
    }
}

/// A policy for `manylinux_2_<minor>`, a glibc minor PEP 600 allows but the policy files do not
/// list (`manylinux_2_25`, `manylinux_2_32`), from its neighbours: the GLIBC versions up to that
/// minor (of the next newer policy, which lists every version its glibc has), and everything
/// else of the next older policy — its other symbol versions, its library whitelist, its
/// blacklist — which a system of that glibc is sure to have. `None` when the minor is listed,
/// outside the files' range, or has no room between its neighbours' priorities.
fn derive_minor(policies: &[Arc<Policy>], minor: u32) -> Option<Policy> {
    let minor_of = |p: &Policy| p.name.strip_prefix("manylinux_2_").and_then(|m| m.parse::<u32>().ok());
    if policies.iter().any(|p| minor_of(p) == Some(minor)) {
        return None;
    }
    let older = policies.iter().filter(|p| minor_of(p).is_some_and(|m| m < minor)).max_by_key(|p| minor_of(p))?;
    let newer = policies.iter().filter(|p| minor_of(p).is_some_and(|m| m > minor)).min_by_key(|p| minor_of(p))?;
    let (lo, hi) = (minor_of(older)?, minor_of(newer)?);
    let span = u64::from(older.priority - newer.priority);
    let priority = newer.priority + (span * u64::from(hi - minor) / u64::from(hi - lo)) as u32;
    if priority <= newer.priority || priority >= older.priority {
        return None;
    }
    let glibc_minor = |v: &str| -> Option<u32> {
        let rest = v.strip_prefix("GLIBC_2.")?;
        rest.split('.').next()?.parse().ok().filter(|_| rest.split('.').all(|p| p.parse::<u32>().is_ok()))
    };
    let mut symbol_versions = older.symbol_versions.clone();
    let glibc = symbol_versions.entry("GLIBC".into()).or_default();
    for version in newer.symbol_versions.get("GLIBC").into_iter().flatten() {
        if glibc_minor(version).is_some_and(|m| m <= minor) {
            glibc.insert(version.clone());
        }
    }
    Some(Policy {
        name: format!("manylinux_2_{minor}"),
        aliases: Vec::new(),
        priority,
        symbol_versions,
        lib_whitelist: older.lib_whitelist.clone(),
        blacklist: older.blacklist.clone(),
    })
}

fn to_policy(entry: &PolicyEntry, arch: Arch, libc: Libc) -> Policy {
    let symbol_versions = entry
        .symbol_versions
        .get(arch.as_str())
        .map(|prefixes| {
            prefixes
                .iter()
                .map(|(prefix, versions)| (prefix.clone(), versions.iter().map(|v| format!("{prefix}_{v}")).collect()))
                .collect()
        })
        .unwrap_or_default();
    let lib_whitelist = entry
        .lib_whitelist
        .iter()
        .map(|lib| if libc == Libc::Musl && lib == "libc.so" { musl_libc_soname(arch) } else { lib.clone() })
        .collect();
    Policy {
        name: entry.name.clone(),
        aliases: entry.aliases.clone(),
        priority: entry.priority,
        symbol_versions,
        lib_whitelist,
        blacklist: entry.blacklist.iter().map(|(k, v)| (k.clone(), v.iter().cloned().collect())).collect(),
    }
}

/// musl's libc soname per architecture. Ex) i686 → `libc.musl-x86.so.1`
fn musl_libc_soname(arch: Arch) -> String {
    let name = match arch {
        Arch::I686 => "x86",
        Arch::Armv7l => "armv7",
        other => other.as_str(),
    };
    format!("libc.musl-{name}.so.1")
}

fn parse_file(text: &str, origin: &str) -> Result<Vec<PolicyEntry>, PolicyError> {
    let invalid =
        |problem: InvalidPolicy| PolicyError::Invalid { origin: origin.to_string(), problem: Box::new(problem) };
    let mut entries: Vec<PolicyEntry> = serde_json::from_str(text).map_err(|e| invalid(e.into()))?;
    if !entries.iter().any(|e| e.name == "linux" && e.priority == 0) {
        return Err(invalid(InvalidPolicy::NoLinux));
    }
    entries.sort_by_key(|e| std::cmp::Reverse(e.priority));
    validate_supersets(&entries).map_err(invalid)?;
    Ok(entries)
}

/// PEP 600 consistency, as auditwheel checks it: going from more to less compatible, every
/// whitelist and every per-arch, per-prefix version set must contain the previous one.
fn validate_supersets(entries: &[PolicyEntry]) -> Result<(), InvalidPolicy> {
    let tagged: Vec<&PolicyEntry> = entries.iter().filter(|e| e.priority != 0).collect();
    for pair in tagged.windows(2) {
        let (older, newer) = (pair[0], pair[1]);
        if !older.lib_whitelist.iter().all(|l| newer.lib_whitelist.contains(l)) {
            return Err(InvalidPolicy::Whitelist { newer: newer.name.clone(), older: older.name.clone() });
        }
        for (arch, prefixes) in &older.symbol_versions {
            let Some(newer_prefixes) = newer.symbol_versions.get(arch) else {
                continue;
            };
            for (prefix, versions) in prefixes {
                let newer_set =
                    newer_prefixes.get(prefix).map(|v| v.iter().collect::<BTreeSet<_>>()).unwrap_or_default();
                if let Some(missing) = versions.iter().find(|v| !newer_set.contains(v)) {
                    return Err(InvalidPolicy::SymbolVersions {
                        newer: newer.name.clone(),
                        arch: arch.clone(),
                        prefix: prefix.clone(),
                        missing: missing.clone(),
                        older: older.name.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_policies_load_for_every_arch() {
        let policies = Policies::embedded();
        let x86 = policies.for_platform(Arch::X86_64, Libc::Glibc, &[]);
        assert_eq!(x86.policies.first().unwrap().name, "manylinux_2_5");
        assert_eq!(x86.tagged().last().unwrap().name, "manylinux_2_41");
        assert!(x86.linux().is_linux());
        let riscv = policies.for_platform(Arch::Riscv64, Libc::Glibc, &[]);
        assert_eq!(riscv.policies.first().unwrap().name, "manylinux_2_31");
        let ppc64 = policies.for_platform(Arch::Ppc64, Libc::Glibc, &[]);
        assert_eq!(ppc64.tagged().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["manylinux_2_17"]);
        let musl = policies.for_platform(Arch::I686, Libc::Musl, &[]);
        assert_eq!(musl.policies.first().unwrap().name, "musllinux_1_2");
        assert!(musl.policies[0].lib_whitelist.contains("libc.musl-x86.so.1"));
        // A musllinux_1_1 claim cannot be disproved by symbol versions: it stays on offer.
        let claimed = policies.for_platform(Arch::I686, Libc::Musl, &["musllinux_1_1_i686"]);
        let names: Vec<&str> = claimed.policies.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["musllinux_1_1", "musllinux_1_2", "linux"]);
    }

    #[test]
    fn version_sets_have_gaps() {
        let set = Policies::embedded().for_platform(Arch::X86_64, Libc::Glibc, &[]);
        let p = set.by_tag(&PlatformTag::parse("manylinux_2_37_x86_64")).unwrap();
        assert!(!p.allows_version("GLIBC_2.37"));
        assert!(p.allows_version("GLIBC_2.36"));
        assert!(p.allows_version("OPENSSL_3.0.0"), "unknown prefixes are not checked");
        assert!(!p.allows_version("GLIBC_PRIVATE"));
        assert_eq!(set.by_tag(&PlatformTag::parse("manylinux2014_x86_64")).unwrap().name, "manylinux_2_17");
    }

    #[test]
    fn rejects_a_file_that_breaks_pep_600_supersets() {
        let text = r#"[{"name":"linux","aliases":[],"priority":0,"symbol_versions":{},"lib_whitelist":[],"blacklist":{}},
          {"name":"manylinux_2_5","aliases":[],"priority":100,"symbol_versions":{"x86_64":{"GLIBC":["2.5"]}},"lib_whitelist":["libc.so.6"],"blacklist":{}},
          {"name":"manylinux_2_12","aliases":[],"priority":90,"symbol_versions":{"x86_64":{"GLIBC":["2.12"]}},"lib_whitelist":["libc.so.6"],"blacklist":{}}]"#;
        let err = parse_file(text, "test.json").unwrap_err().to_string();
        assert!(err.contains("manylinux_2_12 x86_64 GLIBC lacks 2.5"), "{err}");
    }
}
