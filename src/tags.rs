//! Which platform tags a wheel should carry, given its verdict.
//!
//! The derived tag (with its aliases), plus every tag the input already claimed that the
//! binaries honour; a claimed tag they do not honour is dropped. Sorted lexicographically, as
//! auditwheel sorts them (`manylinux2014_x86_64.manylinux_2_17_x86_64`).

use crate::analysis::Analysis;
use crate::platform::Arch;
use crate::policy::PolicySet;
use crate::policy::verdict::{Blockers, Verdict};

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

/// A user's request for a tag (`--plat`, `--only-plat`).
#[derive(Debug, Clone, Default)]
pub struct TagRequest {
    /// `None` or `auto`: the derived tag.
    pub plat: Option<String>,
    pub only_plat: bool,
    /// Tags for the wheel once `repair` vendored its external libraries.
    pub after_repair: bool,
    /// Keep the claimed tags as they are (`repair --no-update-tags`).
    pub keep_tags: bool,
}

/// What a claimed tag is worth.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimCheck {
    pub tag: String,
    /// Where the claim is made: `filename`, `WHEEL`, or both.
    pub claimed_in: Vec<&'static str>,
    pub honoured: bool,
    /// Why not, when it is not honoured.
    pub reason: Option<String>,
}

/// The index of the policy the wheel meets as it is, and the tag strings for it.
pub fn derived_tags(set: &PolicySet, verdict: &Verdict) -> Vec<String> {
    set.tags(verdict.overall)
}

pub fn linux_tag(arch: Arch) -> String {
    format!("linux_{arch}")
}

/// Check each claimed tag against the verdict.
pub fn check_claims(analysis: &Analysis, filename_tags: &[String], wheel_tags: &[String]) -> Vec<ClaimCheck> {
    let mut all: Vec<String> = filename_tags.to_vec();
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
            let reason = claim_problem(analysis, &tag);
            ClaimCheck { honoured: reason.is_none(), reason, tag, claimed_in }
        })
        .collect()
}

/// `None` when the binaries honour `tag`, else why not.
fn claim_problem(analysis: &Analysis, tag: &str) -> Option<String> {
    let (Some(set), Some(verdict)) = (&analysis.policy_set, &analysis.verdict) else {
        // No host binary: any tag is as true as the wheel's own choice.
        return None;
    };
    if tag == linux_tag(set.arch) {
        return (verdict.overall != set.policies.len() - 1)
            .then(|| format!("the wheel meets {}", derived_tags(set, verdict)[0]));
    }
    if set.own_tag.as_deref() == Some(tag) && verdict.overall == set.policies.len() - 1 {
        // An Android wheel keeps its tag (no other tag applies), but it does not meet its policy.
        let blockers = verdict.blockers(set, &analysis.verdict_input(), 0);
        return Some(format!(
            "{}; the tag stays, since no other tag applies to an Android wheel",
            first_blocker(&blockers)
        ));
    }
    let Some(index) = set.by_tag(tag).map(|p| set.policies.iter().position(|q| q == p).unwrap_or(0)) else {
        return Some(
            format!("not a tag for {} {:?} binaries", set.arch, set.libc)
                .replace("Glibc", "glibc")
                .replace("Musl", "musl"),
        );
    };
    if index >= verdict.overall {
        return None;
    }
    let blockers = verdict.blockers(set, &analysis.verdict_input(), index);
    Some(first_blocker(&blockers))
}

/// One line that says the most important reason a policy is not met: the wheel's own symbol
/// versions, then external libraries the policy does not allow (as the wheel is, they are the
/// blocker; their own symbol versions matter only once repair vendors them), then those.
pub fn first_blocker(blockers: &Blockers) -> String {
    let describe = |r: &crate::policy::verdict::Requirement| {
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

/// The platform tags the wheel should carry. `claimed` are the input's platform tags.
pub fn true_tags(analysis: &Analysis, claimed: &[String], request: &TagRequest) -> Result<Vec<String>, TagError> {
    let plat = request.plat.as_deref().filter(|p| *p != "auto");
    let (Some(set), Some(verdict)) = (&analysis.policy_set, &analysis.verdict) else {
        if request.keep_tags {
            return Ok(claimed.to_vec());
        }
        if let Some(p) = plat {
            return Err(TagError::PurePlat(p.to_string()));
        }
        return Ok(claimed.to_vec());
    };
    let linux = set.policies.len() - 1;
    let met = if request.after_repair { verdict.repairable } else { verdict.overall };
    // `repair` never passes a wheel no policy accepts unless `linux_<arch>` is asked for by name
    // (auditwheel refuses it too): CI would pass and the upload fail later.
    if request.after_repair && met == linux && set.own_tag.is_none() && plat != Some(linux_tag(set.arch).as_str()) {
        let newest = linux.saturating_sub(1);
        let mut blockers = verdict.blockers(set, &analysis.verdict_input(), newest);
        blockers.libs_to_eliminate.clear();
        return Err(TagError::NoPolicy { reason: first_blocker(&blockers), linux: linux_tag(set.arch) });
    }
    if request.keep_tags {
        return Ok(claimed.to_vec());
    }
    if set.own_tag.is_some() && met == linux {
        // An Android wheel is never a `linux_<arch>` wheel: it keeps its own tag, and `show`
        // says what keeps it from meeting its policy.
        return Ok(claimed.to_vec());
    }
    let mut tags: Vec<String> = Vec::new();
    if let Some(p) = plat {
        let index = if p == linux_tag(set.arch) {
            linux
        } else {
            let policy = set.by_tag(p).ok_or_else(|| {
                TagError::UnknownPlat(
                    p.to_string(),
                    format!(
                        "{} {}",
                        set.arch,
                        match set.libc {
                            crate::platform::Libc::Musl => "musllinux",
                            crate::platform::Libc::Android => "android",
                            crate::platform::Libc::Glibc => "manylinux",
                        }
                    ),
                )
            })?;
            set.policies.iter().position(|q| q == policy).unwrap_or(linux)
        };
        if index < met {
            let mut blockers = verdict.blockers(set, &analysis.verdict_input(), index);
            if request.after_repair {
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
                set.by_tag(tag).and_then(|p| set.policies.iter().position(|q| q == p)).is_some_and(|i| i >= met);
            if tag.ends_with(set.arch.as_str()) && honoured && !tag.starts_with("linux_") {
                tags.push(tag.clone());
            }
        }
    }
    tags.sort();
    tags.dedup();
    // Order is not a change: the same set keeps the input's order
    // (`manylinux_2_17_x86_64.manylinux2014_x86_64` stays as it is).
    let mut sorted_claims = claimed.to_vec();
    sorted_claims.sort();
    sorted_claims.dedup();
    if sorted_claims == tags {
        return Ok(claimed.to_vec());
    }
    Ok(tags)
}
