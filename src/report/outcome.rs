//! What `retag` and `repair` did with each wheel, as JSON and text, and the messages of a batch
//! (notes, warnings, the failure count) that go to stderr.

use serde::{Deserialize, Serialize};

use super::json::{self, Entry, Failed, JSON_VERSION};
use crate::plan::repair::Graft;
use crate::version::{OrderingHazard, VersionChange};
use crate::wheel::RecordFindings;
use crate::wheel::platform_tag::PlatformTag;

/// What `retag` or `repair` did with one wheel.
#[derive(Debug, Clone)]
pub struct RetagOutcome {
    pub wheel: String,
    pub output: Option<String>,
    pub tags: Vec<PlatformTag>,
    /// False when the wheel already was what it should be (it may still have been copied).
    pub changed: bool,
    pub version_change: VersionChange,
    /// Libraries `repair` vendored.
    pub grafts: Vec<Graft>,
    /// Where the input's RECORD disagreed with its archive: the output's RECORD is true.
    pub record_corrected: RecordFindings,
    /// Whether every member's hash was checked against the input's RECORD.
    pub hashes_checked: bool,
    /// The tag the input meets as it is, and the one its symbol versions allow.
    pub platform_tag: Option<String>,
    pub symbol_tag: Option<String>,
    /// Why the output is tagged `linux_<arch>` when the input claimed a more compatible tag:
    /// the claim and what keeps the binaries from it. Ex) `manylinux_2_39_x86_64: it needs
    /// the external library libfoo.so.1, which the policy does not allow (repair would vendor it)`
    pub lowered: Option<String>,
}

/// One wheel of a writing batch: its name as given (for a failure) and what happened.
pub type Written<'a, E> = (String, &'a Result<RetagOutcome, E>);

/// The JSON entry of one outcome (`retag --json`, `repair --json`); the version fields only
/// when marking.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetagEntry {
    pub version: u32,
    pub wheel: String,
    pub output: Option<String>,
    pub tags: Vec<PlatformTag>,
    pub changed: bool,
    pub grafts: Vec<Graft>,
    pub record_corrected: RecordFindings,
    pub hashes_checked: bool,
    pub platform_tag: Option<String>,
    pub symbol_tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowered: Option<String>,
    #[serde(flatten)]
    pub version_change: Option<VersionChange>,
}

/// The batch's JSON document: one entry per wheel, in order.
pub fn to_json<E: std::fmt::Display>(results: &[Written<'_, E>], marking: bool) -> String {
    let entries: Vec<Entry<'_, RetagEntry>> = results
        .iter()
        .map(|(name, result)| match result {
            Ok(o) => Entry::Done(RetagEntry {
                version: JSON_VERSION,
                wheel: o.wheel.clone(),
                output: o.output.clone(),
                tags: o.tags.clone(),
                changed: o.changed,
                grafts: o.grafts.clone(),
                record_corrected: o.record_corrected.clone(),
                hashes_checked: o.hashes_checked,
                platform_tag: o.platform_tag.clone(),
                symbol_tag: o.symbol_tag.clone(),
                lowered: o.lowered.clone(),
                version_change: marking.then(|| o.version_change.clone()),
            }),
            Err(e) => Entry::Failed(Failed::new(name, e)),
        })
        .collect();
    json::to_text(&entries)
}

/// The batch as text: where each wheel went, what was vendored, the version changes.
pub fn to_text<E: std::fmt::Display>(results: &[Written<'_, E>], marking: bool) -> String {
    let mut text = String::new();
    for outcome in results.iter().filter_map(|(_, r)| r.as_ref().ok()) {
        match &outcome.output {
            Some(out) if outcome.changed => text.push_str(&format!("{} -> {out}\n", outcome.wheel)),
            Some(out) => text.push_str(&format!("{} -> {out} (already true)\n", outcome.wheel)),
            None => text.push_str(&format!("{}: tags already true, left as it is\n", outcome.wheel)),
        }
        for graft in &outcome.grafts {
            text.push_str(&format!("  vendored {} from {} as {}\n", graft.soname, graft.source, graft.member));
        }
        if marking {
            text.push_str(&version_text(&outcome.version_change));
        }
    }
    text
}

/// The note for a wheel whose RECORD the output corrects.
pub fn record_note(wheel: &str, corrected: &RecordFindings) -> String {
    format!(
        "wheelfix: note: {wheel}: its RECORD disagreed with the archive ({}); the output's RECORD lists every file with its sha256 and size",
        corrected.summarize()
    )
}

/// The batch's messages for stderr, in order: a corrected RECORD's note, a tag lowered to
/// `linux_<arch>` and why, each failure.
pub fn messages<E: std::fmt::Display>(results: &[Written<'_, E>]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, result) in results {
        match result {
            Ok(o) => {
                if !o.record_corrected.is_empty() {
                    out.push(record_note(&o.wheel, &o.record_corrected));
                }
                if let Some(why) = &o.lowered {
                    out.push(format!(
                        "wheelfix: note: {}: written as {}: it claimed {why}; `wheelfix show` explains",
                        o.wheel,
                        crate::wheel::platform_tag::join_tags(&o.tags)
                    ));
                }
            }
            Err(e) => out.push(format!("wheelfix: error: {e}")),
        }
    }
    out
}

/// The version decision and pin rewrites of one wheel, as text lines.
pub fn version_text(change: &VersionChange) -> String {
    let mut out = String::new();
    if let Some(d) = &change.local_version {
        match &d.new_version {
            Some(new) => out.push_str(&format!("  version: {} -> {new} ({})\n", d.version, d.reason)),
            None => out.push_str(&format!("  version: {} unchanged ({})\n", d.version, d.reason)),
        }
    }
    for pin in &change.pins {
        match &pin.new_requirement {
            Some(new) => out.push_str(&format!("  pin: {} -> {new}\n", pin.requirement)),
            None => out.push_str(&format!("  warning: `{}`: {}\n", pin.requirement, pin.message)),
        }
    }
    out
}

/// A warning for each ordering hazard of a batch.
pub fn hazard_messages(hazards: &[OrderingHazard]) -> Vec<String> {
    hazards.iter().map(|h| format!("wheelfix: warning: {} (ROCm/TheRock#7183)", h.message)).collect()
}

/// The closing message of a batch in which wheels failed.
pub fn failed_message(failed: usize, total: usize) -> Option<String> {
    (failed > 0).then(|| format!("wheelfix: {failed} of {} failed", crate::log::plural(total, "wheel")))
}
