//! Wheel variants ([PEP 825](https://peps.python.org/pep-0825/)): the variant label of a file
//! name, the `*.dist-info/variant.json` of a variant wheel and the `{name}-{version}-variants.json`
//! an index serves beside them.
//!
//! The revision implemented is the one uv 0.13 reads: format `0.1.1` (the schema in
//! `schemas/variant-schema-0.1.1.json`, from the PEP's repository). A wheel that declares its
//! variant provider writes the provider draft's format (`peps/850/v0.2.0`, uv's name for it): the
//! same document with a `providers` table. Every URL wheelfix knows is in [`KNOWN_SCHEMAS`]; a
//! document of another is read as unsupported, as the PEP requires.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The schema of PEP 825's metadata, format 0.1.1 (a draft: PEP 825 replaces the URL with one
/// on packaging.python.org when it is final).
pub const VARIANT_SCHEMA: &str = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json";
/// The same metadata with a `providers` table (the provider draft, as uv 0.13 reads it).
pub const PROVIDER_SCHEMA: &str = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json";
/// The schemas wheelfix reads and writes.
pub const KNOWN_SCHEMAS: [&str; 2] = [VARIANT_SCHEMA, PROVIDER_SCHEMA];
/// The member of the `.dist-info` directory that holds a variant wheel's metadata.
pub const DIST_INFO_FILE: &str = "variant.json";
/// The label of the variant with no properties, always compatible.
pub const NULL_LABEL: &str = "null";

/// The properties of one variant: namespace → feature → values (any one value is enough).
pub type Properties = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// A variant label: `0-9`, `a-z`, `_` and `.`, at least one.
pub fn is_label(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'_' || b == b'.')
}

/// A namespace or feature name: `0-9`, `a-z` and `_`.
fn is_name(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'_')
}

/// An object reference as entry points write them: a dotted module path, then `:` and a
/// dotted attribute path. Ex) `amd_variant_provider.plugin:AMDVariantPlugin`
fn is_object_reference(text: &str) -> bool {
    let dotted = |part: &str| {
        !part.is_empty()
            && part.split('.').all(|id| {
                let mut chars = id.chars();
                chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
    };
    text.split_once(':').is_some_and(|(module, object)| dotted(module) && dotted(object))
}

/// The largest `{name}-{version}-variants.json` read: thousands of variants fit in far less.
const SET_FILE_LIMIT: u64 = 16 << 20;

/// A `{name}-{version}-variants.json`, read and checked.
pub fn read_set_file(path: &std::path::Path) -> Result<VariantMetadata, String> {
    crate::files::read_bounded(path, SET_FILE_LIMIT)
        .map_err(|e| e.to_string())
        .and_then(|bytes| VariantMetadata::parse(&bytes).map_err(|e| e.to_string()))
}

/// What a release's variant set lacks: per build (a wheel file name without its label), the
/// labels it has no wheel of. The labels are the set file's where there is one (what
/// `variants` published), else every label some build has. Ex) [(`torch-2.9.0-cp312-cp312-linux_x86_64.whl`, [`gfx950`])]
pub fn missing_variants<'a>(
    present: impl IntoIterator<Item = (&'a str, String)>,
    set: Option<&VariantMetadata>,
) -> Vec<(String, Vec<String>)> {
    let mut builds: BTreeMap<String, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for (label, build) in present {
        builds.entry(build).or_default().insert(label);
    }
    let labels: std::collections::BTreeSet<&str> = match set {
        Some(set) => set.variants.keys().map(String::as_str).collect(),
        None => builds.values().flatten().copied().collect(),
    };
    builds
        .into_iter()
        .filter_map(|(build, have)| {
            let missing: Vec<String> = labels.iter().filter(|l| !have.contains(*l)).map(|l| l.to_string()).collect();
            (!missing.is_empty()).then_some((build, missing))
        })
        .collect()
}

/// A variant label made from a group name: lowercase, `-` as `_`. Ex) `gfx9-4-generic` → `gfx9_4_generic`
pub fn label_of(name: &str) -> String {
    name.to_ascii_lowercase().replace('-', "_")
}

/// Why a variant document is refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum VariantError {
    #[error("not JSON of the variant format: {0}")]
    Json(String),
    #[error("its $schema `{0}` is not a variant format wheelfix knows ({known}); tools must treat it as unsupported", known = KNOWN_SCHEMAS.join(", "))]
    UnknownSchema(String),
    #[error("default-priorities.namespace must list each namespace once, at least one")]
    NamespacePriorities,
    #[error("variant `{label}` uses namespace `{namespace}`, which default-priorities.namespace does not list")]
    UnlistedNamespace { label: String, namespace: String },
    #[error("`{0}` is not a variant label (0-9, a-z, `_` and `.`)")]
    Label(String),
    #[error("variant `{label}`: `{name}` is not a namespace or feature name (0-9, a-z and `_`)")]
    Name { label: String, name: String },
    #[error(
        "variant `{label}`: `{namespace} :: {feature}` needs at least one value, each once, of 0-9, a-z, `_` and `.`"
    )]
    Values { label: String, namespace: String, feature: String },
    #[error("the null variant has no properties")]
    NullProperties,
    #[error("a wheel's variant.json names exactly its own label `{0}`")]
    WheelLabel(String),
    #[error("variant `{0}` has different properties in different files")]
    InconsistentVariant(String),
    #[error("default-priorities differ: {0:?} against {1:?}")]
    InconsistentPriorities(Vec<String>, Vec<String>),
    #[error("providers of namespace `{0}` differ between files")]
    InconsistentProvider(String),
    #[error("the provider of namespace `{namespace}`: {problem}")]
    Provider { namespace: String, problem: String },
}

