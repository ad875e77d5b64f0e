//! wheelfix: the true platform tag of a Python wheel, and the changes that make its tags,
//! versions and metadata true.
//!
//! The data flows through five stages, one module each:
//! [`wheel`] (the archive) → [`analysis`] (facts about members, via [`elf`], GPU code included) →
//! [`policy`] (the verdict and its reasons) → a [`wheel::writer::Plan`] (what to change) →
//! [`wheel::writer`] (the one writer). `show` stops after the verdict; `retag` plans tags and,
//! with [`version`], local versions and pins; `repair` adds vendored libraries and patched ELF
//! files ([`repair`], [`elf::patch`]). [`release`] works on sets of wheels: metapackages,
//! indexes and `check`. The functions here run those stages over a batch, in parallel.

pub mod analysis;
pub mod config;
pub mod elf;
pub mod exclude;
pub mod libsearch;
pub mod platform;
pub mod policy;
pub mod progress;
pub mod release;
pub mod repair;
pub mod report;
pub mod retag;
pub mod tags;
pub mod version;
pub mod wheel;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analysis::{Analysis, AnalyzeOptions, analyze};
use progress::Progress;
use rayon::prelude::*;
use report::ShowReport;
use tags::TagRequest;
use version::{BatchMember, Content, MarkOptions, OrderingHazard, PinRewrite, VersionDecision};
use wheel::Wheel;
use wheel::normalize_name;

