//! `wheelfix metapackage`: a wheel with no code that pins every wheel of one architecture's set at
//! its exact version, local label included (the defence against same-named projects on PyPI).
//!
//! Its version is `<rocm-version>+<gpu-target>.<8 hex of the sha256 of the sorted pins>`
//! (`10.1.0+gfx950.424e84fe`): a rebuild with other pins is a new version, never the same
//! version with other contents. Its platform tag is the common platform of the pinned wheels
//! (`py3-none-linux_x86_64`), so Linux and Windows builds can never share a file name.

pub mod selector;

use std::collections::BTreeMap;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::extra::DeviceExtra;
use crate::wheel::name::PackageName;
use crate::wheel::platform_tag::PlatformTag;
use crate::writer::new_wheel::NewWheel;

#[derive(Debug, thiserror::Error)]
pub enum MetapackageError {
    #[error("two versions of {project}: {first} ({first_wheel}) and {second} ({second_wheel})")]
    TwoVersions { project: String, first: String, first_wheel: String, second: String, second_wheel: String },
    #[error("the wheels are for different platforms: {0}")]
    MixedPlatforms(String),
    #[error("{wheel} has device code for {found} but none for {target}{}", if files.is_empty() { String::new() } else { format!(" in {}", files.join(", ")) })]
    MissingTarget { wheel: String, found: String, target: String, files: Vec<String> },
    #[error("no wheels to pin")]
    Empty,
    #[error("invalid metapackage version `{0}`: {1}")]
    Version(String, String),
    #[error(transparent)]
    Write(#[from] crate::writer::WriteError),
    #[error("cannot create {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error(
        "--name `{0}` is not a project name (PEP 508: letters, digits, `.`, `-`, `_`, starting and ending with a letter or digit)"
    )]
    Name(String),
    #[error("--rocm-version `{0}` is not a release version (Ex: 10.1.0)")]
    RocmVersion(String),
    /// Why a `--gpu-target` is not one (the words every command uses).
    #[error(transparent)]
    GpuTarget(#[from] crate::policy::gpus::GpuTargetError),
    #[error("metapackage needs --gpu-target: the processors its extras install")]
    NoGpuTarget,
    #[error("`{given}`: a metapackage's extra names a processor as GPUs report it: write `{processor}`")]
    NotAProcessor { given: String, processor: String },
}

impl MetapackageError {
    /// A usage error (exit 2) rather than a failure of the run.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            MetapackageError::Name(_)
                | MetapackageError::RocmVersion(_)
                | MetapackageError::GpuTarget(_)
                | MetapackageError::NoGpuTarget
                | MetapackageError::NotAProcessor { .. }
        )
    }
}

/// A project name as PEP 508 writes it. Ex) `rocm-torch` → yes; `a b;c`, `/abs/path` → no
pub fn is_project_name(name: &str) -> bool {
    PackageName::parse(name).is_ok()
}

impl MetapackageOptions {
    /// Refuse options that would write outside `-o` or an uninstallable wheel.
    pub fn validate(&self) -> Result<(), MetapackageError> {
        if !is_project_name(&self.name) {
            return Err(MetapackageError::Name(self.name.clone()));
        }
        let release = <pep440_rs::Version as std::str::FromStr>::from_str(&self.rocm_version)
            .ok()
            .filter(|v| !v.is_local() && self.rocm_version.starts_with(|c: char| c.is_ascii_digit()));
        if release.is_none() {
            return Err(MetapackageError::RocmVersion(self.rocm_version.clone()));
        }
        if self.gpu_targets.is_empty() {
            return Err(MetapackageError::NoGpuTarget);
        }
        for t in &self.gpu_targets {
            // A processor, written as every GPU names it: it becomes the extra's name.
            let parsed = crate::policy::gpus::parse(t)?;
            if parsed.as_str() != t || parsed.has_features() {
                return Err(MetapackageError::NotAProcessor {
                    given: t.clone(),
                    processor: parsed.processor().to_string(),
                });
            }
        }
        Ok(())
    }
}

/// What to build.
#[derive(Debug, Clone)]
pub struct MetapackageOptions {
    /// Ex) `rocm-torch`
    pub name: String,
    /// Ex) `10.1.0`
    pub rocm_version: String,
    /// Ex) [`gfx950`]; several for a multi-architecture index (one extra each).
    pub gpu_targets: Vec<String>,
    pub output_dir: PathBuf,
    /// `SOURCE_DATE_EPOCH`: the members' time.
    pub source_date_epoch: Option<i64>,
    /// The index the release is published in (`--index-url`), recorded in its METADATA.
    pub index_url: Option<String>,
}

/// The metapackage written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Metapackage {
    pub path: String,
    #[serde(rename = "package_version")]
    pub version: String,
    pub pins: Vec<String>,
}

