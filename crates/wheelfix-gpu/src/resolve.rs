//! How ROCm's kpack runtime finds a split binary's code object for a GPU (rocm-systems
//! `shared/kpack/runtime/src/loader.cpp`, `kpack_load_code_object`), written once for every
//! command that asks: `split` proves with it that each wrapper of the hosts it writes finds its
//! code in the archives it writes, `check` that a set's extras install what the hosts look for,
//! `doctor` that an environment holds what its binaries will load.
//!
//! The runtime's steps, for a wrapper of index `i` whose marker says `{kernel_name,
//! kpack_search_paths}`:
//! 1. the key is `<kernel_name>#<i>`;
//! 2. each search path, relative to the binary's directory, with `@GFXARCH@` expanded to every
//!    target ID compatible with the agent, most specific first
//!    ([`TargetId::compatible_targets`]), names a candidate archive; those that exist are opened;
//! 3. for each compatible target, most specific first, each open archive that holds code for
//!    that target ID is asked for the key; the first that has it serves the code object.
//!
//! The agent's ISAs are its own target ID, then the generic processor's that covers it (a
//! generic code object runs there: LLVM's AMDGPUUsage, "Generic processors"). Paths here are
//! `/`-separated and relative to one root (site-packages, or a wheel's install tree); a search
//! path that is absolute, or that climbs above the root, names no archive under it.

use std::collections::BTreeMap;

use crate::TargetId;
use crate::kpack::GFXARCH;
use crate::targets::{Feature, generic_of, supported_features};

/// A kpack archive's table of contents: each key, and the target IDs it holds code for.
pub type Toc = BTreeMap<String, Vec<TargetId>>;

/// A split binary's marker, where the binary lies: what the runtime starts from.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The binary's path under the root. Ex) `torch/lib/libtorch_hip.so`
    pub binary: &'a str,
    /// The marker's `kernel_name`. Ex) `lib/libtorch_hip.so`
    pub kernel_name: &'a str,
    /// The marker's `kpack_search_paths`. Ex) `../.kpack/torch_@GFXARCH@.kpack`
    pub search_paths: &'a [String],
}

/// Where the runtime finds one wrapper's code object for an agent, or why it finds none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The archive that serves it, and the target ID it is filed under there.
    Found { archive: String, target: TargetId },
    /// No archive the search paths name exists (`KPACK_ERROR_ARCHIVE_NOT_FOUND`): the paths
    /// looked at, most specific first.
    NoArchive { looked_for: Vec<String> },
    /// Archives exist, and none holds the key for a target the agent runs: the archives read.
    NoCode { key: String, archives: Vec<String> },
}

impl Resolution {
    pub fn found(&self) -> bool {
        matches!(self, Resolution::Found { .. })
    }
}

/// The TOC key of wrapper `index` of a binary whose kernel name is `kernel_name`.
/// Ex) (`lib/k.so`, 1) → `lib/k.so#1`
pub fn key(kernel_name: &str, index: usize) -> String {
    format!("{kernel_name}#{index}")
}

/// The ISAs the runtime asks kpack for on a device of target ID `agent`: its own, then the
/// generic processor's that covers its processor, with the settings of the features the generic
/// processor has. Ex) `gfx942:sramecc+:xnack-` → itself, `gfx9-4-generic:sramecc+:xnack-`
pub fn agent_isas(agent: &TargetId) -> Vec<TargetId> {
    let mut isas = vec![agent.clone()];
    if let Some(generic) = generic_of(agent.processor()) {
        let has = supported_features(generic);
        let features = agent.features().filter(|f| has.contains(&f.name)).collect::<Vec<Feature<'_>>>();
        isas.push(TargetId::of(generic, features));
    }
    isas
}

/// The target IDs a device of `processor` reports: one per setting of each target feature it
/// supports (a device is always in one mode). Ex) `gfx90a` → `gfx90a:sramecc+:xnack+`, …
/// (four); `gfx1100` → `gfx1100`
pub fn device_modes(processor: &str) -> Vec<TargetId> {
    let features = supported_features(processor);
    (0..1u32 << features.len())
        .map(|mask| {
            let settings = features.iter().enumerate().map(|(i, name)| Feature { name, on: mask & (1 << i) != 0 });
            TargetId::of(processor, settings)
        })
        .collect()
}

