//! Which platform tags a wheel should carry, given its judgement.
//!
//! The derived tag (with its aliases), plus every tag the input already claimed that the
//! binaries honour; a claimed tag they do not honour is dropped. Sorted lexicographically, as
//! auditwheel sorts them (`manylinux2014_x86_64.manylinux_2_17_x86_64`); the same set in
//! another order is not a change.

use crate::analysis::Analysis;
use crate::policy::judgement::Judged;
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

/// `--plat`: the derived tag, or this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plat {
    Auto,
    Tag(PlatformTag),
}

impl Plat {
    pub fn parse(text: &str) -> Plat {
        if text == "auto" { Plat::Auto } else { Plat::Tag(PlatformTag::parse(text)) }
    }

    /// The tag asked for, unless it is `auto`.
    pub fn tag(&self) -> Option<&PlatformTag> {
        match self {
            Plat::Auto => None,
            Plat::Tag(tag) => Some(tag),
        }
    }
}

impl std::fmt::Display for Plat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Plat::Auto => f.write_str("auto"),
            Plat::Tag(tag) => write!(f, "{tag}"),
        }
    }
}

/// A user's request for a tag (`--plat`, `--only-plat`, `--no-update-tags`).
#[derive(Debug, Clone, Default)]
pub struct TagRequest {
    /// `None`: the derived tag (`--plat auto`, or none given).
    pub plat: Option<PlatformTag>,
    /// Only the `--plat` tag (or the derived one), not the honoured claims.
    pub only_plat: bool,
    /// Keep the claimed tags as they are (`repair --no-update-tags`).
    pub keep_tags: bool,
}

/// Which verdict the tags describe: the wheel as it is (`retag`), or once `repair` vendored
/// its external libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    AsIs,
    Repaired,
}

/// The index of the policy a `--plat` names for this wheel; an error for a tag of another
/// architecture or libc.
pub fn requested_policy(judgement: &Judged, plat: &PlatformTag) -> Result<usize, TagError> {
    judgement.set.index_of(plat).ok_or_else(|| {
        TagError::UnknownPlat(
            plat.to_string(),
            format!("{} {}", judgement.set.arch, judgement.set.libc.policy_family()),
        )
    })
}

/// The platform tags the wheel should carry. `claimed` are the input's platform tags.
pub fn true_tags(
    judgement: Option<&Judged>,
    analysis: &Analysis,
    claimed: &[PlatformTag],
    request: &TagRequest,
    basis: Basis,
) -> Result<Vec<PlatformTag>, TagError> {
    let plat = request.plat.clone();
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
        return Err(TagError::NoPolicy { reason: blockers.summary(), linux: set.linux_tag().to_string() });
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
            return Err(TagError::NotMet { tag: p.to_string(), reason: blockers.summary() });
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
            // A static wheel keeps the other libc family's claims: nothing in it disproves them.
            let other_libc = tag.libc().is_some_and(|l| l != set.libc) && analysis.libc_unsaid();
            if tag.arch() == Some(set.arch) && (honoured || other_libc) && !tag.is_linux() {
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
        TagRequest { plat: plat.map(PlatformTag::parse), only_plat, keep_tags: false }
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
}
