//! Step 1: which external libraries `repair` vendors — those the target policy would graft
//! (not whitelisted, not provided by the environment), every one found on this machine.

use std::collections::BTreeSet;

use super::RepairError;
use crate::analysis::Analysis;
use crate::policy::judgement::Judged;

/// The sonames to vendor for the target policy (`None`: the one the repaired wheel meets).
pub fn libraries_to_vendor(
    analysis: &Analysis,
    judgement: &Judged,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{analysis, elf, external, judge};

    #[test]
    fn the_libraries_the_target_policy_would_graft_and_only_found_ones() {
        let found = external("libfoo.so.1", Some("/usr/lib/libfoo.so.1"), &[]);
        let mut python = external("libpython3.12.so.1.0", None, &[]);
        python.libpython = true;
        let a = analysis(
            vec![("pkg/_core.so", elf(&[("libfoo.so.1", "FOO_1"), ("libpython3.12.so.1.0", "P_1")]))],
            vec![found, python],
        );
        let j = judge(&a);
        let libs = libraries_to_vendor(&a, &j, None).unwrap();
        assert_eq!(libs.into_iter().collect::<Vec<_>>(), ["libfoo.so.1"], "libpython is never vendored");
        let missing = external("libbar.so.2", None, &[]);
        let a = analysis(vec![("pkg/_core.so", elf(&[("libbar.so.2", "BAR_2")]))], vec![missing]);
        let err = libraries_to_vendor(&a, &judge(&a), None).unwrap_err();
        assert!(matches!(err, RepairError::NotFound { ref soname, .. } if soname == "libbar.so.2"), "{err}");
    }
}
