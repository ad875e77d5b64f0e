//! `variants`: one fat build becomes variant wheels (PEP 825), one per processor or group, each
//! thinned to its code as `thin` does it (its proof included) and labelled, with a
//! `variant.json` naming its properties in AMD's namespace. An installer that knows variants
//! picks the wheel for the machine's GPU; the fat wheel can stay beside them as the `null`
//! variant (always compatible) and as the plain wheel (for installers that know no variants).
//!
//! Each wheel is examined once; every variant of it is planned from that one analysis, and
//! written from the one inflated copy of each fat member the analysis kept.
//!
//! A release's variants are one set: every variant of every input of one name and version, the
//! null variant, the plain copy and the release's `{name}-{version}-variants.json` are written
//! into a directory of the run inside `-w` and published together once all are whole
//! ([`publish_set`]), so that a failure or a signal leaves `-w` with the earlier set or none,
//! never a part an index would publish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::pipeline::{
    DeviceCommand, Error, Examined, asked_processors, examine_keeping_copies, refuse_missing, writable,
};
use super::write::Destination;
use super::{Common, Output, UsageError, WheelFailed, display_name};
use crate::analysis::copy::CopyRoom;
use crate::gpu::TargetId;
use crate::gpu::targets::Keep;
use crate::output::{OutputKey, TempDir, publish_set};
use crate::plan::edit::{NewMember, Plan};
use crate::plan::kpack::Group;
use crate::plan::split::{GroupBy, all_groups, grouped};
use crate::plan::thin::{ThinOptions, ThinPlan, thin};
use crate::report::variants::{VariantOutcome, WheelVariants, to_json, to_text};
use crate::wheel::variant::{self, NULL_LABEL, Properties, VariantMetadata, amd};
use crate::{parallel, wheel};

/// `variants`' request.
#[derive(Debug, Clone)]
pub struct VariantsRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub wheel_dir: PathBuf,
    /// A variant for every processor the wheel has code for.
    pub all_targets: bool,
    /// One variant per processor (the default), sub-family or family.
    pub group_by: Option<GroupBy>,
    /// Write a variant even where the wheel has no code for a requested processor.
    pub allow_missing: bool,
    /// The fat wheel as the `null` variant.
    pub null: bool,
    /// The fat wheel unlabelled, for installers that know no variants.
    pub plain: bool,
    /// Declare AMD's provider plugin in every variant.json (`--provider amd`).
    pub provider_plugin: bool,
    /// Declare these processors supported on every machine (`--static-gpu-target`): for an index
    /// that serves one kind of machine.
    pub static_targets: Vec<String>,
    /// One directory per group under `wheel_dir`, each an index of its own whose variants
    /// declare the group's processors statically (`--per-gpu-index`).
    pub per_gpu_index: bool,
    pub compact: bool,
}

/// One planned output: which wheel, its label and properties, the thin plan and where it goes.
struct Planned {
    wheel: usize,
    label: String,
    properties: Properties,
    plan: ThinPlan,
    /// Where it is published.
    dest: PathBuf,
    /// Where it is written first, in the run's directory.
    staged: PathBuf,
    /// Its variant.json's `providers`.
    providers: BTreeMap<String, variant::Provider>,
    /// The same file in other GPUs' indexes, (published, written): hard links of the one written.
    links: Vec<(PathBuf, PathBuf)>,
}