/// `default-priorities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultPriorities {
    /// Every namespace the variants use, most important first.
    pub namespace: Vec<String>,
}

/// How an installer learns which properties a machine has (the provider draft): a plugin it
/// installs and runs, or properties the package declares supported everywhere it is installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Provider {
    Plugin {
        requires: Vec<String>,
        #[serde(rename = "plugin-api")]
        plugin_api: String,
    },
    Static {
        #[serde(rename = "static-properties")]
        static_properties: BTreeMap<String, Vec<String>>,
        /// The features, most important first (uv requires it of more than one).
        #[serde(rename = "feature-order", default, skip_serializing_if = "Vec::is_empty")]
        feature_order: Vec<String>,
    },
}

impl Provider {
    /// What an installer acts on is safe to act on: requirements it installs are PEP 508
    /// requirements of an index's projects (never a URL it would fetch and run), the plugin is
    /// an object reference (`module.path:Object`), static properties are feature names with
    /// values. Ex) refused: `evil @ https://evil.example/e.whl`, `plugin-api: "os; rm -rf"`
    fn check(&self) -> Result<(), String> {
        match self {
            Provider::Plugin { requires, plugin_api } => {
                if requires.is_empty() {
                    return Err("`requires` names no package that provides the plugin".into());
                }
                for r in requires {
                    match <pep508_rs::Requirement as std::str::FromStr>::from_str(r) {
                        Err(e) => {
                            return Err(format!("`requires` entry {r:?} is not a PEP 508 requirement: {}", e.message));
                        }
                        Ok(req) if matches!(req.version_or_url, Some(pep508_rs::VersionOrUrl::Url(_))) => {
                            return Err(format!(
                                "`requires` entry {r:?} names a URL: an installer would fetch and run code from outside any index"
                            ));
                        }
                        Ok(_) => {}
                    }
                }
                if !is_object_reference(plugin_api) {
                    return Err(format!("`plugin-api` {plugin_api:?} is not of the form `module.path:Object`"));
                }
                Ok(())
            }
            Provider::Static { static_properties, feature_order } => {
                if static_properties.is_empty() {
                    return Err("`static-properties` is empty".into());
                }
                for (feature, values) in static_properties {
                    let mut unique = values.clone();
                    unique.sort();
                    unique.dedup();
                    if !is_name(feature)
                        || values.is_empty()
                        || unique.len() != values.len()
                        || !values.iter().all(|v| is_label(v))
                    {
                        return Err(format!(
                            "static property {feature:?} needs a feature name (0-9, a-z, `_`) and values, each once, of 0-9, a-z, `_` and `.`"
                        ));
                    }
                }
                if let Some(f) = feature_order.iter().find(|f| !static_properties.contains_key(*f)) {
                    return Err(format!("`feature-order` names {f:?}, which `static-properties` does not declare"));
                }
                Ok(())
            }
        }
    }

