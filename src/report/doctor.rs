//! `doctor`'s report: a summary line first (`ready for gfx942`, `3 problems`, `cannot tell: …`,
//! `nothing to check: …`), each problem with its file, distribution and fix, then what was
//! read; or one JSON document (`schemas/doctor.schema.json`). Every field read from the
//! environment passes [`super::field`]: none prints a line of its own.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::{field, json};
use crate::policy::doctor::{Diagnosis, Status};

/// `doctor --json`: one diagnosis per site-packages directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorDocument {
    pub version: u32,
    /// The exit status: `ready` or `nothing-to-check` (0), `problems` or `cannot-tell` (1); of
    /// several environments, the worst.
    pub status: Status,
    pub environments: Vec<EnvironmentReport>,
}

/// One site-packages directory's diagnosis, with its summary line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentReport {
    pub summary: String,
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
}

/// The status of several environments: the worst one's.
fn worst(diagnoses: &[Diagnosis]) -> Status {
    let rank = |s: Status| match s {
        Status::CannotTell => 3,
        Status::Problems => 2,
        Status::Ready => 1,
        Status::NothingToCheck => 0,
    };
    diagnoses.iter().map(|d| d.status).max_by_key(|s| rank(*s)).unwrap_or(Status::NothingToCheck)
}

/// The JSON document of `diagnoses`.
pub fn doctor_json(diagnoses: &[Diagnosis]) -> String {
    let environments =
        diagnoses.iter().map(|d| EnvironmentReport { summary: d.summary(), diagnosis: d.clone() }).collect();
    json::to_text(&DoctorDocument { version: super::JSON_VERSION, status: worst(diagnoses), environments })
}

/// The text report of every diagnosis.
pub fn doctor_text(diagnoses: &[Diagnosis]) -> String {
    diagnoses.iter().map(diagnosis_text).collect::<Vec<_>>().join("\n")
}

fn diagnosis_text(d: &Diagnosis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", field(&d.summary()));
    let _ = writeln!(out, "  environment: {}", field(&d.site));
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
            let mut head = format!("    {} [{}]", p.severity.as_str(), p.kind);
            if let Some(gpu) = &p.gpu {
                let _ = write!(head, " {}", field(gpu));
            }
            let _ = writeln!(out, "{head}");
            if let Some(file) = &p.file {
                let owner = p.distribution.as_deref().map(|d| format!(" ({})", field(d))).unwrap_or_default();
                let _ = writeln!(out, "      {}{owner}", field(file));
            } else if let Some(dist) = &p.distribution {
                let _ = writeln!(out, "      {}", field(dist));
            }
            let _ = writeln!(out, "      {}", field(&p.message));
            if let Some(fix) = &p.fix {
                let _ = writeln!(out, "      fix: {}", field(fix));
            }
        }
    }
    if !d.binaries.is_empty() {
        let _ = writeln!(out, "\n  Device code, per GPU:");
        for b in &d.binaries {
            let owner = b.distribution.as_deref().map(|d| format!(" ({})", field(d))).unwrap_or_default();
            let _ = writeln!(out, "    {}{owner}  {}", field(&b.file), b.form);
            for g in &b.gpus {
                let _ = writeln!(out, "      {} {}: {}", if g.runs { "ok " } else { "NO " }, g.gpu, field(&g.how));
            }
        }
    }
    if !d.notes.is_empty() {
        let _ = writeln!(out, "\n  Notes:");
        for n in &d.notes {
            let _ = writeln!(out, "    {}", field(n));
        }
    }
    out
}
