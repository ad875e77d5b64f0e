//! `split`: one fat wheel becomes a host wheel (same name, version and tags; its device code
//! replaced by kpack references) and one device wheel per GPU target group, which holds that
//! group's kpack archives and requires the host at the exact version; the host declares the
//! extras `device-<group>` and `device-all` ([`plan::split`]). Every wheel is examined and
//! planned, then the host written (its archives made as each binary is rewritten), then the
//! device wheels.
//!
//! Why one file: the command's orchestration (examine, plan, write the host, gather
//! its archives into device wheels, publish the set together) and the naming of device wheels; the
//! plan is in `plan::split` and the bytes in `writer::thin`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::pipeline::{DeviceCommand, Error, Examined, asked_processors, examine_keeping_copies, writable};
use super::write::{Destination, Placement, place};
use super::{Common, Output, WheelFailed, display_name};
use crate::analysis::CopyRoom;
use crate::gpu::kpack::ArchiveWriter;
use crate::gpu::resolve::Lookup;
use crate::gpu::targets::Keep;
use crate::output::{OutputKey, TempDir, publish_set};
use crate::plan::split::{
    ArchiveLayout, DeviceNaming, DeviceWheelPlan, Group, SharedArchives, SplitOptions, SplitPlan, SplitTo, all_groups,
    split,
};
/// `--group-by`'s values and the checks of `--group`, `--overlay-root` and
/// `--device-requires-dist`, for the command line.
pub use crate::plan::split::{
    ArchivePer, GroupBy, SettingError, check_device_requirement, check_kpack_group, check_overlay_root,
};
use crate::report::split::{DeviceWheel, LeftAlone, SplitOutcome, SplitWheel, to_json, to_text};
use crate::settings::Settings;
use crate::wheel::WheelFilename;
use crate::wheel::name::PackageName;
use crate::writer::new_wheel::NewWheel;
use crate::writer::proof::Proven;
use crate::writer::thin::ThinOutcome;
use crate::zip::Spilled;
use crate::{parallel, wheel};

/// `split`'s request.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub wheel_dir: PathBuf,
    /// The groups asked for (`--gpu-target`); empty with `all_targets`. The device wheels'
    /// naming and the archives' layout (`--device-name`, `--group-by`, `--group`,
    /// `--overlay-root`, `--archive-per`, `--device-requires-dist`) are settings
    /// ([`crate::settings::SplitSettings`]).
    pub targets: Vec<String>,
    pub all_targets: bool,
    /// `--drop-other-targets`: code of processors no device wheel takes leaves the host anyway.
    pub drop_other_targets: bool,
    /// `--require-devices`: the host requires every device wheel unconditionally.
    pub require_devices: bool,
    pub compact: bool,
}

