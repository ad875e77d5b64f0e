//! Which platform tags a wheel should carry, given its judgement.
//!
//! The derived tag (with its aliases), plus every tag the input already claimed that the
//! binaries honour; a claimed tag they do not honour is dropped. Sorted lexicographically, as
//! auditwheel sorts them (`manylinux2014_x86_64.manylinux_2_17_x86_64`); the same set in
//! another order is not a change.

use crate::analysis::Analysis;
use crate::policy::verdict::{Blockers, Judgement, Requirement};
use crate::wheel::platform_tag::{PlatformTag, sort_tags};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TagError {
    #[error("--plat {0}: not a tag of the {1} policies (try `wheelfix show` to see the tag the wheel meets)")]
    UnknownPlat(String, String),
    #[error("does not meet {tag}: {reason} (`wheelfix show` explains the tag it meets)")]
    NotMet { tag: String, reason: String },
    #[error("--plat {0}: the wheel has no host binaries, so no platform tag applies to it")]
    PurePlat(String),
    #[error(
        "no manylinux or musllinux policy accepts it, even with its libraries vendored: {reason}; nothing was written (build on an older toolchain, or ask for --plat {linux} to write a {linux} wheel)"
    )]
    NoPolicy { reason: String, linux: String },
}

/// A user's request for a tag (`--plat`, `--only-plat`, `--no-update-tags`).
#[derive(Debug, Clone, Default)]
pub struct TagRequest {
    /// `None` or `auto`: the derived tag.
    pub plat: Option<String>,
    pub only_plat: bool,
    /// Keep the claimed tags as they are (`repair --no-update-tags`).
    pub keep_tags: bool,
}

impl TagRequest {
    /// `--plat`, unless it is `auto`.
    pub fn plat(&self) -> Option<PlatformTag> {
        self.plat.as_deref().filter(|p| *p != "auto").map(PlatformTag::parse)
    }
}

/// Which verdict the tags describe: the wheel as it is (`retag`), or once `repair` vendored
/// its external libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    AsIs,
    Repaired,
}

/// What a claimed tag is worth.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimCheck {
    pub tag: PlatformTag,
    /// Where the claim is made: `filename`, `WHEEL`, or both.
    pub claimed_in: Vec<&'static str>,
    pub honoured: bool,
    /// Why not, when it is not honoured.
    pub reason: Option<String>,
}

/// Check each claimed tag against the judgement (`None`: no host binary, every claim stands).
pub fn check_claims(
    judgement: Option<&Judgement>,
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
                claimed_in.push("filename");
            }
            if wheel_tags.contains(&tag) {
                claimed_in.push("WHEEL");
            }
            let reason = judgement.and_then(|j| claim_problem(j, analysis, &tag));
            ClaimCheck { honoured: reason.is_none(), reason, tag, claimed_in }
        })
        .collect()
}

/// `None` when the binaries honour `tag`, else why not.
fn claim_problem(judgement: &Judgement, analysis: &Analysis, tag: &PlatformTag) -> Option<String> {
    let (set, verdict) = (&judgement.set, &judgement.verdict);
    let linux = judgement.linux();
    if *tag == set.linux_tag() {
        return (verdict.overall != linux).then(|| format!("the wheel meets {}", judgement.tag(verdict.overall)));
    }
    if set.own_tag.as_ref() == Some(tag) && verdict.overall == linux {
        // An Android wheel keeps its tag (no other tag applies), but it does not meet its policy.
        let blockers = verdict.blockers(set, analysis, 0);
        return Some(format!(
            "{}; the tag stays, since no other tag applies to an Android wheel",
            first_blocker(&blockers)
        ));
    }
    let Some(index) = set.index_of(tag) else {
        return Some(format!("not a tag for {} {} binaries", set.arch, set.libc.as_str()));
    };
    if index >= verdict.overall {
        return None;
    }
    Some(first_blocker(&verdict.blockers(set, analysis, index)))
}

