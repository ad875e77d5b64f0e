//! The release set: per-architecture metapackage wheels, static pip indexes, and `check`, the
//! lint for the failures a ROCm release has seen (`../shared/seeds/`).

pub mod check;
pub mod index;
pub mod metapackage;

use std::path::{Path, PathBuf};

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

/// The core metadata of a distribution file, as stored: a wheel's `.dist-info/METADATA`, or an
/// sdist's `<name>-<version>/PKG-INFO` (`.tar.gz`).
pub fn read_core_metadata(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.ends_with(".whl") {
        let archive = crate::wheel::Archive::open(path).map_err(|e| e.to_string())?;
        let member = archive
            .members()
            .iter()
            .find(|m| m.name.ends_with(".dist-info/METADATA") && m.name.matches('/').count() == 1)
            .ok_or("no .dist-info/METADATA")?;
        return archive.read(member).map(|b| b.into_vec()).map_err(|e| e.to_string());
    }
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
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The platform family of a wheel's platform tags, for telling Linux and Windows builds apart.
/// Ex) `manylinux_2_28_x86_64` → `linux_x86_64`; `win_amd64` → `win_amd64`; `any` → `None`
pub fn platform_family(platform_tags: &[String]) -> Option<String> {
    let tag = platform_tags.iter().find(|t| *t != "any")?;
    if let Some(arch) = crate::platform::Arch::from_platform_tag(tag)
        && (tag.starts_with("manylinux") || tag.starts_with("musllinux") || tag.starts_with("linux"))
    {
        return Some(format!("linux_{arch}"));
    }
    if tag.starts_with("macosx") {
        return Some(format!("macosx_{}", tag.rsplit('_').next().unwrap_or("")));
    }
    Some(tag.clone())
}
