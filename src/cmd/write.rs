//! `retag` and `repair`: every wheel examined, its output named (collisions refused before
//! anything is written), its plan completed and written.

use std::path::{Path, PathBuf};

use super::pipeline::{Batch, Error, Examined, decide_versions, examine_all, refuse_collisions};
use super::{Common, Output, WheelFailed, display_name};
use crate::output::{Commit, OutputKey};
use crate::plan::tags::Basis;
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::report::outcome::{self, RetagOutcome};
use crate::settings::Settings;
use crate::version::VersionChange;
use crate::wheel::platform_tag::PlatformTag;
use crate::writer::head_start::{self, HeadStart};
use crate::writer::{self, WriteOptions};
use crate::{analysis, parallel};

/// Where `retag` writes.
#[derive(Debug, Clone)]
pub enum Destination {
    /// Into this directory, under the new name.
    Directory(PathBuf),
    /// Beside the input, replacing it.
    InPlace,
}

impl Destination {
    /// Where a writing command puts its wheels: in place when asked, else the directory given,
    /// else `wheelhouse/` (auditwheel's default).
    pub fn chosen(in_place: bool, dir: Option<PathBuf>) -> Destination {
        match dir {
            _ if in_place => Destination::InPlace,
            Some(dir) => Destination::Directory(dir),
            None => Destination::Directory(PathBuf::from("wheelhouse")),
        }
    }
}

/// What a writing batch does to each wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Its true tags and, when marking, its new version and pins.
    Retag,
    /// Its external libraries vendored and what needs them patched, then the tags the result
    /// meets (and, when marking, the new version), as `Retag` does.
    Repair,
}

impl Job {
    /// What the tags are derived from: the wheel as it is, or as repair leaves it.
    fn basis(self) -> Basis {
        match self {
            Job::Retag => Basis::AsIs,
            Job::Repair => Basis::Repaired,
        }
    }
}

/// `retag`'s and `repair`'s request.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub destination: Destination,
}

/// Run `retag` or `repair`: what each wheel became, errors and notes on stderr.
pub fn run(request: &WriteRequest, job: Job) -> Output {
    let settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let progress = crate::progress::for_inputs(&request.wheels, request.common.quiet);
    let batch = write_batch(&request.wheels, &settings, job, &request.destination, progress.as_ref());
    drop(progress);
    let marking = settings.marking.is_some();
    let results: Vec<Result<RetagOutcome, WheelFailed<Error>>> =
        request.wheels.iter().zip(batch.results).map(|(path, r)| r.map_err(|e| WheelFailed::new(path, e))).collect();
    let written: Vec<outcome::Written<'_, _>> =
        request.wheels.iter().zip(&results).map(|(path, r)| (display_name(path), r)).collect();
    let stdout =
        if request.common.json { outcome::to_json(&written, marking) } else { outcome::to_text(&written, marking) };
    let mut stderr = outcome::messages(&written);
    stderr.extend(outcome::hazard_messages(&batch.hazards));
    let failed = results.iter().filter(|r| r.is_err()).count();
    Output { stdout, stderr, code: 0 }.finish(failed, results.len())
}

/// Retag a batch: examine every wheel (verifying hashes unless told not to), derive its true
/// tags and, when marking, its new version and pins; write each result.
pub fn retag_batch(
    paths: &[PathBuf],
    settings: &Settings,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    write_batch(paths, settings, Job::Retag, destination, progress)
}

/// Repair a batch ([`Job::Repair`]).
pub fn repair_batch(
    paths: &[PathBuf],
    settings: &Settings,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    write_batch(paths, settings, Job::Repair, destination, progress)
}

/// One wheel of a writing batch whose output name is known.
struct Named {
    examined: Examined,
    change: VersionChange,
    tags: Vec<PlatformTag>,
    /// The plan of its name, WHEEL and METADATA ([`plan::retag`]).
    plan: Plan,
    /// Where it goes (`--in-place` under the same name: the input itself).
    dest: PathBuf,
    /// Its first members, copied while the batch was analysed.
    head: Option<HeadStart>,
}