    /// How an installer learns a machine's properties through it, in a few words.
    /// Ex) `plugin amd-variant-provider, which an installer must know to run (…)`, `declared for every machine: gfx_arch gfx942`
    pub fn describe(&self) -> String {
        match self {
            Provider::Plugin { requires, .. } => format!(
                "plugin {}, which an installer must know to run (uv 0.13 skips a plugin it does not know and takes the null variant)",
                requires.join(", ")
            ),
            Provider::Static { static_properties, .. } => {
                let each = static_properties.iter().map(|(feature, values)| format!("{feature} {}", values.join(", ")));
                format!("declared for every machine: {}", each.collect::<Vec<_>>().join("; "))
            }
        }
    }
}

/// A `variant.json` (one variant) or a `{name}-{version}-variants.json` (all of a version's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantMetadata {
    #[serde(rename = "$schema")]
    pub schema: String,
    #[serde(rename = "default-priorities")]
    pub default_priorities: DefaultPriorities,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Provider>,
    pub variants: BTreeMap<String, Properties>,
}

impl VariantMetadata {
    /// One variant's document. Its priorities list `namespaces` (every namespace of the
    /// release's variants: each variant's, the null variant's included, must agree), then any
    /// other its properties or providers use.
    pub fn of_variant(
        label: &str,
        namespaces: &[&str],
        properties: Properties,
        providers: BTreeMap<String, Provider>,
    ) -> VariantMetadata {
        let mut namespaces: Vec<String> = namespaces.iter().map(|n| n.to_string()).collect();
        for n in properties.keys().chain(providers.keys()) {
            if !namespaces.contains(n) {
                namespaces.push(n.clone());
            }
        }
        let schema = if providers.is_empty() { VARIANT_SCHEMA } else { PROVIDER_SCHEMA };
        VariantMetadata {
            schema: schema.to_string(),
            default_priorities: DefaultPriorities { namespace: namespaces },
            providers,
            variants: BTreeMap::from([(label.to_string(), properties)]),
        }
    }

    /// Read and check a document.
    pub fn parse(bytes: &[u8]) -> Result<VariantMetadata, VariantError> {
        let metadata: VariantMetadata = serde_json::from_slice(bytes).map_err(|e| VariantError::Json(e.to_string()))?;
        metadata.check()?;
        Ok(metadata)
    }

    /// Read a wheel's `variant.json` and check that it names the wheel's label, and only it.
    pub fn parse_for_wheel(bytes: &[u8], label: &str) -> Result<VariantMetadata, VariantError> {
        let metadata = Self::parse(bytes)?;
        if metadata.variants.len() != 1 || !metadata.variants.contains_key(label) {
            return Err(VariantError::WheelLabel(label.to_string()));
        }
        Ok(metadata)
    }

