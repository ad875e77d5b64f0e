//! What the policies make of one wheel, computed once from its facts: no platform tag applies
//! (a pure wheel), no policy covers its binaries (and why), or the policies that apply with their
//! verdict, what each claimed tag is worth, and what happens to each external library. Reports,
//! plans and checks read this; none works it out again.

use std::collections::BTreeMap;

use super::verdict::{Blockers, Verdict};
use super::{Policies, PolicySet};
use crate::analysis::Analysis;
use crate::analysis::linkage::LinkageRules;
use crate::platform::{Libc, Os};
use crate::wheel::Wheel;
use crate::wheel::platform_tag::PlatformTag;

/// The policies' view of one wheel.
#[derive(Debug, Clone)]
pub enum Judgement {
    /// No host binary of any format: no platform tag says more than its file name does.
    Pure,
    /// Host binaries no policy covers (a Windows or macOS wheel, an Android API level no policy
    /// names, binaries of no covered architecture), and why.
    Unaudited(String),
    /// The policies that apply, and what they say.
    Judged(Box<Judged>),
}

impl Judgement {
    pub fn judged(&self) -> Option<&Judged> {
        match self {
            Judgement::Judged(j) => Some(j),
            _ => None,
        }
    }

    pub fn unaudited(&self) -> Option<&str> {
        match self {
            Judgement::Unaudited(reason) => Some(reason),
            _ => None,
        }
    }

    pub fn is_pure(&self) -> bool {
        matches!(self, Judgement::Pure)
    }
}

/// The policies that judge a wheel and their verdict.
#[derive(Debug, Clone)]
pub struct Judged {
    pub set: PolicySet,
    pub verdict: Verdict,
    /// What happens to each external library the report lists: those the binaries need
    /// directly, and those repair would vendor for [`Judged::repair_target`].
    pub dispositions: BTreeMap<String, Disposition>,
}

pub use super::disposition::Disposition;

impl Judged {
    pub fn new(set: PolicySet, analysis: &Analysis, disable_isa_check: bool) -> Judged {
        let verdict = Verdict::compute(&set, analysis, disable_isa_check);
        let mut judged = Judged { set, verdict, dispositions: BTreeMap::new() };
        let target = judged.repair_target(None);
        let grafted = &judged.verdict.grafted[target];
        let policy = &judged.set.policies[target];
        judged.dispositions = analysis
            .external
            .iter()
            .filter(|(soname, lib)| lib.direct || grafted.contains(*soname))
            .map(|(soname, lib)| (soname.clone(), Disposition::of(lib, policy)))
            .collect();
        judged
    }

    /// The main tag of the policy at `index`. Ex) `manylinux_2_17_x86_64`
    pub fn tag(&self, index: usize) -> PlatformTag {
        self.set.tags(index).swap_remove(0)
    }

    /// The index of `linux`, the least compatible policy.
    pub fn linux(&self) -> usize {
        self.set.policies.len() - 1
    }

    /// The policy whose whitelist decides what `repair` vendors: `--plat` when given, else the
    /// policy the repaired wheel meets, or the newest tagged policy when that is `linux`.
    pub fn repair_target(&self, plat: Option<usize>) -> usize {
        plat.unwrap_or_else(|| self.verdict.repairable.min(self.linux().saturating_sub(1)))
    }

    /// Everything that keeps the wheel from meeting the policy at `index`.
    pub fn blockers(&self, analysis: &Analysis, index: usize) -> Blockers {
        self.verdict.blockers(&self.set, analysis, index)
    }
}

/// The tags a wheel claims, as the policies see them: its file name's and its WHEEL file's.
#[derive(Debug, Clone)]
pub struct Claims<'a> {
    pub filename: &'a [PlatformTag],
    pub wheel: Vec<PlatformTag>,
}

impl<'a> Claims<'a> {
    pub fn of(wheel: &'a Wheel) -> Claims<'a> {
        Claims { filename: &wheel.filename.platform_tags, wheel: wheel.wheel_info.platform_tags() }
    }
}

/// What the policies have to say before a verdict: nothing applies, the binaries are not
/// covered, or these policies judge them.
pub enum Selection {
    Pure,
    Unaudited(String),
    Judge(PolicySet),
}

impl Selection {
    /// How the libraries of the wheel are resolved for this selection (its libc's rules, the
    /// libraries even its most compatible policy takes from the system).
    pub fn linkage_rules(&self) -> Option<LinkageRules<'_>> {
        match self {
            Selection::Judge(set) => {
                Some(LinkageRules { libc: set.libc, always_allowed: &set.policies[0].lib_whitelist })
            }
            _ => None,
        }
    }

