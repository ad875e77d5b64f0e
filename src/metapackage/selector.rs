//! `wheelfix selector`: the package people install with an extra (`pip install
//! "rocm[device-gfx950]"`), written in one run from the wheels of every platform of a release.
//!
//! The seed's bug (`../shared/seeds/000_…`): each platform's job wrote one `rocm` sdist of the
//! same name from its own target list, and the last upload won: Linux users lost their
//! `device-gfx950` extra. Here every platform gets a wheel of its own (`py3-none-<platform>`,
//! the seed's second solution): its extras are exactly the device wheels built for that
//! platform, `device-all` requires all of them, and every other project of that platform is
//! required at its exact version. File names differ per platform, so no upload overwrites
//! another; the bytes depend on the set of inputs only (sorted, fixed timestamps), never on
//! their order or on which machine runs it. On a platform without a target, pip says
//! `rocm … does not provide the extra 'device-gfx950'` instead of installing nothing in silence.
//!
//! No sdist is written: one sdist serves every platform only through markers pip evaluates at
//! install time (a build backend fetched from the index then, and a silent empty extra where a
//! target is missing), which is what the per-platform wheels avoid.

use std::collections::{BTreeMap, BTreeSet};

use crate::extra::DeviceExtra;
use crate::wheel::name::PackageName;
use crate::wheel::platform_tag::{PlatformTag, sort_tags};
use crate::writer::new_wheel::NewWheel;

/// One input wheel: its project, version and platform tags.
#[derive(Debug, Clone)]
pub struct SelectorInput {
    pub name: String,
    pub version: String,
    pub platform_tags: Vec<PlatformTag>,
    pub wheel: String,
    /// A metapackage or selector wheelfix wrote (an earlier run's selector is read past).
    pub wheelfix_metapackage: bool,
    /// The projects it requires with no extra of its own (a device wheel: its host).
    pub requires: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "--name `{0}` is not a project name (PEP 508: letters, digits, `.`, `-`, `_`, starting and ending with a letter or digit)"
    )]
    Name(String),
    #[error("two versions of {project} for {platform}: {first} and {second}")]
    TwoVersions { project: String, platform: String, first: String, second: String },
    #[error("the wheels have versions {0}: give the selector's with --version")]
    Versions(String),
    #[error("--version `{0}` is not a version (PEP 440)")]
    Version(String),
    #[error("no platform wheel among the inputs: a selector chooses among platform wheels")]
    Empty,
    #[error("no device wheel (`<name>-device-<target>`) among the inputs for {0}: the selector would have no extra")]
    NoDevices(String),
    #[error(
        "--name `{name}` is the project of the input {wheel}: its selector would take that project's place (and could replace the input); choose another name"
    )]
    NameOfAnInput { name: String, wheel: String },
    #[error(transparent)]
    Write(#[from] crate::writer::WriteError),
    #[error("cannot create {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
}

impl SelectorError {
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            SelectorError::Name(_)
                | SelectorError::Version(_)
                | SelectorError::Versions(_)
                | SelectorError::NameOfAnInput { .. }
        )
    }
}

/// One selector wheel written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SelectorWheel {
    pub path: String,
    pub platform: String,
    /// `device-<target>` extras, in the order people read targets.
    pub extras: Vec<String>,
    pub requirements: Vec<String>,
}

/// Per platform: project → (version, name as written, device target).
type Projects = BTreeMap<PackageName, (String, String, Option<String>)>;