/// Run `variants`.
pub fn run(request: &VariantsRequest) -> Output {
    let mut settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let asked = match asked_processors(DeviceCommand::Variants, request.all_targets, &settings) {
        Ok(processors) => grouped(processors, request.group_by.unwrap_or(GroupBy::Target)),
        Err(e) => return Output::usage(e),
    };
    if let Err(e) = check_provider_flags(request) {
        return Output::usage(e);
    }
    if let Err(e) = std::fs::create_dir_all(&request.wheel_dir) {
        return Output::failure(format!("cannot create {}: {e}", request.wheel_dir.display()));
    }
    // Every output is written in this run's directory and published per release, whole.
    let stage = match TempDir::create(&request.wheel_dir.join(".variants")) {
        Ok(stage) => stage,
        Err(e) => return Output::failure(format!("cannot write in {}: {e}", request.wheel_dir.display())),
    };
    // The members with bundles are inflated once, by the analysis, into copies where the
    // variants go, that every variant's rewrite reads (each writes an overlay of its own);
    // beyond the room the writer inflates again, per variant.
    let copy_keep = match request.all_targets {
        true => Keep::everything(),
        false => Keep::new(asked.iter().flat_map(|g| g.keep.targets.clone()).collect()),
    };
    let room = CopyRoom::new(request.wheel_dir.clone(), settings.copy_room, copy_keep);
    let examined = examine_keeping_copies(&request.wheels, &mut settings, room, request.common.quiet);

    let options = ThinOptions {
        prune_files: false,
        compact: request.compact,
        compression_level: settings.zip_compression_level.value,
        shared_copies: true,
    };
    let mut failures: BTreeMap<usize, VariantsError> = BTreeMap::new();
    let mut examined_ok: Vec<Option<Examined>> = Vec::new();
    let mut planned: Vec<Planned> = Vec::new();
    for (index, result) in examined.into_iter().enumerate() {
        let outcome = result.and_then(|e| {
            let plans = plan_wheel(index, &e, request, &asked, options, stage.path())?;
            Ok((e, plans))
        });
        match outcome {
            Ok((e, plans)) => {
                planned.extend(plans);
                examined_ok.push(Some(e));
            }
            Err(e) => {
                failures.insert(index, VariantsError::Wheel(Box::new(e)));
                examined_ok.push(None);
            }
        }
    }
    refuse_shared_outputs(request, &mut planned, &mut failures);
    // Each GPU's index has its directory in the run's directory too.
    for p in &planned {
        if let Err(e) = std::fs::create_dir_all(crate::output::parent_dir(&p.staged)) {
            return Output::failure(format!("cannot write in {}: {e}", stage.path().display()));
        }
    }
    let written: Vec<(usize, Result<Vec<WrittenVariant>, VariantsError>)> = parallel::map_owned(planned, |p| {
        let examined = examined_ok[p.wheel].as_ref().expect("planned wheels were examined");
        write_variant(examined, p, request, &settings)
    });
    let results = collect(request, &examined_ok, written, failures, stage.path());
    drop(stage);
    let named: Vec<(String, &Result<WheelVariants, WheelFailed<VariantsError>>)> =
        request.wheels.iter().zip(&results).map(|(path, r)| (display_name(path), r)).collect();
    let stdout = if request.common.json { to_json(&named) } else { to_text(&named) };
    let mut stderr: Vec<String> =
        named.iter().filter_map(|(_, r)| r.as_ref().err()).map(|e| format!("wheelfix: error: {e}")).collect();
    let flat = !request.per_gpu_index && !request.provider_plugin && request.static_targets.is_empty();
    if flat && results.iter().any(|r| r.is_ok()) {
        stderr.push(
            "wheelfix: note: these variants declare no provider: uv takes the null variant from them today (it runs no provider for `amd`); without --one-index, `variants` writes one index per GPU, from which uv installs that GPU's variant".into(),
        );
    }
    let failed = results.iter().filter(|r| r.is_err()).count();
    Output { stdout, stderr, code: 0 }.finish(failed, results.len())
}

/// Refuse, before anything is written, every input whose variants another input of the run
/// would also write (two builds under one file name: which lands where would depend on timing),
/// or that would replace another input; as `split` refuses them.
fn refuse_shared_outputs(
    request: &VariantsRequest,
    planned: &mut Vec<Planned>,
    failures: &mut BTreeMap<usize, VariantsError>,
) {
    let mut writers: BTreeMap<OutputKey, (PathBuf, std::collections::BTreeSet<usize>)> = BTreeMap::new();
    for p in planned.iter() {
        writers.entry(OutputKey::of(&p.dest)).or_insert_with(|| (p.dest.clone(), Default::default())).1.insert(p.wheel);
    }
    let inputs: Vec<OutputKey> = request.wheels.iter().map(|w| OutputKey::of(w)).collect();
    for (key, (dest, wheels)) in &writers {
        let output = dest.display().to_string();
        if wheels.len() > 1 {
            let names: Vec<String> = wheels.iter().map(|&i| request.wheels[i].display().to_string()).collect();
            for &i in wheels {
                let error = Error::Collision { output: output.clone(), wheels: names.clone() };
                failures.entry(i).or_insert(VariantsError::Wheel(Box::new(error)));
            }
        } else if let Some(j) = inputs.iter().position(|input| input == key) {
            for &i in wheels {
                let input = request.wheels[j].display().to_string();
                let error = Error::ReplacesOtherInput { output: output.clone(), input };
                failures.entry(i).or_insert(VariantsError::Wheel(Box::new(error)));
            }
        }
    }
    planned.retain(|p| !failures.contains_key(&p.wheel));
}

