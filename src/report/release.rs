//! The outcomes of the commands that work on sets of wheels or single files: `check`, `index`,
//! `metapackage`, `lddtree`, as JSON and text.

use serde::Serialize;

use super::json::{self, JSON_VERSION, Versioned};
use crate::analysis::lddtree::Tree;
use crate::release::check::{Finding, Severity};
use crate::release::index::IndexSummary;
use crate::release::metapackage::Metapackage;
use crate::release::resolve::Resolution;

/// `check`'s findings, counted, and the resolution `--resolve` held against the set.
pub struct CheckReport<'a> {
    pub findings: &'a [Finding],
    pub errors: usize,
    pub warnings: usize,
    pub resolution: Option<&'a Resolution>,
}

impl<'a> CheckReport<'a> {
    pub fn new(findings: &'a [Finding]) -> Self {
        let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
        CheckReport { findings, errors, warnings: findings.len() - errors, resolution: None }
    }

    pub fn with_resolution(mut self, resolution: Option<&'a Resolution>) -> Self {
        self.resolution = resolution;
        self
    }

    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Document<'a> {
            version: u32,
            errors: usize,
            warnings: usize,
            findings: &'a [Finding],
            #[serde(skip_serializing_if = "Option::is_none")]
            resolution: Option<&'a Resolution>,
        }
        json::to_text(&Document {
            version: JSON_VERSION,
            errors: self.errors,
            warnings: self.warnings,
            findings: self.findings,
            resolution: self.resolution,
        })
    }

    pub fn to_text(&self) -> String {
        let mut text = String::new();
        if let Some(r) = self.resolution {
            let outcome = match &r.failure {
                Some(_) => "no resolution".to_string(),
                None => format!("{} distribution(s)", r.distributions.len()),
            };
            text.push_str(&format!("resolved with {}: {outcome}\n", r.resolver));
            for d in &r.distributions {
                text.push_str(&format!("  {} {}  {}\n", d.name, d.version, d.source));
            }
        }
        for f in self.findings {
            text.push_str(&format!("{}: {}: {}\n", f.severity.as_str(), f.kind, f.message));
            for file in &f.files {
                text.push_str(&format!("  {file}\n"));
            }
        }
        text.push_str(&format!("{} error(s), {} warning(s)\n", self.errors, self.warnings));
        text
    }
}

/// `index`: what was written.
pub fn index_json(summary: &IndexSummary) -> String {
    json::to_text(&Versioned::new(summary))
}

pub fn index_text(summary: &IndexSummary) -> String {
    if summary.files.is_empty() {
        return format!("nothing written to {}: no file could be indexed\n", summary.output);
    }
    let mut text = format!("wrote {} ({} projects, {} files)\n", summary.output, summary.projects, summary.files.len());
    if let Some(upload) = &summary.upload_dir {
        text.push_str(&format!("files to upload beside the wheels: {upload}\n"));
    }
    text
}

/// `index`'s messages for stderr: its notes, each file left out, their count.
pub fn index_messages(summary: &IndexSummary) -> Vec<String> {
    let mut messages: Vec<String> = summary.notes.iter().map(|note| format!("wheelfix: note: {note}")).collect();
    for skipped in &summary.skipped {
        messages.push(format!("wheelfix: error: {}: left out of the index: {}", skipped.file, skipped.reason));
    }
    if !summary.skipped.is_empty() {
        messages.push(format!("wheelfix: {} file(s) left out of the index", summary.skipped.len()));
    }
    messages
}

/// `metapackage`: the wheel written and its pins.
pub fn metapackage_json(meta: &Metapackage) -> String {
    json::to_text(&Versioned::new(meta))
}

pub fn metapackage_text(meta: &Metapackage) -> String {
    let mut text = format!("wrote {} ({} pins)\n", meta.path, meta.pins.len());
    for pin in &meta.pins {
        text.push_str(&format!("  {pin}\n"));
    }
    text
}

/// `lddtree`: the trees.
pub fn lddtree_json(trees: &[Tree]) -> String {
    #[derive(Serialize)]
    struct Document<'a> {
        version: u32,
        trees: &'a [Tree],
    }
    json::to_text(&Document { version: JSON_VERSION, trees })
}

pub fn lddtree_text(trees: &[Tree]) -> String {
    trees.iter().map(tree_text).collect::<Vec<_>>().join("\n")
}

/// A tree as indented text: each library under the first object that needed it.
fn tree_text(tree: &Tree) -> String {
    let mut out = tree.file.clone();
    if let Some(interp) = &tree.interpreter {
        out.push_str(&format!(" (interpreter {interp})"));
    }
    out.push('\n');
    let mut shown = std::collections::HashSet::new();
    children_text(tree, &tree.needed, 1, &mut shown, &mut out);
    out
}

fn children_text(
    tree: &Tree,
    needed: &[String],
    depth: usize,
    shown: &mut std::collections::HashSet<String>,
    out: &mut String,
) {
    for soname in needed {
        let indent = "    ".repeat(depth);
        let Some(lib) = tree.libs.get(soname) else {
            out.push_str(&format!("{indent}{soname} (the loader)\n"));
            continue;
        };
        if !shown.insert(soname.clone()) {
            out.push_str(&format!("{indent}{soname} (already loaded)\n"));
            continue;
        }
        match (&lib.path, &lib.source) {
            (Some(path), Some(source)) => out.push_str(&format!("{indent}{soname} => {path} ({source})\n")),
            _ => out.push_str(&format!("{indent}{soname} => not found\n")),
        }
        children_text(tree, &lib.needed, depth + 1, shown, out);
    }
}
