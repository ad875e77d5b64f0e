//! What `split` did with each wheel, as JSON and text: the host wheel and its sizes, and per
//! group the device wheel, the extra that installs it and its size.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::human_bytes;
use super::json::{self, Entry, Failed, JSON_VERSION};
use crate::gpu::GpuCode;
use crate::plan::thin::FileCut;

/// One device wheel written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceWheel {
    /// The group it holds. Ex) `gfx942`
    pub target: String,
    /// Its project name. Ex) `torch-device-gfx942`
    pub name: String,
    pub wheel: String,
    /// The host's extra that requires it. Ex) `device-gfx942`; `device-all` for a family
    /// directory's wheel, which every extra of `family_of` brings too.
    pub extra: String,
    /// A family directory's wheel (`amd-gfx11xx/`): the processors whose device wheels (and
    /// extras) require it. Ex) `gfx1100`, `gfx1151`
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub family_of: Vec<String>,
    /// kpack archives in it (one per host binary with code for the group).
    pub archives: usize,
    /// Kernel database files moved into it from the host, at their paths.
    pub databases: usize,
    pub size: Option<u64>,
    pub installed: Option<u64>,
    /// One `py3-none-<platform>` wheel for the hosts of every Python version this run split,
    /// whose device code for the group was the same bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// What `split` did with one wheel (an entry of `split --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SplitOutcome {
    /// Left as it is, nothing written: already the output of a split.
    Left(LeftAlone),
    /// Its host written (split, or copied with nothing to split) and its device wheels.
    Written(Box<SplitWheel>),
}

/// A wheel `split` leaves as it is (a device wheel, a split host), and why. Its JSON entry is
/// the one a written wheel has, with nothing written and `skipped` the reason.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LeftAlone {
    pub wheel: String,
    #[serde(rename = "skipped")]
    pub reason: String,
}

impl Serialize for LeftAlone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Entry<'a> {
            #[serde(flatten)]
            nothing: SplitWheel,
            skipped: &'a str,
        }
        let nothing = SplitWheel {
            wheel: self.wheel.clone(),
            host: String::new(),
            size_before: None,
            size_after: None,
            installed_before: None,
            installed_after: None,
            binaries: 0,
            devices: Vec::new(),
            cut: Vec::new(),
            left: Vec::new(),
            uncovered: Vec::new(),
            rewritten: false,
        };
        Entry { nothing, skipped: &self.reason }.serialize(serializer)
    }
}

impl SplitOutcome {
    /// The wheel it is about. Ex) `torch-2.9.0-cp312-cp312-linux_x86_64.whl`
    pub fn wheel(&self) -> &str {
        match self {
            SplitOutcome::Left(left) => &left.wheel,
            SplitOutcome::Written(written) => &written.wheel,
        }
    }
}

/// A wheel `split` wrote: its host, and its device wheels.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SplitWheel {
    pub wheel: String,
    /// The host wheel written.
    pub host: String,
    pub size_before: Option<u64>,
    pub size_after: Option<u64>,
    pub installed_before: Option<u64>,
    pub installed_after: Option<u64>,
    /// Host binaries whose device code moved out.
    pub binaries: usize,
    pub devices: Vec<DeviceWheel>,
    /// What each of those binaries lost, by target id.
    pub cut: Vec<FileCut>,
    /// Device code in other forms, left in the host wheel.
    pub left: Vec<GpuCode>,
    /// Binaries with no code at all for some of the device wheels' targets (the fat wheel had
    /// none either): installed with those extras, they cannot load their kernels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncovered: Vec<crate::gpu::targets::Uncovered>,
    /// The host is not a copy of the input: its RECORD was written anew (device code moved
    /// out, or the input's RECORD disagreed with its archive).
    pub rewritten: bool,
}

#[derive(Serialize)]
struct OutcomeJson<'a> {
    version: u32,
    #[serde(flatten)]
    outcome: &'a SplitOutcome,
}

/// One wheel of the batch: its name as given (for a failure) and what happened.
pub type Split<'a, E> = (String, &'a Result<SplitOutcome, E>);

/// The batch's JSON document: one entry per wheel, in order.
pub fn to_json<E: std::fmt::Display>(results: &[Split<'_, E>]) -> String {
    let entries: Vec<Entry<'_, OutcomeJson<'_>>> = results
        .iter()
        .map(|(name, result)| match result {
            Ok(outcome) => Entry::Done(OutcomeJson { version: JSON_VERSION, outcome }),
            Err(e) => Entry::Failed(Failed::new(name, e)),
        })
        .collect();
    json::to_text(&entries)
}

/// The batch as text.
pub fn to_text<E: std::fmt::Display>(results: &[Split<'_, E>]) -> String {
    let mut out = String::new();
    let size = |s: Option<u64>| s.map_or_else(|| "?".to_string(), human_bytes);
    for outcome in results.iter().filter_map(|(_, r)| r.as_ref().ok()) {
        let o = match outcome {
            SplitOutcome::Left(left) => {
                let _ = writeln!(out, "{}: {}", left.wheel, left.reason);
                continue;
            }
            SplitOutcome::Written(written) => written,
        };
        if o.binaries == 0 && o.devices.is_empty() {
            let what = if o.left.is_empty() {
                "no device code to split"
            } else {
                "no HIP offload bundles to split (its device code is in other forms, left in the host)"
            };
            let how = if o.rewritten { "written, with its RECORD made true, to" } else { "copied to" };
            let _ = writeln!(out, "{}: {what}; {how} {}", o.wheel, o.host);
            write_left(&mut out, &o.left);
            continue;
        }
        let _ = writeln!(out, "{}: host {}", o.wheel, o.host);
        let _ = writeln!(
            out,
            "  size: {} -> {} download, {} -> {} installed (the device code of {} moved out)",
            size(o.size_before),
            size(o.size_after),
            size(o.installed_before),
            size(o.installed_after),
            if o.binaries == 1 { "1 binary".to_string() } else { format!("{} binaries", o.binaries) }
        );
        for d in &o.devices {
            let _ = writeln!(
                out,
                "  {}: {} ({} download, {} installed; {}, {}; extra `{}`{}){}",
                d.target,
                d.wheel,
                size(d.size),
                size(d.installed),
                crate::log::plural(d.archives, "archive"),
                crate::log::plural(d.databases, "database file"),
                d.extra,
                if d.family_of.is_empty() {
                    String::new()
                } else {
                    format!("; required by the device wheels of {}", d.family_of.join(", "))
                },
                if d.shared { "; shared by every Python version's host" } else { "" }
            );
        }
        write_left(&mut out, &o.left);
    }
    out
}

/// Device code in other forms than HIP bundles, which stays in the host wheel.
fn write_left(out: &mut String, left: &[GpuCode]) {
    for code in left {
        let targets = if code.targets.is_empty() { "-".to_string() } else { code.targets.join(" ") };
        let _ = writeln!(out, "    {}: left in the host wheel ({}): {targets}", code.file, super::container_name(code));
    }
}