/// The device modes a target ID a person or a machine names allows: every mode of its
/// processor with the settings it gives (a setting it does not give, either way). A device's
/// own target ID gives them all: itself. Ex) `gfx942:xnack-` → `gfx942:sramecc-:xnack-`,
/// `gfx942:sramecc+:xnack-`
pub fn modes_of(target: &TargetId) -> Vec<TargetId> {
    let given: Vec<Feature<'_>> = target.features().collect();
    let modes: Vec<TargetId> = device_modes(target.processor())
        .into_iter()
        .filter(|mode| given.iter().all(|g| mode.features().any(|f| f == *g)))
        .collect();
    if modes.is_empty() { vec![target.clone()] } else { modes }
}

impl Lookup<'_> {
    /// The archive paths the runtime tries for `agent`, in its order, each once.
    /// Ex) (`p/lib/_k.so`, [`../.kpack/k_@GFXARCH@.kpack`], `gfx90a:xnack+`) →
    /// [`p/.kpack/k_gfx90a:xnack+.kpack`, `p/.kpack/k_gfx90a.kpack`]
    pub fn archive_paths(&self, agent: &TargetId) -> Vec<String> {
        let targets: Vec<TargetId> = agent_isas(agent).iter().flat_map(TargetId::compatible_targets).collect();
        let mut paths: Vec<String> = Vec::new();
        for pattern in self.search_paths {
            let expanded: Vec<String> = if pattern.contains(GFXARCH) {
                targets.iter().map(|t| pattern.replace(GFXARCH, t.as_str())).collect()
            } else {
                vec![pattern.clone()]
            };
            for path in expanded.iter().filter_map(|p| under_root(self.binary, p)) {
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        paths
    }

    /// The archive paths its search paths name with `@GFXARCH@` as `name` (one target ID),
    /// in their order. Ex) (`p/lib/_k.so`, [`../.kpack/k_@GFXARCH@.kpack`], `gfx942`) →
    /// [`p/.kpack/k_gfx942.kpack`]
    pub fn paths_named(&self, name: &str) -> Vec<String> {
        self.search_paths.iter().filter_map(|p| under_root(self.binary, &p.replace(GFXARCH, name))).collect()
    }

    /// Where wrapper `index`'s code object for `agent` is found, among the archives `archives`
    /// gives the table of contents of (by path; `None`: no archive there).
    pub fn resolve<'t>(
        &self,
        index: usize,
        agent: &TargetId,
        archives: impl Fn(&str) -> Option<&'t Toc>,
    ) -> Resolution {
        let key = key(self.kernel_name, index);
        let paths = self.archive_paths(agent);
        let open: Vec<(&String, &Toc)> = paths.iter().filter_map(|p| Some((p, archives(p)?))).collect();
        if open.is_empty() {
            return Resolution::NoArchive { looked_for: paths };
        }
        for isa in agent_isas(agent) {
            for target in isa.compatible_targets() {
                for (path, toc) in &open {
                    if toc.get(&key).is_some_and(|targets| targets.contains(&target)) {
                        return Resolution::Found { archive: (*path).clone(), target };
                    }
                }
            }
        }
        Resolution::NoCode { key, archives: open.into_iter().map(|(p, _)| p.clone()).collect() }
    }
}

