//! wheelfix: the true platform tag of a Python wheel, and the changes that make its tags,
//! versions and metadata true.
//!
//! The data flows through five stages, one module each:
//! [`wheel`] (the archive) → [`analysis`] (facts about members, via [`elf`]) →
//! [`policy`] (the verdict and its reasons) → a [`wheel::writer::Plan`] (what to change) →
//! [`wheel::writer`] (the one writer). `show` stops after the verdict; `retag` writes a plan.

pub mod analysis;
pub mod elf;
pub mod exclude;
pub mod libsearch;
pub mod platform;
pub mod policy;
pub mod progress;
pub mod report;
pub mod retag;
pub mod tags;
pub mod wheel;

use std::path::{Path, PathBuf};

use analysis::{AnalyzeOptions, analyze};
use progress::Progress;
use report::ShowReport;
use tags::TagRequest;
use wheel::Wheel;

/// Any failure of one wheel; the message names the wheel's member where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Wheel(#[from] wheel::WheelError),
    #[error(transparent)]
    Tag(#[from] tags::TagError),
    #[error(transparent)]
    Write(#[from] wheel::writer::WriteError),
    #[error("the output {0} would replace the input; use --in-place to allow that")]
    WouldOverwriteInput(PathBuf),
    #[error("cannot create {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error("cannot remove the old file {path}: {source}")]
    RemoveOld { path: String, source: std::io::Error },
}

/// Analyse one wheel for `show`.
pub fn show(path: &Path, options: &AnalyzeOptions, progress: &dyn Progress) -> Result<ShowReport, Error> {
    let wheel = Wheel::open(path)?;
    let analysis = analyze(&wheel, options, progress)?;
    Ok(ShowReport::new(&wheel, &analysis))
}

/// Where `retag` writes.
#[derive(Debug, Clone)]
pub enum Destination {
    /// Into this directory, under the new name.
    Directory(PathBuf),
    /// Beside the input, replacing it.
    InPlace,
}

/// What `retag` did with one wheel.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RetagOutcome {
    pub wheel: String,
    pub output: Option<String>,
    pub tags: Vec<String>,
    /// False when the wheel already carried these tags (it may still have been copied).
    pub changed: bool,
    pub report: ShowReport,
}

/// Retag one wheel: analyse (verifying hashes unless `options.verify_hashes` is off), derive its
/// true tags, and write the result.
pub fn retag(
    path: &Path,
    options: &AnalyzeOptions,
    request: &TagRequest,
    destination: &Destination,
    progress: &dyn Progress,
) -> Result<RetagOutcome, Error> {
    let mut wheel = Wheel::open(path)?;
    let analysis = analyze(&wheel, options, progress)?;
    let report = ShowReport::new(&wheel, &analysis);
    let tags = retag::retag_tags(&wheel, &analysis, request)?;
    let plan = retag::plan_tags(&wheel, &analysis, &tags);
    let changed = plan.is_some();
    let file_name = plan.as_ref().map(|p| p.filename.to_string()).unwrap_or_else(|| wheel.filename.to_string());
    let output = match destination {
        Destination::InPlace => {
            let Some(plan) = plan else {
                return Ok(RetagOutcome { wheel: wheel.filename.to_string(), output: None, tags, changed, report });
            };
            let dest = retag::output_path(path, &file_name, None);
            wheel::writer::write_wheel(&mut wheel, &plan, &dest)?;
            if dest.file_name() != path.file_name() {
                std::fs::remove_file(path)
                    .map_err(|source| Error::RemoveOld { path: path.display().to_string(), source })?;
            }
            dest
        }
        Destination::Directory(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|source| Error::CreateDir { path: dir.display().to_string(), source })?;
            let dest = retag::output_path(path, &file_name, Some(dir));
            if same_file(&dest, path) {
                return Err(Error::WouldOverwriteInput(dest));
            }
            let plan = plan.unwrap_or_else(|| wheel::writer::Plan::new(wheel.filename.clone()));
            wheel::writer::write_wheel(&mut wheel, &plan, &dest)?
        }
    };
    Ok(RetagOutcome {
        wheel: wheel.filename.to_string(),
        output: Some(output.display().to_string()),
        tags,
        changed,
        report,
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
