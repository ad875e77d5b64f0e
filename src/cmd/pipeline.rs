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

/// The commands that rewrite device code (`thin`, `split`, `variants`), as their messages name
/// them; they share their first steps ([`asked_processors`], [`examine_keeping_copies`],
/// [`writable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCommand {
    Thin,
    Split,
    Variants,
}

impl DeviceCommand {
    pub fn name(self) -> &'static str {
        match self {
            DeviceCommand::Thin => "thin",
            DeviceCommand::Split => "split",
            DeviceCommand::Variants => "variants",
        }
    }

    /// The outputs it is asked targets for. Ex) `the device wheels to write`
    fn outputs(self) -> &'static str {
        match self {
            DeviceCommand::Thin => "the targets to keep",
            DeviceCommand::Split => "the device wheels to write",
            DeviceCommand::Variants => "the variants to write",
        }
    }

    /// Why a target ID with features names no output of its own.
    fn one_per_processor(self) -> &'static str {
        match self {
            DeviceCommand::Split => {
                "split writes one device wheel per processor (its xnack/sramecc variants go in the same wheel)"
            }
            DeviceCommand::Thin | DeviceCommand::Variants => {
                "a variant is a processor (its xnack/sramecc code goes in the same wheel)"
            }
        }
    }
}

/// Why the GPU targets a device-code command is asked for are not: a usage error (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetsError {
    #[error("{} needs --gpu-target{}: {}", command.name(), if *command == DeviceCommand::Thin { " (or gpu-targets in [tool.wheelfix])" } else { " (repeatable) or --all-targets" }, command.outputs())]
    NoTargets { command: DeviceCommand },
    #[error("give --gpu-target or --all-targets, not both")]
    TargetsAndAll,
    #[error("`{target}`: {}; name the processor", command.one_per_processor())]
    TargetId { command: DeviceCommand, target: String },
    #[error(transparent)]
    GpuTarget(#[from] crate::policy::gpus::GpuTargetError),
}

/// The processors `split` or `variants` is asked for, a group each: the targets of the run's
/// settings (`--gpu-target`, else `gpu-targets` of `[tool.wheelfix]`), each a processor LLVM
/// knows; none with `--all-targets` (each wheel's own are taken), which `--gpu-target` on the
/// command line contradicts.
pub fn asked_processors(
    command: DeviceCommand,
    all_targets: bool,
    settings: &Settings,
) -> Result<Vec<plan::kpack::Group>, TargetsError> {
    let targets = &settings.gpu_targets;
    let on_command_line = targets.origin == crate::settings::Origin::CommandLine;
    match (all_targets, targets.value.is_empty()) {
        (true, _) if on_command_line && !targets.value.is_empty() => Err(TargetsError::TargetsAndAll),
        (true, _) => Ok(Vec::new()),
        (false, true) => Err(TargetsError::NoTargets { command }),
        (false, false) => targets
            .value
            .iter()
            .map(|target| {
                if target.contains(':') {
                    return Err(TargetsError::TargetId { command, target: target.clone() });
                }
                Ok(plan::kpack::Group::of(target)?)
            })
            .collect(),
    }
}

/// Examine every wheel of a device-code command, the analysis keeping an inflated copy of each
/// member with bundles in `room` (so that each is inflated once), with a progress bar unless
/// `quiet`.
pub fn examine_keeping_copies(
    wheels: &[PathBuf],
    settings: &mut Settings,
    room: analysis::CopyRoom,
    quiet: bool,
) -> Vec<Result<Examined, Error>> {
    settings.analyze.keep_bundled_copies = Some(room);
    let progress = crate::progress::for_inputs(wheels, quiet);
    examine_all(wheels, settings, progress.as_ref())
}

/// Whether a device-code command may write from this wheel and its plan: pip installs the
/// wheel, and every file whose bundles the plan rewrites was read (`unreadable`: file, why).
pub fn writable(command: DeviceCommand, wheel: &wheel::Wheel, unreadable: &[(String, String)]) -> Result<(), Error> {
    if !wheel.installer_problems.is_empty() {
        return Err(Error::Uninstallable { problems: wheel.installer_problems.clone() });
    }
    let Some((file, problem)) = unreadable.first() else { return Ok(()) };
    let (file, problem) = (file.clone(), problem.clone());
    Err(match command {
        DeviceCommand::Split => Error::Unsplittable { file, problem },
        DeviceCommand::Thin | DeviceCommand::Variants => Error::Unthinnable { file, problem },
    })
}

/// A thin plan that leaves a requested target without code, refused (`--allow-missing` writes
/// it anyway): the targets, what the wheel has, and the binaries that lack them.
pub fn refuse_missing(plan: &plan::thin::ThinPlan, analysis: &analysis::Analysis) -> Result<(), Error> {
    if plan.missing.is_empty() {
        return Ok(());
    }
    let files = plan.uncovered.iter().map(|u| u.file.clone()).collect();
    Err(Error::MissingTargets { missing: plan.missing.clone(), present: analysis.gpu_targets(), files })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, LoadedConfig};
    use crate::settings::Flags;

    fn settings(flags: &[&str], config: &[&str]) -> Settings {
        let flags = Flags { gpu_targets: flags.iter().map(|t| t.to_string()).collect(), ..Flags::default() };
        let config = Config { gpu_targets: Some(config.iter().map(|t| t.to_string()).collect()), ..Config::default() };
        let loaded = LoadedConfig { path: Some("/p/pyproject.toml".into()), config };
        Settings::resolve_with(&flags, &|_| None, &loaded).unwrap()
    }

    fn names(groups: Vec<plan::kpack::Group>) -> Vec<String> {
        groups.into_iter().map(|g| g.name).collect()
    }

    #[test]
    fn split_and_variants_are_asked_for_processors_the_same_way() {
        for command in [DeviceCommand::Split, DeviceCommand::Variants] {
            let asked = |all, flags: &[&str], config: &[&str]| asked_processors(command, all, &settings(flags, config));
            assert_eq!(names(asked(false, &["GFX942", "gfx950"], &[]).unwrap()), ["gfx942", "gfx950"]);
            assert_eq!(names(asked(false, &[], &["gfx90a"]).unwrap()), ["gfx90a"], "[tool.wheelfix]'s");
            assert!(asked(true, &[], &["gfx90a"]).unwrap().is_empty(), "--all-targets takes each wheel's own");
            assert_eq!(asked(true, &["gfx942"], &[]).unwrap_err(), TargetsError::TargetsAndAll);
            let none = asked(false, &[], &[]).unwrap_err().to_string();
            assert!(none.starts_with(&format!("{} needs --gpu-target (repeatable) or --all-targets", command.name())));
            let id = asked(false, &["gfx90a:xnack+"], &[]).unwrap_err().to_string();
            assert!(id.starts_with("`gfx90a:xnack+`: ") && id.ends_with("; name the processor"), "{id}");
            assert!(matches!(asked(false, &["mi300"], &[]), Err(TargetsError::GpuTarget(_))));
        }
        let thin = TargetsError::NoTargets { command: DeviceCommand::Thin }.to_string();
        assert_eq!(thin, "thin needs --gpu-target (or gpu-targets in [tool.wheelfix]): the targets to keep");
    }
}