/// Run `split`: what each wheel became, errors on stderr.
pub fn run(request: &SplitRequest) -> Output {
    let mut settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let asked = match asked_processors(DeviceCommand::Split, request.all_targets, &settings) {
        Ok(asked) => asked,
        Err(e) => return Output::usage(e),
    };
    if let Err(e) = std::fs::create_dir_all(&request.wheel_dir) {
        return Output::failure(format!("cannot create {}: {e}", request.wheel_dir.display()));
    }
    // Every output is written in a directory of this run inside `-w` and published from there
    // as a set, once it is whole and proven: a split that fails or is interrupted leaves `-w`
    // as it was. The directory goes with the run, on every exit path.
    let stage = match TempDir::create(&request.wheel_dir.join(".split")) {
        Ok(stage) => stage,
        Err(e) => return Output::failure(format!("cannot write in {}: {e}", request.wheel_dir.display())),
    };
    let staged = stage.path().to_path_buf();
    // Every code object a group takes must be in the kept copy: with --all-targets, all of them.
    let copy_keep = if request.all_targets {
        Keep::everything()
    } else {
        Keep::new(asked.iter().flat_map(|g| g.keep.targets.clone()).collect())
    };
    let room = CopyRoom::capturing(staged.clone(), settings.copy_room, copy_keep);
    let examined = examine_keeping_copies(&request.wheels, &mut settings, room, request.common.quiet);
    let level = settings.zip_compression_level.value;
    let mut planned: Vec<Result<Planned, Error>> = examined
        .into_iter()
        .map(|e| {
            let examined = e?;
            if let Some(reason) = already_split(&examined) {
                return Ok(Planned::AlreadySplit(examined.wheel.filename.to_string(), reason));
            }
            let groups =
                if request.all_targets { all_groups(&examined.wheel, &examined.analysis) } else { asked.clone() };
            plan_one(examined, &groups, request, &settings, level)
        })
        .collect();
    refuse_unsafe_outputs(&mut planned, request);
    refuse_shared_archives(&mut planned);
    let work: Vec<_> = planned.into_iter().zip(&request.wheels).collect();
    let destination = Destination::Directory(staged.clone());
    let mut written: Vec<Result<SplitOutcome, Error>> = parallel::map_owned(work, |(planned, path)| {
        planned.and_then(|planned| match planned {
            Planned::AlreadySplit(wheel, reason) => Ok(SplitOutcome::Left(LeftAlone { wheel, reason })),
            Planned::Split(planned) => {
                let (examined, plan) = *planned;
                let at = Staging { input: path, destination: &destination, staged: &staged };
                write_one(&examined, &plan, &settings, at).map(|w| SplitOutcome::Written(Box::new(w)))
            }
        })
    });
    let shared_failed = share_device_wheels(&mut written, &settings, &staged);
    let mut published = std::collections::BTreeSet::new();
    let results: Vec<Result<SplitOutcome, WheelFailed<Error>>> = written
        .into_iter()
        .zip(&request.wheels)
        .map(|(outcome, path)| {
            outcome
                .and_then(|o| match o {
                    SplitOutcome::Written(written) => publish(*written, &request.wheel_dir, &mut published)
                        .map(|w| SplitOutcome::Written(Box::new(w))),
                    left => Ok(left),
                })
                .map_err(|e| WheelFailed::new(path, e))
        })
        .collect();
    drop(stage);
    let named: Vec<(String, &Result<SplitOutcome, WheelFailed<Error>>)> =
        request.wheels.iter().zip(&results).map(|(path, r)| (display_name(path), r)).collect();
    let stdout = if request.common.json { to_json(&named) } else { to_text(&named) };
    let mut stderr: Vec<String> =
        named.iter().filter_map(|(_, r)| r.as_ref().err()).map(|e| format!("wheelfix: error: {e}")).collect();
    stderr.extend(shared_failed.into_iter().map(|e| format!("wheelfix: warning: {e}")));
    let failed = results.iter().filter(|r| r.is_err()).count();
    Output { stdout, stderr, code: 0 }.finish(failed, results.len())
}

/// One wheel, planned: its split, or the reason it is left alone.
enum Planned {
    Split(Box<(Examined, SplitPlan)>),
    /// A device wheel or a host already split: (its file name, why).
    AlreadySplit(String, String),
}

/// Why a wheel is already the output of a split, if it is: it holds kpack archives or kpack
/// markers and no offload bundle left to move (a device wheel, or a split host). Split again,
/// a device wheel's database files would move to device wheels of their own.
fn already_split(examined: &Examined) -> Option<String> {
    let gpu = &examined.analysis.gpu;
    let bundles = gpu.iter().any(|c| c.container == crate::gpu::Container::HipFatbin && !c.target_bytes.is_empty());
    if bundles {
        return None;
    }
    let archives = gpu.iter().filter(|c| c.container == crate::gpu::Container::KpackArchive).count();
    let markers = gpu.iter().filter(|c| !c.kpack_search_paths.is_empty()).count();
    match (archives, markers) {
        (0, 0) => None,
        (_, 0) => Some(format!(
            "a device wheel ({}, no offload bundles): left as it is",
            crate::log::plural(archives, "kpack archive")
        )),
        _ => Some(format!(
            "already split ({markers} {} with kpack markers, no offload bundles): left as it is",
            if markers == 1 { "binary" } else { "binaries" }
        )),
    }
}

