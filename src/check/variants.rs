//! `check`'s rules for variant wheels (PEP 825): each wheel's `variant.json` is readable and
//! names its label; a version's variant wheels agree (one meaning per label, one label per
//! property set, the same priorities), as the index's `{name}-{version}-variants.json` must
//! merge them; each variant's device code is what its `amd :: gfx_arch` properties say; and a
//! version with variants has a wheel for machines no variant fits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::facts::Dist;
use super::{Finding, Kind, Severity};
use crate::gpu::TargetId;
use crate::gpu::targets::{Keep, is_known_processor};
use crate::wheel::variant::{self, NULL_LABEL, Properties, Provider, VariantMetadata, amd};

/// A version's variant wheels, as read, and whether a plain (unlabelled) wheel is there too.
type VersionVariants<'a> = (Vec<(&'a Dist, &'a VariantMetadata)>, bool);

pub(super) fn variant_findings(dists: &[Dist], set_files: &[PathBuf]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut versions: BTreeMap<(&str, &str), VersionVariants<'_>> = BTreeMap::new();
    for d in dists {
        let Some(w) = &d.wheel else { continue };
        let entry = versions.entry((d.project.as_str(), d.version.as_str())).or_default();
        match &w.variant {
            None => entry.1 |= d.platform.is_some() || d.pure,
            Some((_, Err(problem))) => {
                use crate::wheel::variant::{VariantError, VariantReadError};
                let kind = match problem {
                    VariantReadError::Invalid { source: VariantError::Provider { .. }, .. } => {
                        Kind::VariantProviderInvalid
                    }
                    _ => Kind::VariantMetadata,
                };
                findings.push(error(kind, format!("{}: {problem}; installers cannot choose it", d.file_name), vec![d]))
            }
            Some((label, Ok(metadata))) => {
                entry.0.push((d, metadata));
                findings.extend(code_findings(d, label, &metadata.variants[label], &w.gpu_targets));
            }
        }
    }
    let mut named_sets = BTreeSet::new();
    for ((project, version), (variants, has_plain)) in versions {
        if variants.is_empty() {
            continue;
        }
        named_sets.insert(set_name_of(project, version, &variants));
        findings.extend(agreement_findings(&variants));
        findings.extend(static_findings(&variants));
        findings.extend(set_findings(project, version, &variants, set_files));
        let has_null = variants
            .iter()
            .any(|(d, _)| d.wheel.as_ref().and_then(|w| w.variant.as_ref()).is_some_and(|(l, _)| l == NULL_LABEL));
        if !has_null && !has_plain {
            findings.push(Finding {
                kind: Kind::VariantNoFallback,
                severity: Severity::Warning,
                message: format!(
                    "{project} {version} has variant wheels but no null variant and no plain wheel: a machine no variant fits (another GPU, no GPU, an installer without variant support) gets nothing"
                ),
                files: variants.iter().map(|(d, _)| d.path.display().to_string()).collect(),
            });
        }
    }
    // A set file whose release has no variant wheel here at all.
    for f in set_files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !named_sets.contains(&name) {
            findings.push(Finding {
                kind: Kind::VariantSetIncomplete,
                severity: Severity::Error,
                message: format!("{name} names variants of a release none of whose variant wheels is here"),
                files: vec![f.display().to_string()],
            });
        }
    }
    findings
}

fn error(kind: Kind, message: String, dists: Vec<&Dist>) -> Finding {
    Finding {
        kind,
        severity: Severity::Error,
        message,
        files: dists.iter().map(|d| d.path.display().to_string()).collect(),
    }
}