/// The flags that declare a provider make sense together.
fn check_provider_flags(request: &VariantsRequest) -> Result<(), UsageError> {
    if request.provider_plugin && !request.static_targets.is_empty() {
        return Err(UsageError::ProviderAndStatic);
    }
    Ok(request.static_targets.iter().try_for_each(|t| TargetId::parse(t).map(drop))?)
}

/// The `providers` table a wheel's variant.json carries, if one is asked for: with
/// `--per-gpu-index`, the processors of the index (`group`) the variant goes in.
fn providers(
    request: &VariantsRequest,
    group: Option<&[String]>,
    rocm: Option<&str>,
) -> BTreeMap<String, variant::Provider> {
    if let (true, Some(processors)) = (request.per_gpu_index, group) {
        BTreeMap::from([(amd::NAMESPACE.to_string(), amd::provider(processors, rocm))])
    } else if request.provider_plugin || !request.static_targets.is_empty() {
        BTreeMap::from([(amd::NAMESPACE.to_string(), amd::provider(&request.static_targets, rocm))])
    } else {
        BTreeMap::new()
    }
}

/// Every variant of one wheel, planned from its one analysis.
fn plan_wheel(
    index: usize,
    examined: &Examined,
    request: &VariantsRequest,
    asked: &[Group],
    options: ThinOptions,
    stage: &Path,
) -> Result<Vec<Planned>, Error> {
    let (wheel, analysis) = (&examined.wheel, &examined.analysis);
    writable(DeviceCommand::Variants, wheel, &[])?;
    if let Some(label) = &wheel.filename.variant {
        return Err(Error::Unthinnable {
            file: wheel.filename.to_string(),
            problem: format!("it is already the variant `{label}`; make variants from the fat wheel"),
        });
    }
    let groups = if request.all_targets {
        grouped(all_groups(wheel, analysis), request.group_by.unwrap_or(GroupBy::Target))
    } else {
        asked.to_vec()
    };
    if groups.is_empty() {
        return Err(Error::NoVariant);
    }
    let rocm = rocm_version(wheel);
    let mut planned = Vec::new();
    for group in &groups {
        let plan = thin(wheel, analysis, &group.keep, options);
        writable(DeviceCommand::Variants, wheel, &plan.unreadable)?;
        // With --all-targets every processor has code in some binary; one that other binaries
        // lack is written as the fat wheel serves it (their bundles hold nothing for it either),
        // and reported as missing, as `split --all-targets` does.
        if !request.allow_missing && !request.all_targets {
            refuse_missing(&plan, analysis)?;
        }
        let label = variant::label_of(&group.name);
        let processors = processors_of(group);
        let properties = amd::properties(&processors, rocm.as_deref());
        let dir = request.per_gpu_index.then_some(group.name.as_str());
        let (dest, staged) = dest_of(request, wheel, &label, dir, stage);
        let providers = providers(request, Some(&processors), rocm.as_deref());
        let links = Vec::new();
        planned.push(Planned { wheel: index, dest, staged, providers, label, properties, plan, links });
    }
    if request.null {
        let plan = ThinPlan {
            plan: Plan::new(wheel.filename.clone()),
            cut: Vec::new(),
            pruned: Vec::new(),
            left: Vec::new(),
            missing: Vec::new(),
            uncovered: Vec::new(),
            unreadable: Vec::new(),
        };
        // One null variant. With an index per GPU it is written once, declaring no provider
        // (it has no properties to declare), and linked into every GPU's index: the fat wheel
        // is stored once, not once per GPU.
        let dirs: Vec<Option<&str>> = match request.per_gpu_index {
            true => groups.iter().map(|g| Some(g.name.as_str())).collect(),
            false => vec![None],
        };
        let (dest, staged) = dest_of(request, wheel, NULL_LABEL, dirs[0], stage);
        let links = dirs[1..].iter().map(|dir| dest_of(request, wheel, NULL_LABEL, *dir, stage)).collect();
        let providers = if request.per_gpu_index { BTreeMap::new() } else { providers(request, None, rocm.as_deref()) };
        let (properties, label) = (Properties::new(), NULL_LABEL.to_string());
        planned.push(Planned { wheel: index, label, properties, plan, dest, staged, providers, links });
    }
    Ok(planned)
}

