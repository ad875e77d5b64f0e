//! `thin`: one fat build cut down to some GPU targets. Every wheel is examined, its plan made
//! from the analysis ([`plan::thin`]), its output named (the same name: the wheel stays the same
//! distribution), collisions refused before anything is written, then each is written.

use std::path::{Path, PathBuf};

use super::pipeline::{
    DeviceCommand, Error, Examined, TargetsError, examine_keeping_copies, refuse_collisions, refuse_missing, writable,
};
use super::write::{Destination, Placement, output_dir, place};
use super::{Common, Output, UsageError, WheelFailed, display_name};
use crate::analysis::CopyRoom;
use crate::gpu::TargetId;
use crate::gpu::targets::Keep;
use crate::plan::thin::{ThinOptions, ThinPlan, thin};
use crate::report::thin::{ThinOutcome, to_json, to_text};
use crate::settings::Settings;
use crate::{parallel, wheel};

/// `thin`'s request.
#[derive(Debug, Clone)]
pub struct ThinRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub destination: Destination,
    /// Thin a wheel whose device code has nothing for a requested target anyway.
    pub allow_missing: bool,
    /// Remove standalone code-object files for other targets.
    pub prune_files: bool,
    /// Take the freed pages out of the host binaries (`--no-compact` leaves them as zeros).
    pub compact: bool,
}

/// Run `thin`: what each wheel became, errors on stderr.
pub fn run(request: &ThinRequest) -> Output {
    let mut settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let keep = match keep_of(&settings) {
        Ok(keep) => keep,
        Err(e) => return Output::usage(e),
    };
    // The files with bundles are kept inflated where the outputs go, so that each is inflated
    // once; beyond the room the writer inflates again.
    let copies_dir = match &request.destination {
        Destination::Directory(dir) => {
            if let Err(e) = std::fs::create_dir_all(dir) {
                return Output::failure(format!("cannot create {}: {e}", dir.display()));
            }
            dir.clone()
        }
        Destination::InPlace => crate::output::parent_dir(&request.wheels[0]).to_path_buf(),
    };
    let room = CopyRoom::new(copies_dir, settings.copy_room, keep.clone());
    let examined = examine_keeping_copies(&request.wheels, &mut settings, room, request.common.quiet);
    let mut planned: Vec<Result<(Examined, ThinPlan, PathBuf), Error>> = examined
        .into_iter()
        .zip(&request.wheels)
        .map(|(e, path)| plan_one(e?, &keep, request, &settings, path))
        .collect();
    refuse_collisions(&mut planned, |(_, _, d)| d.as_path(), &request.wheels);
    let work: Vec<_> = planned.into_iter().zip(&request.wheels).collect();
    let results: Vec<Result<ThinOutcome, WheelFailed<Error>>> = parallel::map_owned(work, |(planned, path)| {
        planned
            .and_then(|(examined, plan, dest)| {
                let at = Placement { path, dest: &dest, destination: &request.destination, head: None };
                write_one(&examined, &plan, &settings, at)
            })
            .map_err(|e| WheelFailed::new(path, e))
    });
    let named: Vec<(String, &Result<ThinOutcome, WheelFailed<Error>>)> =
        request.wheels.iter().zip(&results).map(|(path, r)| (display_name(path), r)).collect();
    let stdout = if request.common.json { to_json(&named) } else { to_text(&named) };
    let stderr = crate::report::thin::messages(&named);
    let failed = results.iter().filter(|r| r.is_err()).count();
    Output { stdout, stderr, code: 0 }.finish(failed, results.len())
}

/// The targets to keep: `--gpu-target`, else `gpu-targets` of `[tool.wheelfix]`.
fn keep_of(settings: &Settings) -> Result<Keep, UsageError> {
    let targets = &settings.gpu_targets.value;
    if targets.is_empty() {
        return Err(TargetsError::NoTargets { command: DeviceCommand::Thin }.into());
    }
    let requested: Result<Vec<TargetId>, _> = targets.iter().map(|t| crate::policy::gpus::parse(t)).collect();
    Ok(Keep::new(requested?))
}

/// One wheel's plan and output path.
fn plan_one(
    examined: Examined,
    keep: &Keep,
    request: &ThinRequest,
    settings: &Settings,
    path: &Path,
) -> Result<(Examined, ThinPlan, PathBuf), Error> {
    let (wheel, analysis) = (&examined.wheel, &examined.analysis);
    let options = ThinOptions {
        prune_files: request.prune_files,
        compact: request.compact,
        compression_level: settings.zip_compression_level.value,
        shared_copies: false,
    };
    let plan = thin(wheel, analysis, keep, options);
    writable(DeviceCommand::Thin, wheel, &plan.unreadable)?;
    if !request.allow_missing {
        refuse_missing(&plan, analysis)?;
    }
    // The same name: in place, the input itself.
    let dest = match &request.destination {
        Destination::InPlace => path.to_path_buf(),
        Destination::Directory(_) => output_dir(path, &request.destination)?.join(wheel.filename.to_string()),
    };
    Ok((examined, plan, dest))
}

/// Write one thinned wheel where `at` says (its input, its destination).
pub(super) fn write_one(
    examined: &Examined,
    plan: &ThinPlan,
    settings: &Settings,
    at: Placement<'_>,
) -> Result<ThinOutcome, Error> {
    let path = at.path;
    let (wheel, analysis) = (&examined.wheel, &examined.analysis);
    let changed = plan.changes();
    // A copy is right only when the input is true: a stale RECORD is written corrected even
    // with nothing to drop.
    let rewrite = changed || !analysis.record_findings.is_empty();
    let size_before = std::fs::metadata(path).map(|m| m.len()).ok();
    let written = place(examined, &plan.plan, settings, rewrite, at)?;
    let not_compacted = written.as_ref().map(not_compacted).unwrap_or_default();
    let output = written.map(|w| w.path);
    let size_after = match &output {
        Some(o) => std::fs::metadata(o).map(|m| m.len()).ok(),
        None => size_before,
    };
    let installed_before = Some(wheel.archive.installed_size());
    let installed_after = match &output {
        Some(o) => wheel::Archive::open(o).ok().map(|a| a.installed_size()),
        None => installed_before,
    };
    Ok(ThinOutcome {
        wheel: wheel.filename.to_string(),
        output: output.map(|o| o.display().to_string()),
        changed,
        size_before,
        size_after,
        installed_before,
        installed_after,
        not_compacted,
        cut: plan.cut.clone(),
        pruned: plan.pruned.clone(),
        left: plan.left.clone(),
        missing: plan.missing.clone(),
        record_corrected: if rewrite { analysis.record_findings.clone() } else { Default::default() },
    })
}

/// The host binaries whose layout the writer left, and why.
fn not_compacted(written: &crate::writer::Written) -> Vec<crate::report::thin::NotCompacted> {
    // By member path, in order.
    written
        .thinned
        .iter()
        .filter_map(|(file, outcome)| {
            let reason = outcome.layout_note.clone()?;
            Some(crate::report::thin::NotCompacted { file: file.clone(), reason })
        })
        .collect()
}
