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

use serde::Serialize;
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
    let wheel = Component {
        bom_ref: wheel_purl.clone(),
        hashes: Vec::new(),
        name: name.to_string(),
        properties: Vec::new(),
        purl: Some(wheel_purl.clone()),
        kind: "library",
        version: Some(version.to_string()),
    };
    let mut rows: Vec<(String, Component)> = vendored
        .iter()
        .map(|v| {
            // The source path is named for files a package owns (a system path); a file no
            // package owns usually comes from a build directory, which would make the
            // document differ from build to build.
            let property = |name: &'static str, value: &str| Property { name, value: value.to_string() };
            let mut properties = vec![property("wheelfix:wheel_path", &v.member)];
            if owners.contains_key(&v.source) {
                properties.push(property("wheelfix:source_path", &v.real));
            }
            properties.push(property("wheelfix:soname", &v.soname));
            let hashes = vec![Hash { alg: "SHA-256", content: v.sha256.clone() }];
            let source_hash = crate::wheel::digest::hex(&Sha256::digest(v.source.as_bytes()));
            let component = match owners.get(&v.source) {
                Some(p) => Component {
                    bom_ref: format!("{}#{source_hash}", p.purl()),
                    hashes,
                    name: p.name.clone(),
                    properties,
                    purl: Some(p.purl()),
                    kind: "library",
                    version: Some(p.version.clone()),
                },
                None => Component {
                    bom_ref: format!("file:{}", v.member),
                    hashes,
                    name: v.soname.clone(),
                    properties,
                    purl: None,
                    kind: "file",
                    version: None,
                },
            };
            let key = owners.get(&v.source).map(Package::purl).unwrap_or_else(|| format!("~{}", v.member));
            let order = if owners.contains_key(&v.source) { v.source.as_str() } else { "" };
            (format!("{key}\0{order}"), component)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let refs: Vec<String> = rows.iter().map(|(_, c)| c.bom_ref.clone()).collect();
    let mut dependencies = vec![Dependency { depends_on: Some(refs.clone()), reference: wheel_purl }];
    dependencies.extend(refs.into_iter().map(|r| Dependency { depends_on: None, reference: r }));
    let mut components = vec![wheel.clone()];
    components.extend(rows.into_iter().map(|(_, c)| c));
    let doc = Bom {
        bom_format: "CycloneDX",
        components,
        dependencies,
        metadata: Metadata {
            component: wheel,
            tools: vec![Tool { name: "wheelfix", version: env!("CARGO_PKG_VERSION") }],
        },
        spec_version: "1.4",
        version: 1,
    };
    serde_json::to_string_pretty(&doc).expect("serialises") + "\n"
}

// The CycloneDX 1.4 document, as far as wheelfix writes it. Fields are declared in the order
// of their keys, which is the order they are printed in.

#[derive(Serialize)]
struct Bom {
    #[serde(rename = "bomFormat")]
    bom_format: &'static str,
    components: Vec<Component>,
    dependencies: Vec<Dependency>,
    metadata: Metadata,
    #[serde(rename = "specVersion")]
    spec_version: &'static str,
    version: u32,
}

#[derive(Serialize)]
struct Metadata {
    component: Component,
    tools: Vec<Tool>,
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize, Clone)]
struct Component {
    #[serde(rename = "bom-ref")]
    bom_ref: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    hashes: Vec<Hash>,
    name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    properties: Vec<Property>,
    #[serde(skip_serializing_if = "Option::is_none")]
    purl: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

#[derive(Serialize, Clone)]
struct Hash {
    alg: &'static str,
    content: String,
}

#[derive(Serialize, Clone)]
struct Property {
    name: &'static str,
    value: String,
}

#[derive(Serialize)]
struct Dependency {
    #[serde(rename = "dependsOn", skip_serializing_if = "Option::is_none")]
    depends_on: Option<Vec<String>>,
    #[serde(rename = "ref")]
    reference: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's keys print sorted, as CycloneDX documents were always printed here: the
    /// types declare their fields in that order.
    #[test]
    fn the_document_prints_its_keys_sorted() {
        let vendored = |soname: &str, source: &str| Vendored {
            soname: soname.into(),
            source: source.into(),
            real: source.into(),
            member: format!("demo.libs/{soname}"),
            sha256: "ab".repeat(32),
        };
        let owners = BTreeMap::from([(
            "/usr/lib/libz.so.1".to_string(),
            Package { kind: "deb", distro: "debian".into(), name: "zlib1g".into(), version: "1.2".into() },
        )]);
        let text = document(
            "demo",
            "1.0",
            "demo-1.0-cp312-cp312-manylinux_2_17_x86_64.whl",
            &[vendored("libz.so.1", "/usr/lib/libz.so.1"), vendored("libfoo.so", "/build/libfoo.so")],
            &owners,
        );
        let sorted: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&sorted).unwrap() + "\n");
        assert_eq!(sorted["components"].as_array().unwrap().len(), 3);
        assert_eq!(sorted["components"][1]["purl"], "pkg:deb/debian/zlib1g@1.2");
        assert_eq!(sorted["components"][2]["type"], "file");
        assert!(sorted["components"][2].get("purl").is_none());
        assert_eq!(sorted["dependencies"][0]["dependsOn"].as_array().unwrap().len(), 2);
        assert!(sorted["dependencies"][1].get("dependsOn").is_none());
    }
}