    /// The judgement, once the libraries are resolved (`analysis.external`).
    pub fn judge(self, analysis: &Analysis, disable_isa_check: bool) -> Judgement {
        match self {
            Selection::Pure => Judgement::Pure,
            Selection::Unaudited(reason) => Judgement::Unaudited(reason),
            Selection::Judge(set) => Judgement::Judged(Box::new(Judged::new(set, analysis, disable_isa_check))),
        }
    }
}

impl Policies {
    /// The policies that judge a wheel, if any do: none for a Windows or macOS wheel or one of
    /// no known architecture; an Android wheel's own ([`Policies::for_android`]); else the
    /// manylinux or musllinux family of its libc, with its claims (file name, WHEEL, and a
    /// requested `--plat`) for [`Policies::for_platform`].
    ///
    /// The binaries of a wheel no policy covers are set aside (`analysis.binaries` emptied):
    /// nothing resolves, judges or patches them.
    pub fn select(
        &self,
        claims: &Claims<'_>,
        analysis: &mut Analysis,
        requested_plat: Option<&PlatformTag>,
    ) -> Selection {
        if let Some(reason) = self.unaudited(claims, analysis) {
            analysis.binaries.clear();
            return Selection::Unaudited(reason);
        }
        if analysis.binaries.is_empty() {
            return Selection::Pure;
        }
        match self.for_claims(claims, analysis, requested_plat) {
            Some(set) => Selection::Judge(set),
            None => Selection::Unaudited("no manylinux or musllinux policy covers these binaries".into()),
        }
    }

    fn for_claims(
        &self,
        claims: &Claims<'_>,
        analysis: &Analysis,
        requested_plat: Option<&PlatformTag>,
    ) -> Option<PolicySet> {
        let claimed = claims.filename;
        if claimed.iter().map(PlatformTag::os).find(|o| *o != Os::Any).is_some_and(|os| !os.has_policies()) {
            return None;
        }
        let arch = analysis.arch?;
        if let Some(tag) = claimed.iter().find(|t| t.libc() == Some(Libc::Android)) {
            return self.for_android(arch, &tag.to_string());
        }
        let mut all: Vec<String> = claimed.iter().chain(&claims.wheel).map(|t| t.to_string()).collect();
        all.extend(requested_plat.map(|p| p.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        Some(self.for_platform(arch, analysis.libc, &all))
    }

    /// Why no policy applies to a wheel that has binaries, if none does: a Windows or macOS
    /// wheel, an Android tag no android policy covers, binaries of no platform a policy names.
    fn unaudited(&self, claims: &Claims<'_>, analysis: &Analysis) -> Option<String> {
        let claimed = claims.filename;
        let formats = &analysis.binary_formats;
        if let Some(os) = claimed.iter().map(PlatformTag::os).find(|o| *o != Os::Any)
            && !os.has_policies()
        {
            return (formats.total() > 0)
                .then(|| format!("{} wheel: no manylinux/musllinux policy applies", os.name()));
        }
        let android = claimed.iter().any(|t| t.libc() == Some(Libc::Android));
        if android && !analysis.binaries.is_empty() && self.for_claims(claims, analysis, None).is_none() {
            return Some("an Android wheel whose tag names no API level an android policy covers".into());
        }
        let foreign_elf = !analysis.elf.is_empty();
        if analysis.binaries.is_empty() && (foreign_elf || formats.total() > 0) {
            let tag = claimed.iter().find(|t| !t.is_any()).map(|t| t.to_string()).unwrap_or_else(|| "any".into());
            // Installed files (no file name claims a tag): said of the files, plainly.
            if claimed.is_empty() && formats.pe > 0 && formats.mach_o == 0 && !foreign_elf {
                return Some(
                    "Windows (PE) binaries: a wheel of them keeps its Windows tag (`win_amd64`, `win_arm64` or `win32`, by their machine); no manylinux or musllinux analysis applies".into(),
                );
            }
            return Some(if formats.pe + formats.mach_o > 0 && !foreign_elf {
                format!(
                    "the binaries of this `{tag}` wheel are PE or Mach-O files, which no manylinux or musllinux policy covers"
                )
            } else {
                format!("no manylinux or musllinux policy covers the binaries of this `{tag}` wheel")
            });
        }
        None
    }
}