/// Any failure of one wheel; the message names the wheel's member where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Wheel(#[from] wheel::WheelError),
    #[error(transparent)]
    Tag(#[from] tags::TagError),
    #[error(transparent)]
    Write(#[from] wheel::writer::WriteError),
    #[error(transparent)]
    Output(#[from] wheel::output::OutputError),
    #[error("the output {0} would replace the input; use --in-place to allow that")]
    WouldOverwriteInput(PathBuf),
    #[error("the output {output} would replace {input}, another input of this run; nothing was written for it")]
    ReplacesOtherInput { output: String, input: String },
    #[error("{} wheels of this run would be written to {output}: {}; none of them was written", wheels.len(), wheels.join(", "))]
    Collision { output: String, wheels: Vec<String> },
    #[error("cannot create {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error("{source}")]
    Version { wheel: String, source: version::VersionError },
    #[error("{source}")]
    Repair { wheel: String, source: repair::RepairError },
    #[error(transparent)]
    Metapackage(#[from] Box<release::metapackage::MetapackageError>),
    #[error("cannot remove the old file {path}: {source}")]
    RemoveOld { path: String, source: std::io::Error },
}

/// Analyse one wheel for `show`.
pub fn show(path: &Path, options: &AnalyzeOptions, progress: &dyn Progress) -> Result<ShowReport, Error> {
    let wheel = Wheel::open(path)?;
    let analysis = analyze(&wheel, options, progress)?;
    check_strict(&analysis, options)?;
    Ok(ShowReport::new(&wheel, &analysis))
}

/// `--strict-record`: any difference between RECORD and the archive fails the wheel.
fn check_strict(analysis: &Analysis, options: &AnalyzeOptions) -> Result<(), Error> {
    match analysis.record_findings.first() {
        Some(first) if options.strict_record => Err(Error::Wheel(wheel::WheelError::StrictRecord {
            summary: wheel::record::summarize(&analysis.record_findings),
            first: first.file.clone(),
        })),
        _ => Ok(()),
    }
}

/// Where `retag` writes.
#[derive(Debug, Clone)]
pub enum Destination {
    /// Into this directory, under the new name.
    Directory(PathBuf),
    /// Beside the input, replacing it.
    InPlace,
}

/// Local-version marking for a batch (`--rocm-version`, `--local-version`).
#[derive(Debug, Clone)]
pub struct Marking {
    pub options: MarkOptions,
    /// Wheels already published: their versions join the ordering-hazard check.
    pub index_dir: Option<PathBuf>,
}

/// What happens to one wheel's version and pins.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VersionChange {
    pub local_version: Option<VersionDecision>,
    pub pins: Vec<PinRewrite>,
}

/// What `retag` did with one wheel.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RetagOutcome {
    pub wheel: String,
    pub output: Option<String>,
    pub tags: Vec<String>,
    /// False when the wheel already was what it should be (it may still have been copied).
    pub changed: bool,
    #[serde(flatten)]
    pub version_change: VersionChange,
    /// Libraries `repair` vendored.
    pub grafts: Vec<repair::Graft>,
    /// Where the input's RECORD disagreed with its archive: the output's RECORD is true.
    pub record_corrected: Vec<wheel::RecordFinding>,
    /// Whether every member's hash was checked against the input's RECORD.
    pub hashes_checked: bool,
    #[serde(skip)]
    pub report: ShowReport,
}

/// The outcome of a batch: one result per input, in order, and batch-wide warnings.
#[derive(Debug)]
pub struct Batch<T> {
    pub results: Vec<Result<T, Error>>,
    pub hazards: Vec<OrderingHazard>,
}

/// Open and analyse every wheel, in parallel.
fn open_all(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    progress: &dyn Progress,
) -> Vec<Result<(Wheel, Analysis), Error>> {
    paths
        .par_iter()
        .map(|path| {
            let wheel = Wheel::open(path)?;
            let analysis = analyze(&wheel, options, progress)?;
            Ok((wheel, analysis))
        })
        .collect()
}

/// The version decisions and pin rewrites of a batch (`None`: a wheel that failed to open), and
/// its ordering hazards.
fn decide_versions(
    opened: &[Option<(&Wheel, &Analysis)>],
    marking: Option<&Marking>,
) -> (Vec<Result<VersionChange, Error>>, Vec<OrderingHazard>) {
    let Some(marking) = marking else {
        return (opened.iter().map(|_| Ok(VersionChange::default())).collect(), Vec::new());
    };
    let ok: Vec<(usize, &Wheel, &Analysis)> =
        opened.iter().enumerate().filter_map(|(i, r)| r.map(|(w, a)| (i, w, a))).collect();
    let members: Vec<BatchMember> = ok
        .iter()
        .map(|(_, w, a)| BatchMember {
            name: if w.metadata.name.is_empty() { w.filename.name.clone() } else { w.metadata.name.clone() },
            version: if w.metadata.version.is_empty() {
                w.filename.version.clone()
            } else {
                w.metadata.version.clone()
            },
            content: if a.elf_members.is_empty() && a.gpu.is_empty() { Content::Pure } else { Content::Compiled },
            requires_dist: w.metadata.requires_dist.clone(),
        })
        .collect();
    let decisions = version::decide_batch(&members, &marking.options);
    let mut versions: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (m, d) in members.iter().zip(&decisions) {
        if let Ok(d) = d {
            versions.insert(
                normalize_name(&m.name),
                (m.version.clone(), d.new_version.clone().unwrap_or(m.version.clone())),
            );
        }
    }
    let mut changes: Vec<Result<VersionChange, Error>> = opened.iter().map(|_| Ok(VersionChange::default())).collect();
    for ((index, wheel, _), decision) in ok.iter().zip(decisions) {
        changes[*index] = match decision {
            Ok(d) => Ok(VersionChange {
                local_version: Some(d),
                pins: version::rewrite_pins(&wheel.metadata.requires_dist, &versions),
            }),
            Err(e) => Err(Error::Version { wheel: wheel.filename.to_string(), source: e }),
        };
    }
    // The hazard: this batch's new versions plus what is already published.
    let mut all: Vec<(String, String)> = versions.iter().map(|(n, (_, new))| (n.clone(), new.clone())).collect();
    if let Some(dir) = &marking.index_dir {
        all.extend(published_versions(dir));
    }
    (changes, version::ordering_hazards(&all))
}

/// `(name, version)` of every wheel file in a directory tree (from the file names).
fn published_versions(dir: &Path) -> Vec<(String, String)> {
    release::collect_files(&[dir.to_path_buf()], &[".whl"])
        .iter()
        .filter_map(|path| wheel::WheelFilename::parse(path.file_name()?.to_str()?).ok())
        .map(|f| (f.name, f.version))
        .collect()
}

/// `show` for a batch: every wheel's report, with version decisions when marking.
pub fn show_batch(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    marking: Option<&Marking>,
    progress: &dyn Progress,
) -> Batch<(ShowReport, VersionChange)> {
    let opened = open_all(paths, options, progress);
    let refs: Vec<Option<(&Wheel, &Analysis)>> = opened.iter().map(|r| r.as_ref().ok().map(|(w, a)| (w, a))).collect();
    let (changes, hazards) = decide_versions(&refs, marking);
    let results = opened
        .into_iter()
        .zip(changes)
        .map(|(opened, change)| {
            let (wheel, analysis) = opened?;
            check_strict(&analysis, options)?;
            Ok((ShowReport::new(&wheel, &analysis), change?))
        })
        .collect();
    Batch { results, hazards }
}

/// Retag a batch: analyse every wheel (verifying hashes unless `options.verify_hashes` is
/// off), derive its true tags and, when marking, its new version and pins; write each result.
pub fn retag_batch(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    request: &TagRequest,
    marking: Option<&Marking>,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    write_batch(paths, options, request, None, marking, destination, progress)
}

/// Repair a batch: vendor each wheel's external libraries, patch what needs them, write the
/// tags the result meets (and, when marking, the new versions), as `retag` does.
pub fn repair_batch(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    request: &TagRequest,
    settings: &repair::RepairSettings<'_>,
    marking: Option<&Marking>,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    let request = TagRequest { after_repair: true, ..request.clone() };
    write_batch(paths, options, &request, Some(settings), marking, destination, progress)
}

/// One wheel of a writing batch once its output name is known.
struct Named {
    wheel: Wheel,
    analysis: Analysis,
    change: VersionChange,
    tags: Vec<String>,
    /// Where it goes (`--in-place` under the same name: the input itself).
    dest: PathBuf,
}

fn write_batch(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    request: &TagRequest,
    repair: Option<&repair::RepairSettings<'_>>,
    marking: Option<&Marking>,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    let opened = open_all(paths, options, progress);
    let refs: Vec<Option<(&Wheel, &Analysis)>> = opened.iter().map(|r| r.as_ref().ok().map(|(w, a)| (w, a))).collect();
    let (changes, hazards) = decide_versions(&refs, marking);
    // First every output's name, so that collisions are found before anything is written.
    let mut named: Vec<Result<Named, Error>> = opened
        .into_iter()
        .zip(changes)
        .zip(paths)
        .map(|((opened, change), path)| {
            let (wheel, analysis) = opened?;
            check_strict(&analysis, options)?;
            name_output(wheel, analysis, change?, request, path, destination)
        })
        .collect();
    refuse_collisions(&mut named, paths);
    let results =
        named.into_par_iter().zip(paths).map(|(named, path)| write_one(named?, path, repair, destination)).collect();
    Batch { results, hazards }
}

/// The output name of one wheel: its true tags and, when marking, its new version.
fn name_output(
    wheel: Wheel,
    analysis: Analysis,
    change: VersionChange,
    request: &TagRequest,
    path: &Path,
    destination: &Destination,
) -> Result<Named, Error> {
    let tags = tags::true_tags(&analysis, &wheel.filename.platform_tags, request)?;
    let mut filename = wheel.filename.with_platform_tags(tags.clone());
    if let Some(version) = change.local_version.as_ref().and_then(|d| d.new_version.as_deref()) {
        filename = filename.with_version(&version.replace('-', "_"));
    }
    let file_name = filename.to_string();
    let dir = output_dir(path, destination)?;
    let unchanged_name = file_name == wheel.filename.to_string();
    // In place, a wheel that keeps its name may still need writing (WHEEL, RECORD); whether it
    // does is known once its plan is made, so its destination is its input.
    let dest = if matches!(destination, Destination::InPlace) && unchanged_name {
        path.to_path_buf()
    } else {
        dir.join(&file_name)
    };
    Ok(Named { wheel, analysis, change, tags, dest })
}

/// Fail every wheel whose output another wheel of the run also writes, or whose output would
/// replace another input of the run: before anything is written.
fn refuse_collisions(named: &mut [Result<Named, Error>], paths: &[PathBuf]) {
    let key = |p: &Path| -> PathBuf {
        let dir = wheel::output::parent_dir(p);
        dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()).join(p.file_name().unwrap_or_default())
    };
    let inputs: Vec<PathBuf> = paths.iter().map(|p| key(p)).collect();
    let mut by_dest: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (i, n) in named.iter().enumerate() {
        if let Ok(Named { dest, .. }) = n {
            by_dest.entry(key(dest)).or_default().push(i);
        }
    }
    for (dest, users) in by_dest {
        let wheels: Vec<String> = users.iter().map(|&i| paths[i].display().to_string()).collect();
        for &i in &users {
            let other_input = inputs.iter().enumerate().find(|(j, input)| *j != i && **input == dest);
            if users.len() > 1 {
                named[i] = Err(Error::Collision { output: dest.display().to_string(), wheels: wheels.clone() });
            } else if let Some((j, _)) = other_input {
                named[i] = Err(Error::ReplacesOtherInput {
                    output: dest.display().to_string(),
                    input: paths[j].display().to_string(),
                });
            }
        }
    }
}

