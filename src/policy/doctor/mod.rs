//! `doctor`'s judgement of an installed environment on a machine's GPUs, over everything
//! installed: for each binary with device code and each GPU, whether the code object the
//! runtime would load is there (in the binary, bundle by bundle, or in the kpack archives its
//! markers lead to, as the runtime looks: [`crate::gpu::resolve`]), with the runtime's
//! variables applied to both (`HSA_OVERRIDE_GFX_VERSION`); device wheels installed for another
//! GPU named as such; whether the kernel databases of a library, wherever they are installed,
//! cover the GPU; exact pins between distributions that no longer hold; one ROCm ABI; every
//! library found. What cannot be read is a problem of its own, and the verdict is "cannot
//! tell", never "ready". Each problem names its file, the distribution that owns it, and a fix
//! that runs as printed ([`fixes`]).

use serde::{Deserialize, Serialize};

use crate::analysis::installed::{Distribution, Environment, InstallerFacts};
use crate::analysis::machine::{Gpu, Machine};

mod code;
mod environment;
pub mod fixes;
#[cfg(test)]
mod tests;

pub use super::problem::{Kind, Severity};
pub use fixes::Fixes;

/// One problem, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Ex) `no-code-for-gpu`, `kpack-unresolved`, `kpack-archive-damaged`
    pub kind: Kind,
    pub severity: Severity,
    /// The GPU (its target id) it concerns, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The file, relative to site-packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The distribution that owns it: `name==version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    pub message: String,
    /// What to run, or do, to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Problem {
    /// A problem of `kind` at its kind's severity, about nothing in particular yet.
    pub fn new(kind: Kind, message: String) -> Problem {
        Problem { kind, severity: kind.severity(), gpu: None, file: None, distribution: None, message, fix: None }
    }

    pub fn on_gpu(mut self, gpu: &Gpu) -> Problem {
        self.gpu = Some(gpu.target_id.clone());
        self
    }

    pub fn in_file(mut self, file: &str, distribution: Option<String>) -> Problem {
        self.file = Some(file.to_string());
        self.distribution = distribution;
        self
    }

    pub fn of(mut self, distribution: &Distribution) -> Problem {
        self.distribution = Some(name_of(distribution));
        self
    }

    pub fn fixed_by(mut self, fix: impl Into<String>) -> Problem {
        self.fix = Some(fix.into());
        self
    }

    pub fn with_severity(mut self, severity: Severity) -> Problem {
        self.severity = severity;
        self
    }

    /// A kind whose problem means something was not read, so nothing can be said of it: a
    /// distribution or binary, or a kpack marker that cannot be parsed (where its code is, and
    /// whether it is installed, cannot be known).
    fn is_unread(&self) -> bool {
        matches!(self.kind, Kind::DistributionUnreadable | Kind::BinaryUnreadable | Kind::KpackMarkerUnusable)
    }
}

/// One binary with device code, on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// The GPU's target id.
    pub gpu: String,
    pub runs: bool,
    /// What serves it, or what is missing. Ex) `gfx942 in its offload bundles`
    pub how: String,
}

/// A binary with device code, and its verdict on each GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryVerdict {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// `bundles` (a fat or thin build), `kpack` (split: code in archives), or `code-objects`.
    pub form: String,
    /// The target IDs it carries (a split binary: none, its archives hold them).
    pub targets: Vec<crate::gpu::TargetId>,
    pub gpus: Vec<Served>,
}

/// The verdict on an environment, what the exit status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Every GPU runs what is installed (warnings aside): exit 0.
    Ready,
    /// A kernel launch or a load fails: exit 1.
    Problems,
    /// Something could not be read, so nothing can be said of it: exit 1.
    CannotTell,
    /// No GPU code and no ROCm library is installed: exit 0.
    NothingToCheck,
}