/// The processors a group's variant runs on: each named one, a generic one as the processors
/// it covers (a machine reports its processor, never a generic name).
fn processors_of(group: &Group) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for t in &group.keep.targets {
        match crate::gpu::targets::generic_covers(t.processor()) {
            Some(covered) => names.extend(covered.iter().map(|c| c.to_string())),
            None => names.push(t.processor().to_string()),
        }
    }
    let order: Vec<String> =
        crate::gpu::targets::natural_order(names.iter().map(String::as_str)).into_iter().map(String::from).collect();
    let mut unique = Vec::new();
    for n in order {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    unique
}

/// The ROCm release the wheel's version names (`2.9.0+rocm7.0.2` → `7.0.2`), if it does.
fn rocm_version(wheel: &wheel::Wheel) -> Option<String> {
    let release = crate::version::rocm_release(wheel.filename.version.parsed.local())?;
    Some(release.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
}

/// Where a variant is published, and where it is written first: in `-w`, or in its GPU's
/// index `-w/<dir>/` (`--per-gpu-index`).
fn dest_of(
    request: &VariantsRequest,
    wheel: &wheel::Wheel,
    label: &str,
    dir: Option<&str>,
    stage: &Path,
) -> (PathBuf, PathBuf) {
    let name = wheel::WheelFilename { variant: Some(label.to_string()), ..wheel.filename.clone() }.to_string();
    let (out, staged) = match dir {
        Some(dir) => (request.wheel_dir.join(dir), stage.join(dir)),
        None => (request.wheel_dir.clone(), stage.to_path_buf()),
    };
    (out.join(&name), staged.join(&name))
}

/// One variant written into the run's directory, with what its variant.json says and where it
/// is to be published.
#[derive(Clone)]
struct WrittenVariant {
    outcome: VariantOutcome,
    metadata: VariantMetadata,
    staged: PathBuf,
    dest: PathBuf,
}

/// Write one variant: the thinned wheel, labelled, with its variant.json, into the run's directory.
fn write_variant(
    examined: &Examined,
    mut p: Planned,
    request: &VariantsRequest,
    settings: &crate::settings::Settings,
) -> (usize, Result<Vec<WrittenVariant>, VariantsError>) {
    let wheel = &examined.wheel;
    let path = &request.wheels[p.wheel];
    let metadata = VariantMetadata::of_variant(&p.label, &[amd::NAMESPACE], p.properties.clone(), p.providers.clone());
    let document = metadata.clone();
    let lines = VariantMetadata::property_lines(&p.properties);
    p.plan.plan.filename.variant = Some(p.label.clone());
    let member = format!("{}/{}", p.plan.plan.output_dist_info(&wheel.dist_info), variant::DIST_INFO_FILE);
    p.plan.plan.add.insert(member, NewMember::new(metadata.to_bytes(), Some(0o644)));
    if let Some(url) = settings.index_url.value.as_deref() {
        let text = crate::wheel::metadata::with_index_url(&wheel.metadata_text, url);
        if text != wheel.metadata_text {
            let member = format!("{}/METADATA", p.plan.plan.output_dist_info(&wheel.dist_info));
            p.plan.plan.replace.insert(member, NewMember::new(text.into_bytes(), None));
        }
    }
    let destination = Destination::Directory(p.staged.parent().unwrap_or(Path::new(".")).to_path_buf());
    let at = super::write::Placement { path, dest: &p.staged, destination: &destination, head: None };
    let written = super::thin::write_one(examined, &p.plan, settings, at);
    let result = written.map(|thin| WrittenVariant {
        outcome: VariantOutcome { label: p.label.clone(), properties: lines, thin },
        metadata: document,
        staged: p.staged,
        dest: p.dest,
    });
    let result = result.map_err(|error| VariantsError::Variant { label: p.label.clone(), error: Box::new(error) });
    let linked = result.and_then(|first| {
        let mut all = vec![first.clone()];
        for (dest, staged) in &p.links {
            link_or_copy(&first.staged, staged).map_err(VariantsError::Plain)?;
            all.push(WrittenVariant { staged: staged.clone(), dest: dest.clone(), ..first.clone() });
        }
        Ok(all)
    });
    (p.wheel, linked)
}

/// Each input's outcome: its variants, published with the rest of its release, or its first
/// failure. A release (one name and version) is published whole: every input of it written, or
/// none of it published.
fn collect(
    request: &VariantsRequest,
    examined: &[Option<Examined>],
    written: Vec<(usize, Result<Vec<WrittenVariant>, VariantsError>)>,
    mut failures: BTreeMap<usize, VariantsError>,
    stage: &Path,
) -> Vec<Result<WheelVariants, WheelFailed<VariantsError>>> {
    let mut variants: BTreeMap<usize, Vec<WrittenVariant>> = BTreeMap::new();
    for (index, result) in written {
        match result {
            Ok(v) => variants.entry(index).or_default().extend(v),
            Err(e) => {
                failures.entry(index).or_insert(e);
            }
        }
    }
    let mut plain = stage_plain_copies(request, examined, &variants, &mut failures, stage);
    let mut published: BTreeMap<usize, WheelVariants> = BTreeMap::new();
    for ((project, version), inputs) in releases(request, examined) {
        let set_name = crate::wheel::filename::variants_file_name(&project, &version);
        let result = match inputs.iter().find(|i| failures.contains_key(i)) {
            Some(failed) => Err(VariantsError::ReleaseFailed(request.wheels[*failed].display().to_string())),
            None => publish_release(&inputs, &variants, &plain, &set_name),
        };
        for i in inputs {
            let set_files = match &result {
                Err(e) => {
                    failures.entry(i).or_insert_with(|| e.again());
                    continue;
                }
                Ok(set_files) => set_files.clone(),
            };
            let mut outcomes = Vec::new();
            for mut v in variants.remove(&i).unwrap_or_default() {
                v.outcome.thin.output = Some(v.dest.display().to_string());
                outcomes.push(v.outcome);
            }
            let plain = plain.remove(&i).unwrap_or_default().into_iter().map(|(_, dest)| dest.display().to_string());
            let wheel = examined[i].as_ref().expect("examined").wheel.filename.to_string();
            published.insert(i, WheelVariants { wheel, variants: outcomes, plain: plain.collect(), set_files });
        }
    }
    (0..request.wheels.len())
        .map(|index| match failures.remove(&index) {
            Some(e) => Err(WheelFailed::new(&request.wheels[index], e)),
            None => Ok(published.remove(&index).expect("every input is failed or published")),
        })
        .collect()
}

/// `to` as a hard link of `from` (one file in every GPU's index, stored once), or a copy where
/// the file system links nothing.
fn link_or_copy(from: &Path, to: &Path) -> Result<(), crate::writer::WriteError> {
    let io = |source| crate::writer::WriteError::Io { path: to.display().to_string(), source };
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to).map(drop).map_err(io)
}