/// Plan and write one wheel whose output name is known.
fn write_one(
    named: Named,
    path: &Path,
    repair: Option<&repair::RepairSettings<'_>>,
    destination: &Destination,
) -> Result<RetagOutcome, Error> {
    let Named { wheel, analysis, change, tags, dest } = named;
    let report = ShowReport::new(&wheel, &analysis);
    let repair_plan = match repair {
        Some(settings) => repair::plan_repair(&wheel, &analysis, settings)
            .map_err(|source| Error::Repair { wheel: wheel.filename.to_string(), source })?,
        None => repair::RepairPlan::default(),
    };
    let new_version = change.local_version.as_ref().and_then(|d| d.new_version.as_deref());
    let changes = retag::Changes { platform_tags: &tags, new_version, pins: &change.pins };
    let mut plan = retag::plan_changes(&wheel, &analysis, &changes);
    if !repair_plan.patched.is_empty() || !repair_plan.added.is_empty() {
        let plan = plan.get_or_insert_with(|| wheel::writer::Plan::new(wheel.filename.clone()));
        for (path, member) in repair_plan.patched {
            plan.replace.insert(plan.output_name(&path).to_string(), member);
        }
        plan.add.extend(repair_plan.added);
    }
    // A RECORD that disagrees with the archive is a change too: the output's is true.
    if plan.is_none() && !analysis.record_findings.is_empty() {
        plan = Some(wheel::writer::Plan::new(wheel.filename.clone()));
    }
    if let (Some(plan), Some(settings)) = (plan.as_mut(), repair) {
        plan.compression_level = settings.compression_level;
    }
    let changed = plan.is_some();
    let outcome = |output: Option<PathBuf>| RetagOutcome {
        wheel: wheel.filename.to_string(),
        output: output.map(|o| o.display().to_string()),
        tags: tags.clone(),
        changed,
        version_change: change.clone(),
        grafts: repair_plan.grafts.clone(),
        record_corrected: if changed { analysis.record_findings.clone() } else { Vec::new() },
        hashes_checked: analysis.hashes_checked,
        report: report.clone(),
    };
    let input_mode = wheel.archive.zip.file_mode;
    let identity = wheel.archive.zip.identity;
    let output = match destination {
        Destination::InPlace => {
            let Some(plan) = plan else { return Ok(outcome(None)) };
            if dest == path {
                let commit = wheel::output::Commit::ReplaceInput(identity);
                wheel::writer::write_wheel(&wheel, &plan, &analysis.digests, &dest, commit, Some(input_mode))?
            } else {
                // Never replace a file that is not this wheel's input; and only go on while the
                // input is still the file that was read.
                let input_unchanged = || wheel::zip::FileIdentity::at(path).ok() == Some(identity);
                if !input_unchanged() {
                    return Err(wheel::output::OutputError::InputChanged(path.display().to_string()).into());
                }
                let commit = wheel::output::Commit::NoClobber;
                let written =
                    wheel::writer::write_wheel(&wheel, &plan, &analysis.digests, &dest, commit, Some(input_mode))
                        .map_err(|e| match e {
                            wheel::writer::WriteError::Output(wheel::output::OutputError::Exists(_))
                                if !input_unchanged() =>
                            {
                                Error::Output(wheel::output::OutputError::InputChanged(path.display().to_string()))
                            }
                            e => e.into(),
                        })?;
                // Another run on the same input may have removed it already.
                if input_unchanged() {
                    match std::fs::remove_file(path) {
                        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                            return Err(Error::RemoveOld { path: path.display().to_string(), source });
                        }
                        _ => {}
                    }
                }
                written
            }
        }
        Destination::Directory(_) => {
            if same_file(&dest, path) {
                return Err(Error::WouldOverwriteInput(dest));
            }
            let commit = wheel::output::Commit::Replace;
            match plan {
                Some(plan) => wheel::writer::write_wheel(&wheel, &plan, &analysis.digests, &dest, commit, None)?,
                None => wheel::writer::copy_wheel(path, &dest, commit, None)?,
            }
        }
    };
    Ok(outcome(Some(output)))
}

