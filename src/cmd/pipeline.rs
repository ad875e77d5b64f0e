//! The first stages for a batch, with the run's settings ([`crate::examine`] does one wheel):
//! the batch's virtual site-packages and its version decisions.

use std::path::{Path, PathBuf};

use crate::analysis;
use crate::analysis::site::SitePackages;
use crate::output::OutputError;
use crate::progress::Progress;
use crate::settings::Settings;
use crate::version::{self, BatchMember, Content, OrderingHazard, VersionChange};
use crate::wheel;
use crate::writer::WriteError;
use crate::{metapackage, parallel, plan};

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
    #[error("{} wheels of this run would be written to {output}: {}; none of them was written{}", wheels.len(), wheels.join(", "), if wheels.contains(output) { " (the directory still holds the output of an earlier run: give each run an empty directory, or remove the old files first)" } else { "" })]
    Collision { output: String, wheels: Vec<String> },
    #[error("the output {0} would replace the input itself; nothing was written (choose another -w)")]
    WouldReplaceOwnInput(PathBuf),
    #[error("cannot create {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error("{source}")]
    Version { wheel: String, source: version::VersionError },
    #[error("{source}")]
    Repair { wheel: String, source: plan::repair::RepairError },
    #[error("{source}")]
    Vendor { wheel: String, source: analysis::vendor::VendorError },
    #[error(transparent)]
    Metapackage(#[from] Box<metapackage::MetapackageError>),
    #[error("its device code has nothing for {} (it has {}{}); nothing was written (--allow-missing thins it anyway)", missing.join(", "), if present.is_empty() { "no targets".to_string() } else { present.join(", ") }, if files.is_empty() { String::new() } else { format!("; none for it in {}", files.join(", ")) })]
    MissingTargets { missing: Vec<crate::gpu::TargetId>, present: Vec<String>, files: Vec<String> },
    #[error("cannot thin `{file}`: {problem}; nothing was written")]
    Unthinnable { file: String, problem: String },
    #[error("it has no device code in offload bundles: there is no variant to write; nothing was written")]
    NoVariant,
    #[error("cannot split `{file}`: {problem}; nothing was written")]
    Unsplittable { file: String, problem: String },
    #[error("its device code has nothing for {} (it has {}): there is no device wheel to write; nothing was written", missing.join(", "), if present.is_empty() { "no targets".to_string() } else { present.join(", ") })]
    NoCodeFor { missing: Vec<String>, present: Vec<String> },
    #[error("{} would go to no device wheel: {}; nothing was written (add --gpu-target for them, use --all-targets, or --drop-other-targets to remove them from the host)", if unclaimed.len() == 1 { "this device code" } else { "these device codes" }, unclaimed.iter().map(|(t, files)| format!("{t} in {}", files.join(", "))).collect::<Vec<_>>().join("; "))]
    Unclaimed { unclaimed: Vec<(String, Vec<String>)> },
    #[error("pip refuses to install it: {}; nothing was written (rebuild the wheel)", problems.join("; "))]
    Uninstallable { problems: Vec<String> },
}

pub use crate::examine::Examined;

/// Open, analyse and judge one wheel with the run's settings; `site` holds the wheels
/// installed beside it.
pub fn examine(
    path: &Path,
    settings: &Settings,
    site: &SitePackages,
    progress: &dyn Progress,
) -> Result<Examined, Error> {
    Ok(crate::examine::examine(path, &settings.examine_options(), site, progress)?)
}

/// The outcome of a batch: one result per input, in order, and batch-wide warnings.
#[derive(Debug)]
pub struct Batch<T> {
    pub results: Vec<Result<T, Error>>,
    pub hazards: Vec<OrderingHazard>,
}

/// Examine every wheel, in parallel, each beside the `--with-wheels` and the batch's other wheels.
pub fn examine_all(paths: &[PathBuf], settings: &Settings, progress: &dyn Progress) -> Vec<Result<Examined, Error>> {
    let site = batch_site(paths, settings);
    parallel::map(paths, |path| examine(path, settings, &site, progress))
}

/// The virtual site-packages of a batch: `--with-wheels`, and the batch's own wheels when it has
/// more than one (the wheels of one invocation are installed together).
pub fn batch_site(paths: &[PathBuf], settings: &Settings) -> SitePackages {
    let mut inputs = settings.with_wheels.value.clone();
    if paths.len() > 1 {
        inputs.extend(paths.iter().cloned());
    }
    if inputs.is_empty() { SitePackages::default() } else { SitePackages::open(&inputs) }
}

/// The version decisions and pin rewrites of a batch, and its ordering hazards.
pub fn decide_versions(
    examined: &[Result<Examined, Error>],
    settings: &Settings,
) -> (Vec<Result<VersionChange, Error>>, Vec<OrderingHazard>) {
    let members: Vec<Option<BatchMember>> = examined
        .iter()
        .map(|r| {
            r.as_ref().ok().map(|e| BatchMember {
                name: e.wheel.metadata.package.clone(),
                version: e.wheel.metadata.version.clone(),
                content: if e.wheel.is_wheelfix_metapackage() {
                    Content::Metapackage
                } else if e.analysis.has_no_code() {
                    Content::Pure
                } else {
                    Content::Compiled
                },
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
    crate::files::collect_files(&[dir.to_path_buf()], &[".whl"])
        .iter()
        .filter_map(|path| wheel::WheelFilename::parse(path.file_name()?.to_str()?).ok())
        .map(|f| (f.name.to_string(), f.version.text))
        .collect()
}

/// Fail every wheel whose output another wheel of the run also writes, or whose output would
/// replace another input of the run: before anything is written. `dest` gives an item's output.
pub fn refuse_collisions<T>(items: &mut [Result<T, Error>], dest: impl Fn(&T) -> &Path, paths: &[PathBuf]) {
    let dests: Vec<Option<&Path>> = items.iter().map(|n| n.as_ref().ok().map(&dest)).collect();
    let found = crate::output::collisions(&dests, paths);
    for (n, collision) in items.iter_mut().zip(found) {
        match collision {
            Some(crate::output::Collision::Shared { output, wheels }) => *n = Err(Error::Collision { output, wheels }),
            Some(crate::output::Collision::ReplacesInput { output, input }) => {
                *n = Err(Error::ReplacesOtherInput { output, input })
            }
            None => {}
        }
    }
}
