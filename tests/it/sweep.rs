//! The real-wheel sweep (opt-in, disk-heavy): every command on a directory of wheels from PyPI.
//!
//! ```text
//! python3 benches/sweep/fetch.py benches/sweep/wheels.txt ~/wheelfix-sweep
//! WHEELFIX_SWEEP_DIR=~/wheelfix-sweep cargo test --release --test it sweep:: -- --nocapture
//! ```
//!
//! For every wheel: `show` (text and JSON, which must agree), `show --verify`, `retag -w`, `thin -w`
//! (to its first GPU target), and
//! `repair -w` for Linux platform wheels; then `index` and `check` on the whole directory. It
//! asserts that no wheel is refused (pip installs them all), that every written wheel's RECORD
//! is true (or the output is a byte-for-byte copy), that no input changed, and that outputs
//! have the mode `0666 & ~umask` gives. `repair` may refuse a wheel only for a reason it names
//! (a library this machine lacks, no policy that accepts the wheel). A summary goes to stderr.

use crate::support;
use wheelfix::gpu::TargetId;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use support::python::assert_true_record;
use support::{show_report, stderr, stdout, wheelfix};
use wheelfix::gpu::Container;
use wheelfix::report::ShowReport;
use wheelfix::report::release::CheckDocument;
use wheelfix::report::thin::ThinOutcome;
use wheelfix::wheel::RecordProblem;

fn fingerprint(path: &Path) -> (u64, u64, i64, i64, String) {
    let meta = std::fs::metadata(path).unwrap();
    let hash = wheelfix::wheel::digest::file_sha256_hex(path).unwrap();
    (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec(), hash)
}

/// The text report agrees with the JSON one on what it states.
fn text_agrees_with_json(text: &str, json: &ShowReport) -> Result<(), String> {
    let line_value = |label: &str| text.lines().find_map(|l| l.trim_start().strip_prefix(label)).map(str::trim);
    if let Some(tag) = json.platform_tag.as_deref()
        && line_value("platform tag:") != Some(tag)
    {
        return Err(format!("platform tag: text {:?}, json {tag}", line_value("platform tag:")));
    }
    if json.platform_tag.is_some() {
        let retag = support::tag_texts(&json.retag_tags);
        if line_value("retag writes:") != Some(retag.join(".").as_str()) {
            return Err(format!("retag writes: text {:?}, json {retag:?}", line_value("retag writes:")));
        }
    }
    for soname in json.external_libs.keys() {
        if !text.contains(soname.as_str()) {
            return Err(format!("external library {soname} missing from the text"));
        }
    }
    let record = &json.record;
    if record.is_empty() == text.contains("RECORD disagrees with the archive") {
        return Err(format!(
            "RECORD findings: json has {}, text says {:?}",
            record.len(),
            text.contains("RECORD disagrees")
        ));
    }
    let targets = &json.gpu_targets;
    if !targets.is_empty() && !text.contains(&targets.join(", ")) {
        return Err(format!("GPU targets {targets:?} missing from the text"));
    }
    if json.gpu_only && !text.contains("GPU-only:") {
        return Err("GPU-only in json, not in text".into());
    }
    if json.pure && !json.gpu_only && !text.contains("pure:") {
        return Err("pure in json, not in text".into());
    }
    if !json.pure && text.contains("  pure:") {
        return Err("pure in text, not in json".into());
    }
    Ok(())
}

/// The one report of `show --json`'s output, typed: JSON that does not read back into the
/// report is a problem of the sweep, not a panic that ends it.
fn read_report(out: &std::process::Output) -> Result<ShowReport, String> {
    let printed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).map_err(|e| format!("no JSON ({e})"))?;
    let entry = printed.into_iter().next().ok_or("no entry")?;
    support::try_typed::<wheelfix::report::ShowJsonEntry>(entry, &[]).map(|e| e.report)
}

/// Reasons `repair` may give for refusing a wheel: real limits, named.
const REPAIR_REFUSALS: &[&str] = &[
    "was not found; searched",
    "no manylinux or musllinux policy accepts it",
    "vendoring into Android wheels is not supported",
    "cannot repair to",
];