/// Refuse, before anything is written, each wheel whose outputs would destroy or shadow
/// something: an output name shared with another output of the run (after PEP 503
/// normalisation of the project), an output that is an input of the run (its own included),
/// a device project that is the host's own, a file or archive name longer than a file system
/// takes. Existing files in `-w` are checked when the set is published ([`publish`]).
fn refuse_unsafe_outputs(planned: &mut [Result<Planned, Error>], request: &SplitRequest) {
    let names: Vec<Option<Vec<OutputName>>> = planned
        .iter_mut()
        .map(|p| match p {
            Ok(Planned::Split(planned)) => match output_names(&planned.0, &planned.1) {
                Ok(names) => Some(names),
                Err(e) => {
                    *p = Err(e);
                    None
                }
            },
            _ => None,
        })
        .collect();
    let inputs: Vec<OutputKey> = request.wheels.iter().map(|p| OutputKey::of(p)).collect();
    let mut users: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, names) in names.iter().enumerate() {
        for name in names.iter().flatten() {
            users.entry(name.key.clone()).or_default().push(i);
        }
    }
    for (i, names) in names.iter().enumerate() {
        let Some(names) = names else { continue };
        for name in names {
            let dest = request.wheel_dir.join(&name.file);
            let others: Vec<String> = users[&name.key]
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| request.wheels[j].display().to_string())
                .collect();
            if !others.is_empty() {
                let mut wheels = vec![request.wheels[i].display().to_string()];
                wheels.extend(others);
                planned[i] = Err(Error::Collision { output: dest.display().to_string(), wheels });
                break;
            }
            let key = OutputKey::of(&dest);
            if let Some(j) = inputs.iter().position(|input| *input == key) {
                if j == i {
                    planned[i] = Err(Error::WouldReplaceOwnInput(dest));
                    break;
                }
                planned[i] = Err(Error::ReplacesOtherInput {
                    output: dest.display().to_string(),
                    input: request.wheels[j].display().to_string(),
                });
                break;
            }
        }
    }
}

/// Refuse, before anything is written, the splits of different projects whose device wheels
/// would install archives at one path (`--overlay-root common --group rocm` over two projects
/// with binaries under `common/`): installed together, one project's kernels would replace the
/// other's. The same project's wheels for several Pythons share their device wheels: no clash.
fn refuse_shared_archives(planned: &mut [Result<Planned, Error>]) {
    let mut users: std::collections::BTreeMap<String, Vec<(usize, String)>> = Default::default();
    for (i, p) in planned.iter().enumerate() {
        let Ok(Planned::Split(split)) = p else { continue };
        let project = split.0.wheel.metadata.package.to_string();
        let stems: std::collections::BTreeSet<&str> =
            split.1.binaries.iter().map(|b| b.archive_stem.as_str()).collect();
        for stem in stems {
            users.entry(stem.to_string()).or_default().push((i, project.clone()));
        }
    }
    for (stem, list) in users {
        let projects: std::collections::BTreeSet<&str> = list.iter().map(|(_, p)| p.as_str()).collect();
        if projects.len() < 2 {
            continue;
        }
        let names = projects.iter().copied().collect::<Vec<_>>().join(", ");
        for (i, _) in &list {
            let file = match &planned[*i] {
                Ok(Planned::Split(split)) => split.0.wheel.filename.to_string(),
                _ => continue,
            };
            planned[*i] = Err(Error::Unsplittable {
                file,
                problem: format!(
                    "the device wheels of {names} would each install `{stem}_<target>.kpack`: installed together, one's kernels would replace the other's (give each project its own --group)"
                ),
            });
        }
    }
}

/// One output file of a wheel's split: its file name, and the key two outputs collide by (the
/// name with its project normalised as pip compares projects).
struct OutputName {
    file: String,
    key: String,
}

/// The file names a wheel's split writes (host, then device wheels), once the plan has found
/// no problem with them ([`SplitPlan::name_problem`]).
fn output_names(examined: &Examined, plan: &SplitPlan) -> Result<Vec<OutputName>, Error> {
    let wheel = &examined.wheel;
    if let Some(problem) = plan.name_problem(wheel) {
        return Err(Error::Unsplittable { file: wheel.filename.to_string(), problem });
    }
    let key = |f: &WheelFilename| {
        let file = f.to_string();
        format!("{}{}", PackageName::new(&f.distribution), &file[f.distribution.len()..])
    };
    let files = std::iter::once(&wheel.filename).chain(plan.devices.iter().map(|d| &d.filename));
    Ok(files.map(|f| OutputName { file: f.to_string(), key: key(f) }).collect())
}