/// One line that says the most important reason a policy is not met: the wheel's own symbol
/// versions, then external libraries the policy does not allow (as the wheel is, they are the
/// blocker; their own symbol versions matter only once repair vendors them), then those.
pub fn first_blocker(blockers: &Blockers) -> String {
    let describe = |r: &Requirement| {
        let count = blockers.versions.iter().filter(|x| x.version == r.version && x.external == r.external).count();
        let more = if count > 1 { format!(" (and {} more files)", count - 1) } else { String::new() };
        let symbol = r.symbols.first().map(|s| format!(" for `{s}`")).unwrap_or_default();
        let which = if r.external { " (it would be vendored)" } else { "" };
        format!("`{}`{which} needs {}{symbol}{more}", r.file, r.version)
    };
    if let Some(r) = blockers.versions.iter().find(|r| !r.external) {
        return describe(r);
    }
    if let Some(lib) = blockers.libs_to_eliminate.first() {
        return format!(
            "it needs the external library {lib}, which the policy does not allow (repair would vendor it)"
        );
    }
    if let Some(r) = blockers.versions.first() {
        return describe(r);
    }
    if let Some((lib, syms)) = blockers.blacklisted_symbols.iter().next() {
        return format!("it references blacklisted symbols of {lib}: {}", syms.join(", "));
    }
    if let Some(file) = blockers.isa.first() {
        return format!("{file} needs an ISA extension beyond the baseline");
    }
    if blockers.pyfpe {
        return "it uses the PyFPE_jbuf function (PEP 513)".into();
    }
    if blockers.ucs2 {
        return "it is compiled against a narrow unicode (UCS2) Python".into();
    }
    "the policy is not met".into()
}

/// The index of the policy a `--plat` names for this wheel; an error for a tag of another
/// architecture or libc.
pub fn requested_policy(judgement: &Judgement, plat: &PlatformTag) -> Result<usize, TagError> {
    judgement.set.index_of(plat).ok_or_else(|| {
        TagError::UnknownPlat(
            plat.to_string(),
            format!("{} {}", judgement.set.arch, judgement.set.libc.policy_family()),
        )
    })
}