/// One wheel to pin: its project name and version (METADATA), file name, platform tags and GPU
/// targets.
pub struct Pinned {
    pub name: String,
    pub version: String,
    pub wheel: String,
    pub platform_tags: Vec<PlatformTag>,
    pub gpu_targets: Vec<String>,
    /// Its binaries with offload bundles that hold no code for the metapackage's target
    /// ([`crate::gpu::targets::uncovered`]).
    pub uncovered: Vec<crate::gpu::targets::Uncovered>,
    /// Its `Provides-Extra` names: a split host's `device-<target>` extras bring its device code.
    pub extras: Vec<String>,
    /// The projects its `device-…` extras require (a split host's device wheels, a family's
    /// among them).
    pub brings: Vec<String>,
}

pub fn build(wheels: &[Pinned], options: &MetapackageOptions) -> Result<Metapackage, MetapackageError> {
    options.validate()?;
    let own = PackageName::new(&options.name);
    type Pin<'a> = (&'a str, &'a str, &'a str, &'a Vec<String>);
    let mut pins: BTreeMap<PackageName, Pin<'_>> = BTreeMap::new();
    let mut platforms: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in wheels {
        let project = PackageName::new(&w.name);
        if project == own {
            continue; // an earlier build of this metapackage
        }
        if let Some((version, _, wheel, _)) = pins.get(&project)
            && *version != w.version
        {
            return Err(MetapackageError::TwoVersions {
                project: project.to_string(),
                first: version.to_string(),
                first_wheel: wheel.to_string(),
                second: w.version.to_string(),
                second_wheel: w.wheel.clone(),
            });
        }
        // A split set's device wheel comes with its host's extra, not as a pin of its own.
        if let Some(target) = crate::extra::device_project_target(project.as_str())
            && wheels.iter().any(|h| {
                h.extras.iter().any(|e| DeviceExtra::parse(e).is_some_and(|e| e.target() == Some(target)))
                    || h.brings.iter().any(|b| PackageName::new(b) == project)
            })
        {
            continue;
        }
        let lacking: Vec<&String> = options.gpu_targets.iter().filter(|t| !w.gpu_targets.contains(t)).collect();
        if (!w.gpu_targets.is_empty() && !lacking.is_empty()) || !w.uncovered.is_empty() {
            let found = if w.gpu_targets.is_empty() { "no GPU target".to_string() } else { w.gpu_targets.join(", ") };
            let files: Vec<String> = w.uncovered.iter().map(|u| u.file.clone()).collect();
            let mut target: Vec<String> =
                w.uncovered.iter().flat_map(|u| u.targets.iter().map(|t| t.to_string())).collect();
            target.extend(lacking.into_iter().filter(|_| !w.gpu_targets.is_empty()).cloned());
            target.sort();
            target.dedup();
            return Err(MetapackageError::MissingTarget {
                wheel: w.wheel.clone(),
                found,
                target: target.join(", "),
                files,
            });
        }
        if let Some(family) = crate::distribution::platform_family(&w.platform_tags) {
            platforms.entry(family).or_default().push(w.wheel.clone());
        }
        pins.insert(project, (&w.version, &w.name, &w.wheel, &w.extras));
    }
    if pins.is_empty() {
        return Err(MetapackageError::Empty);
    }
    if platforms.len() > 1 {
        let list: Vec<String> = platforms.iter().map(|(p, w)| format!("{p} ({})", w.join(", "))).collect();
        return Err(MetapackageError::MixedPlatforms(list.join("; ")));
    }
    let platform = platforms.keys().next().cloned().unwrap_or_else(|| "any".into());
    // One extra per target; a pin that has that target's extra itself (a split host) is
    // required with it.
    let mut requirements: Vec<String> = Vec::new();
    for target in &options.gpu_targets {
        let extra = DeviceExtra::of(target);
        for (version, name, _, extras) in pins.values() {
            let with = if extras.iter().any(|e| extra == *e) { format!("[{extra}]") } else { String::new() };
            requirements.push(format!("{name}{with}=={version}; extra == \"{extra}\""));
        }
    }
    let digest = Sha256::digest(requirements.join("\n").as_bytes());
    let targets = options.gpu_targets.join(".");
    let version = format!("{}+{targets}.{}", options.rocm_version, &crate::wheel::digest::hex(&digest)[..8]);
    <pep440_rs::Version as std::str::FromStr>::from_str(&version)
        .map_err(|e| MetapackageError::Version(version.clone(), e.to_string()))?;

    let wheel = NewWheel {
        name: options.name.clone(),
        version: version.clone(),
        summary: format!(
            "The wheels built together for {} against ROCm {}, pinned exactly",
            options.gpu_targets.join(", "),
            options.rocm_version
        ),
        provides_extra: options.gpu_targets.iter().map(|t| DeviceExtra::of(t).to_string()).collect(),
        requires_dist: requirements.clone(),
        index_url: options.index_url.clone(),
        file_tags: format!("py3-none-{platform}"),
        tags: vec![format!("py3-none-{platform}")],
        root_is_purelib: platform == "any",
        wheel_ends_with_empty_line: true,
        members: Vec::new(),
        source_date_epoch: options.source_date_epoch,
    };
    std::fs::create_dir_all(&options.output_dir)
        .map_err(|source| MetapackageError::CreateDir { path: options.output_dir.display().to_string(), source })?;
    let path = wheel.write(&options.output_dir)?;
    Ok(Metapackage { path: path.display().to_string(), version, pins: requirements })
}