/// Move one wheel's host and device wheels from the stage into `-w`, as a set
/// ([`publish_set`]); a device wheel an earlier wheel's set published (one shared by several
/// Python versions) is not moved again. The outcome then names where they are.
fn publish(
    mut outcome: SplitWheel,
    wheel_dir: &Path,
    published: &mut std::collections::BTreeSet<PathBuf>,
) -> Result<SplitWheel, Error> {
    let to_dest = |staged: &str| {
        let staged = PathBuf::from(staged);
        let dest = wheel_dir.join(staged.file_name().unwrap_or_default());
        (staged, dest)
    };
    let files: Vec<(PathBuf, PathBuf)> =
        std::iter::once(&outcome.host).chain(outcome.devices.iter().map(|d| &d.wheel)).map(|p| to_dest(p)).collect();
    let moved: Vec<(PathBuf, PathBuf)> =
        files.iter().filter(|(staged, _)| !published.contains(staged)).cloned().collect();
    publish_set(&moved)?;
    published.extend(moved.into_iter().map(|(staged, _)| staged));
    outcome.host = files[0].1.display().to_string();
    for (device, (_, dest)) in outcome.devices.iter_mut().zip(&files[1..]) {
        device.wheel = dest.display().to_string();
    }
    Ok(outcome)
}

/// Device wheels of one group that this run wrote for hosts of several Python versions (one
/// project, version and platform, other Python tags) and that hold the same members, byte for
/// byte by their RECORD digests, become one `py3-none-<platform>` wheel
/// ([`crate::plan::split::shared_device_wheel`]): an index holds each code object once, not
/// once per Python version. Device wheels that differ stay one per host. What could not be
/// shared is returned as warnings (the per-host wheels stay, which is still a whole set).
fn share_device_wheels(
    outcomes: &mut [Result<SplitOutcome, Error>],
    settings: &Settings,
    staged: &Path,
) -> Vec<String> {
    // (device project, version, platform tags) → (outcome, device) of each host's wheel.
    let mut groups: std::collections::BTreeMap<(String, String, String), Vec<(usize, usize)>> = Default::default();
    for (i, outcome) in outcomes.iter().enumerate() {
        let Ok(SplitOutcome::Written(o)) = outcome else { continue };
        for (j, d) in o.devices.iter().enumerate() {
            let Some(name) = Path::new(&d.wheel).file_name().and_then(|n| n.to_str()) else { continue };
            let Ok(f) = WheelFilename::parse(name) else { continue };
            let platforms = f.platform_tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(".");
            groups.entry((f.distribution.clone(), f.version.text.clone(), platforms)).or_default().push((i, j));
        }
    }
    let mut warnings = Vec::new();
    for members in groups.into_values().filter(|m| m.len() > 1) {
        let paths: Vec<PathBuf> =
            members.iter().map(|&(i, j)| PathBuf::from(&device_of(outcomes, i, j).wheel)).collect();
        match shared_wheel(&paths, settings, staged) {
            Ok(None) => {}
            Ok(Some(shared)) => {
                let size = std::fs::metadata(&shared).map(|m| m.len()).ok();
                for &(i, j) in &members {
                    let device = device_of(outcomes, i, j);
                    device.wheel = shared.display().to_string();
                    device.size = size;
                    device.shared = true;
                }
                for path in &paths {
                    let _ = std::fs::remove_file(path);
                }
            }
            Err(e) => warnings.push(format!("{}: not shared across Python versions: {e}", display_name(&paths[0]))),
        }
    }
    warnings
}

/// The `j`th device wheel of outcome `i`, which was grouped from a written wheel.
fn device_of(outcomes: &mut [Result<SplitOutcome, Error>], i: usize, j: usize) -> &mut DeviceWheel {
    match &mut outcomes[i] {
        Ok(SplitOutcome::Written(written)) => &mut written.devices[j],
        _ => unreachable!("device wheels are grouped from written wheels only"),
    }
}