/// A version's variant wheels agree: they merge into one index file, and no two labels mean
/// the same properties.
fn agreement_findings(variants: &[(&Dist, &VariantMetadata)]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut merged = variants[0].1.clone();
    for (d, metadata) in &variants[1..] {
        if let Err(e) = merged.merge(metadata) {
            findings.push(error(
                Kind::VariantInconsistent,
                format!("{}: {e}: the index cannot write one {{name}}-{{version}}-variants.json for them", d.file_name),
                vec![d],
            ));
        }
    }
    // One schema of properties: every variant but the null one names the same features (a
    // gfx942 variant with `rocm_version` beside a gfx950 one without comes from two runs).
    let shapes: BTreeMap<Vec<(&String, &String)>, Vec<&str>> = merged
        .variants
        .iter()
        .filter(|(label, _)| label.as_str() != NULL_LABEL)
        .fold(BTreeMap::new(), |mut shapes, (label, properties)| {
            let shape = properties.iter().flat_map(|(n, features)| features.keys().map(move |f| (n, f))).collect();
            shapes.entry(shape).or_default().push(label.as_str());
            shapes
        });
    if shapes.len() > 1 {
        let each: Vec<String> = shapes
            .iter()
            .map(|(shape, labels)| {
                let features: Vec<String> = shape.iter().map(|(n, f)| format!("{n} :: {f}")).collect();
                format!("{} with {}", labels.join(", "), features.join(", "))
            })
            .collect();
        let first = variants[0].0.file_name.clone();
        findings.push(error(
            Kind::VariantInconsistent,
            format!(
                "{first}: the version's variants name different features ({}): they come from different runs; write the release's variants in one run",
                each.join("; ")
            ),
            variants.iter().map(|(d, _)| *d).collect(),
        ));
    }
    let mut by_properties: BTreeMap<&Properties, Vec<&str>> = BTreeMap::new();
    for (label, properties) in &merged.variants {
        by_properties.entry(properties).or_default().push(label);
    }
    for labels in by_properties.values().filter(|l| l.len() > 1) {
        let files = variants
            .iter()
            .filter(|(d, _)| {
                let label = d.wheel.as_ref().and_then(|w| w.variant.as_ref()).map(|(l, _)| l.as_str());
                label.is_some_and(|l| labels.contains(&l))
            })
            .map(|(d, _)| *d)
            .collect();
        findings.push(error(
            Kind::VariantDuplicateProperties,
            format!(
                "the labels {} name the same properties: installers order them by label alone; give each property set one label",
                labels.join(", ")
            ),
            files,
        ));
    }
    findings
}

/// A variant's device code against its `amd :: gfx_arch` properties: code for each processor
/// it names, and none for a processor it does not name (a machine of that processor would never
/// choose it).
fn code_findings(d: &Dist, label: &str, properties: &Properties, targets: &[String]) -> Vec<Finding> {
    let Some(named) = properties.get(amd::NAMESPACE).and_then(|f| f.get(amd::GFX_ARCH)) else {
        return Vec::new();
    };
    // Properties write `-` as `_` (`gfx9_4_generic`); processors are LLVM's names.
    let processors: Vec<TargetId> = named.iter().filter_map(|n| TargetId::parse(&n.replace('_', "-")).ok()).collect();
    let keep = Keep::new(processors.clone());
    let mut findings = Vec::new();
    let without: Vec<String> = processors
        .iter()
        .filter(|p| !targets.iter().any(|t| Keep::new(vec![(*p).clone()]).keeps(t)))
        .map(|p| p.processor().to_string())
        .collect();
    if !without.is_empty() {
        findings.push(error(
            Kind::VariantCodeMismatch,
            format!(
                "{}: variant `{label}` says it runs on {} but has no device code for {}: installed there, its kernels do not load",
                d.file_name,
                named.join(", "),
                without.join(", ")
            ),
            vec![d],
        ));
    }
    // AMD processors only: NVIDIA code (`sm_90`, `compute_90`) is neither named by the `amd`
    // namespace nor removed by thinning; a wheel that carries both keeps it in every variant.
    let extra: Vec<&str> =
        targets.iter().filter(|t| is_known_processor(t) && !keep.keeps(*t)).map(String::as_str).collect();
    if !extra.is_empty() {
        findings.push(Finding {
            kind: Kind::VariantExtraCode,
            severity: Severity::Warning,
            message: format!(
                "{}: variant `{label}` holds device code for {} that its properties ({}) do not name: no machine of those processors chooses it, and the bytes are carried for nothing",
                d.file_name,
                extra.join(", "),
                named.join(", ")
            ),
            files: vec![d.path.display().to_string()],
        });
    }
    findings
}

/// The label of a variant wheel, and its build: its file name without the label (one build per
/// Python and platform tag). Ex) (`gfx942`, `torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl`)
fn label_and_build(d: &Dist) -> Option<(&str, String)> {
    let (label, _) = d.wheel.as_ref()?.variant.as_ref()?;
    let name = crate::wheel::WheelFilename::parse(&d.file_name).ok()?;
    Some((label, crate::wheel::WheelFilename { variant: None, ..name }.to_string()))
}