/// The diagnosis of one environment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diagnosis {
    /// site-packages.
    pub site: String,
    pub status: Status,
    pub gpus: Vec<Gpu>,
    pub distributions: Vec<Distribution>,
    /// How packages get into it: what the fixes run.
    pub installer: InstallerFacts,
    /// How many host binaries were read.
    pub binaries_read: usize,
    pub binaries: Vec<BinaryVerdict>,
    pub problems: Vec<Problem>,
    pub notes: Vec<String>,
}

impl Diagnosis {
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|p| p.severity == Severity::Error).count()
    }

    /// Whether the exit status is 1.
    pub fn fails(&self) -> bool {
        matches!(self.status, Status::Problems | Status::CannotTell)
    }

    /// The first line a person reads. Ex) `ready for gfx942`, `ready for gfx942 (1 warning)`,
    /// `3 problems`, `cannot tell: 1 file it cannot read`, `nothing to check: …`
    pub fn summary(&self) -> String {
        let errors = self.errors();
        let warnings = self.problems.len() - errors;
        match self.status {
            Status::CannotTell => {
                let unread = self.problems.iter().filter(|p| p.is_unread()).count();
                let others = errors - unread;
                let also =
                    if others > 0 { format!(", and {}", crate::log::plural(others, "problem")) } else { String::new() };
                format!("cannot tell: {} it cannot read{also}", crate::log::plural(unread, "file"))
            }
            Status::Problems => crate::log::plural(errors, "problem"),
            Status::NothingToCheck => format!(
                "nothing to check: no GPU code and no ROCm library among its {}",
                crate::log::plural(self.distributions.len(), "distribution")
            ),
            Status::Ready => {
                let mut gpus: Vec<&str> = self.gpus.iter().map(|g| g.processor.as_str()).collect();
                gpus.dedup();
                let warned = if warnings > 0 {
                    format!(" ({})", crate::log::plural(warnings, "warning"))
                } else {
                    String::new()
                };
                format!("ready for {}{warned}", gpus.join(", "))
            }
        }
    }
}

/// `name==version`.
fn name_of(d: &Distribution) -> String {
    format!("{}=={}", d.name, d.version)
}

/// The distribution that owns a binary, as `name==version`.
fn owner_name(env: &Environment, owner: Option<usize>) -> Option<String> {
    owner.map(|i| name_of(&env.site.distributions[i]))
}

/// Judge `env` on the GPUs of `machine`; fixes install as `fixes` say.
pub fn diagnose(env: &Environment, machine: &Machine, fixes: &Fixes<'_>) -> Diagnosis {
    let mut problems = Vec::new();
    let mut notes = machine.notes.clone();
    environment::unread_problems(env, fixes, &mut problems);
    let software = environment::has_gpu_software(env);
    if machine.gpus.is_empty() && software {
        problems.push(
            Problem::new(Kind::NoGpu, format!("no GPU the runtime would use ({})", machine.source))
                .fixed_by("name the GPU to check for with --gpu (e.g. --gpu gfx942)"),
        );
    }
    let judged = code::judge_binaries(env, machine, fixes, &mut problems);
    environment::database_problems(env, machine, fixes, &mut problems);
    environment::abi_problems(env, &mut problems);
    environment::loader_problems(env, &mut problems, &mut notes);
    environment::pin_problems(env, fixes, &mut problems);
    problems.sort_by(|a, b| (a.severity, &a.file, a.kind).cmp(&(b.severity, &b.file, b.kind)));
    problems.dedup();
    let status = if problems.iter().any(Problem::is_unread) {
        Status::CannotTell
    } else if problems.iter().any(|p| p.severity == Severity::Error) {
        Status::Problems
    } else if !software && problems.is_empty() {
        Status::NothingToCheck
    } else {
        Status::Ready
    };
    Diagnosis {
        site: env.site.root.display().to_string(),
        status,
        gpus: machine.gpus.clone(),
        distributions: env.site.distributions.clone(),
        installer: env.site.installer.clone(),
        binaries_read: env.binaries.len(),
        binaries: judged,
        problems,
        notes,
    }
}