/// The one wheel for `paths` (device wheels of this run, one per host), written into the
/// stage, when their members outside `.dist-info` are the same; `None` when they differ.
fn shared_wheel(paths: &[PathBuf], settings: &Settings, staged: &Path) -> Result<Option<PathBuf>, SharingError> {
    let open = |p: &Path| wheel::Wheel::open(p).map_err(|source| SharingError::Open { wheel: display_name(p), source });
    let wheels: Vec<wheel::Wheel> = paths.iter().map(|p| open(p)).collect::<Result<_, _>>()?;
    let content = |w: &wheel::Wheel| -> Vec<(String, String)> {
        let prefix = format!("{}/", w.dist_info);
        let rows = w.record.rows().filter(|r| !r.path.starts_with(&prefix));
        let mut rows: Vec<(String, String)> = rows.map(|r| (r.path.to_string(), r.hash.to_string())).collect();
        rows.sort();
        rows
    };
    let first = content(&wheels[0]);
    let pythons: std::collections::BTreeSet<String> =
        wheels.iter().map(|w| w.filename.python_abi_pairs().join(".")).collect();
    if pythons.len() < wheels.len() || wheels[1..].iter().any(|w| content(w) != first) {
        return Ok(None);
    }
    let plan = crate::plan::split::shared_device_wheel(&wheels[0]);
    let dest = staged.join(plan.filename.to_string());
    let options = crate::writer::WriteOptions {
        patcher: settings.patcher.value.patcher(),
        budget: &settings.analyze.memory,
        source_date_epoch: settings.source_date_epoch,
    };
    let commit = crate::output::Commit::Replace;
    crate::writer::write_wheel(&wheels[0], &plan, &[], &options, crate::writer::WriteTo::new(&dest, commit))?;
    // Proven before the per-host wheels go: the shared wheel's RECORD names each member of
    // theirs with its digest, and its archive's members hash to that RECORD.
    let written = open(&dest)?;
    if content(&written) != first || !members_hash_to_record(&written)? {
        let _ = std::fs::remove_file(&dest);
        return Err(SharingError::NotAsMade(plan.filename.to_string()));
    }
    Ok(Some(dest))
}

/// Why device wheels could not become one: the per-host wheels stay.
#[derive(Debug, thiserror::Error)]
enum SharingError {
    #[error("{wheel}: {source}")]
    Open { wheel: String, source: wheel::WheelError },
    #[error(transparent)]
    Write(#[from] crate::writer::WriteError),
    #[error("{0} does not hold the members it was made from")]
    NotAsMade(String),
    #[error("{member}: {source}")]
    Read { member: String, source: Box<dyn std::error::Error + Send + Sync> },
}

fn plan_one(
    examined: Examined,
    groups: &[Group],
    request: &SplitRequest,
    settings: &Settings,
    level: u32,
) -> Result<Planned, Error> {
    let (wheel, analysis) = (&examined.wheel, &examined.analysis);
    let split_settings = &settings.split;
    let naming = DeviceNaming {
        template: split_settings.device_name.value.clone(),
        group_by: split_settings.group_by.value,
        requires_dist: split_settings.device_requires_dist.value.clone(),
    };
    let therock_group = crate::plan::split::therock_group(&wheel.metadata.name);
    let shared = match (split_settings.kpack_group.value.as_deref(), split_settings.overlay_root.value.as_deref()) {
        (Some(group), root) => Some(SharedArchives { group, root }),
        (None, Some(root)) => Some(SharedArchives { group: &therock_group, root: Some(root) }),
        (None, None) => None,
    };
    let layout = ArchiveLayout { shared, per: split_settings.archive_per.value };
    let options = SplitOptions {
        groups,
        naming: &naming,
        compact: request.compact,
        compression_level: level,
        dir: &request.wheel_dir,
        layout,
        index_url: settings.index_url.value.as_deref(),
    };
    let mut plan = split(wheel, analysis, &options);
    if request.require_devices {
        crate::plan::split::require_devices(&mut plan, wheel);
    }
    writable(DeviceCommand::Split, wheel, &plan.unreadable)?;
    account_for_every_target(&examined, groups, &plan, request)?;
    Ok(Planned::Split(Box::new((examined, plan))))
}

/// Every processor the split moves code of goes to a device wheel, and every processor asked
/// for has code: a target asked for without code (`--gpu-target gfx950` on a wheel without
/// gfx950 code, `gfx9-4-generic` where no code is generic) is refused as `thin` refuses it, and
/// code that no device wheel takes is refused unless `--drop-other-targets` says to drop it.
fn account_for_every_target(
    examined: &Examined,
    groups: &[Group],
    plan: &SplitPlan,
    request: &SplitRequest,
) -> Result<(), Error> {
    let missing: Vec<String> =
        groups.iter().filter(|g| !plan.groups.contains(&g.name)).map(|g| g.name.clone()).collect();
    if !missing.is_empty() && !request.all_targets {
        // What the wheel has, for the message only.
        let present = all_groups(&examined.wheel, &examined.analysis).into_iter().map(|g| g.name).collect();
        return Err(Error::NoCodeFor { missing, present });
    }
    if request.drop_other_targets {
        return Ok(());
    }
    let mut unclaimed: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let claimed = |target: &crate::gpu::TargetId| groups.iter().any(|g| g.keep.keeps(target));
    for cut in &plan.cut {
        for target in cut.dropped.keys().filter(|t| !claimed(t)) {
            unclaimed.entry(target.to_string()).or_default().push(cut.file.clone());
        }
    }
    for db in plan.databases.iter().filter(|d| d.group.is_none()) {
        unclaimed.entry(db.target.to_string()).or_default().push(db.member.clone());
    }
    if unclaimed.is_empty() {
        return Ok(());
    }
    let order: Vec<&str> = crate::gpu::targets::natural_order(unclaimed.keys().map(String::as_str));
    let unclaimed = order.iter().map(|t| (t.to_string(), unclaimed[*t].clone())).collect();
    Err(Error::Unclaimed { unclaimed })
}

/// Where one wheel's split reads and writes: the input, and the run's directory in `-w` where
/// its outputs are staged.
struct Staging<'a> {
    input: &'a Path,
    destination: &'a Destination,
    staged: &'a Path,
}