    /// The rules of the format beyond its shape.
    pub fn check(&self) -> Result<(), VariantError> {
        if !KNOWN_SCHEMAS.contains(&self.schema.as_str()) {
            return Err(VariantError::UnknownSchema(self.schema.clone()));
        }
        for (namespace, provider) in &self.providers {
            provider.check().map_err(|problem| VariantError::Provider { namespace: namespace.clone(), problem })?;
            if !is_name(namespace) {
                let problem = "its namespace is not a name (0-9, a-z and `_`)".to_string();
                return Err(VariantError::Provider { namespace: namespace.clone(), problem });
            }
        }
        let namespaces = &self.default_priorities.namespace;
        let mut unique = namespaces.clone();
        unique.sort();
        unique.dedup();
        if namespaces.is_empty() || unique.len() != namespaces.len() || !namespaces.iter().all(|n| is_name(n)) {
            return Err(VariantError::NamespacePriorities);
        }
        for (label, properties) in &self.variants {
            if !is_label(label) {
                return Err(VariantError::Label(label.clone()));
            }
            if label == NULL_LABEL && !properties.is_empty() {
                return Err(VariantError::NullProperties);
            }
            for (namespace, features) in properties {
                if !namespaces.contains(namespace) {
                    let (label, namespace) = (label.clone(), namespace.clone());
                    return Err(VariantError::UnlistedNamespace { label, namespace });
                }
                for (feature, values) in features {
                    if let Some(bad) = [namespace, feature].into_iter().find(|n| !is_name(n)) {
                        return Err(VariantError::Name { label: label.clone(), name: bad.clone() });
                    }
                    let mut unique = values.clone();
                    unique.sort();
                    unique.dedup();
                    let value_ok = |v: &String| is_label(v);
                    if values.is_empty() || unique.len() != values.len() || !values.iter().all(value_ok) {
                        let (label, namespace, feature) = (label.clone(), namespace.clone(), feature.clone());
                        return Err(VariantError::Values { label, namespace, feature });
                    }
                }
            }
        }
        Ok(())
    }

    /// Merge another document of the same version into this one, as the PEP's index does: the
    /// variants are joined (a label must mean the same everywhere), the priorities must agree
    /// (one may extend the other), providers of a namespace must agree.
    pub fn merge(&mut self, other: &VariantMetadata) -> Result<(), VariantError> {
        let (mine, theirs) = (&self.default_priorities.namespace, &other.default_priorities.namespace);
        if !mine.starts_with(theirs) && !theirs.starts_with(mine) {
            return Err(VariantError::InconsistentPriorities(mine.clone(), theirs.clone()));
        }
        for (label, properties) in &other.variants {
            if self.variants.get(label).is_some_and(|p| p != properties) {
                return Err(VariantError::InconsistentVariant(label.clone()));
            }
        }
        for (namespace, provider) in &other.providers {
            if self.providers.get(namespace).is_some_and(|p| p != provider) {
                return Err(VariantError::InconsistentProvider(namespace.clone()));
            }
        }
        if theirs.len() > mine.len() {
            self.default_priorities.namespace = theirs.clone();
        }
        self.variants.extend(other.variants.clone());
        self.providers.extend(other.providers.clone());
        if !self.providers.is_empty() {
            self.schema = PROVIDER_SCHEMA.to_string();
        }
        Ok(())
    }

    /// The document as written: keys in order, two-space indents, a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut text = serde_json::to_string_pretty(self).expect("serialises");
        text.push('\n');
        text.into_bytes()
    }

    /// Every property, as the PEP writes them. Ex) `amd :: gfx_arch :: gfx942`
    pub fn property_lines(properties: &Properties) -> Vec<String> {
        let mut lines = Vec::new();
        for (namespace, features) in properties {
            for (feature, values) in features {
                lines.extend(values.iter().map(|v| format!("{namespace} :: {feature} :: {v}")));
            }
        }
        lines
    }
}

/// Why a variant wheel's `variant.json` cannot be read: installers cannot choose the wheel.
#[derive(Debug, thiserror::Error)]
pub enum VariantReadError {
    #[error("its name has the variant label `{0}` but it has no .dist-info/variant.json (PEP 825)")]
    Missing(String),
    #[error("{member}: {source}")]
    Read { member: String, source: super::ArchiveError },
    #[error("{member}: {source}")]
    Invalid { member: String, source: VariantError },
}