/// A variant's directory in the run's directory, and the one it is published in.
type DirPair = (PathBuf, PathBuf);

fn dirs_of(v: &WrittenVariant) -> DirPair {
    (crate::output::parent_dir(&v.staged).to_path_buf(), crate::output::parent_dir(&v.dest).to_path_buf())
}

/// The plain copies (`--plain`), into the run's directory too: one in each directory the
/// input's variants go to, as (staged, destination); no staged copy where the destination is
/// the input itself, which is never replaced (not even by its own bytes).
fn stage_plain_copies(
    request: &VariantsRequest,
    examined: &[Option<Examined>],
    variants: &BTreeMap<usize, Vec<WrittenVariant>>,
    failures: &mut BTreeMap<usize, VariantsError>,
    stage: &Path,
) -> BTreeMap<usize, Vec<(Option<PathBuf>, PathBuf)>> {
    let mut plain: BTreeMap<usize, Vec<(Option<PathBuf>, PathBuf)>> = BTreeMap::new();
    for (index, e) in examined.iter().enumerate() {
        let Some(e) = e.as_ref().filter(|_| request.plain && !failures.contains_key(&index)) else { continue };
        let path = &request.wheels[index];
        let name = e.wheel.filename.to_string();
        let mut dirs: Vec<DirPair> = variants.get(&index).into_iter().flatten().map(dirs_of).collect();
        dirs.sort();
        dirs.dedup();
        if dirs.is_empty() {
            dirs.push((stage.to_path_buf(), request.wheel_dir.clone()));
        }
        // Copied once, linked into every other GPU's index.
        let mut first: Option<PathBuf> = None;
        for (staged_dir, dir) in dirs {
            let dest = dir.join(&name);
            if OutputKey::of(&dest) == OutputKey::of(path) {
                plain.entry(index).or_default().push((None, dest));
                continue;
            }
            let staged = staged_dir.join(&name);
            let made = match &first {
                Some(first) => link_or_copy(first, &staged).map(|()| staged),
                None => crate::writer::copy_wheel(path, &staged, crate::output::Commit::Replace, None),
            };
            match made {
                Ok(staged) => {
                    first.get_or_insert_with(|| staged.clone());
                    plain.entry(index).or_default().push((Some(staged), dest));
                }
                Err(e) => {
                    failures.insert(index, VariantsError::Plain(e));
                    break;
                }
            }
        }
    }
    plain
}