#[test]
#[ignore = "needs the real-wheel sweep downloaded (benches/sweep/fetch.py); set WHEELFIX_SWEEP_DIR"]
fn every_command_on_real_wheels() {
    let (dir, wheels) = support::opt_in_wheels("WHEELFIX_SWEEP_DIR", "the sweep's wheels (benches/sweep/fetch.py)");
    let before: Vec<_> = wheels.iter().map(|w| fingerprint(w)).collect();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let umask_mode = 0o644; // the test runs with the usual umask 022

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems: Vec<String> = Vec::new();
    let mut repair_refused: Vec<String> = Vec::new();
    let mut thin_sizes: Vec<String> = Vec::new();
    let mut stale: Vec<String> = Vec::new();
    for wheel in &wheels {
        let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
        let arg = wheel.to_str().unwrap();
        let start = std::time::Instant::now();
        *counts.entry("wheels").or_default() += 1;

        let json_out = wheelfix(w, &["show", "--json", arg]);
        let text_out = wheelfix(w, &["show", arg]);
        if !json_out.status.success() || !text_out.status.success() {
            problems.push(format!("{name}: show refused it: {}", stderr(&json_out)));
            continue;
        }
        let report = match read_report(&json_out) {
            Ok(report) => report,
            Err(e) => {
                problems.push(format!("{name}: show --json: {e}"));
                continue;
            }
        };
        if let Err(e) = text_agrees_with_json(&stdout(&text_out), &report) {
            problems.push(format!("{name}: show's text and JSON disagree: {e}"));
        }
        for (set, label) in [(report.pure, "pure"), (report.gpu_only, "gpu-only")] {
            if set {
                *counts.entry(label).or_default() += 1;
            }
        }
        if !report.record.is_empty() {
            *counts.entry("stale RECORD (show)").or_default() += 1;
            let kinds: std::collections::BTreeSet<&str> = report.record.iter().map(|f| f.problem.as_str()).collect();
            stale.push(format!("{name}: {}", kinds.into_iter().collect::<Vec<_>>().join(", ")));
        }
        if report.unaudited.is_some() {
            *counts.entry("no policy applies").or_default() += 1;
        }
        if !report.gpu_targets.is_empty() {
            *counts.entry("with GPU targets").or_default() += 1;
        }

        let verify = wheelfix(w, &["show", "--verify", "--json", arg]);
        if !verify.status.success() {
            problems.push(format!("{name}: show --verify refused it: {}", stderr(&verify)));
        } else {
            let verified = read_report(&verify).unwrap_or_else(|e| {
                problems.push(format!("{name}: show --verify --json: {e}"));
                ShowReport::default()
            });
            let hashes: Vec<&str> =
                verified.record.iter().filter(|f| f.problem == RecordProblem::Hash).map(|f| f.file.as_str()).collect();
            if !hashes.is_empty() {
                *counts.entry("stale RECORD hash (show --verify)").or_default() += 1;
                stale.push(format!("{name}: hash of {}", hashes.join(", ")));
            }
        }

        let out_dir = w.join("retagged");
        let retag = wheelfix(w, &["retag", "--json", "-w", out_dir.to_str().unwrap(), arg]);
        match check_output(&retag, wheel, w, umask_mode) {
            Ok(changed) => {
                *counts.entry(if changed { "retag: rewritten" } else { "retag: copied as it is" }).or_default() += 1
            }
            Err(e) => problems.push(format!("{name}: retag: {e}")),
        }

        // thin to the first AMDGPU target of its device code (a wheel without any is copied as it is),
        // and `show` on the result reports only that target.
        let first_target = report.gpu_targets.iter().find(|t| t.starts_with("gfx")).cloned();
        let thinned = w.join("thinned");
        let target = first_target.clone().unwrap_or_else(|| "gfx942".into());
        let thin = wheelfix(
            w,
            &["thin", "--json", "--allow-missing", "--gpu-target", &target, "-w", thinned.to_str().unwrap(), arg],
        );
        match check_output(&thin, wheel, w, umask_mode) {
            Ok(changed) => {
                *counts.entry(if changed { "thin: rewritten" } else { "thin: copied as it is" }).or_default() += 1;
                let result: Vec<ThinOutcome> = support::entries(&thin, &["version", "kept", "dropped"]);
                if changed {
                    let output = w.join(result[0].output.as_deref().unwrap());
                    let after = show_report(w, &output, &[]);
                    let bundles = [Container::HipFatbin, Container::OffloadBundle, Container::CompressedOffloadBundle];
                    let others: Vec<&TargetId> = after
                        .gpu
                        .iter()
                        .filter(|g| bundles.contains(&g.container))
                        .flat_map(|g| &g.targets)
                        .filter(|t| t.processor() != target.as_str() && !t.is_generic())
                        .collect();
                    if !others.is_empty() {
                        problems.push(format!("{name}: thin to {target} left {others:?} in its bundles"));
                    }
                    thin_sizes.push(format!(
                        "{name}: {} -> {} bytes ({target})",
                        result[0].size_before.unwrap_or_default(),
                        result[0].size_after.unwrap_or_default()
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: thin: {e}")),
        }
        let _ = std::fs::remove_dir_all(&thinned);

        let linux = report.platform_tag.is_some();
        if linux {
            let repaired = w.join("repaired");
            let repair = wheelfix(w, &["repair", "--json", "-w", repaired.to_str().unwrap(), arg]);
            if repair.status.success() {
                match check_output(&repair, wheel, w, umask_mode) {
                    Ok(_) => *counts.entry("repair: written").or_default() += 1,
                    Err(e) => problems.push(format!("{name}: repair: {e}")),
                }
            } else {
                let err = stderr(&repair);
                if REPAIR_REFUSALS.iter().any(|r| err.contains(r)) {
                    *counts.entry("repair: refused with a named reason").or_default() += 1;
                    repair_refused.push(format!("{name}: {}", err.lines().next().unwrap_or_default()));
                } else {
                    problems.push(format!("{name}: repair failed: {err}"));
                }
            }
            let _ = std::fs::remove_dir_all(&repaired);
        }
        let _ = std::fs::remove_dir_all(&out_dir);
        eprintln!("{name}: {:.1} s", start.elapsed().as_secs_f64());
    }

    let site = w.join("site");
    let index = wheelfix(w, &["index", "-o", site.to_str().unwrap(), dir.to_str().unwrap()]);
    if !index.status.success() {
        problems.push(format!("index: {}", stderr(&index)));
    }
    let check = wheelfix(w, &["check", "--json", dir.to_str().unwrap()]);
    let document = serde_json::from_slice(&check.stdout).map_err(|e| e.to_string());
    match document.and_then(|printed| support::try_typed::<CheckDocument>(printed, &[])) {
        Ok(document) => {
            for f in &document.findings {
                *counts.entry("check findings").or_default() += 1;
                if f.kind == "unreadable" {
                    problems.push(format!("check could not read a wheel: {}", f.message));
                }
            }
        }
        Err(e) => problems.push(format!("check --json ({e}): {}", stderr(&check))),
    }

    for (wheel, b) in wheels.iter().zip(&before) {
        if &fingerprint(wheel) != b {
            problems.push(format!("{}: the input changed", wheel.display()));
        }
    }
    eprintln!("\nsweep of {} wheels in {}:", wheels.len(), dir.display());
    for (k, v) in &counts {
        eprintln!("  {k}: {v}");
    }
    for t in &thin_sizes {
        eprintln!("  thinned {t}");
    }
    for r in &repair_refused {
        eprintln!("  repair refused {r}");
    }
    for r in &stale {
        eprintln!("  stale RECORD: {r}");
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// A `retag`/`repair --json` run: it succeeded, and each output is true. Returns whether the
/// wheel was rewritten (not copied as it is).
fn check_output(out: &std::process::Output, input: &Path, cwd: &Path, mode: u32) -> Result<bool, String> {
    if !out.status.success() {
        return Err(format!("refused: {}", stderr(out)));
    }
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let result = &results[0];
    let output = cwd.join(result["output"].as_str().ok_or("no output")?);
    let actual = std::fs::metadata(&output).map_err(|e| e.to_string())?.permissions().mode() & 0o777;
    if actual != mode {
        return Err(format!("{} has mode {actual:o}, not {mode:o}", output.display()));
    }
    // A wheel whose RECORD was corrected is written anew even when nothing else changed.
    let corrected = match &result["record_corrected"] {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
        serde_json::Value::String(s) => !s.is_empty(),
        _ => true,
    };
    let changed = result["changed"] == true || corrected;
    if changed {
        std::panic::catch_unwind(|| assert_true_record(&output)).map_err(|_| "its RECORD is not true".to_string())?;
    } else if std::fs::read(&output).map_err(|e| e.to_string())? != std::fs::read(input).map_err(|e| e.to_string())? {
        return Err("an unchanged wheel was not copied byte for byte".into());
    }
    Ok(changed)
}
