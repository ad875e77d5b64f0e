//! The facts `repair` needs of the libraries it vendors, gathered once the policy has named
//! them: where each file really is, its sha256 (which names the copy) and the OS package that
//! owns it (for the bill of materials).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Analysis;

#[derive(Debug, thiserror::Error)]
pub enum VendorError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// A library of this machine that `repair` copies into a wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorSource {
    pub soname: String,
    /// The file as the library search found it. Ex) `/lib/x86_64-linux-gnu/libz.so.1`
    pub path: String,
    /// That file with its symlinks resolved. Ex) `/usr/lib/x86_64-linux-gnu/libz.so.1.3`
    pub real: PathBuf,
    /// The sha256 of the file.
    pub sha256: [u8; 32],
    /// The OS package that owns `real`, if the machine's package manager knows it.
    pub owner: Option<Package>,
}

/// The facts of every library in `libs` (sonames of [`Analysis::external`] that were found),
/// in parallel.
pub fn sources(libs: &BTreeSet<String>, analysis: &Analysis) -> Result<Vec<VendorSource>, VendorError> {
    let libs: Vec<&String> = libs.iter().collect();
    crate::parallel::try_map(&libs, |soname| {
        let path = analysis.external[*soname].path.clone().unwrap_or_default();
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path));
        let sha256 = crate::wheel::digest::file_sha256(&real)
            .map_err(|source| VendorError::Read { path: path.clone(), source })?;
        let owner = owner(&real);
        Ok(VendorSource { soname: (*soname).clone(), path, real, sha256, owner })
    })
}

/// The OS package a file belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `deb`, `rpm` or `apk`.
    pub kind: &'static str,
    /// `/etc/os-release` `ID`. Ex) `debian`
    pub distro: String,
    pub name: String,
    pub version: String,
}

impl Package {
    /// The package URL. Ex) `pkg:deb/debian/libssl3@3.0.17-1~deb12u2`
    pub fn purl(&self) -> String {
        format!("pkg:{}/{}/{}@{}", self.kind, quote(&self.distro), quote(&self.name), quote(&self.version))
    }
}

/// Percent-encoding as purl wants it (every byte but unreserved characters).
pub fn quote(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `ID` of `/etc/os-release`.
fn distro() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines().find_map(|l| l.strip_prefix("ID=")).map(|v| v.trim_matches('"').to_string())
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).stderr(std::process::Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The package that owns `path`, if the machine's package manager knows it.
pub fn owner(path: &Path) -> Option<Package> {
    let distro = distro()?;
    let path = path.to_str()?;
    if let Some(found) = output("dpkg", &["-S", path]) {
        // `libssl3:amd64: /usr/lib/x86_64-linux-gnu/libssl.so.3`
        let name = found.lines().next()?.split(':').next()?.trim().to_string();
        let status = output("dpkg", &["-s", &name])?;
        let version = status.lines().find_map(|l| l.strip_prefix("Version: "))?.trim().to_string();
        return Some(Package { kind: "deb", distro, name, version });
    }
    if let Some(found) = output("rpm", &["-qf", "--queryformat", "%{NAME} %{VERSION} %{RELEASE}", path]) {
        let mut parts = found.split_whitespace();
        let (name, version, release) = (parts.next()?, parts.next()?, parts.next()?);
        return Some(Package { kind: "rpm", distro, name: name.into(), version: format!("{version}-{release}") });
    }
    if let Some(found) = output("apk", &["info", "--who-owns", path]) {
        // `/usr/lib/libz.so.1 is owned by zlib-1.3.1-r2`
        let owned = found.lines().next()?.rsplit_once(" is owned by ")?.1.trim();
        let (name, version) = split_apk(owned)?;
        return Some(Package { kind: "apk", distro, name: name.into(), version: version.into() });
    }
    None
}

/// `zlib-1.3.1-r2` → (`zlib`, `1.3.1-r2`): the version starts at the first `-` before a digit.
fn split_apk(text: &str) -> Option<(&str, &str)> {
    let at = text.match_indices('-').find(|(i, _)| text[i + 1..].starts_with(|c: char| c.is_ascii_digit()))?.0;
    Some((&text[..at], &text[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purls_and_apk_versions() {
        let p = Package {
            kind: "deb",
            distro: "debian".into(),
            name: "libssl3".into(),
            version: "3.0.17-1~deb12u2".into(),
        };
        assert_eq!(p.purl(), "pkg:deb/debian/libssl3@3.0.17-1~deb12u2");
        assert_eq!(split_apk("zlib-1.3.1-r2"), Some(("zlib", "1.3.1-r2")));
        assert_eq!(split_apk("libstdc++-14.2.0-r4"), Some(("libstdc++", "14.2.0-r4")));
    }
}