/// The directory a wheel's output goes to (created when needed).
fn output_dir(path: &Path, destination: &Destination) -> Result<PathBuf, Error> {
    match destination {
        Destination::Directory(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|source| Error::CreateDir { path: dir.display().to_string(), source })?;
            Ok(dir.clone())
        }
        Destination::InPlace => Ok(wheel::output::parent_dir(path).to_path_buf()),
    }
}

/// Build a metapackage pinning every wheel in `paths` (see [`release::metapackage`]).
pub fn metapackage(
    paths: &[PathBuf],
    options: &AnalyzeOptions,
    settings: &release::metapackage::MetapackageOptions,
    progress: &dyn Progress,
) -> Result<release::metapackage::Metapackage, Error> {
    let mut opened = Vec::new();
    for result in open_all(paths, options, progress) {
        let (wheel, analysis) = result?;
        let report = ShowReport::new(&wheel, &analysis);
        opened.push((wheel, report));
    }
    let pinned: Vec<release::metapackage::Pinned<'_>> = opened
        .iter()
        .map(|(wheel, report)| release::metapackage::Pinned {
            name: if wheel.metadata.name.is_empty() { &wheel.filename.name } else { &wheel.metadata.name },
            version: if wheel.metadata.version.is_empty() { &wheel.filename.version } else { &wheel.metadata.version },
            report,
        })
        .collect();
    release::metapackage::build(&pinned, settings).map_err(|e| Error::Metapackage(Box::new(e)))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
