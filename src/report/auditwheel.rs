//! `show --json-format auditwheel`: the document `auditwheel show --json` prints (auditwheel
//! 6.8, `show-schema.json`), for scripts written against it.
//!
//! The fields mean what they mean in auditwheel: `overall_tag` is the policy the wheel meets as
//! it is (external libraries count); `external_libs` are the libraries the most compatible policy
//! would have to vendor (`null` when not found); `policy_upgrades` lists, from the least
//! compatible policy on, each policy more compatible than `overall_tag` with the libraries and
//! blacklisted symbols it would need eliminated. Versions sort as strings, as in auditwheel.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::analysis::Analysis;
use crate::analysis::linkage::is_loader;
use crate::policy::judgement::Judgement;

/// The platform form, fields in auditwheel's order.
#[derive(Serialize)]
struct Platform {
    version: u32,
    wheel: String,
    pure: bool,
    overall_tag: String,
    sym_tag: String,
    pyfpe: bool,
    ucs2: bool,
    unsupported_isa: bool,
    versioned_symbols: BTreeMap<String, Vec<String>>,
    external_libs: BTreeMap<String, Option<String>>,
    policy_upgrades: Upgrades,
}

#[derive(Serialize)]
struct Upgrade {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    libs_to_eliminate: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    blacklisted_symbols: BTreeMap<String, Vec<String>>,
}

/// Policy → upgrade, in the order given (a map in JSON).
struct Upgrades(Vec<(String, Upgrade)>);

impl Serialize for Upgrades {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (policy, upgrade) in &self.0 {
            map.serialize_entry(policy, upgrade)?;
        }
        map.end()
    }
}

/// auditwheel's message for a wheel with no platform ELF file.
const NOT_A_PLATFORM_WHEEL: &str = "This does not look like a platform wheel, no ELF executable or shared library file (including compiled Python C extension) found in the wheel archive";

/// The document for one wheel. `allow_pure`: `--allow-pure-python-wheel` (a pure wheel gives
/// the `pure` form instead of the error form).
/// One wheel's document, as auditwheel prints it (indent 4, its key order).
pub struct Document {
    pub text: String,
    /// The error form (auditwheel exits 1 for it).
    pub is_error: bool,
}

/// The document for one wheel.
pub fn document(file_name: &str, analysis: &Analysis, judgement: &Judgement, allow_pure: bool) -> Document {
    let Some(judgement) = judgement.judged() else {
        // auditwheel names no reason: a wheel it does not audit is no platform wheel.
        if allow_pure && file_name.ends_with("-any.whl") {
            #[derive(Serialize)]
            struct Pure<'a> {
                version: u32,
                wheel: &'a str,
                pure: bool,
            }
            return Document { text: to_text(&Pure { version: 1, wheel: file_name, pure: true }), is_error: false };
        }
        return error(file_name, NOT_A_PLATFORM_WHEEL);
    };
    let (set, verdict) = (&judgement.set, &judgement.verdict);
    let linux = judgement.linux();

    let mut versioned: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in verdict.deciding_requirements(set, analysis).into_iter().filter(|r| !is_loader(&r.library)) {
        versioned.entry(r.library).or_default().push(r.version);
    }
    for versions in versioned.values_mut() {
        versions.sort();
        versions.dedup();
    }

    let external_libs = verdict.grafted[0]
        .iter()
        .map(|soname| {
            let path = analysis.external.get(soname).and_then(|l| l.path.clone()).map(|p| resolve_file_links(&p));
            (soname.clone(), path)
        })
        .collect();

    // Least compatible first (auditwheel walks its policies by ascending priority).
    let mut upgrades = Vec::new();
    for index in (0..verdict.overall).rev() {
        let blockers = verdict.blockers(set, analysis, index);
        let upgrade = Upgrade {
            libs_to_eliminate: blockers.libs_to_eliminate,
            blacklisted_symbols: blockers.blacklisted_symbols,
        };
        if !upgrade.libs_to_eliminate.is_empty() || !upgrade.blacklisted_symbols.is_empty() {
            upgrades.push((judgement.tag(index).to_string(), upgrade));
        }
    }
    let doc = Platform {
        version: 1,
        wheel: file_name.to_string(),
        pure: false,
        overall_tag: judgement.tag(verdict.overall).to_string(),
        sym_tag: judgement.tag(verdict.symbol).to_string(),
        pyfpe: verdict.pyfpe,
        ucs2: verdict.ucs2,
        unsupported_isa: verdict.machine == linux,
        versioned_symbols: versioned,
        external_libs,
        policy_upgrades: Upgrades(upgrades),
    };
    Document { text: to_text(&doc), is_error: false }
}

/// The file a library path names with its own symlinks followed, in the directory it was found
/// in (`/lib/x86_64-linux-gnu/libdrm.so.2` → `/lib/x86_64-linux-gnu/libdrm.so.2.4.0`), as
/// auditwheel prints it.
fn resolve_file_links(path: &str) -> String {
    let mut current = std::path::PathBuf::from(path);
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&current) else { break };
        current = match current.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    current.display().to_string()
}

/// The error form: `{"version": 1, "wheel": …, "error": …}`.
pub fn error(file_name: &str, message: &str) -> Document {
    #[derive(Serialize)]
    struct Error<'a> {
        version: u32,
        wheel: &'a str,
        error: &'a str,
    }
    Document { text: to_text(&Error { version: 1, wheel: file_name, error: message }), is_error: true }
}

/// Rendered as auditwheel renders it (indent 4).
fn to_text(doc: &impl Serialize) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    doc.serialize(&mut serializer).expect("serialises");
    String::from_utf8(out).expect("JSON is UTF-8") + "\n"
}