/// Write a wheel's host and device wheels into the stage.
fn write_one(examined: &Examined, plan: &SplitPlan, settings: &Settings, at: Staging<'_>) -> Result<SplitWheel, Error> {
    let Staging { input: path, destination, staged } = at;
    let wheel = &examined.wheel;
    let dest = &staged.join(wheel.filename.to_string());
    let changed = !plan.binaries.is_empty() || !plan.databases.is_empty();
    let rewrite = changed || !examined.analysis.record_findings.is_empty();
    let size_before = std::fs::metadata(path).map(|m| m.len()).ok();
    let written = place(examined, &plan.plan, settings, rewrite, Placement { path, dest, destination, head: None })?;
    let (output, mut thinned) = match written {
        Some(w) => (w.path, w.thinned),
        None => (dest.to_path_buf(), Default::default()),
    };
    // One device wheel per wheel group, with its processors' code from the archives the host's
    // rewrite returned; independent of each other, so written on every core.
    let inputs: Vec<DeviceInput<'_>> =
        plan.devices.iter().map(|device| DeviceInput::take(plan, device, &mut thinned)).collect();
    let devices = parallel::try_map_owned(inputs, |input| {
        write_device(wheel, plan, input, (staged, settings.source_date_epoch))
    })?;
    Ok(SplitWheel {
        wheel: wheel.filename.to_string(),
        host: output.display().to_string(),
        size_before,
        size_after: std::fs::metadata(&output).map(|m| m.len()).ok(),
        installed_before: Some(wheel.archive.installed_size()),
        installed_after: wheel::Archive::open(&output).ok().map(|a| a.installed_size()),
        binaries: plan.binaries.len(),
        devices,
        cut: plan.cut.clone(),
        left: plan.left.clone(),
        uncovered: plan.uncovered.clone(),
        rewritten: rewrite,
    })
}

/// What one device wheel is made of: its plan, and the archives the host's rewrite made for its
/// processors (finished, or unfinished parts to merge).
struct DeviceInput<'p> {
    device: &'p DeviceWheelPlan,
    /// (member path, archive) of every binary's own finished archive for a processor.
    finished: Vec<(String, Proven)>,
    /// `--group`: per archive name (`gfx942`, or a target id), each binary's unfinished part,
    /// in the binaries' order.
    parts: BTreeMap<String, Vec<(&'p SplitTo, ArchiveWriter)>>,
}

impl<'p> DeviceInput<'p> {
    /// Take the group's archives out of what the host's rewrite returned: those whose name's
    /// processor is one of the group's ([`crate::plan::kpack::ArchivePer::name`]).
    fn take(plan: &'p SplitPlan, device: &'p DeviceWheelPlan, thinned: &mut BTreeMap<String, ThinOutcome>) -> Self {
        let ours = |name: &str| device.processors.iter().any(|p| p == crate::gpu::targets::processor_of(name));
        let mut finished = Vec::new();
        let mut parts: BTreeMap<String, Vec<(&SplitTo, ArchiveWriter)>> = BTreeMap::new();
        for binary in &plan.binaries {
            let Some(outcome) = thinned.get_mut(&binary.member) else { continue };
            for (name, stored) in outcome.archives.iter().filter(|(name, _)| ours(name)) {
                finished.push((binary.archive_path(name), stored.clone()));
            }
            let names: Vec<String> = outcome.unfinished.keys().filter(|name| ours(name)).cloned().collect();
            for name in names {
                let part = outcome.unfinished.remove(&name).expect("listed above");
                parts.entry(name).or_default().push((binary, part));
            }
        }
        DeviceInput { device, finished, parts }
    }
}

