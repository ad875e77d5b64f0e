//! What `thin` did with each wheel, as JSON (`schemas/thin.schema.json`) and text: per file,
//! the code objects and bytes kept and dropped per target; the device code left as it was;
//! the wheel's size before and after.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::gpu::TargetId;

use super::human_bytes;
use super::json::{self, Entry, Failed, JSON_VERSION};
use crate::gpu::{Count, GpuCode};
use crate::plan::thin::FileCut;
use crate::wheel::RecordFindings;

/// A host binary `--compact` left with its layout, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotCompacted {
    pub file: String,
    pub reason: String,
}

/// What `thin` did with one wheel (an entry of `thin --json`, less its totals).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThinOutcome {
    pub wheel: String,
    /// Where it was written; none when left in place unchanged.
    pub output: Option<String>,
    /// False when nothing was dropped (the wheel was copied byte for byte, written anew with its
    /// RECORD corrected, or left in place).
    pub changed: bool,
    /// Download size (the wheel file) before and after.
    pub size_before: Option<u64>,
    pub size_after: Option<u64>,
    /// Installed size (its members) before and after: a compacted host binary installs smaller.
    pub installed_before: Option<u64>,
    pub installed_after: Option<u64>,
    /// Host binaries whose freed pages stayed in the file (`--compact`), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_compacted: Vec<NotCompacted>,
    /// Files whose bundles were rewritten, or kept whole (nothing to drop).
    pub cut: Vec<FileCut>,
    /// Standalone code-object files removed (`--prune-files`).
    pub pruned: Vec<FileCut>,
    /// Device code in other forms, left as it was.
    pub left: Vec<GpuCode>,
    /// Requested targets no code object runs on (`--allow-missing`).
    pub missing: Vec<TargetId>,
    /// Where the input's RECORD disagreed with its archive: the output's RECORD is true.
    pub record_corrected: RecordFindings,
}

impl ThinOutcome {
    /// Kept and dropped code objects by target, across files.
    pub fn totals(&self) -> (BTreeMap<TargetId, Count>, BTreeMap<TargetId, Count>) {
        let (mut kept, mut dropped) = (BTreeMap::new(), BTreeMap::new());
        for cut in self.cut.iter().chain(&self.pruned) {
            Count::sum_into(&mut kept, cut.kept.iter().map(|(t, c)| (t.clone(), *c)));
            Count::sum_into(&mut dropped, cut.dropped.iter().map(|(t, c)| (t.clone(), *c)));
        }
        (kept, dropped)
    }
}

#[derive(Serialize)]
struct OutcomeJson<'a> {
    version: u32,
    #[serde(flatten)]
    outcome: &'a ThinOutcome,
    kept: BTreeMap<TargetId, Count>,
    dropped: BTreeMap<TargetId, Count>,
}

/// One wheel of the batch: its name as given (for a failure) and what happened.
pub type Thinned<'a, E> = (String, &'a Result<ThinOutcome, E>);

/// The batch's JSON document: one entry per wheel, in order.
pub fn to_json<E: std::fmt::Display>(results: &[Thinned<'_, E>]) -> String {
    let entries: Vec<Entry<'_, OutcomeJson<'_>>> = results
        .iter()
        .map(|(name, result)| match result {
            Ok(outcome) => {
                let (kept, dropped) = outcome.totals();
                Entry::Done(OutcomeJson { version: JSON_VERSION, outcome, kept, dropped })
            }
            Err(e) => Entry::Failed(Failed::new(name, e)),
        })
        .collect();
    json::to_text(&entries)
}

fn counts_text(counts: &BTreeMap<TargetId, Count>) -> String {
    if counts.is_empty() {
        return "nothing".into();
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|(t, c)| format!("{t} ({}, {})", crate::log::plural(c.objects, "object"), human_bytes(c.bytes)))
        .collect();
    parts.join(", ")
}

/// The batch's messages for stderr, in order: a corrected RECORD's note, each failure.
pub fn messages<E: std::fmt::Display>(results: &[Thinned<'_, E>]) -> Vec<String> {
    results
        .iter()
        .filter_map(|(_, r)| match r {
            Ok(o) if !o.record_corrected.is_empty() => Some(super::outcome::record_note(&o.wheel, &o.record_corrected)),
            Ok(_) => None,
            Err(e) => Some(format!("wheelfix: error: {e}")),
        })
        .collect()
}

/// The batch as text.
pub fn to_text<E: std::fmt::Display>(results: &[Thinned<'_, E>]) -> String {
    let mut out = String::new();
    for outcome in results.iter().filter_map(|(_, r)| r.as_ref().ok()) {
        let size = |s: Option<u64>| s.map_or_else(|| "?".to_string(), human_bytes);
        let place = match (&outcome.output, outcome.changed) {
            (Some(o), true) => format!("thinned into {o}"),
            (Some(o), false) if !outcome.record_corrected.is_empty() => {
                format!("nothing to drop; written to {o} with its RECORD corrected")
            }
            (Some(o), false) => format!("nothing to drop; copied to {o}"),
            (None, _) => "nothing to drop; left as it is".to_string(),
        };
        let _ = writeln!(out, "{}: {place}", outcome.wheel);
        let _ = writeln!(
            out,
            "  size: {} -> {} download, {} -> {} installed",
            size(outcome.size_before),
            size(outcome.size_after),
            size(outcome.installed_before),
            size(outcome.installed_after)
        );
        for n in &outcome.not_compacted {
            let _ = writeln!(out, "    {}: its freed pages stay in the file: {}", n.file, n.reason);
        }
        let (kept, dropped) = outcome.totals();
        if kept.is_empty() && dropped.is_empty() {
            // "kept: nothing" would read as device code lost.
            let _ = writeln!(out, "  no offload bundles: no device code to thin");
        } else {
            let _ = writeln!(out, "  kept: {}", counts_text(&kept));
            let _ = writeln!(out, "  dropped: {}", counts_text(&dropped));
        }
        for cut in outcome.cut.iter().filter(|c| !c.dropped.is_empty()) {
            let n = |m: &BTreeMap<TargetId, Count>| m.values().map(|c| c.objects).sum::<usize>();
            let _ = writeln!(
                out,
                "    {}: kept {}, dropped {}",
                cut.file,
                n(&cut.kept),
                crate::log::plural(n(&cut.dropped), "code object")
            );
        }
        for cut in &outcome.pruned {
            let _ = writeln!(out, "    {}: removed (--prune-files)", cut.file);
        }
        for code in &outcome.left {
            let targets = if code.targets.is_empty() { "-".to_string() } else { code.targets.join(" ") };
            let _ = writeln!(out, "    {}: left as it is ({}): {targets}", code.file, super::container_name(code));
        }
        if !outcome.missing.is_empty() {
            let _ = writeln!(out, "  warning: nothing runs on {} (--allow-missing)", outcome.missing.join(", "));
        }
    }
    out
}