/// A variant wheel's `*.dist-info/variant.json`, read and checked against its label `label`.
pub fn read(archive: &super::Archive, label: &str) -> Result<VariantMetadata, VariantReadError> {
    let member = archive
        .members()
        .iter()
        .find(|m| {
            m.name.split_once('/').is_some_and(|(dir, file)| dir.ends_with(".dist-info") && file == DIST_INFO_FILE)
        })
        .ok_or_else(|| VariantReadError::Missing(label.to_string()))?;
    let bytes =
        archive.read(member).map_err(|source| VariantReadError::Read { member: member.name.to_string(), source })?;
    VariantMetadata::parse_for_wheel(&bytes, label)
        .map_err(|source| VariantReadError::Invalid { member: member.name.to_string(), source })
}

/// The `amd` namespace as AMD's variant provider (`amd-variant-provider`) names its features.
pub mod amd {
    use super::{BTreeMap, Properties, Provider};

    pub const NAMESPACE: &str = "amd";
    /// The GPU processors a variant runs on. Ex) `gfx942`
    pub const GFX_ARCH: &str = "gfx_arch";
    /// The ROCm version the variant was built for. Ex) `7.0.2`
    pub const ROCM_VERSION: &str = "rocm_version";
    /// AMD's provider plugin, as its package declares it.
    pub const PLUGIN_REQUIRES: &str = "amd-variant-provider";
    pub const PLUGIN_API: &str = "amd_variant_provider.plugin:AMDVariantPlugin";

    /// The properties of a variant holding code for `processors`, built for ROCm `rocm` if known.
    pub fn properties(processors: &[String], rocm: Option<&str>) -> Properties {
        let mut features = BTreeMap::new();
        features.insert(GFX_ARCH.to_string(), processors.iter().map(|p| super::label_of(p)).collect());
        if let Some(rocm) = rocm {
            features.insert(ROCM_VERSION.to_string(), vec![rocm.to_string()]);
        }
        BTreeMap::from([(NAMESPACE.to_string(), features)])
    }