/// The inputs' projects by platform family, with the platform tags of each; a selector's own
/// earlier wheels are read past.
fn projects_by_platform(
    inputs: &[SelectorInput],
    name: &str,
) -> Result<BTreeMap<String, (Projects, Vec<PlatformTag>)>, SelectorError> {
    let own = PackageName::new(name);
    let mut platforms: BTreeMap<String, (Projects, Vec<PlatformTag>)> = BTreeMap::new();
    for input in inputs {
        let project = PackageName::new(&input.name);
        if project == own {
            // An earlier selector of this name (one wheelfix wrote, nothing but requirements)
            // is read past; any other wheel of this project would be shadowed on the index, or
            // replaced, by a selector without its files.
            if !input.wheelfix_metapackage {
                return Err(SelectorError::NameOfAnInput { name: name.to_string(), wheel: input.wheel.clone() });
            }
            continue;
        }
        let Some(platform) = crate::distribution::platform_family(&input.platform_tags) else { continue };
        let (projects, tags) = platforms.entry(platform.clone()).or_default();
        let target = crate::extra::device_project_target(project.as_str()).map(str::to_string);
        if let Some((first, _, _)) = projects.get(&project)
            && *first != input.version
        {
            return Err(SelectorError::TwoVersions {
                project: project.to_string(),
                platform,
                first: first.clone(),
                second: input.version.clone(),
            });
        }
        projects.insert(project, (input.version.clone(), input.name.clone(), target));
        tags.extend(input.platform_tags.iter().filter(|t| !t.is_any()).cloned());
    }
    if platforms.is_empty() {
        return Err(SelectorError::Empty);
    }
    Ok(platforms)
}

/// Per host of the platform's device wheels, the device extras its device wheels serve.
fn hosts_by_extra(
    projects: &Projects,
    devices: &[(&str, &str, &str)],
    hosts_of: &BTreeMap<PackageName, Vec<PackageName>>,
) -> BTreeMap<PackageName, BTreeSet<String>> {
    let mut serving: BTreeMap<PackageName, BTreeSet<String>> = BTreeMap::new();
    for (target, device, _) in devices {
        let requires = hosts_of.get(&PackageName::new(device)).map(Vec::as_slice).unwrap_or_default();
        for host in requires.iter().filter(|h| projects.get(*h).is_some_and(|(_, _, t)| t.is_none())) {
            serving.entry(host.clone()).or_default().insert(DeviceExtra::of(target).to_string());
        }
    }
    serving
}

/// The selector's version: the one asked for, else the one version every input has.
fn selector_version(
    version: Option<&str>,
    platforms: &BTreeMap<String, (Projects, Vec<PlatformTag>)>,
) -> Result<String, SelectorError> {
    match version {
        Some(v) => {
            <pep440_rs::Version as std::str::FromStr>::from_str(v).map_err(|_| SelectorError::Version(v.into()))?;
            Ok(v.to_string())
        }
        None => {
            let all: BTreeSet<&str> =
                platforms.values().flat_map(|(p, _)| p.values().map(|(v, _, _)| v.as_str())).collect();
            if all.len() != 1 {
                return Err(SelectorError::Versions(all.into_iter().collect::<Vec<_>>().join(", ")));
            }
            Ok(all.into_iter().next().expect("one").to_string())
        }
    }
}

/// What a selector is: its name, its version (else the one its inputs share), where it is
/// written, and what its METADATA records.
#[derive(Debug, Clone, Default)]
pub struct SelectorOptions {
    pub name: String,
    pub version: Option<String>,
    pub output_dir: std::path::PathBuf,
    /// `SOURCE_DATE_EPOCH`: the members' time.
    pub source_date_epoch: Option<i64>,
    /// The index the release is published in (`--index-url`).
    pub index_url: Option<String>,
}

