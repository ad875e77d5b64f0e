//! Step 5: a PEP 770 software bill of materials for the vendored libraries,
//! `<dist-info>/sboms/wheelfix.cdx.json` (CycloneDX 1.4, as auditwheel writes
//! `auditwheel.cdx.json`).
//!
//! Each vendored file is a component: the OS package that owns its source (asked of `dpkg`, `rpm`
//! or `apk`, whichever the machine has, as auditwheel does) with that package's purl
//! (`pkg:deb/debian/libssl3@3.0.17-1~deb12u2`), or, when no package owns it, the file by its
//! soname. Every component carries the sha256 of the file in the wheel and its path there. The
//! document has no timestamp and a fixed order, so the same repair gives the same bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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

/// One library vendored into the wheel.
#[derive(Debug, Clone)]
pub struct Vendored {
    pub soname: String,
    /// The file it was copied from, as the search found it (auditwheel's path for the bom-ref).
    pub source: String,
    /// That file with symlinks resolved (the path package managers know).
    pub real: String,
    /// Its path in the wheel.
    pub member: String,
    /// Hex sha256 of the file as the wheel holds it.
    pub sha256: String,
}

/// Percent-encoding as purl wants it (every byte but unreserved characters).
fn quote(text: &str) -> String {
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

/// The CycloneDX document for a repaired wheel. `owners`: source path → its package.
pub fn document(
    name: &str,
    version: &str,
    wheel_file_name: &str,
    vendored: &[Vendored],
    owners: &BTreeMap<String, Package>,
) -> String {
    let wheel_purl = format!("pkg:pypi/{}@{}?file_name={}", quote(name), quote(version), quote(wheel_file_name));
    let wheel = json!({"type": "library", "bom-ref": wheel_purl, "name": name, "version": version, "purl": wheel_purl});
    let mut rows: Vec<(String, Value)> = vendored
        .iter()
        .map(|v| {
            // The source path is named for files a package owns (a system path); a file no
            // package owns usually comes from a build directory, which would make the
            // document differ from build to build.
            let mut properties = vec![json!({"name": "wheelfix:wheel_path", "value": v.member})];
            if owners.contains_key(&v.source) {
                properties.push(json!({"name": "wheelfix:source_path", "value": v.real}));
            }
            properties.push(json!({"name": "wheelfix:soname", "value": v.soname}));
            let hashes = json!([{"alg": "SHA-256", "content": v.sha256}]);
            let source_hash = crate::wheel::digest::hex(&Sha256::digest(v.source.as_bytes()));
            let component = match owners.get(&v.source) {
                Some(p) => json!({
                    "type": "library",
                    "bom-ref": format!("{}#{source_hash}", p.purl()),
                    "name": p.name,
                    "version": p.version,
                    "purl": p.purl(),
                    "hashes": hashes,
                    "properties": properties,
                }),
                None => json!({
                    "type": "file",
                    "bom-ref": format!("file:{}", v.member),
                    "name": v.soname,
                    "hashes": hashes,
                    "properties": properties,
                }),
            };
            let key = owners.get(&v.source).map(Package::purl).unwrap_or_else(|| format!("~{}", v.member));
            let order = if owners.contains_key(&v.source) { v.source.as_str() } else { "" };
            (format!("{key}\0{order}"), component)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let refs: Vec<Value> = rows.iter().map(|(_, c)| c["bom-ref"].clone()).collect();
    let mut components = vec![wheel.clone()];
    components.extend(rows.into_iter().map(|(_, c)| c));
    let mut dependencies = vec![json!({"ref": wheel_purl, "dependsOn": refs})];
    dependencies.extend(refs.iter().map(|r| json!({"ref": r})));
    let doc = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.4",
        "version": 1,
        "metadata": {
            "component": wheel,
            "tools": [{"name": "wheelfix", "version": env!("CARGO_PKG_VERSION")}],
        },
        "components": components,
        "dependencies": dependencies,
    });
    serde_json::to_string_pretty(&doc).expect("serialises") + "\n"
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