    /// The provider entry: AMD's plugin, or processors every machine that installs from this
    /// index is declared to have (with the ROCm release the wheel was built for, which its
    /// variants name too).
    pub fn provider(static_targets: &[String], rocm: Option<&str>) -> Provider {
        if static_targets.is_empty() {
            return Provider::Plugin {
                requires: vec![PLUGIN_REQUIRES.to_string()],
                plugin_api: PLUGIN_API.to_string(),
            };
        }
        let values = static_targets.iter().map(|t| super::label_of(t)).collect();
        let mut static_properties = BTreeMap::from([(GFX_ARCH.to_string(), values)]);
        let mut feature_order = Vec::new();
        if let Some(rocm) = rocm {
            static_properties.insert(ROCM_VERSION.to_string(), vec![rocm.to_string()]);
            feature_order = vec![GFX_ARCH.to_string(), ROCM_VERSION.to_string()];
        }
        Provider::Static { static_properties, feature_order }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(label: &str, arch: &str) -> VariantMetadata {
        VariantMetadata::of_variant(
            label,
            &[amd::NAMESPACE],
            amd::properties(&[arch.to_string()], None),
            BTreeMap::new(),
        )
    }

    #[test]
    fn labels_follow_the_pep() {
        assert!(is_label("gfx942") && is_label("null") && is_label("x86_64.v3"));
        assert!(!is_label("") && !is_label("GFX942") && !is_label("gfx9-4-generic"));
        assert_eq!(label_of("gfx9-4-generic"), "gfx9_4_generic");
    }

    #[test]
    fn a_variant_document_round_trips_and_is_checked() {
        let doc = one("gfx942", "gfx942");
        let text = String::from_utf8(doc.to_bytes()).unwrap();
        assert!(text.contains("\"$schema\": \"https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json\""));
        assert_eq!(VariantMetadata::parse_for_wheel(text.as_bytes(), "gfx942").unwrap(), doc);
        assert_eq!(
            VariantMetadata::parse_for_wheel(text.as_bytes(), "gfx90a"),
            Err(VariantError::WheelLabel("gfx90a".into()))
        );
        let unknown = text.replace("v0.1.1", "v9.0.0");
        assert!(matches!(VariantMetadata::parse(unknown.as_bytes()), Err(VariantError::UnknownSchema(_))));
        let unlisted = text.replace("\"namespace\": [\n      \"amd\"\n    ]", "\"namespace\": [\n      \"cpu\"\n    ]");
        assert!(matches!(VariantMetadata::parse(unlisted.as_bytes()), Err(VariantError::UnlistedNamespace { .. })));
        let null =
            VariantMetadata::of_variant(NULL_LABEL, &[], amd::properties(&["gfx942".into()], None), BTreeMap::new());
        assert_eq!(null.check(), Err(VariantError::NullProperties));
    }

    #[test]
    fn provider_data_an_installer_acts_on_is_checked() {
        let with = |provider: Provider| {
            let mut doc = one("gfx942", "gfx942");
            doc.providers.insert("amd".into(), provider);
            doc.schema = PROVIDER_SCHEMA.into();
            doc.check()
        };
        let plugin =
            |requires: &str, api: &str| Provider::Plugin { requires: vec![requires.into()], plugin_api: api.into() };
        assert_eq!(with(amd::provider(&[], None)), Ok(()));
        assert_eq!(with(amd::provider(&["gfx942".into()], Some("7.0.2"))), Ok(()));
        assert_eq!(with(plugin("amd-variant-provider>=0.1; python_version >= '3.9'", "a.b:C")), Ok(()));
        for (requires, api) in [
            ("evil @ https://evil.example/e.whl", "a.b:C"),
            ("not a requirement!", "a.b:C"),
            ("<script>alert(1)</script>", "a.b:C"),
            ("ok", "os; rm -rf /"),
            ("ok", "module_only"),
            ("ok", "a.b:<b>C</b>"),
        ] {
            assert!(matches!(with(plugin(requires, api)), Err(VariantError::Provider { .. })), "{requires} {api}");
        }
        let statics = |feature: &str, value: &str| Provider::Static {
            static_properties: BTreeMap::from([(feature.to_string(), vec![value.to_string()])]),
            feature_order: Vec::new(),
        };
        assert!(matches!(with(statics("gfx_arch", "<i>gfx942</i>")), Err(VariantError::Provider { .. })));
        assert!(matches!(with(statics("Gfx Arch", "gfx942")), Err(VariantError::Provider { .. })));
    }

    #[test]
    fn merging_joins_variants_and_refuses_conflicts() {
        let mut all = one("gfx942", "gfx942");
        all.merge(&one("gfx90a", "gfx90a")).unwrap();
        assert_eq!(all.variants.keys().collect::<Vec<_>>(), ["gfx90a", "gfx942"]);
        assert_eq!(all.merge(&one("gfx942", "gfx950")), Err(VariantError::InconsistentVariant("gfx942".into())));
        let with_plugin = VariantMetadata::of_variant(
            "gfx1100",
            &[],
            amd::properties(&["gfx1100".into()], None),
            BTreeMap::from([("amd".to_string(), amd::provider(&[], None))]),
        );
        all.merge(&with_plugin).unwrap();
        assert_eq!(all.schema, PROVIDER_SCHEMA);
        let statics = VariantMetadata::of_variant(
            "gfx1100",
            &[],
            amd::properties(&["gfx1100".into()], None),
            BTreeMap::from([("amd".to_string(), amd::provider(&["gfx1100".into()], None))]),
        );
        assert_eq!(all.merge(&statics), Err(VariantError::InconsistentProvider("amd".into())));
    }
}