/// Every code object a device wheel's archives hold for its processors is found by the kpack
/// runtime's lookup from its binary's marker ([`crate::writer::proof::prove_lookups`]); else
/// the wheel is not written.
fn prove_lookups(
    wheel: &wheel::Wheel,
    plan: &SplitPlan,
    device: &DeviceWheelPlan,
    archives: &[(String, Proven)],
) -> Result<(), Error> {
    let markers: Vec<(String, &SplitTo, Vec<String>)> = plan
        .binaries
        .iter()
        .filter_map(|to| {
            let (_, search_paths) = crate::gpu::kpack::read_marker(&to.marker)?;
            Some((wheel.install_path(&to.member)?, to.as_ref(), search_paths))
        })
        .collect();
    let lookups: Vec<Lookup<'_>> = markers
        .iter()
        .map(|(binary, to, search_paths)| Lookup { binary, kernel_name: &to.kernel_name, search_paths })
        .collect();
    let tocs: BTreeMap<&str, &crate::gpu::resolve::Toc> = archives.iter().map(|(p, a)| (p.as_str(), &a.toc)).collect();
    crate::writer::proof::prove_lookups(&lookups, &device.processors, &tocs).map_err(|problems| Error::Unsplittable {
        file: wheel.filename.to_string(),
        problem: format!(
            "the {} device wheel's code objects are not where the split host's markers lead the runtime: {}",
            device.group,
            problems.join("; ")
        ),
    })
}

/// The archive of name `name` (`gfx942`, or a target id) the wheel's binaries share
/// (`--group`): every binary's code objects (`parts`, in the binaries' order) under one table
/// of contents; `None` without code for it.
fn shared_archive(
    name: &str,
    mut parts: Vec<(&SplitTo, ArchiveWriter)>,
    dir: &Path,
) -> std::io::Result<Option<(String, Proven)>> {
    let Some((first, _)) = parts.first() else { return Ok(None) };
    let (path, group) = (first.archive_path(name), first.shared.clone().unwrap_or_default());
    let family = first.archive_per.family(name);
    let archive = if parts.len() == 1 {
        parts.pop().expect("one").1
    } else {
        let mut merged = ArchiveWriter::new(tempfile::tempfile_in(dir)?)?;
        for (_, part) in &mut parts {
            let entries: Vec<(String, String)> =
                part.entries().map(|(k, t, _)| (k.to_string(), t.to_string())).collect();
            for (key, target) in entries {
                merged.copy_frame(part, &key, &target, &key)?;
            }
        }
        merged
    };
    let expected = archive.expected();
    let file = archive.finish(&group, &family)?;
    Ok(Some((path.clone(), crate::writer::proof::proven_archive(file, &expected, &path, name)?)))
}