/// A search path (after expansion) as a path under the root, joined to the binary's directory;
/// `None` for an absolute path or one that climbs above the root.
fn under_root(binary: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let dir = binary.rsplit_once('/').map_or("", |(d, _)| d);
    wheelfix_base::paths::normalize_path(&wheelfix_base::paths::join_path(dir, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> TargetId {
        TargetId::from_code(text)
    }

    fn toc(entries: &[(&str, &[&str])]) -> Toc {
        entries.iter().map(|(k, ts)| (k.to_string(), ts.iter().map(|t| id(t)).collect())).collect()
    }

    #[test]
    fn archive_paths_follow_the_binary_and_the_agents_compatible_targets() {
        let search = vec!["../.kpack/k_@GFXARCH@.kpack".to_string(), "/opt/rocm/x.kpack".to_string()];
        let lookup = Lookup { binary: "p/lib/_k.so", kernel_name: "p/lib/_k.so", search_paths: &search };
        assert_eq!(
            lookup.archive_paths(&id("gfx90a:xnack+")),
            ["p/.kpack/k_gfx90a:xnack+.kpack", "p/.kpack/k_gfx90a.kpack"]
        );
        assert_eq!(
            lookup.archive_paths(&id("gfx942:sramecc+:xnack-")),
            [
                "p/.kpack/k_gfx942:sramecc+:xnack-.kpack",
                "p/.kpack/k_gfx942:sramecc+.kpack",
                "p/.kpack/k_gfx942:xnack-.kpack",
                "p/.kpack/k_gfx942.kpack",
                "p/.kpack/k_gfx9-4-generic:sramecc+:xnack-.kpack",
                "p/.kpack/k_gfx9-4-generic:sramecc+.kpack",
                "p/.kpack/k_gfx9-4-generic:xnack-.kpack",
                "p/.kpack/k_gfx9-4-generic.kpack",
            ]
        );
        let top = Lookup { binary: "_k.so", kernel_name: "_k.so", search_paths: &search };
        assert!(top.archive_paths(&id("gfx1100")).is_empty(), "above the root");
        assert_eq!(lookup.paths_named("gfx942"), ["p/.kpack/k_gfx942.kpack"]);
        let here = vec!["./k.kpack".to_string()];
        assert_eq!(
            Lookup { binary: "a/b.so", kernel_name: "", search_paths: &here }.paths_named("gfx950"),
            ["a/k.kpack"]
        );
    }

    #[test]
    fn the_most_specific_target_of_an_archive_that_has_the_key_serves_it() {
        let search = vec![".kpack/k_@GFXARCH@.kpack".to_string()];
        let lookup = Lookup { binary: "p/k.so", kernel_name: "p/k.so", search_paths: &search };
        let bare = toc(&[("p/k.so#0", &["gfx90a:xnack-", "gfx90a:xnack+"]), ("p/k.so#1", &["gfx90a"])]);
        let archives = |path: &str| (path == "p/.kpack/k_gfx90a.kpack").then_some(&bare);
        let agent = id("gfx90a:sramecc-:xnack+");
        assert_eq!(
            lookup.resolve(0, &agent, archives),
            Resolution::Found { archive: "p/.kpack/k_gfx90a.kpack".into(), target: id("gfx90a:xnack+") }
        );
        assert!(lookup.resolve(1, &agent, archives).found());
        assert!(matches!(lookup.resolve(2, &agent, archives), Resolution::NoCode { .. }));
        // XNACK-only code does not serve a device with XNACK off.
        let on_only = toc(&[("p/k.so#0", &["gfx90a:xnack+"])]);
        let archives = |path: &str| (path == "p/.kpack/k_gfx90a:xnack+.kpack").then_some(&on_only);
        assert!(matches!(lookup.resolve(0, &id("gfx90a:sramecc-:xnack-"), archives), Resolution::NoArchive { .. }));
        assert!(lookup.resolve(0, &id("gfx90a:sramecc-:xnack+"), archives).found());
    }

    #[test]
    fn generic_code_serves_the_processors_it_covers() {
        let search = vec![".kpack/k_@GFXARCH@.kpack".to_string()];
        let lookup = Lookup { binary: "k.so", kernel_name: "k.so", search_paths: &search };
        let generic = toc(&[("k.so#0", &["gfx9-4-generic"])]);
        let archives = |path: &str| (path == ".kpack/k_gfx942.kpack").then_some(&generic);
        assert_eq!(
            lookup.resolve(0, &id("gfx942:sramecc+:xnack-"), archives),
            Resolution::Found { archive: ".kpack/k_gfx942.kpack".into(), target: id("gfx9-4-generic") }
        );
    }

    #[test]
    fn a_target_without_settings_allows_every_mode() {
        let modes: Vec<String> = modes_of(&id("gfx942:xnack-")).iter().map(|t| t.to_string()).collect();
        assert_eq!(modes, ["gfx942:sramecc-:xnack-", "gfx942:sramecc+:xnack-"]);
        assert_eq!(modes_of(&id("gfx942:sramecc+:xnack-")), [id("gfx942:sramecc+:xnack-")]);
        assert_eq!(modes_of(&id("gfx1100")), [id("gfx1100")]);
    }

    #[test]
    fn devices_report_every_mode_of_their_features() {
        assert_eq!(device_modes("gfx1100"), [id("gfx1100")]);
        let modes: Vec<String> = device_modes("gfx90a").iter().map(|t| t.to_string()).collect();
        assert_eq!(
            modes,
            ["gfx90a:sramecc-:xnack-", "gfx90a:sramecc+:xnack-", "gfx90a:sramecc-:xnack+", "gfx90a:sramecc+:xnack+"]
        );
    }
}
