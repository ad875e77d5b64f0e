//! `check`'s rules for variant wheels (PEP 825): each wheel's `variant.json` is readable and
//! names its label; a version's variant wheels agree (one meaning per label, one label per
//! property set, the same priorities), as the index's `{name}-{version}-variants.json` must
//! merge them; each variant's device code is what its `amd :: gfx_arch` properties say; and a
//! version with variants has a wheel for machines no variant fits.

use std::collections::BTreeMap;

use super::facts::Dist;
use super::{Finding, Kind, Severity};
use crate::gpu::TargetId;
use crate::gpu::targets::{Keep, is_known_processor};
use crate::wheel::variant::{NULL_LABEL, Properties, VariantMetadata, amd};

/// A version's variant wheels, as read, and whether a plain (unlabelled) wheel is there too.
type VersionVariants<'a> = (Vec<(&'a Dist, &'a VariantMetadata)>, bool);

pub(super) fn variant_findings(dists: &[Dist]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut versions: BTreeMap<(&str, &str), VersionVariants<'_>> = BTreeMap::new();
    for d in dists {
        let Some(w) = &d.wheel else { continue };
        let entry = versions.entry((d.project.as_str(), d.version.as_str())).or_default();
        match &w.variant {
            None => entry.1 |= d.platform.is_some() || d.pure,
            Some((_, Err(problem))) => findings.push(error(
                Kind::VariantMetadata,
                format!("{}: {problem}; installers cannot choose it", d.file_name),
                vec![d],
            )),
            Some((label, Ok(metadata))) => {
                entry.0.push((d, metadata));
                findings.extend(code_findings(d, label, &metadata.variants[label], &w.gpu_targets));
            }
        }
    }
    for ((project, version), (variants, has_plain)) in versions {
        if variants.is_empty() {
            continue;
        }
        findings.extend(agreement_findings(&variants));
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
