//! Step 1: which external libraries `repair` vendors — those the target policy would graft
//! (not whitelisted, not provided by the environment), every one found on this machine.

use std::collections::BTreeSet;

use super::RepairError;
use crate::analysis::Analysis;
use crate::policy::verdict::Judgement;

/// The sonames to vendor for the target policy (`None`: the one the repaired wheel meets).
pub fn libraries_to_vendor(
    analysis: &Analysis,
    judgement: &Judgement,
    target: Option<usize>,
) -> Result<BTreeSet<String>, RepairError> {
    let target = judgement.repair_target(target);
    let grafted = &judgement.verdict.grafted[target];
    if judgement.set.own_tag.is_some() && !grafted.is_empty() {
        return Err(RepairError::Android);
    }
    // libpython is never vendored: the dependency is removed (`patch`).
    let libs: BTreeSet<String> = grafted.iter().filter(|s| !analysis.external[*s].libpython).cloned().collect();
    for soname in &libs {
        let lib = &analysis.external[soname];
        if lib.path.is_none() {
            return Err(RepairError::NotFound {
                soname: soname.clone(),
                needed_by: lib.needed_by.iter().cloned().collect::<Vec<_>>().join(", "),
                searched: if lib.searched.is_empty() { "nothing".into() } else { lib.searched.join(", ") },
            });
        }
    }
    Ok(libs)
}
