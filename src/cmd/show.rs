//! `show`: the platform tag each wheel honestly meets, and why; auditwheel's document; the
//! resolved settings.

use std::path::{Path, PathBuf};

use super::pipeline::{Batch, Error, batch_site, decide_versions, examine, examine_all};
use super::{Common, Output, display_name};
use crate::progress::Progress;
use crate::report::{self, ShowReport, outcome};
use crate::settings::Settings;
use crate::version::VersionChange;

/// `show`'s request.
#[derive(Debug, Clone, Default)]
pub struct ShowRequest {
    /// No wheels: print the resolved settings (`show --config`).
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    /// `--json-format auditwheel`: auditwheel's documents instead of wheelfix's.
    pub auditwheel_json: bool,
    /// `--allow-pure-python-wheel` (auditwheel's format reports pure wheels only with it).
    pub allow_pure: bool,
}

pub fn run(request: &ShowRequest) -> Output {
    let settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    if request.wheels.is_empty() {
        return Output { stdout: settings.describe_text(), ..Output::default() };
    }
    if let Some(Err(e)) = settings.gpu_targets.value.iter().map(|t| crate::policy::gpus::parse(t)).find(Result::is_err)
    {
        return Output::usage(e);
    }
    if request.auditwheel_json {
        return run_auditwheel(request, &settings);
    }
    let marking = settings.marking.is_some();
    let (installed, wheels): (Vec<&PathBuf>, Vec<&PathBuf>) =
        request.wheels.iter().partition(|path| is_installed_input(path));
    let wheels: Vec<PathBuf> = wheels.into_iter().cloned().collect();
    let progress = crate::progress::for_inputs(&wheels, request.common.quiet);
    let batch = show_batch(&wheels, &settings, progress.as_ref());
    drop(progress);
    let mut shown = wheels.iter().zip(batch.results).map(|(path, result)| match result {
        Ok((report, change)) => (report, marking.then_some(change)),
        Err(e) => (ShowReport::failed(&display_name(path), format!("{}: {e}", path.display())), None),
    });
    let mut entries: Vec<report::ShowEntry> = Vec::new();
    for path in &request.wheels {
        if installed.contains(&path) {
            let report = show_installed(path, &settings)
                .unwrap_or_else(|e| ShowReport::failed(&path.display().to_string(), e.to_string()));
            entries.push((report, None));
        } else {
            entries.extend(shown.next());
        }
    }
    for (report, _) in &mut entries {
        report.check_gpu_targets(&settings.gpu_targets.value);
    }
    let failed = entries.iter().filter(|(r, _)| r.error.is_some() || !r.missing_gpu_targets.is_empty()).count();
    let mut output = Output::default();
    if request.common.json {
        output.stdout = report::show_json(&entries);
    } else {
        output.stdout = report::show_text(&entries);
        for (r, _) in entries.iter().filter(|(r, _)| r.error.is_some()) {
            output.stderr.push(format!("wheelfix: error: {}", r.error.as_deref().unwrap_or_default()));
        }
    }
    output.stderr.extend(entries.iter().filter_map(|(r, _)| r.missing_gpu_targets_message()));
    output.stderr.extend(outcome::hazard_messages(&batch.hazards));
    output.finish(failed, entries.len())
}

/// `show --json-format auditwheel`: auditwheel's documents; a wheel that fails, or that
/// auditwheel would refuse (not a platform wheel), gives its error form and exit 1, as there.
fn run_auditwheel(request: &ShowRequest, settings: &Settings) -> Output {
    let progress = crate::progress::for_inputs(&request.wheels, request.common.quiet);
    let documents = show_auditwheel_batch(&request.wheels, settings, request.allow_pure, progress.as_ref());
    drop(progress);
    let mut output = Output::default();
    let mut failed = 0;
    for (path, document) in request.wheels.iter().zip(documents) {
        let document = document
            .unwrap_or_else(|e| report::auditwheel::error(&display_name(path), &format!("{}: {e}", path.display())));
        failed += usize::from(document.is_error);
        output.stdout.push_str(&document.text);
    }
    output.finish(failed, request.wheels.len())
}

/// Whether `show` reads `path` as installed files: a directory, or a file that is not a zip
/// archive and not named as a wheel (an installed `.so`, a code object, a kpack archive).
fn is_installed_input(path: &Path) -> bool {
    if path.is_dir() {
        return true;
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("whl")) {
        return false;
    }
    // Opened as a regular file only: a FIFO or a device is never waited on.
    let mut head = [0u8; 4];
    let read = crate::files::open_regular(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    read.is_ok() && &head != b"PK\x03\x04"
}

/// `show` of installed files: the tag they meet, their libraries, their device code.
fn show_installed(path: &Path, settings: &Settings) -> Result<ShowReport, crate::analysis::installed::InstalledError> {
    let crate::examine::InstalledExamined { files, analysis, judgement } =
        crate::examine::examine_installed(path, &settings.examine_options())?;
    let root = if path.is_dir() { path } else { path.parent().unwrap_or(Path::new(".")) };
    Ok(ShowReport::of_installed(&path.display().to_string(), root, &files, &analysis, &judgement))
}

/// Analyse one wheel for `show`.
pub fn show(path: &Path, settings: &Settings, progress: &dyn Progress) -> Result<ShowReport, Error> {
    let site = batch_site(&[], settings);
    let e = examine(path, settings, &site, progress)?;
    Ok(ShowReport::new(&e.wheel, &e.analysis, &e.judgement))
}

/// `show` for a batch: every wheel's report, with version decisions when marking.
pub fn show_batch(
    paths: &[PathBuf],
    settings: &Settings,
    progress: &dyn Progress,
) -> Batch<(ShowReport, VersionChange)> {
    let examined = examine_all(paths, settings, progress);
    let (changes, hazards) = decide_versions(&examined, settings);
    let results = examined
        .into_iter()
        .zip(changes)
        .map(|(e, change)| {
            let e = e?;
            Ok((ShowReport::new(&e.wheel, &e.analysis, &e.judgement), change?))
        })
        .collect();
    Batch { results, hazards }
}

/// `show --json-format auditwheel`: auditwheel's `show --json` document for every wheel, in order.
pub fn show_auditwheel_batch(
    paths: &[PathBuf],
    settings: &Settings,
    allow_pure: bool,
    progress: &dyn Progress,
) -> Vec<Result<report::auditwheel::Document, Error>> {
    examine_all(paths, settings, progress)
        .into_iter()
        .map(|e| {
            let e = e?;
            let name = e.wheel.filename.to_string();
            Ok(report::auditwheel::document(&name, &e.analysis, &e.judgement, allow_pure))
        })
        .collect()
}
