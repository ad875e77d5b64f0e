//! Plans: what a writing command changes in one wheel, as edits to one [`Plan`] that the one
//! writer applies ([`crate::wheel::writer`]).
//!
//! Every command starts from the same edits ([`retag`]): the true platform tags in the file
//! name and the WHEEL `Tag:` lines ([`tags`]), and, when marking, the new local version with the
//! batch's pins ([`version`]). `repair` then adds its edits ([`repair`]): vendored libraries,
//! patched ELF files, moved scripts. Nothing here touches a file.

pub mod repair;
pub mod tags;
pub mod version;

use crate::analysis::Analysis;
use crate::wheel::Wheel;
use crate::wheel::filename::escape_version;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::writer::{NewMember, Plan};
use version::{PinRewrite, rewrite_metadata};

/// What to change in one wheel's name, WHEEL and METADATA.
#[derive(Debug, Clone, Default)]
pub struct Changes<'a> {
    pub platform_tags: &'a [PlatformTag],
    pub new_version: Option<&'a str>,
    pub pins: &'a [PinRewrite],
}

/// The WHEEL `Tag:` lines for `platform_tags`: every `{python}-{abi}` pair the WHEEL file (or,
/// failing that, the file name) names, times every platform tag in the given order.
pub fn wheel_tag_lines(wheel: &Wheel, platform_tags: &[PlatformTag]) -> Vec<String> {
    let mut pairs: Vec<String> = Vec::new();
    for tag in &wheel.wheel_info.tags {
        let mut parts = tag.splitn(3, '-');
        if let (Some(py), Some(abi)) = (parts.next(), parts.next()) {
            let pair = format!("{py}-{abi}");
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    if pairs.is_empty() {
        pairs = wheel.filename.python_abi_pairs();
    }
    pairs.iter().flat_map(|pair| platform_tags.iter().map(move |plat| format!("{pair}-{plat}"))).collect()
}

/// The plan of a retag: the file name's tags and version, the `.dist-info` and `.data` renames
/// a new version makes, WHEEL's `Tag:` lines (and `Root-Is-Purelib: false` for a platform wheel
/// that claims to be purelib), METADATA's `Version:` and pins. An empty plan (same name, no
/// member edits) when the wheel already is what the changes describe.
pub fn retag(wheel: &Wheel, analysis: &Analysis, changes: &Changes<'_>) -> Plan {
    let mut plan = Plan::new(wheel.filename.with_platform_tags(changes.platform_tags.to_vec()));

    // A new version renames the `.dist-info` and `.data` directories.
    if let Some(version) = changes.new_version {
        plan.filename = plan.filename.with_version(version);
        let old_stem = wheel.dist_info_stem();
        let name = old_stem.rsplit_once('-').map_or("", |(n, _)| n);
        let new_stem = format!("{name}-{}", escape_version(version));
        for member in wheel.archive.members() {
            for suffix in [".dist-info/", ".data/"] {
                if let Some(rest) = member.name.strip_prefix(&format!("{old_stem}{suffix}")) {
                    plan.renames.insert(member.name.to_string(), format!("{new_stem}{suffix}{rest}"));
                }
            }
        }
    }
    let dist_info = plan.output_name(&format!("{}/WHEEL", wheel.dist_info)).trim_end_matches("/WHEEL").to_string();

    let mut lines = wheel_tag_lines(wheel, changes.platform_tags);
    // The same `Tag:` lines in another order are not a change.
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v.dedup();
        v
    };
    if sorted(&lines) == sorted(&wheel.wheel_info.tags) {
        lines = wheel.wheel_info.tags.clone();
    }
    let platform_specific = changes.platform_tags.iter().any(|t| !t.is_any()) && !analysis.binaries.is_empty();
    let purelib = (platform_specific && wheel.wheel_info.root_is_purelib == Some(true)).then_some(false);
    let wheel_text = if lines == wheel.wheel_info.tags && purelib.is_none() {
        wheel.wheel_info.text.clone()
    } else {
        wheel.wheel_info.with_tags(&lines, purelib)
    };
    if wheel_text != wheel.wheel_info.text {
        plan.replace.insert(format!("{dist_info}/WHEEL"), NewMember { data: wheel_text.into_bytes(), mode: None });
    }
    let metadata = rewrite_metadata(&wheel.metadata_text, changes.new_version, changes.pins);
    if metadata != wheel.metadata_text {
        plan.replace.insert(format!("{dist_info}/METADATA"), NewMember { data: metadata.into_bytes(), mode: None });
    }
    plan
}

/// Whether applying `plan` writes anything other than the input: a new name, an edited member,
/// or a RECORD to correct.
pub fn changes_anything(plan: &Plan, wheel: &Wheel, analysis: &Analysis) -> bool {
    plan.filename != wheel.filename || plan.changes_members() || !analysis.record_findings.is_empty()
}
