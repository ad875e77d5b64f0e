//! The rules `check` holds a set to, each over the distributions read, one module per family:
//! selectors and extras, versions and pins, wheels and tags, ROCm ABIs, kpack. Each rule is one
//! function over the same facts; the few helpers they share (architecture directories, projects
//! in reach) are here.

use std::collections::BTreeMap;
use std::path::Path;

use super::facts::Dist;

mod abis;
mod kpack;
mod selectors;
#[cfg(test)]
mod tests;
mod versions;
mod wheels;

pub(super) use abis::abi_findings;
pub(super) use kpack::{archive_damage_findings, kpack_findings, split_set_findings};
pub(super) use selectors::{metapackage_findings, selector_findings, self_requirement_findings, serving_findings};
pub(super) use versions::{interpreter_findings, unmet_requirement_findings, version_findings};
pub(super) use wheels::{path_conflict_findings, provider_findings, wheel_findings};

/// A platform family of a wheel's platform tag. Ex) `manylinux_2_28_x86_64` → `linux`
pub(in crate::check) fn os_family(platform: &str) -> &str {
    ["linux", "win", "macosx"].into_iter().find(|f| platform.contains(f)).unwrap_or(platform)
}

/// The GPU architecture a directory names. Ex) `site/gfx950/torch-….whl` → `gfx950`
pub(in crate::check) fn architecture_dir(path: &Path) -> Option<String> {
    path.parent()?.components().rev().find_map(|c| {
        let s = c.as_os_str().to_str()?;
        crate::gpu::targets::is_known_processor(s).then(|| s.to_string())
    })
}

/// The distributions of `project` an install from `d`'s index can see: those of its
/// architecture directory, or of none (an index per architecture is the seeds' layout).
pub(in crate::check) fn in_reach<'a>(by_project: &ByProject<'a>, d: &Dist, project: &str) -> Vec<&'a Dist> {
    let arch = architecture_dir(&d.path);
    by_project
        .get(project)
        .map(|list| {
            list.iter()
                .copied()
                .filter(|o| architecture_dir(&o.path).is_none_or(|a| Some(&a) == arch.as_ref()))
                .collect()
        })
        .unwrap_or_default()
}

/// The set's distributions by project, made once: the rules that follow requirements look a
/// project up here instead of walking the whole set for each requirement (a set of thousands
/// of wheels that pin each other would take minutes).
pub(in crate::check) type ByProject<'a> = BTreeMap<&'a str, Vec<&'a Dist>>;

pub(in crate::check) fn by_project(dists: &[Dist]) -> ByProject<'_> {
    let mut map: ByProject<'_> = BTreeMap::new();
    for d in dists {
        map.entry(d.project.as_str()).or_default().push(d);
    }
    map
}

/// Whether a requirement admits a distribution's version; a version or specifier that does not
/// parse is admitted (what else would the requirement bring).
pub(in crate::check) fn admits(requirement: &crate::wheel::requirement::Requirement, version: &str) -> bool {
    match (requirement.specifiers(), version.parse::<pep440_rs::Version>()) {
        (Some(specifiers), Ok(version)) => specifiers.contains(&version),
        _ => true,
    }
}