/// Each release: its inputs, by the name and version their file names give (an input that
/// could not be read belongs to the release its file name names, and holds it back).
fn releases(request: &VariantsRequest, examined: &[Option<Examined>]) -> BTreeMap<(String, String), Vec<usize>> {
    let mut releases: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (index, path) in request.wheels.iter().enumerate() {
        let name = match &examined[index] {
            Some(e) => Some(e.wheel.filename.clone()),
            None => path.file_name().and_then(|n| wheel::WheelFilename::parse(&n.to_string_lossy()).ok()),
        };
        if let Some(name) = name {
            releases.entry((name.name.as_str().to_string(), name.version.parsed.to_string())).or_default().push(index);
        }
    }
    releases
}

/// Everything of one release, in every directory, moved into place together ([`publish_set`]);
/// each directory (an index of its own) gets the set file of its variants. Returns the set
/// files.
fn publish_release(
    inputs: &[usize],
    variants: &BTreeMap<usize, Vec<WrittenVariant>>,
    plain: &BTreeMap<usize, Vec<(Option<PathBuf>, PathBuf)>>,
    set_name: &str,
) -> Result<Vec<String>, VariantsError> {
    let io = |path: &Path, source| {
        VariantsError::Plain(crate::writer::WriteError::Io { path: path.display().to_string(), source })
    };
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut sets: BTreeMap<DirPair, VariantMetadata> = BTreeMap::new();
    for i in inputs {
        for v in variants.get(i).into_iter().flatten() {
            files.push((v.staged.clone(), v.dest.clone()));
            match sets.get_mut(&dirs_of(v)) {
                None => {
                    sets.insert(dirs_of(v), v.metadata.clone());
                }
                Some(set) => set.merge(&v.metadata).map_err(VariantsError::Disagree)?,
            }
        }
        let copies = plain.get(i).into_iter().flatten();
        files.extend(copies.filter_map(|(staged, dest)| Some((staged.clone()?, dest.clone()))));
    }
    let mut set_files = Vec::new();
    for ((staged_dir, dir), set) in &sets {
        let staged = staged_dir.join(set_name);
        std::fs::write(&staged, set.to_bytes()).map_err(|e| io(&staged, e))?;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        files.push((staged, dir.join(set_name)));
        set_files.push(dir.join(set_name).display().to_string());
    }
    publish_set(&files).map_err(VariantsError::Publish)?;
    Ok(set_files)
}

/// Why one input's variants were not all written.
#[derive(Debug, thiserror::Error)]
enum VariantsError {
    #[error(transparent)]
    Wheel(Box<Error>),
    #[error("variant {label}: {error}")]
    Variant { label: String, error: Box<Error> },
    #[error("the plain copy: {0}")]
    Plain(crate::writer::WriteError),
    #[error(
        "nothing of its release was published: {0}, of the same name and version, failed, and a release's variants are published whole"
    )]
    ReleaseFailed(String),
    #[error("its release's variants disagree: {0}")]
    Disagree(crate::wheel::variant::VariantError),
    #[error("nothing of its release was published: {0}")]
    Publish(crate::output::OutputError),
}

impl VariantsError {
    /// The same failure, for another input of the release it stopped.
    fn again(&self) -> VariantsError {
        match self {
            VariantsError::ReleaseFailed(input) => VariantsError::ReleaseFailed(input.clone()),
            VariantsError::Disagree(e) => VariantsError::Disagree(e.clone()),
            other => VariantsError::ReleaseFailed(format!("publishing the set ({other})")),
        }
    }
}
