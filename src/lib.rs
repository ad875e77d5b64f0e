//! wheelfix: the true platform tag of a Python wheel, and the changes that make its tags,
//! versions and metadata true.
//!
//! The data flows through five stages:
//!
//! 1. [`wheel`]: the archive, opened — file name and tags, WHEEL, METADATA, RECORD compared with
//!    the central directory.
//! 2. [`analysis`]: facts about every member ([`analysis::scan`]: host ELF files via [`elf`],
//!    GPU code, hashes), then the libraries the host binaries need ([`analysis::linkage`]).
//! 3. [`policy`]: the policies that apply ([`policy::Policies::for_wheel`]) and their verdict,
//!    computed once from the facts ([`policy::verdict::Judgement`]).
//! 4. [`plan`]: what to change, as edits to one [`wheel::writer::Plan`]: the true tags and local
//!    versions ([`plan::retag`]) for every writing command, plus vendored libraries and patched
//!    files for `repair` ([`plan::repair`]).
//! 5. [`wheel::writer`]: the one writer, which applies any plan.
//!
//! `show` stops after the verdict and renders it ([`report`]); `retag` and `repair` differ only
//! in their plan. [`release`] works on sets of wheels: metapackages, indexes and `check`.
//! [`settings`] resolves a run's settings once; [`parallel`] holds every parallel loop. The
//! functions here run the stages over a batch.

pub mod analysis;
pub mod config;
pub mod elf;
pub mod exclude;
pub mod log;
pub mod parallel;
pub mod plan;
pub mod platform;
pub mod policy;
pub mod progress;
pub mod release;
pub mod report;
pub mod settings;
#[cfg(test)]
mod testing;
pub mod version;
pub mod wheel;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analysis::Analysis;
use analysis::site::SitePackages;
use plan::Plan;
use plan::tags::Basis;
use policy::judgement::{Claims, Judgement};
use progress::Progress;
use report::ShowReport;
use settings::Settings;
use version::{BatchMember, Content, OrderingHazard, VersionChange};
use wheel::Wheel;
use wheel::output::{Commit, OutputError};
use wheel::platform_tag::PlatformTag;
use writer::{WriteError, WriteOptions};

