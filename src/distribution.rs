//! One distribution file of a release set (a wheel or an sdist), read once: its core metadata
//! and hash, the Pythons it installs on and its platform family. What `index`, `check`,
//! `metapackage` and the release page read a set's files through.

use std::path::{Path, PathBuf};

use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{CoreMetadata, WheelFilename, WheelMetadata};

/// One distribution file of a release set, read once: its core metadata (parsed, and as
/// stored for PEP 658) and the sha256 of the file.
pub struct Distribution {
    pub path: PathBuf,
    pub file_name: String,
    /// A wheel's file name, parsed (`None` for an sdist).
    pub wheel: Option<WheelFilename>,
    pub metadata: CoreMetadata,
    /// METADATA (a wheel's) or PKG-INFO (an sdist's) as stored.
    pub metadata_bytes: Vec<u8>,
    /// Hex. Ex) `e3b0c442…`
    pub sha256: String,
    /// Bytes, as hashed.
    pub size: u64,
    /// Why pip refuses to install it (wheels only; [`WheelMetadata::installer_problems`]).
    pub installer_problems: Vec<String>,
}

/// Why a file of a release set cannot be read as a distribution.
#[derive(Debug, thiserror::Error)]
pub enum DistributionError {
    #[error(transparent)]
    Wheel(#[from] crate::wheel::WheelError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("PKG-INFO: {0}")]
    PkgInfo(crate::wheel::metadata::MetadataError),
    #[error("the sdist's file name is not `<name>-<version>.tar.gz` for its PKG-INFO's name {0}")]
    SdistName(String),
    #[error("an sdist without PKG-INFO")]
    NoPkgInfo,
}

impl Distribution {
    /// Read a wheel through [`WheelMetadata`] (its METADATA only), or an sdist's
    /// `<name>-<version>/PKG-INFO` (`.tar.gz`).
    pub fn read(path: &Path) -> Result<Distribution, DistributionError> {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if file_name.ends_with(".whl") {
            let wheel = WheelMetadata::open(path)?;
            let sha256 = wheel.archive.zip.sha256()?;
            return Ok(Distribution {
                path: path.to_path_buf(),
                file_name,
                metadata_bytes: wheel.metadata_text.into_bytes(),
                metadata: wheel.metadata,
                wheel: Some(wheel.filename),
                sha256,
                size: wheel.archive.zip.identity.len,
                installer_problems: wheel.installer_problems,
            });
        }
        let metadata_bytes = read_pkg_info(path)?;
        let metadata =
            CoreMetadata::parse(&String::from_utf8_lossy(&metadata_bytes)).map_err(DistributionError::PkgInfo)?;
        check_sdist_name(&file_name, &metadata)?;
        let sha256 = crate::wheel::digest::file_sha256_hex(path)?;
        let size = std::fs::metadata(path)?.len();
        Ok(Distribution {
            path: path.to_path_buf(),
            file_name,
            wheel: None,
            metadata,
            metadata_bytes,
            sha256,
            size,
            installer_problems: Vec::new(),
        })
    }
}

/// CPython minor versions a release set may be installed on, oldest first: what the
/// interpreter checks try (3.6, the oldest manylinux2014 Python, to well past today's 3.14).
pub const PYTHONS: std::ops::RangeInclusive<u64> = 6..=20;

/// A distribution can be installed on CPython 3.`minor`: its Requires-Python admits it and, for
/// a wheel (`file_name` parses as one), one of its Python tags does.
pub fn installs_on(file_name: &str, requires_python: Option<&str>, minor: u64) -> bool {
    let version = pep440_rs::Version::new([3, minor]);
    if let Some(rp) = requires_python
        && let Ok(spec) = <pep440_rs::VersionSpecifiers as std::str::FromStr>::from_str(rp)
        && !spec.contains(&version)
    {
        return false;
    }
    match WheelFilename::parse(file_name) {
        Ok(name) => name.python_tags.iter().any(|t| python_tag_fits(t, &name.abi_tags, 3, minor)),
        Err(_) => true, // an sdist has no tags
    }
}

/// A wheel's Python tag admits CPython `major.minor`. Ex) `cp311` + `abi3` → 3.11 and later
pub fn python_tag_fits(tag: &str, abis: &[String], major: u64, minor: u64) -> bool {
    let digits = |s: &str| -> Option<(u64, Option<u64>)> {
        let (m, rest) = s.split_at(1.min(s.len()));
        Some((m.parse().ok()?, if rest.is_empty() { None } else { Some(rest.parse().ok()?) }))
    };
    if let Some(v) = tag.strip_prefix("py") {
        return digits(v).is_some_and(|(m, n)| m == major && n.is_none_or(|n| n <= minor));
    }
    if let Some(v) = tag.strip_prefix("cp") {
        return digits(v).is_some_and(|(m, n)| {
            let n = n.unwrap_or(0);
            m == major && (n == minor || (abis.iter().any(|a| a == "abi3") && n <= minor))
        });
    }
    true
}

/// An sdist's file name is `<name>-<version>.tar.gz` for the name of its PKG-INFO and a PEP 440
/// version (what pip reads off the link), in the characters those allow: a page quotes it, a
/// URL holds it.
fn check_sdist_name(file_name: &str, metadata: &CoreMetadata) -> Result<(), DistributionError> {
    let wrong = || DistributionError::SdistName(metadata.package.to_string());
    let stem = file_name.strip_suffix(".tar.gz").ok_or_else(wrong)?;
    let (name, version) = stem.rsplit_once('-').ok_or_else(wrong)?;
    let same_name = crate::wheel::name::PackageName::parse(name).is_ok_and(|n| n == metadata.package);
    // The version is not compared with PKG-INFO's: a selector sdist may name its public
    // version only (`rocm-7.13.0.tar.gz` of `7.13.0+rocm`).
    let a_version = crate::wheel::metadata::DistVersion::parse(version).is_ok();
    let plain = version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '!'));
    if same_name && a_version && plain { Ok(()) } else { Err(wrong()) }
}

/// An sdist's `<name>-<version>/PKG-INFO`.
fn read_pkg_info(path: &Path) -> Result<Vec<u8>, DistributionError> {
    use std::io::Read;
    let file = crate::files::open_regular(path)?;
    let len = file.metadata()?.len();
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(file.take(len)));
    for entry in archive.entries()? {
        let entry = entry?;
        let is_pkg_info = entry.path().ok().is_some_and(|p| p.components().count() == 2 && p.ends_with("PKG-INFO"));
        if is_pkg_info {
            let mut data = Vec::new();
            entry.take(16 << 20).read_to_end(&mut data)?;
            return Ok(data);
        }
    }
    Err(DistributionError::NoPkgInfo)
}

/// The platform family of a wheel's platform tags, for telling Linux and Windows builds apart.
/// Ex) `manylinux_2_28_x86_64` → `linux_x86_64`; `win_amd64` → `win_amd64`; `any` → `None`
pub fn platform_family(platform_tags: &[PlatformTag]) -> Option<String> {
    let tag = platform_tags.iter().find(|t| !t.is_any())?;
    if let Some(arch) = tag.arch()
        && tag.os() == crate::platform::Os::Linux
    {
        return Some(format!("linux_{arch}"));
    }
    if let PlatformTag::Macos { arch, .. } = tag {
        return Some(format!("macosx_{}", arch.rsplit('_').next().unwrap_or("")));
    }
    Some(tag.to_string())
}
