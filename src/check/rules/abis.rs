//! ROCm ABIs: one ROCm release line per index, and local labels that name the ROCm the
//! binaries link.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::check::facts::Dist;
use crate::check::{Finding, Kind, Severity};

/// One ROCm ABI per index: the ROCm libraries the wheels an index serves link (by SONAME
/// major) all come from one ROCm release line (`rocm-abi-mix`), and a wheel's `+rocm…` label
/// names a line that ships the majors it links (`rocm-abi-label`).
pub(in crate::check) fn abi_findings(dists: &[Dist]) -> Vec<Finding> {
    use crate::check::abi::{AbiTable, line_text, split_soname};
    let table = AbiTable::builtin();
    // Each wheel that links ROCm, the libraries it links, and the lines it can serve: those one
    // of its binaries fits (a wheel with one backend per ROCm, as bitsandbytes ships, serves each).
    let linking: Vec<(&Dist, BTreeSet<String>, Vec<&str>)> = dists
        .iter()
        .filter_map(|d| {
            let per_binary = &d.wheel.as_ref()?.rocm_sonames;
            if per_binary.is_empty() {
                return None;
            }
            let all: BTreeSet<String> = per_binary.iter().flatten().cloned().collect();
            let mut lines: Vec<&str> = per_binary.iter().flat_map(|b| table.lines_shipping(b)).collect();
            lines.sort_by_key(|l| table.line_rank(l));
            lines.dedup();
            Some((d, all, lines))
        })
        .collect();
    let lines_text = |lines: &[&str]| match lines {
        [] => "no one ROCm release".to_string(),
        lines => lines.iter().map(|l| line_text(l)).collect::<Vec<_>>().join(" or "),
    };
    let listed = |sonames: &BTreeSet<String>| sonames.iter().cloned().collect::<Vec<_>>().join(", ");
    let mut findings = Vec::new();
    // One finding per project and what is wrong with its label, naming every file it holds for
    // (a project's variants, or its wheels for several Pythons, are one mistake).
    let mut mislabelled: BTreeMap<(&str, &str, String), (String, Vec<&Dist>)> = BTreeMap::new();
    for (d, sonames, lines) in &linking {
        let Some(release) = crate::version::rocm_release(d.metadata.version.parsed.local()) else { continue };
        let Some(line) = table.line_of(&release) else { continue };
        if !lines.contains(&line) {
            let bases: BTreeSet<&str> = sonames.iter().filter_map(|s| split_soname(s)).map(|(b, _)| b).collect();
            let why = format!(
                "labelled for ROCm {} but links {} ({}); {} ships {}: on a host with the ROCm its label names it fails to load. Rebuild it against that ROCm, or label it with the ROCm it was built for",
                release.iter().map(u64::to_string).collect::<Vec<_>>().join("."),
                listed(sonames),
                lines_text(lines),
                line_text(line),
                table.describe(line, &bases)
            );
            let key = (d.project.as_str(), d.version.as_str(), why.clone());
            mislabelled.entry(key).or_insert_with(|| (why, Vec::new())).1.push(d);
        }
    }
    for (_, (why, wheels)) in mislabelled {
        let who = match wheels.as_slice() {
            [one] => one.file_name.clone(),
            [first, ..] => {
                format!("{} {} ({} files, {} among them)", first.project, first.version, wheels.len(), first.file_name)
            }
            [] => continue,
        };
        findings.push(Finding {
            kind: Kind::RocmAbiLabel,
            severity: Severity::Error,
            message: format!("{who} is {why}"),
            files: wheels.iter().map(|d| d.path.display().to_string()).collect(),
        });
    }
    // The wheels each index serves: those of an architecture directory with those of none.
    let arches: BTreeSet<Option<String>> = linking.iter().map(|(d, _, _)| architecture_dir(&d.path)).collect();
    let places: Vec<Option<String>> =
        if arches.iter().all(Option::is_none) { vec![None] } else { arches.into_iter().flatten().map(Some).collect() };
    for place in places {
        let served: Vec<&(&Dist, BTreeSet<String>, Vec<&str>)> = linking
            .iter()
            .filter(|(d, _, _)| architecture_dir(&d.path).is_none_or(|a| Some(&a) == place.as_ref()))
            .collect();
        let common = served
            .iter()
            .map(|(_, _, lines)| lines.clone())
            .reduce(|a, b| a.into_iter().filter(|l| b.contains(l)).collect());
        if served.len() < 2 || common.is_none_or(|c| !c.is_empty()) {
            continue;
        }
        // Group the wheels by the release lines their libraries fit.
        let mut by_lines: BTreeMap<Vec<&str>, Vec<String>> = BTreeMap::new();
        for (d, sonames, lines) in &served {
            by_lines.entry(lines.clone()).or_default().push(format!("{} ({})", d.file_name, listed(sonames)));
        }
        let groups: Vec<String> =
            by_lines.iter().map(|(lines, wheels)| format!("{}: {}", lines_text(lines), wheels.join(", "))).collect();
        let place_text = place.as_ref().map(|a| format!("the {a} index")).unwrap_or_else(|| "the set".into());
        findings.push(Finding {
            kind: Kind::RocmAbiMixed,
            severity: Severity::Error,
            message: format!(
                "{place_text} mixes ROCm ABIs, and one environment holds one ROCm: {}. Rebuild the odd ones against the set's ROCm, or publish them in a separate index",
                groups.join("; ")
            ),
            files: served.iter().map(|(d, _, _)| d.path.display().to_string()).collect(),
        });
    }
    findings
}