/// Any failure of one wheel; the message names the wheel's member where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Wheel(#[from] wheel::WheelError),
    #[error(transparent)]
    Tag(#[from] plan::tags::TagError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Output(#[from] OutputError),
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
    Repair { wheel: String, source: plan::repair::RepairError },
    #[error("{source}")]
    Vendor { wheel: String, source: analysis::vendor::VendorError },
    #[error(transparent)]
    Metapackage(#[from] Box<release::metapackage::MetapackageError>),
    #[error("cannot remove the old file {path} ({source}); the new one was removed again, nothing changed")]
    RemoveOld { path: String, source: std::io::Error },
    #[error("pip refuses to install it: {}; nothing was written (rebuild the wheel)", problems.join("; "))]
    Uninstallable { problems: Vec<String> },
    #[error("another wheelfix run is rewriting {0} in place; nothing was written")]
    InPlaceBusy(String),
}

/// One wheel through the first three stages: opened, analysed, judged.
pub struct Examined {
    pub wheel: Wheel,
    pub analysis: Analysis,
    /// What the policies make of it: nothing to judge (a pure wheel), binaries no policy covers
    /// (a Windows wheel, binaries of no covered architecture), or their verdict.
    pub judgement: Judgement,
}

impl Examined {
    /// The platform tags the file name gives.
    pub fn claimed_tags(&self) -> &[PlatformTag] {
        &self.wheel.filename.platform_tags
    }
}

/// Open, analyse and judge one wheel; `site` holds the wheels installed beside it.
pub fn examine(
    path: &Path,
    settings: &Settings,
    site: &SitePackages,
    progress: &dyn Progress,
) -> Result<Examined, Error> {
    let wheel = Wheel::open(path)?;
    let options = &settings.analyze;
    let mut analysis = analysis::scan(&wheel, options, progress)?;
    if settings.strict_record.value
        && let Some(first) = analysis.record_findings.first()
    {
        return Err(Error::Wheel(wheel::WheelError::StrictRecord {
            summary: analysis.record_findings.summarize(),
            first: first.file.clone(),
        }));
    }
    let plat = settings.plat.value.as_deref().filter(|p| *p != "auto").map(PlatformTag::parse);
    let selection = settings.policies.select(&Claims::of(&wheel), &mut analysis, plat.as_ref());
    for problem in &site.problems {
        analysis.notes.push(analysis::Note { file: "--with-wheels".into(), message: problem.clone() });
    }
    if let Some(rules) = selection.linkage_rules() {
        analysis::linkage::resolve(&wheel, &mut analysis, rules, options, site);
    }
    let judgement = selection.judge(&analysis, settings.disable_isa_check);
    if let Some(j) = judgement.judged() {
        let v = &j.verdict;
        debug!(
            "{}: symbol versions allow {}; without external libraries {}; blacklist {}; ISA {}; as it is {}; once repaired {}",
            wheel.filename,
            j.tag(v.symbol),
            j.tag(v.reference),
            j.tag(v.blacklist),
            j.tag(v.machine),
            j.tag(v.overall),
            j.tag(v.repairable)
        );
    }
    Ok(Examined { wheel, analysis, judgement })
}

/// Analyse one wheel for `show`.
pub fn show(path: &Path, settings: &Settings, progress: &dyn Progress) -> Result<ShowReport, Error> {
    let site = batch_site(&[], settings);
    let e = examine(path, settings, &site, progress)?;
    Ok(ShowReport::new(&e.wheel, &e.analysis, &e.judgement))
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
    pub tags: Vec<PlatformTag>,
    /// False when the wheel already was what it should be (it may still have been copied).
    pub changed: bool,
    #[serde(flatten)]
    pub version_change: VersionChange,
    /// Libraries `repair` vendored.
    pub grafts: Vec<plan::repair::Graft>,
    /// Where the input's RECORD disagreed with its archive: the output's RECORD is true.
    pub record_corrected: wheel::RecordFindings,
    /// Whether every member's hash was checked against the input's RECORD.
    pub hashes_checked: bool,
    /// The tag the input meets as it is, and the one its symbol versions allow.
    #[serde(skip)]
    pub platform_tag: Option<String>,
    #[serde(skip)]
    pub symbol_tag: Option<String>,
}

/// The outcome of a batch: one result per input, in order, and batch-wide warnings.
#[derive(Debug)]
pub struct Batch<T> {
    pub results: Vec<Result<T, Error>>,
    pub hazards: Vec<OrderingHazard>,
}

/// Examine every wheel, in parallel, each beside the `--with-wheels` and the batch's other wheels.
fn examine_all(paths: &[PathBuf], settings: &Settings, progress: &dyn Progress) -> Vec<Result<Examined, Error>> {
    let site = batch_site(paths, settings);
    parallel::map(paths, |path| examine(path, settings, &site, progress))
}

/// The virtual site-packages of a batch: `--with-wheels`, and the batch's own wheels when it has
/// more than one (the wheels of one invocation are installed together).
fn batch_site(paths: &[PathBuf], settings: &Settings) -> SitePackages {
    let mut inputs = settings.with_wheels.value.clone();
    if paths.len() > 1 {
        inputs.extend(paths.iter().cloned());
    }
    if inputs.is_empty() { SitePackages::default() } else { SitePackages::open(&inputs) }
}

/// The version decisions and pin rewrites of a batch, and its ordering hazards.
fn decide_versions(
    examined: &[Result<Examined, Error>],
    settings: &Settings,
) -> (Vec<Result<VersionChange, Error>>, Vec<OrderingHazard>) {
    let members: Vec<Option<BatchMember>> = examined
        .iter()
        .map(|r| {
            r.as_ref().ok().map(|e| BatchMember {
                name: e.wheel.metadata.package.clone(),
                version: e.wheel.metadata.version.clone(),
                content: if e.analysis.has_no_code() { Content::Pure } else { Content::Compiled },
                requires_dist: e.wheel.metadata.requires_dist.clone(),
            })
        })
        .collect();
    let published = match settings.marking.as_ref().and_then(|m| m.index_dir.as_ref()) {
        Some(dir) => published_versions(dir),
        None => Vec::new(),
    };
    let (changes, hazards) = version::decide(&members, settings.marking.as_ref(), &published);
    let changes = changes
        .into_iter()
        .zip(examined)
        .map(|(change, e)| {
            change.map_err(|source| Error::Version {
                wheel: e.as_ref().map(|e| e.wheel.filename.to_string()).unwrap_or_default(),
                source,
            })
        })
        .collect();
    (changes, hazards)
}

/// `(name, version)` of every wheel file in a directory tree (from the file names).
fn published_versions(dir: &Path) -> Vec<(String, String)> {
    wheel::inputs::collect_files(&[dir.to_path_buf()], &[".whl"])
        .iter()
        .filter_map(|path| wheel::WheelFilename::parse(path.file_name()?.to_str()?).ok())
        .map(|f| (f.name.to_string(), f.version.text))
        .collect()
}

/// `show` for a batch: every wheel's report, with version decisions when marking.
pub fn show_batch(
    paths: &[PathBuf],
    settings: &Settings,
    progress: &dyn Progress,
) -> Batch<(ShowReport, VersionChange)> {
    let examined = examine_all(paths, settings, progress);
    let (changes, hazards) = decide_versions(&examined, settings);
    let results = examined
        .into_iter()
        .zip(changes)
        .map(|(e, change)| {
            let e = e?;
            Ok((ShowReport::new(&e.wheel, &e.analysis, &e.judgement), change?))
        })
        .collect();
    Batch { results, hazards }
}

/// `show --json-format auditwheel`: auditwheel's `show --json` document for every wheel, in order.
pub fn show_auditwheel_batch(
    paths: &[PathBuf],
    settings: &Settings,
    allow_pure: bool,
    progress: &dyn Progress,
) -> Vec<Result<report::auditwheel::Document, Error>> {
    examine_all(paths, settings, progress)
        .into_iter()
        .map(|e| {
            let e = e?;
            let name = e.wheel.filename.to_string();
            Ok(report::auditwheel::document(&name, &e.analysis, &e.judgement, allow_pure))
        })
        .collect()
}

/// `lddtree`: the dependency tree of a file, or of the host binaries of a wheel (`member`: only
/// that one).
pub fn lddtree(path: &Path, member: Option<&str>, settings: &Settings) -> Result<Vec<analysis::lddtree::Tree>, String> {
    let search = &settings.analyze.search;
    let is_wheel = path.extension().is_some_and(|e| e == "whl");
    if !is_wheel {
        if member.is_some() {
            return Err(format!("{}: a member can only be named inside a wheel", path.display()));
        }
        return analysis::lddtree::of_file(path, search).map(|t| vec![t]);
    }
    let wheel = Wheel::open(path).map_err(|e| e.to_string())?;
    let analysis = analysis::scan(&wheel, &settings.analyze, &progress::NoProgress).map_err(|e| e.to_string())?;
    let binaries: Vec<(&str, &elf::ElfFacts)> = analysis.binaries.iter().map(|b| analysis.binary(b)).collect();
    let files = analysis::lddtree::WheelFiles {
        by_install_path: binaries.iter().filter_map(|(p, f)| wheel.install_path(p).map(|i| (i, *f))).collect(),
    };
    let Some(m) = member else {
        let order: Vec<String> = binaries.iter().filter_map(|(p, _)| wheel.install_path(p)).collect();
        return Ok(analysis::lddtree::of_wheel(&files, &order, search));
    };
    let found: Vec<_> = binaries.iter().filter(|(p, _)| *p == m).collect();
    if found.is_empty() {
        return Err(format!("{}: `{m}` is not an ELF host binary of the wheel", wheel.filename));
    }
    Ok(found
        .into_iter()
        .map(|(p, f)| {
            let install = wheel.install_path(p).unwrap_or_else(|| p.to_string());
            analysis::lddtree::of_member(&install, f, &files, search)
        })
        .collect())
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
}

fn write_batch(
    paths: &[PathBuf],
    settings: &Settings,
    job: Job,
    destination: &Destination,
    progress: &dyn Progress,
) -> Batch<RetagOutcome> {
    let examined = examine_all(paths, settings, progress);
    let (changes, hazards) = decide_versions(&examined, settings);
    let basis = job.basis();
    // First every output's name, so that collisions are found before anything is written.
    let mut named: Vec<Result<Named, Error>> = examined
        .into_iter()
        .zip(changes)
        .zip(paths)
        .map(|((e, change), path)| name_output(e?, change?, settings, basis, path, destination))
        .collect();
    refuse_collisions(&mut named, paths);
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
    let tags =
        plan::tags::true_tags(judgement.judged(), analysis, &wheel.filename.platform_tags, &settings.tags, basis)?;
    let changes = plan::Changes { platform_tags: &tags, new_version: change.new_version(), pins: &change.pins };
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
    Ok(Named { examined, change, tags, plan, dest })
}

/// Fail every wheel whose output another wheel of the run also writes, or whose output would
/// replace another input of the run: before anything is written.
fn refuse_collisions(named: &mut [Result<Named, Error>], paths: &[PathBuf]) {
    let inputs: Vec<OutputKey> = paths.iter().map(|p| output_key(p)).collect();
    let mut by_dest: BTreeMap<OutputKey, (PathBuf, Vec<usize>)> = BTreeMap::new();
    for (i, n) in named.iter().enumerate() {
        if let Ok(Named { dest, .. }) = n {
            by_dest.entry(output_key(dest)).or_insert_with(|| (dest.clone(), Vec::new())).1.push(i);
        }
    }
    for (key, (dest, users)) in by_dest {
        let wheels: Vec<String> = users.iter().map(|&i| paths[i].display().to_string()).collect();
        for &i in &users {
            let other_input = inputs.iter().enumerate().find(|(j, input)| *j != i && **input == key);
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

/// Where a file is (or would be), whatever the path's spelling: its directory's device and
/// inode (a bind mount of a directory, `in/../in/.` and a symlink are one place) and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum OutputKey {
    Placed {
        dir: (u64, u64),
        name: std::ffi::OsString,
    },
    /// A directory that does not exist yet: its path.
    Unplaced(PathBuf),
}

fn output_key(path: &Path) -> OutputKey {
    let dir = wheel::output::parent_dir(path);
    let name = path.file_name().unwrap_or_default().to_os_string();
    match wheel::inputs::identity(dir) {
        Some(dir) => OutputKey::Placed { dir, name },
        None => OutputKey::Unplaced(path.to_path_buf()),
    }
}

/// Complete one wheel's plan (`repair` adds its edits) and write it.
fn write_one(
    named: Named,
    path: &Path,
    settings: &Settings,
    job: Job,
    destination: &Destination,
) -> Result<RetagOutcome, Error> {
    let Named { examined, change, tags, mut plan, dest } = named;
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
    };
    let output = match destination {
        Destination::InPlace if !changed => return Ok(outcome(None)),
        Destination::InPlace => write_in_place(wheel, &plan, &analysis.digests, &write_options(settings), path, &dest)?,
        Destination::Directory(_) => {
            if wheel::inputs::same_file(&dest, path) || output_key(&dest) == output_key(path) {
                return Err(Error::WouldOverwriteInput(dest));
            }
            if changed {
                writer::write_wheel(
                    wheel,
                    &plan,
                    &analysis.digests,
                    &write_options(settings),
                    &dest,
                    Commit::Replace,
                    None,
                )?
            } else {
                writer::copy_wheel(path, &dest, Commit::Replace, None)?
            }
        }
    };
    Ok(outcome(Some(output)))
}

/// Add `repair`'s edits to a wheel's plan: the libraries the target policy would graft
/// (`--plat`'s, else the one the repaired wheel meets), their facts gathered, then copied in
/// and the wheel's files patched to use them.
fn repair_edits(plan: &mut Plan, examined: &Examined, settings: &Settings) -> Result<Vec<plan::repair::Graft>, Error> {
    let Examined { wheel, analysis, judgement } = examined;
    let repair = settings.repair();
    plan.compression_level = repair.compression_level;
    let Some(judged) = judgement.judged() else { return Ok(Vec::new()) };
    let target = match settings.tags.plat() {
        Some(plat) => Some(plan::tags::requested_policy(judged, &plat)?),
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

/// `--in-place`: replace the input (keeping its mode), or write the new name and remove the
/// input. Never replace a file that is not this wheel's input, and only go on while the input
/// is still the file that was read.
fn write_in_place(
    wheel: &Wheel,
    plan: &Plan,
    digests: &[Option<[u8; 32]>],
    options: &WriteOptions<'_>,
    path: &Path,
    dest: &Path,
) -> Result<PathBuf, Error> {
    let (mode, identity) = (wheel.archive.zip.file_mode, wheel.archive.zip.identity);
    // One run at a time rewrites an input in place: two runs with different flags would both
    // write, and both say they succeeded.
    if !wheel::output::try_lock(wheel.archive.zip.file()) {
        return Err(Error::InPlaceBusy(path.display().to_string()));
    }
    let replaced = || Error::Output(OutputError::InputChanged(path.display().to_string()));
    let input_unchanged = || wheel::zip::FileIdentity::at(path).ok() == Some(identity);
    if !input_unchanged() {
        return Err(replaced());
    }
    if dest == path {
        return Ok(writer::write_wheel(
            wheel,
            plan,
            digests,
            options,
            dest,
            Commit::ReplaceInput(identity),
            Some(mode),
        )?);
    }
    let written = writer::write_wheel(wheel, plan, digests, options, dest, Commit::NoClobber, Some(mode)).map_err(
        |e| match e {
            WriteError::Output(OutputError::Exists(_)) if !input_unchanged() => replaced(),
            e => e.into(),
        },
    )?;
    if input_unchanged()
        && let Err(source) = std::fs::remove_file(path)
        && source.kind() != std::io::ErrorKind::NotFound
    {
        // The input stays (immutable, a read-only directory): the new file goes again, so
        // that one wheel is never left as two.
        let _ = std::fs::remove_file(&written);
        return Err(Error::RemoveOld { path: path.display().to_string(), source });
    }
    Ok(written)
}

/// What the writer needs of the run's settings.
fn write_options(settings: &Settings) -> WriteOptions<'_> {
    WriteOptions { patcher: settings.patcher.value.patcher(), budget: &settings.analyze.memory }
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

/// Build a metapackage pinning every wheel in `paths` (see [`release::metapackage`]): each
/// wheel's name, version, platform tags and GPU targets, from its metadata and device code.
pub fn metapackage(
    paths: &[PathBuf],
    settings: &Settings,
    options: &release::metapackage::MetapackageOptions,
    progress: &dyn Progress,
) -> Result<release::metapackage::Metapackage, Error> {
    let scanned = parallel::map(paths, |path| -> Result<release::metapackage::Pinned, Error> {
        let wheel = Wheel::open(path)?;
        if !wheel.installer_problems.is_empty() {
            return Err(Error::Uninstallable { problems: wheel.installer_problems.clone() });
        }
        let analysis = analysis::scan(&wheel, &settings.analyze, progress)?;
        Ok(release::metapackage::Pinned {
            name: wheel.metadata.name.clone(),
            version: wheel.metadata.version.text.clone(),
            wheel: wheel.filename.to_string(),
            platform_tags: wheel.filename.platform_tags.clone(),
            gpu_targets: analysis.gpu_targets(),
        })
    });
    // The first failure in argument order is the one reported.
    let scanned: Vec<release::metapackage::Pinned> = scanned.into_iter().collect::<Result<_, _>>()?;
    release::metapackage::build(&scanned, options).map_err(|e| Error::Metapackage(Box::new(e)))
}
