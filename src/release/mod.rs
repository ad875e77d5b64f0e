//! The release set: per-architecture metapackage wheels, static pip indexes, and `check`, the
//! lint for the failures a ROCm release has seen (`../shared/seeds/`).

pub mod check;
pub mod index;
pub mod metapackage;

use std::path::{Path, PathBuf};

use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{CoreMetadata, WheelFilename, WheelMetadata};

/// Every file under `inputs` (directories are walked; files are taken as they are) whose name
/// ends in one of `suffixes`, sorted.
pub fn collect_files(inputs: &[PathBuf], suffixes: &[&str]) -> Vec<PathBuf> {
    fn walk(path: &Path, suffixes: &[&str], out: &mut Vec<PathBuf>) {
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(path) else { return };
            for entry in entries.flatten() {
                walk(&entry.path(), suffixes, out);
            }
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| suffixes.iter().any(|s| n.ends_with(s))) {
            out.push(path.to_path_buf());
        }
    }
    let mut out = Vec::new();
    for input in inputs {
        walk(input, suffixes, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

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
}

impl Distribution {
    /// Read a wheel through [`WheelMetadata`] (its METADATA only), or an sdist's
    /// `<name>-<version>/PKG-INFO` (`.tar.gz`).
    pub fn read(path: &Path) -> Result<Distribution, String> {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if file_name.ends_with(".whl") {
            let wheel = WheelMetadata::open(path).map_err(|e| e.to_string())?;
            let sha256 = wheel.archive.zip.sha256().map_err(|e| e.to_string())?;
            return Ok(Distribution {
                path: path.to_path_buf(),
                file_name,
                metadata_bytes: wheel.metadata_text.into_bytes(),
                metadata: wheel.metadata,
                wheel: Some(wheel.filename),
                sha256,
            });
        }
        let metadata_bytes = read_pkg_info(path)?;
        let metadata =
            CoreMetadata::parse(&String::from_utf8_lossy(&metadata_bytes)).map_err(|e| format!("PKG-INFO: {e}"))?;
        let sha256 = file_sha256(path).map_err(|e| e.to_string())?;
        Ok(Distribution { path: path.to_path_buf(), file_name, wheel: None, metadata, metadata_bytes, sha256 })
    }
}

/// An sdist's `<name>-<version>/PKG-INFO`.
fn read_pkg_info(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let is_pkg_info = entry.path().ok().is_some_and(|p| p.components().count() == 2 && p.ends_with("PKG-INFO"));
        if is_pkg_info {
            let mut data = Vec::new();
            entry.take(16 << 20).read_to_end(&mut data).map_err(|e| e.to_string())?;
            return Ok(data);
        }
    }
    Err("an sdist without PKG-INFO".into())
}

/// sha256 of a file, streamed. Ex) `e3b0c442…`
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    crate::wheel::zip::sha256_of(&file)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
