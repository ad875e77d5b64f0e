//! The outcomes of the commands that work on sets of wheels or single files: `check`, `index`,
//! `metapackage`, `lddtree`, as JSON and text.

use serde::{Deserialize, Serialize};

use super::json::{self, JSON_VERSION, Versioned};
use crate::analysis::lddtree::Tree;
use crate::check::{Finding, Kind, Severity};
use crate::index::IndexSummary;
use crate::metapackage::Metapackage;
use crate::upstream::resolve::Resolution;

/// `check`'s findings, counted, and the resolution `--resolve` held against the set.
pub struct CheckReport<'a> {
    /// Errors first, then warnings; by kind within each.
    pub findings: Vec<&'a Finding>,
    pub errors: usize,
    pub warnings: usize,
    pub resolution: Option<&'a Resolution>,
}

impl<'a> CheckReport<'a> {
    /// The report of `findings`; with `errors_only`, warnings are counted but not listed.
    pub fn new(findings: &'a [Finding], errors_only: bool) -> Self {
        let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
        let mut listed: Vec<&Finding> =
            findings.iter().filter(|f| !errors_only || f.severity == Severity::Error).collect();
        listed.sort_by(|a, b| (a.severity, &a.kind).cmp(&(b.severity, &b.kind)));
        CheckReport { findings: listed, errors, warnings: findings.len() - errors, resolution: None }
    }

    pub fn with_resolution(mut self, resolution: Option<&'a Resolution>) -> Self {
        self.resolution = resolution;
        self
    }

    pub fn to_json(&self) -> String {
        json::to_text(&self.document())
    }

    /// The `check --json` document.
    pub fn document(&self) -> CheckDocument {
        let fixes = self.findings.iter().filter_map(|f| Some((f.kind, f.kind.fix()?.to_string()))).collect();
        CheckDocument {
            version: JSON_VERSION,
            errors: self.errors,
            warnings: self.warnings,
            findings: self.findings.iter().map(|&f| f.clone()).collect(),
            fixes,
            resolution: self.resolution.cloned(),
        }
    }

    /// Errors first, grouped by kind, each kind with its fix where there is one.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        if let Some(r) = self.resolution {
            let outcome = match &r.failure {
                Some(_) => "no resolution".to_string(),
                None => crate::report::plural(r.distributions.len(), "distribution"),
            };
            text.push_str(&format!("resolved with {}: {outcome}\n", r.resolver));
            for d in &r.distributions {
                text.push_str(&format!("  {} {}  {}\n", d.name, d.version, d.source));
            }
        }
        let mut groups: Vec<(Severity, Kind, Vec<&Finding>)> = Vec::new();
        for f in &self.findings {
            match groups.last_mut() {
                Some((severity, kind, list)) if *severity == f.severity && *kind == f.kind => list.push(f),
                _ => groups.push((f.severity, f.kind, vec![f])),
            }
        }
        for (severity, kind, list) in groups {
            text.push_str(&format!("{} {kind} ({}):\n", severity.as_str(), list.len()));
            if let Some(fix) = kind.fix() {
                text.push_str(&format!("  fix: {fix}\n"));
            }
            for f in list {
                text.push_str(&format!("  {}: {}: {}\n", severity.as_str(), kind, f.message));
                for file in &f.files {
                    text.push_str(&format!("    {file}\n"));
                }
            }
        }
        let listed = if self.findings.len() < self.errors + self.warnings {
            " (warnings not listed: --errors-only)"
        } else {
            ""
        };
        text.push_str(&format!(
            "{}, {}{listed}\n",
            crate::report::plural(self.errors, "error"),
            crate::report::plural(self.warnings, "warning")
        ));
        text
    }
}

/// `lddtree --json`: a tree per file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LddtreeDocument {
    pub version: u32,
    pub trees: Vec<Tree>,
}

/// `check --json`: the findings and what to do about them; it reads back from that JSON, so
/// that scripts and tests in Rust take it typed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckDocument {
    pub version: u32,
    pub errors: usize,
    pub warnings: usize,
    /// Errors first, then warnings; by kind within each.
    pub findings: Vec<Finding>,
    /// What to do about each kind of finding listed, where there is one thing to do.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fixes: std::collections::BTreeMap<Kind, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
}

impl CheckDocument {
    /// The findings of `kind`.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Finding> + 'a {
        self.findings.iter().filter(move |f| f.kind.name() == kind)
    }

    /// The kinds of the findings, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.findings.iter().map(|f| f.kind.name()).collect()
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
        messages.push(format!("wheelfix: {} left out of the index", crate::log::plural(summary.skipped.len(), "file")));
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
    json::to_text(&LddtreeDocument { version: JSON_VERSION, trees: trees.to_vec() })
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

/// `site --json`: what was published (`schemas/site.schema.json`).
#[derive(Serialize)]
pub struct SiteSummary<'a> {
    pub version: u32,
    /// The published directory.
    pub output: String,
    pub indexes: Vec<SiteIndex<'a>>,
    /// What was found in the indexes and not published, and why.
    pub left_out: &'a [String],
}

/// One index of a site, as its release page summarises it.
#[derive(Serialize)]
pub struct SiteIndex<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub files: usize,
    pub errors: usize,
    pub warnings: usize,
}

impl SiteSummary<'_> {
    pub fn to_json(&self) -> String {
        json::to_text(self)
    }
}