/// A release's variant set is whole. Its `{name}-{version}-variants.json`, where the
/// directory holds one (`variants` publishes it with the set), names the labels: every build
/// of the release has a wheel of each, whose variant.json says what the set file says of it.
/// Without one, every build has the labels the others have.
fn set_findings(
    project: &str,
    version: &str,
    variants: &[(&Dist, &VariantMetadata)],
    set_files: &[PathBuf],
) -> Vec<Finding> {
    let files: Vec<String> = variants.iter().map(|(d, _)| d.path.display().to_string()).collect();
    let incomplete = |message: String, files: Vec<String>| Finding {
        kind: Kind::VariantSetIncomplete,
        severity: Severity::Error,
        message,
        files,
    };
    let set_name = set_name_of(project, version, variants);
    let set_file = set_files.iter().find(|f| f.file_name().is_some_and(|n| n.to_string_lossy() == set_name));
    let set = match set_file.map(|path| (path, variant::read_set_file(path))) {
        None => None,
        Some((_, Ok(set))) => Some(set),
        Some((path, Err(e))) => {
            let message = format!("{}: {e}: the release's set cannot be told whole", path.display());
            return vec![incomplete(message, vec![path.display().to_string()])];
        }
    };
    let mut findings = Vec::new();
    if let Some(set) = &set {
        for (d, metadata) in variants {
            let Some((label, _)) = d.wheel.as_ref().and_then(|w| w.variant.as_ref()) else { continue };
            if set.variants.get(label) != metadata.variants.get(label) {
                findings.push(incomplete(
                    format!(
                        "{}: variant `{label}` says other properties than {set_name} does: one set was mixed with another",
                        d.file_name
                    ),
                    vec![d.path.display().to_string()],
                ));
            }
        }
    }
    let whose = if set.is_some() { format!("{set_name} names") } else { "another build has".to_string() };
    for (build, missing) in
        variant::missing_variants(variants.iter().filter_map(|(d, _)| label_and_build(d)), set.as_ref())
    {
        findings.push(incomplete(
            format!(
                "{build}: the variants {} that {whose} are missing: a part of a set (an interrupted run, a partial copy) would be published as if it were whole",
                missing.join(", ")
            ),
            files.clone(),
        ));
    }
    findings
}

/// A release's set file name, as `variants` names it: from the wheels' file names.
fn set_name_of(project: &str, version: &str, variants: &[(&Dist, &VariantMetadata)]) -> String {
    match crate::wheel::WheelFilename::parse(&variants[0].0.file_name) {
        Ok(name) => crate::wheel::filename::variants_file_name(name.name.as_str(), &name.version.parsed.to_string()),
        Err(_) => crate::wheel::filename::variants_file_name(project, version),
    }
}

/// Static properties (`--static-gpu-target`) declare every machine that installs from the
/// index one GPU: a variant for other GPUs beside them is never chosen, on any machine.
fn static_findings(variants: &[(&Dist, &VariantMetadata)]) -> Vec<Finding> {
    let declared: BTreeSet<&str> = variants
        .iter()
        .flat_map(|(_, m)| m.providers.get(amd::NAMESPACE))
        .filter_map(|p| match p {
            Provider::Static { static_properties, .. } => static_properties.get(amd::GFX_ARCH),
            Provider::Plugin { .. } => None,
        })
        .flatten()
        .map(String::as_str)
        .collect();
    if declared.is_empty() {
        return Vec::new();
    }
    let hidden: Vec<&Dist> = variants
        .iter()
        .filter(|(d, m)| {
            let Some((label, _)) = d.wheel.as_ref().and_then(|w| w.variant.as_ref()) else { return false };
            let named = m.variants.get(label).and_then(|p| p.get(amd::NAMESPACE)).and_then(|f| f.get(amd::GFX_ARCH));
            named.is_some_and(|named| !named.iter().any(|n| declared.contains(n.as_str())))
        })
        .map(|(d, _)| *d)
        .collect();
    if hidden.is_empty() {
        return Vec::new();
    }
    let declared: Vec<&str> = declared.into_iter().collect();
    let names: Vec<&str> = hidden.iter().map(|d| d.file_name.as_str()).collect();
    vec![error(
        Kind::VariantStaticHides,
        format!(
            "static properties declare every machine {}: {} can never be chosen, on any machine (one run with --static-gpu-target decides for the whole version)",
            declared.join(", "),
            names.join(", ")
        ),
        hidden,
    )]
}
