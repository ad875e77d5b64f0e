//! `wheelfix metapackage`: a wheel with no code that pins every wheel of one architecture's set at
//! its exact version, local label included (the defence against same-named projects on PyPI).
//!
//! Its version is `<rocm-version>+<gpu-target>.<8 hex of the sha256 of the sorted pins>`
//! (`10.1.0+gfx950.424e84fe`): a rebuild with other pins is a new version, never the same
//! version with other contents. Its platform tag is the common platform of the pinned wheels
//! (`py3-none-linux_x86_64`), so Linux and Windows builds can never share a file name.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::wheel::name::PackageName;
use crate::wheel::platform_tag::PlatformTag;
use crate::writer::write_new_wheel;

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
    #[error("--gpu-target `{0}` is not a GPU processor name (Ex: gfx950, gfx9-4-generic)")]
    GpuTarget(String),
}

impl MetapackageError {
    /// A usage error (exit 2) rather than a failure of the run.
    pub fn is_usage(&self) -> bool {
        matches!(self, MetapackageError::Name(_) | MetapackageError::RocmVersion(_) | MetapackageError::GpuTarget(_))
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
        let t = &self.gpu_target;
        let target_ok = !t.is_empty()
            && t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && t.starts_with(|c: char| c.is_ascii_lowercase());
        if !target_ok {
            return Err(MetapackageError::GpuTarget(t.clone()));
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
    /// Ex) `gfx950`
    pub gpu_target: String,
    pub output_dir: PathBuf,
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
    /// ([`crate::elf::gpu::targets::uncovered`]).
    pub uncovered: Vec<crate::elf::gpu::targets::Uncovered>,
}

pub fn build(wheels: &[Pinned], options: &MetapackageOptions) -> Result<Metapackage, MetapackageError> {
    options.validate()?;
    let own = PackageName::new(&options.name);
    let mut pins: BTreeMap<PackageName, (&str, &str, &str)> = BTreeMap::new();
    let mut platforms: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in wheels {
        let project = PackageName::new(&w.name);
        if project == own {
            continue; // an earlier build of this metapackage
        }
        if let Some((version, _, wheel)) = pins.get(&project)
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
        if (!w.gpu_targets.is_empty() && !w.gpu_targets.contains(&options.gpu_target)) || !w.uncovered.is_empty() {
            let found = if w.gpu_targets.is_empty() { "no GPU target".to_string() } else { w.gpu_targets.join(", ") };
            let files: Vec<String> = w.uncovered.iter().map(|u| u.file.clone()).collect();
            return Err(MetapackageError::MissingTarget {
                wheel: w.wheel.clone(),
                found,
                target: options.gpu_target.clone(),
                files,
            });
        }
        if let Some(family) = super::platform_family(&w.platform_tags) {
            platforms.entry(family).or_default().push(w.wheel.clone());
        }
        pins.insert(project, (&w.version, &w.name, &w.wheel));
    }
    if pins.is_empty() {
        return Err(MetapackageError::Empty);
    }
    if platforms.len() > 1 {
        let list: Vec<String> = platforms.iter().map(|(p, w)| format!("{p} ({})", w.join(", "))).collect();
        return Err(MetapackageError::MixedPlatforms(list.join("; ")));
    }
    let platform = platforms.keys().next().cloned().unwrap_or_else(|| "any".into());
    let extra = format!("device-{}", options.gpu_target);
    let requirements: Vec<String> =
        pins.values().map(|(version, name, _)| format!("{name}=={version}; extra == \"{extra}\"")).collect();
    let digest = Sha256::digest(requirements.join("\n").as_bytes());
    let version =
        format!("{}+{}.{}", options.rocm_version, options.gpu_target, &crate::wheel::digest::hex(&digest)[..8]);
    <pep440_rs::Version as std::str::FromStr>::from_str(&version)
        .map_err(|e| MetapackageError::Version(version.clone(), e.to_string()))?;

    let escaped = options.name.replace(['-', '.'], "_");
    let dist_info = format!("{escaped}-{version}.dist-info");
    let mut metadata = format!(
        "Metadata-Version: 2.1\nName: {}\nVersion: {version}\nSummary: The wheels built together for {} against ROCm {}, pinned exactly\nProvides-Extra: {extra}\n",
        options.name, options.gpu_target, options.rocm_version
    );
    for r in &requirements {
        metadata.push_str(&format!("Requires-Dist: {r}\n"));
    }
    let wheel = format!(
        "Wheel-Version: 1.0\nGenerator: wheelfix {}\nRoot-Is-Purelib: {}\nTag: py3-none-{platform}\n\n",
        env!("CARGO_PKG_VERSION"),
        platform == "any"
    );
    let members = vec![
        (format!("{dist_info}/METADATA"), metadata.into_bytes()),
        (format!("{dist_info}/WHEEL"), wheel.into_bytes()),
    ];
    std::fs::create_dir_all(&options.output_dir)
        .map_err(|source| MetapackageError::CreateDir { path: options.output_dir.display().to_string(), source })?;
    let path = options.output_dir.join(format!("{escaped}-{version}-py3-none-{platform}.whl"));
    write_new_wheel(&dist_info, &members, &path)?;
    Ok(Metapackage { path: path.display().to_string(), version, pins: requirements })
}
