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

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::analysis::vendor::{Package, quote};

/// The bill of materials `repair` adds, as the plan knows it: everything but the sha256 of each
/// copy, which the writer knows once it has made them ([`SbomPlan::render`]).
#[derive(Debug, Clone)]
pub struct SbomPlan {
    pub name: String,
    pub version: String,
    /// The repaired wheel's file name.
    pub wheel_file_name: String,
    pub vendored: Vec<Planned>,
}

/// One vendored library in the plan.
#[derive(Debug, Clone)]
pub struct Planned {
    pub soname: String,
    /// The file it was copied from, as the search found it (auditwheel's path for the bom-ref).
    pub source: String,
    /// That file with symlinks resolved (the path package managers know).
    pub real: String,
    /// Its path in the wheel.
    pub member: String,
    /// The OS package that owns it.
    pub owner: Option<Package>,
}

impl SbomPlan {
    /// The document, given the sha256 of each copy as the wheel holds it (by member path).
    pub fn render(&self, sha256_of: &dyn Fn(&str) -> Option<[u8; 32]>) -> String {
        let vendored: Vec<Vendored> = self
            .vendored
            .iter()
            .map(|v| Vendored {
                soname: v.soname.clone(),
                source: v.source.clone(),
                real: v.real.clone(),
                member: v.member.clone(),
                sha256: sha256_of(&v.member).map(|d| crate::wheel::digest::hex(&d)).unwrap_or_default(),
            })
            .collect();
        let owners = self.vendored.iter().filter_map(|v| v.owner.clone().map(|p| (v.source.clone(), p))).collect();
        document(&self.name, &self.version, &self.wheel_file_name, &vendored, &owners)
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