/// Write one selector wheel per platform of `inputs` as `options` say.
pub fn build(inputs: &[SelectorInput], options: &SelectorOptions) -> Result<Vec<SelectorWheel>, SelectorError> {
    let (name, version, output_dir) = (options.name.as_str(), options.version.as_deref(), options.output_dir.as_path());
    let source_date_epoch = options.source_date_epoch;
    if !super::is_project_name(name) {
        return Err(SelectorError::Name(name.to_string()));
    }
    let platforms = projects_by_platform(inputs, name)?;
    // Each device project's host: the project it requires that is not a device project.
    let hosts_of: BTreeMap<PackageName, Vec<PackageName>> = inputs
        .iter()
        .filter(|i| crate::extra::device_project_target(PackageName::new(&i.name).as_str()).is_some())
        .map(|i| (PackageName::new(&i.name), i.requires.iter().map(|r| PackageName::new(r)).collect()))
        .collect();
    let version = selector_version(version, &platforms)?;
    std::fs::create_dir_all(output_dir)
        .map_err(|source| SelectorError::CreateDir { path: output_dir.display().to_string(), source })?;
    let mut written = Vec::new();
    for (platform, (projects, mut tags)) in platforms {
        sort_tags(&mut tags);
        tags.dedup();
        let devices: Vec<(&str, &str, &str)> = {
            let mut list: Vec<(&str, &str, &str)> =
                projects.values().filter_map(|(v, n, t)| Some((t.as_deref()?, n.as_str(), v.as_str()))).collect();
            let order = crate::gpu::targets::natural_order(list.iter().map(|d| d.0));
            list.sort_by_key(|d| (order.iter().position(|t| *t == d.0), d.1.to_string()));
            list
        };
        if devices.is_empty() {
            return Err(SelectorError::NoDevices(platform));
        }
        // Each GPU's extra brings what serves it: a host whose device wheels are not for every
        // target of the platform comes only with the extras of its targets (its tags, its
        // Python, its glibc never stand in the way of a GPU it has no code for); hosts for
        // every target and projects without device code come with the selector itself.
        let serving = hosts_by_extra(&projects, &devices, &hosts_of);
        let every: BTreeSet<String> = devices.iter().map(|d| DeviceExtra::of(d.0).to_string()).collect();
        let partial = |host: &PackageName| serving.get(host).is_some_and(|extras| *extras != every);
        let mut requirements: Vec<String> = projects
            .iter()
            .filter(|(p, (_, _, t))| t.is_none() && !partial(p))
            .map(|(_, (v, n, _))| format!("{n}=={v}"))
            .collect();
        let mut extras = Vec::new();
        for (target, device, v) in &devices {
            let extra = DeviceExtra::of(target).to_string();
            if !extras.contains(&extra) {
                extras.push(extra.clone());
                for (host, (hv, hn, _)) in projects.iter().filter(|(p, _)| partial(p)) {
                    if serving[host].contains(&extra) {
                        requirements.push(format!("{hn}=={hv}; extra == \"{extra}\""));
                    }
                }
            }
            requirements.push(format!("{device}=={v}; extra == \"{extra}\""));
        }
        let all = DeviceExtra::All.to_string();
        for (_, (hv, hn, _)) in projects.iter().filter(|(p, _)| partial(p)) {
            requirements.push(format!("{hn}=={hv}; extra == \"{all}\""));
        }
        for (_, device, v) in &devices {
            requirements.push(format!("{device}=={v}; extra == \"{all}\""));
        }
        let tag_text: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        let mut provides_extra = extras.clone();
        provides_extra.push(all);
        let wheel = NewWheel {
            name: name.to_string(),
            version: version.clone(),
            summary: format!(
                "Choose the device code of {name} {version} for your GPU: pip install \"{name}[device-<target>]\" (or [device-all])"
            ),
            provides_extra,
            requires_dist: requirements.clone(),
            index_url: options.index_url.clone(),
            file_tags: format!("py3-none-{}", tag_text.join(".")),
            tags: tag_text.iter().map(|t| format!("py3-none-{t}")).collect(),
            root_is_purelib: false,
            wheel_ends_with_empty_line: false,
            members: Vec::new(),
            source_date_epoch,
        };
        let path = wheel.write(output_dir)?;
        written.push(SelectorWheel { path: path.display().to_string(), platform, extras, requirements });
    }
    Ok(written)
}
