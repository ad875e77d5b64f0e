//! What each tag a wheel claims (in its file name and its WHEEL file) is worth: honoured by its
//! binaries, or not, and why not.

use super::judgement::Judged;
use crate::analysis::Analysis;
use crate::wheel::platform_tag::PlatformTag;

/// What a claimed tag is worth.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClaimCheck {
    pub tag: PlatformTag,
    /// Where the claim is made: `filename`, `WHEEL`, or both.
    pub claimed_in: Vec<String>,
    pub honoured: bool,
    /// Why not, when it is not honoured.
    pub reason: Option<String>,
}

/// Check each claimed tag against the judgement (`None`: no host binary, every claim stands).
pub fn check_claims(
    judgement: Option<&Judged>,
    analysis: &Analysis,
    filename_tags: &[PlatformTag],
    wheel_tags: &[PlatformTag],
) -> Vec<ClaimCheck> {
    let mut all: Vec<PlatformTag> = filename_tags.to_vec();
    for t in wheel_tags {
        if !all.contains(t) {
            all.push(t.clone());
        }
    }
    all.into_iter()
        .map(|tag| {
            let mut claimed_in = Vec::new();
            if filename_tags.contains(&tag) {
                claimed_in.push("filename".to_string());
            }
            if wheel_tags.contains(&tag) {
                claimed_in.push("WHEEL".to_string());
            }
            let reason = judgement.and_then(|j| claim_problem(j, analysis, &tag));
            ClaimCheck { honoured: reason.is_none(), reason, tag, claimed_in }
        })
        .collect()
}

/// `None` when the binaries honour `tag`, else why not.
fn claim_problem(judgement: &Judged, analysis: &Analysis, tag: &PlatformTag) -> Option<String> {
    let (set, verdict) = (&judgement.set, &judgement.verdict);
    let linux = judgement.linux();
    if *tag == set.linux_tag() {
        return (verdict.overall != linux).then(|| format!("the wheel meets {}", judgement.tag(verdict.overall)));
    }
    if set.own_tag.as_ref() == Some(tag) && verdict.overall == linux {
        // An Android wheel keeps its tag (no other tag applies), but it does not meet its policy.
        let blockers = verdict.blockers(set, analysis, 0);
        return Some(format!("{}; the tag stays, since no other tag applies to an Android wheel", blockers.summary()));
    }
    let Some(index) = set.index_of(tag) else {
        return Some(format!("not a tag for {} {} binaries", set.arch, set.libc.as_str()));
    };
    if index >= verdict.overall {
        return None;
    }
    Some(verdict.blockers(set, analysis, index).summary())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{analysis, elf, external, judge};

    fn tags(text: &str) -> Vec<PlatformTag> {
        text.split('.').map(PlatformTag::parse).collect()
    }

    #[test]
    fn a_claim_blocked_by_an_external_library_names_the_library_first() {
        let lib = external("libnuma.so.1", Some("/usr/lib/libnuma.so.1"), &[("libc.so.6", "GLIBC_2.33")]);
        let a = analysis(
            vec![("pkg/_core.so", elf(&[("libnuma.so.1", "libnuma_1.1"), ("libc.so.6", "GLIBC_2.17")]))],
            vec![lib],
        );
        let j = judge(&a);
        let claims = check_claims(Some(&j), &a, &tags("manylinux_2_27_x86_64"), &[]);
        let reason = claims[0].reason.as_deref().unwrap();
        assert!(reason.starts_with("it needs the external library libnuma.so.1"), "{reason}");
        assert!(!claims[0].honoured);
    }
}