/// The platform tags the wheel should carry. `claimed` are the input's platform tags.
pub fn true_tags(
    judgement: Option<&Judgement>,
    analysis: &Analysis,
    claimed: &[PlatformTag],
    request: &TagRequest,
    basis: Basis,
) -> Result<Vec<PlatformTag>, TagError> {
    let plat = request.plat();
    let Some(judgement) = judgement else {
        if request.keep_tags {
            return Ok(claimed.to_vec());
        }
        if let Some(p) = plat {
            return Err(TagError::PurePlat(p.to_string()));
        }
        return Ok(claimed.to_vec());
    };
    let (set, verdict) = (&judgement.set, &judgement.verdict);
    let linux = judgement.linux();
    let met = match basis {
        Basis::AsIs => verdict.overall,
        Basis::Repaired => verdict.repairable,
    };
    // `repair` never passes a wheel no policy accepts unless `linux_<arch>` is asked for by name
    // (auditwheel refuses it too): CI would pass and the upload fail later.
    if basis == Basis::Repaired && met == linux && set.own_tag.is_none() && plat.as_ref() != Some(&set.linux_tag()) {
        let newest = linux.saturating_sub(1);
        let mut blockers = verdict.blockers(set, analysis, newest);
        blockers.libs_to_eliminate.clear();
        return Err(TagError::NoPolicy { reason: first_blocker(&blockers), linux: set.linux_tag().to_string() });
    }
    if request.keep_tags {
        return Ok(claimed.to_vec());
    }
    if set.own_tag.is_some() && met == linux {
        // An Android wheel is never a `linux_<arch>` wheel: it keeps its own tag, and `show`
        // says what keeps it from meeting its policy.
        return Ok(claimed.to_vec());
    }
    let mut tags: Vec<PlatformTag> = Vec::new();
    if let Some(p) = &plat {
        let index = requested_policy(judgement, p)?;
        if index < met {
            let mut blockers = verdict.blockers(set, analysis, index);
            if basis == Basis::Repaired {
                blockers.libs_to_eliminate.clear();
            }
            return Err(TagError::NotMet { tag: p.to_string(), reason: first_blocker(&blockers) });
        }
        let requested = set.tags(index);
        if request.only_plat {
            tags = requested;
        } else {
            tags.extend(set.tags(met));
            tags.extend(requested);
        }
    } else {
        tags.extend(set.tags(met));
    }
    if !request.only_plat {
        for tag in claimed {
            let honoured =
                set.by_tag(tag).and_then(|p| set.policies.iter().position(|q| **q == *p)).is_some_and(|i| i >= met);
            if tag.arch() == Some(set.arch) && honoured && !tag.is_linux() {
                tags.push(tag.clone());
            }
        }
    }
    sort_tags(&mut tags);
    // Order is not a change: the same set keeps the input's order
    // (`manylinux_2_17_x86_64.manylinux2014_x86_64` stays as it is).
    let mut sorted_claims = claimed.to_vec();
    sort_tags(&mut sorted_claims);
    if sorted_claims == tags {
        return Ok(claimed.to_vec());
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{analysis, elf, external, judge};
    use crate::wheel::platform_tag::join_tags;

    fn tags(text: &str) -> Vec<PlatformTag> {
        text.split('.').map(PlatformTag::parse).collect()
    }

    fn request(plat: Option<&str>, only_plat: bool) -> TagRequest {
        TagRequest { plat: plat.map(str::to_string), only_plat, keep_tags: false }
    }

    #[test]
    fn the_derived_tag_with_its_alias_and_the_honoured_claims() {
        let a = analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.17")]))], vec![]);
        let j = judge(&a);
        let got = true_tags(Some(&j), &a, &tags("linux_x86_64"), &TagRequest::default(), Basis::AsIs).unwrap();
        assert_eq!(join_tags(&got), "manylinux2014_x86_64.manylinux_2_17_x86_64");
        // A less compatible claim is honoured and kept; a more compatible one is dropped.
        let got = true_tags(Some(&j), &a, &tags("manylinux_2_28_x86_64"), &TagRequest::default(), Basis::AsIs).unwrap();
        assert_eq!(join_tags(&got), "manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64");
        let got = true_tags(Some(&j), &a, &tags("manylinux1_x86_64"), &TagRequest::default(), Basis::AsIs).unwrap();
        assert_eq!(join_tags(&got), "manylinux2014_x86_64.manylinux_2_17_x86_64");
        // The same set in another order stays as it is.
        let claimed = tags("manylinux_2_17_x86_64.manylinux2014_x86_64");
        assert_eq!(true_tags(Some(&j), &a, &claimed, &TagRequest::default(), Basis::AsIs).unwrap(), claimed);
    }

    #[test]
    fn plat_requests_only_plat_and_refusals() {
        let a = analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.17")]))], vec![]);
        let j = judge(&a);
        let claimed = tags("linux_x86_64");
        let got = true_tags(Some(&j), &a, &claimed, &request(Some("manylinux_2_28_x86_64"), true), Basis::AsIs);
        assert_eq!(join_tags(&got.unwrap()), "manylinux_2_28_x86_64");
        let err = true_tags(Some(&j), &a, &claimed, &request(Some("manylinux2010_x86_64"), false), Basis::AsIs);
        assert_eq!(
            err.unwrap_err().to_string(),
            "does not meet manylinux2010_x86_64: `pkg/_core.so` needs GLIBC_2.17 for `sym0` (`wheelfix show` explains the tag it meets)"
        );
        let err = true_tags(Some(&j), &a, &claimed, &request(Some("manylinux_2_17_aarch64"), false), Basis::AsIs);
        assert!(matches!(err, Err(TagError::UnknownPlat(..))));
        // No host binary: the tags stay, and no platform tag can be asked for.
        assert_eq!(true_tags(None, &a, &tags("any"), &TagRequest::default(), Basis::AsIs).unwrap(), tags("any"));
        assert!(matches!(
            true_tags(None, &a, &tags("any"), &request(Some("manylinux_2_17_x86_64"), false), Basis::AsIs),
            Err(TagError::PurePlat(_))
        ));
    }

    #[test]
    fn repair_tags_count_vendoring_and_refuse_what_no_policy_accepts() {
        let lib = external("libfoo.so.1", Some("/usr/lib/libfoo.so.1"), &[("libc.so.6", "GLIBC_2.28")]);
        let a = analysis(vec![("pkg/_core.so", elf(&[("libfoo.so.1", "FOO_1")]))], vec![lib]);
        let j = judge(&a);
        let claimed = tags("linux_x86_64");
        let as_is = true_tags(Some(&j), &a, &claimed, &TagRequest::default(), Basis::AsIs).unwrap();
        assert_eq!(join_tags(&as_is), "linux_x86_64");
        let repaired = true_tags(Some(&j), &a, &claimed, &TagRequest::default(), Basis::Repaired).unwrap();
        assert_eq!(join_tags(&repaired), "manylinux_2_28_x86_64");
        let newer = analysis(vec![("pkg/_core.so", elf(&[("libc.so.6", "GLIBC_2.43")]))], vec![]);
        let j = judge(&newer);
        let err = true_tags(Some(&j), &newer, &claimed, &TagRequest::default(), Basis::Repaired).unwrap_err();
        assert!(matches!(err, TagError::NoPolicy { .. }), "{err}");
        let linux = request(Some("linux_x86_64"), false);
        assert_eq!(join_tags(&true_tags(Some(&j), &newer, &claimed, &linux, Basis::Repaired).unwrap()), "linux_x86_64");
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