fn write_batch(
    paths: &[PathBuf],
    settings: &Settings,
    job: Job,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    // Into a directory, `retag` copies what it cannot change of each large wheel while the batch
    // is analysed ([`head_start`]); `repair` may patch any binary, so it waits for its plan.
    let ahead_into = match (job, destination) {
        (Job::Retag, Destination::Directory(dir)) if std::fs::create_dir_all(dir).is_ok() => Some(dir.as_path()),
        _ => None,
    };
    let (heads, examined) = parallel::while_running(
        |stop| match ahead_into {
            Some(dir) => head_start::copy_ahead_all(paths, dir, &head_start::retag_may_change, stop),
            None => Vec::new(),
        },
        || examine_all(paths, settings, progress),
    );
    let mut heads = heads.into_iter().chain(std::iter::repeat_with(|| None));
    let (changes, hazards) = decide_versions(&examined, settings);
    let basis = job.basis();
    // First every output's name, so that collisions are found before anything is written.
    let mut named: Vec<Result<Named, Error>> = examined
        .into_iter()
        .zip(changes)
        .zip(paths)
        .map(|((e, change), path)| {
            let head = heads.next().flatten();
            name_output(e?, change?, settings, basis, path, destination).map(|named| Named { head, ..named })
        })
        .collect();
    refuse_collisions(&mut named, |n| n.dest.as_path(), paths);
    let work: Vec<(Result<Named, Error>, &PathBuf)> = named.into_iter().zip(paths).collect();
    let results = parallel::map_owned(work, |(named, path)| write_one(named?, path, settings, job, destination));
    Batch { results, hazards }
}

/// The output name of one wheel: its true tags and, when marking, its new version.
fn name_output(
    examined: Examined,
    change: VersionChange,
    settings: &Settings,
    basis: Basis,
    path: &Path,
    destination: &Destination,
) -> Result<Named, Error> {
    let Examined { wheel, analysis, judgement } = &examined;
    if !wheel.installer_problems.is_empty() {
        return Err(Error::Uninstallable { problems: wheel.installer_problems.clone() });
    }
    let tags = plan::tags::true_tags(
        judgement.judged(),
        analysis,
        &wheel.filename.platform_tags,
        &settings.tag_request(),
        basis,
    )?;
    let changes = plan::Changes {
        platform_tags: &tags,
        new_version: change.new_version(),
        pins: &change.pins,
        index_url: settings.index_url.value.as_deref(),
    };
    let plan = plan::retag(&plan::Input::of(wheel, analysis), &changes);
    let file_name = plan.filename.to_string();
    let dir = output_dir(path, destination)?;
    let unchanged_name = file_name == wheel.filename.to_string();
    // In place, a wheel that keeps its name may still need writing (WHEEL, RECORD); whether it
    // does is known once its plan is complete, so its destination is its input.
    let dest = if matches!(destination, Destination::InPlace) && unchanged_name {
        path.to_path_buf()
    } else {
        dir.join(&file_name)
    };
    Ok(Named { examined, change, tags, plan, dest, head: None })
}

/// Complete one wheel's plan (`repair` adds its edits) and write it.
fn write_one(
    named: Named,
    path: &Path,
    settings: &Settings,
    job: Job,
    destination: &Destination,
) -> Result<RetagOutcome, Error> {
    let Named { examined, change, tags, mut plan, dest, head } = named;
    let Examined { wheel, analysis, judgement } = &examined;
    let grafts = match job {
        Job::Repair => repair_edits(&mut plan, &examined, settings)?,
        Job::Retag => Vec::new(),
    };
    let changed = plan::changes_anything(&plan, wheel, analysis);
    let outcome = |output: Option<PathBuf>| RetagOutcome {
        wheel: wheel.filename.to_string(),
        output: output.map(|o| o.display().to_string()),
        tags: tags.clone(),
        changed,
        version_change: change.clone(),
        grafts: grafts.clone(),
        record_corrected: if changed { analysis.record_findings.clone() } else { Default::default() },
        hashes_checked: analysis.hashes_checked,
        platform_tag: judgement.judged().map(|j| j.tag(j.verdict.overall).to_string()),
        symbol_tag: judgement.judged().map(|j| j.tag(j.verdict.symbol).to_string()),
        lowered: lowered_claim(&examined, &tags),
    };
    let output = place(&examined, &plan, settings, changed, Placement { path, dest: &dest, destination, head })?;
    Ok(outcome(output.map(|written| written.path)))
}