/// Write one device wheel as its plan says: its archives from every binary, stored (zstd
/// frames do not deflate), and a `.dist-info` with its requirements, with the host's tags.
fn write_device(
    wheel: &wheel::Wheel,
    plan: &SplitPlan,
    input: DeviceInput<'_>,
    (dir, source_date_epoch): (&Path, Option<i64>),
) -> Result<DeviceWheel, Error> {
    let io =
        |what: &str, e: std::io::Error| Error::CreateDir { path: format!("{} ({what})", dir.display()), source: e };
    let DeviceInput { device, finished, parts } = input;
    let (group, processors) = (&device.group, &device.processors);
    let mut proven = finished;
    for (name, parts) in parts {
        if let Some(shared) = shared_archive(&name, parts, dir).map_err(|e| io("archives", e))? {
            proven.push(shared);
        }
    }
    prove_lookups(wheel, plan, device, &proven)?;
    let archives = proven.len();
    let mut spilled: Vec<(String, Arc<Spilled>)> = proven.into_iter().map(|(path, p)| (path, p.stored)).collect();
    let databases: Vec<_> = plan
        .databases
        .iter()
        .filter(|m| m.group.as_deref().is_some_and(|g| processors.iter().any(|p| p == g) || g == group))
        .collect();
    let family = (!device.family_of.is_empty()).then_some(&device.family_of);
    for db in &databases {
        spilled.push((db.member.clone(), Arc::new(copied(wheel, &db.member, dir, plan.plan.compression_level)?)));
    }
    let version = &wheel.filename.version.text;
    let new = NewWheel {
        name: device.project.clone(),
        version: version.clone(),
        summary: match family {
            Some(family_of) => format!(
                "{group} kernel databases of {} {version} (for {}), split out by wheelfix",
                wheel.metadata.name,
                family_of.join(", ")
            ),
            None => format!(
                "{} device code of {} {version}, split out by wheelfix (kpack archives)",
                processors.join(", "),
                wheel.metadata.name
            ),
        },
        provides_extra: Vec::new(),
        requires_dist: device.requires_dist.clone(),
        index_url: device.index_url.clone(),
        file_tags: wheel.filename.tag_triple(),
        tags: wheel
            .filename
            .python_abi_pairs()
            .iter()
            .flat_map(|pair| wheel.filename.platform_tags.iter().map(move |p| format!("{pair}-{p}")))
            .collect(),
        root_is_purelib: false,
        wheel_ends_with_empty_line: false,
        members: spilled,
        source_date_epoch,
    };
    debug_assert_eq!(new.file_name(), device.filename.to_string());
    let path = new.write(dir)?;
    let size = std::fs::metadata(&path).map(|m| m.len()).ok();
    let installed = wheel::Archive::open(&path).ok().map(|a| a.installed_size());
    Ok(DeviceWheel {
        target: group.clone(),
        name: device.project.clone(),
        wheel: path.display().to_string(),
        // A family's wheel comes with each of its processors' extras, and with `device-all`.
        extra: device.extra.to_string(),
        family_of: device.family_of.clone(),
        archives,
        databases: databases.len(),
        size,
        installed,
        shared: false,
    })
}

/// A member of the input, deflated anew into a file of its own (streamed: never whole in memory).
fn copied(wheel: &wheel::Wheel, name: &str, dir: &Path, level: u32) -> Result<Spilled, Error> {
    use crate::writer::thin::MemberProblem;
    let fail = |problem| Error::Write(crate::writer::WriteError::Thin { file: name.to_string(), problem });
    let member = wheel.archive.member(name).ok_or_else(|| fail(MemberProblem::NotAMember))?;
    let mut file = tempfile::tempfile_in(dir).map_err(|e| fail(MemberProblem::Io(e)))?;
    let mut stream = wheel.archive.zip.stream(member).map_err(|e| fail(MemberProblem::Zip(e)))?;
    let mut out = std::io::BufWriter::new(&mut file);
    let len = std::io::copy(&mut stream, &mut out).map_err(|e| fail(MemberProblem::Io(e)))?;
    std::io::Write::flush(&mut out).map_err(|e| fail(MemberProblem::Io(e)))?;
    drop(out);
    let read = |buf: &mut [u8], at: u64| std::os::unix::fs::FileExt::read_exact_at(&file, buf, at);
    Spilled::from_reader(len, level, dir, None, read).map_err(|e| fail(MemberProblem::Io(e)))
}

/// Every member of `wheel` outside its `.dist-info`, read back from the archive, hashes to its
/// RECORD row (a reader of the zip, not the writer's record of what it wrote).
fn members_hash_to_record(wheel: &wheel::Wheel) -> Result<bool, SharingError> {
    use sha2::Digest;
    let prefix = format!("{}/", wheel.dist_info);
    for member in wheel.archive.members().iter().filter(|m| !m.is_dir() && !m.name.starts_with(&prefix)) {
        let fail = |e: Box<dyn std::error::Error + Send + Sync>| SharingError::Read {
            member: member.name.to_string(),
            source: e,
        };
        let mut stream = wheel.archive.zip.stream(member).map_err(|e| fail(Box::new(e)))?;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = std::io::Read::read(&mut stream, &mut buf).map_err(|e| fail(Box::new(e)))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let digest: [u8; 32] = hasher.finalize().into();
        let actual = crate::wheel::record::record_hash(&digest);
        if wheel.record_entry(&member.name).map(|r| r.hash) != Some(actual.as_str()) {
            return Ok(false);
        }
    }
    Ok(true)
}
