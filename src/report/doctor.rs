//! `doctor`'s report: a summary line first (`ready for gfx942`, `3 problems`), each problem with
//! its file, distribution and fix, then what was read; or one JSON document
//! (`schemas/doctor.schema.json`).

use std::fmt::Write;

use serde::Serialize;

use super::json;
use crate::policy::doctor::{Diagnosis, Severity};

/// The JSON document: one diagnosis per site-packages directory.
pub fn doctor_json(diagnoses: &[Diagnosis]) -> String {
    #[derive(Serialize)]
    struct Document<'a> {
        version: u32,
        /// Exit status: `ready` (0) or `problems` (1).
        status: &'static str,
        environments: Vec<Environment<'a>>,
    }
    #[derive(Serialize)]
    struct Environment<'a> {
        summary: String,
        #[serde(flatten)]
        diagnosis: &'a Diagnosis,
    }
    let status = if diagnoses.iter().all(|d| d.errors() == 0) { "ready" } else { "problems" };
    let environments = diagnoses.iter().map(|d| Environment { summary: d.summary(), diagnosis: d }).collect();
    json::to_text(&Document { version: super::JSON_VERSION, status, environments })
}

/// The text report of every diagnosis.
pub fn doctor_text(diagnoses: &[Diagnosis]) -> String {
    diagnoses.iter().map(diagnosis_text).collect::<Vec<_>>().join("\n")
}

fn diagnosis_text(d: &Diagnosis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", d.summary());
    let _ = writeln!(out, "  environment: {}", d.site);
    if d.gpus.is_empty() {
        let _ = writeln!(out, "  GPUs:        none");
    }
    for gpu in &d.gpus {
        let node = gpu.node.map(|n| format!("KFD node {n}")).unwrap_or_else(|| "named with --gpu".into());
        let native = if gpu.native != gpu.processor {
            format!(", a {} taken as {}", gpu.native, gpu.processor)
        } else {
            String::new()
        };
        let _ = writeln!(out, "  GPU:         {} ({node}{native})", gpu.target_id);
    }
    let with_code = d.binaries.len();
    let _ = writeln!(
        out,
        "  read:        {} distributions, {} host binaries, {with_code} with AMD GPU code",
        d.distributions.len(),
        d.binaries_read
    );
    if !d.problems.is_empty() {
        let _ = writeln!(out, "\n  Problems:");
        for p in &d.problems {
            let severity = match p.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let mut head = format!("    {severity} [{}]", p.kind);
            if let Some(gpu) = &p.gpu {
                let _ = write!(head, " {gpu}");
            }
            let _ = writeln!(out, "{head}");
            if let Some(file) = &p.file {
                let owner = p.distribution.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
                let _ = writeln!(out, "      {file}{owner}");
            } else if let Some(dist) = &p.distribution {
                let _ = writeln!(out, "      {dist}");
            }
            let _ = writeln!(out, "      {}", p.message);
            if let Some(fix) = &p.fix {
                let _ = writeln!(out, "      fix: {fix}");
            }
        }
    }
    if !d.binaries.is_empty() {
        let _ = writeln!(out, "\n  Device code, per GPU:");
        for b in &d.binaries {
            let owner = b.distribution.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            let _ = writeln!(out, "    {}{owner}  {}", b.file, b.form);
            for g in &b.gpus {
                let _ = writeln!(out, "      {} {}: {}", if g.runs { "ok " } else { "NO " }, g.gpu, g.how);
            }
        }
    }
    if !d.notes.is_empty() {
        let _ = writeln!(out, "\n  Notes:");
        for n in &d.notes {
            let _ = writeln!(out, "    {n}");
        }
    }
    super::escape_text(&out).into_owned()
}