/// Why `tags` (the output's) are only `linux_<arch>` when the input claimed a more compatible
/// tag: the first claim its binaries do not honour, and why. `None` when nothing was lowered.
fn lowered_claim(examined: &Examined, tags: &[PlatformTag]) -> Option<String> {
    use crate::wheel::platform_tag::PlatformTag as Tag;
    if tags.is_empty() || !tags.iter().all(|t| matches!(t, Tag::Linux { .. })) {
        return None;
    }
    let wheel = &examined.wheel;
    let claims = crate::policy::claims::check_claims(
        examined.judgement.judged(),
        &examined.analysis,
        &wheel.filename.platform_tags,
        &wheel.wheel_info.platform_tags(),
    );
    claims
        .into_iter()
        .filter(|c| !matches!(c.tag, Tag::Linux { .. }))
        .find_map(|c| c.reason.map(|why| format!("{}, but {why}", c.tag)))
}

/// Where a wheel's output goes: its input `path`, the output `dest`, the run's destination, and
/// the members copied ahead of the analysis, if any.
pub(super) struct Placement<'a> {
    pub path: &'a Path,
    pub dest: &'a Path,
    pub destination: &'a Destination,
    pub head: Option<HeadStart>,
}

/// Write a wheel's plan to `dest`. In place, only when the plan changes something (`None`: left
/// as it is), replacing `path`; into a directory, never over the input, and a byte-for-byte copy
/// when nothing changes.
pub(super) fn place(
    examined: &Examined,
    plan: &Plan,
    settings: &Settings,
    changed: bool,
    at: Placement<'_>,
) -> Result<Option<writer::Written>, Error> {
    let (wheel, digests, options) = (&examined.wheel, &examined.analysis.digests, &write_options(settings));
    let Placement { path, dest, destination, head } = at;
    Ok(Some(match destination {
        Destination::InPlace if !changed => return Ok(None),
        Destination::InPlace => writer::write_in_place(wheel, plan, digests, options, path, dest)?,
        Destination::Directory(_) => {
            if crate::files::same_file(dest, path) || OutputKey::of(dest) == OutputKey::of(path) {
                return Err(Error::WouldOverwriteInput(dest.to_path_buf()));
            }
            if changed {
                let to = writer::WriteTo { head, ..writer::WriteTo::new(dest, Commit::Replace) };
                writer::write_wheel(wheel, plan, digests, options, to)?
            } else {
                writer::Written {
                    path: writer::copy_wheel(path, dest, Commit::Replace, None)?,
                    thinned: Default::default(),
                }
            }
        }
    }))
}

/// Add `repair`'s edits to a wheel's plan: the libraries the target policy would graft
/// (`--plat`'s, else the one the repaired wheel meets), their facts gathered, then copied in
/// and the wheel's files patched to use them.
fn repair_edits(plan: &mut Plan, examined: &Examined, settings: &Settings) -> Result<Vec<plan::repair::Graft>, Error> {
    let Examined { wheel, analysis, judgement } = examined;
    let repair = settings.repair();
    plan.compression_level = repair.compression_level;
    let Some(judged) = judgement.judged() else { return Ok(Vec::new()) };
    let target = match settings.plat.value.as_ref().and_then(|p| p.tag()) {
        Some(plat) => Some(plan::tags::requested_policy(judged, plat)?),
        None => None,
    };
    let name = || wheel.filename.to_string();
    let libs = plan::repair::find::libraries_to_vendor(analysis, judged, target)
        .map_err(|source| Error::Repair { wheel: name(), source })?;
    let sources =
        analysis::vendor::sources(&libs, analysis).map_err(|source| Error::Vendor { wheel: name(), source })?;
    plan::repair::add_to_plan(plan, &plan::Input::of(wheel, analysis), analysis, &sources, &repair)
        .map_err(|source| Error::Repair { wheel: name(), source })
}

/// What the writer needs of the run's settings.
fn write_options(settings: &Settings) -> WriteOptions<'_> {
    WriteOptions {
        patcher: settings.patcher.value.patcher(),
        budget: &settings.analyze.memory,
        source_date_epoch: settings.source_date_epoch,
    }
}

/// The directory a wheel's output goes to (created when needed).
pub(super) fn output_dir(path: &Path, destination: &Destination) -> Result<PathBuf, Error> {
    match destination {
        Destination::Directory(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|source| Error::CreateDir { path: dir.display().to_string(), source })?;
            Ok(dir.clone())
        }
        Destination::InPlace => Ok(crate::output::parent_dir(path).to_path_buf()),
    }
}
