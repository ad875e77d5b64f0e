//! What `variants` did with each fat wheel, as JSON and text: its variants (label,
//! properties, the thinned wheel) and its plain copy.

use serde::{Deserialize, Serialize};

use super::json::{self, JSON_VERSION};
use crate::report::thin::ThinOutcome;

/// One variant written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantOutcome {
    pub label: String,
    /// `namespace :: feature :: value`, each.
    pub properties: Vec<String>,
    #[serde(flatten)]
    pub thin: ThinOutcome,
}

/// What became of one fat wheel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WheelVariants {
    pub wheel: String,
    pub variants: Vec<VariantOutcome>,
    /// The plain (unlabelled) copies, if asked for: one in `-w`, or one per GPU's index.
    #[serde(default)]
    pub plain: Vec<String>,
    /// The release's `{name}-{version}-variants.json`, published with its wheels: one in `-w`,
    /// or one per GPU's index (the same for every input of the release).
    #[serde(default)]
    pub set_files: Vec<String>,
}

/// `variants --json`: one entry per fat wheel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantsDocument {
    pub version: u32,
    pub wheels: Vec<VariantsEntry>,
}

/// What became of one fat wheel (`ok`), or why nothing did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum VariantsEntry {
    Done {
        ok: bool,
        #[serde(flatten)]
        variants: WheelVariants,
    },
    Failed {
        ok: bool,
        wheel: String,
        error: String,
    },
}

/// One fat wheel of the batch: its name as given, and its variants or why not.
pub type Input<'a, E> = (String, &'a Result<WheelVariants, E>);

/// The batch's JSON document.
pub fn to_json<E: std::fmt::Display>(results: &[Input<'_, E>]) -> String {
    let wheels = results
        .iter()
        .map(|(name, r)| match r {
            Ok(w) => VariantsEntry::Done { ok: true, variants: w.clone() },
            Err(e) => VariantsEntry::Failed { ok: false, wheel: name.clone(), error: e.to_string() },
        })
        .collect();
    json::to_text(&VariantsDocument { version: JSON_VERSION, wheels })
}

/// The batch as text.
pub fn to_text<E>(results: &[Input<'_, E>]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (name, r) in results {
        let Ok(w) = r else {
            let _ = writeln!(out, "{name}: failed");
            continue;
        };
        let _ =
            writeln!(out, "{}: {} variant{}", w.wheel, w.variants.len(), if w.variants.len() == 1 { "" } else { "s" });
        for v in &w.variants {
            let size = v.thin.size_after.map(super::human_bytes).unwrap_or_default();
            let output = v.thin.output.as_deref().unwrap_or("-");
            let props = if v.properties.is_empty() { "no properties".to_string() } else { v.properties.join(", ") };
            let _ = writeln!(out, "  {:<16} {output} ({size}): {props}", v.label);
        }
        for plain in &w.plain {
            let _ = writeln!(out, "  {:<16} {plain}", "(plain)");
        }
        for set_file in &w.set_files {
            let _ = writeln!(out, "  {:<16} {set_file}", "(the set)");
        }
    }
    out
}
