//! `metapackage`, `index` and `check`: the commands on sets of wheels.

use std::path::PathBuf;

use super::pipeline::Error;
use super::{Common, Output};
use crate::progress::Progress;
use crate::release::index::IndexOptions;
use crate::release::metapackage::MetapackageOptions;
use crate::report::release::{self as render, CheckReport};
use crate::settings::Settings;
use crate::wheel::Wheel;
use crate::{analysis, parallel, release};

/// `metapackage`'s request.
#[derive(Debug, Clone)]
pub struct MetapackageRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub options: MetapackageOptions,
}

pub fn run_metapackage(request: &MetapackageRequest) -> Output {
    let settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    if let Err(e) = request.options.validate() {
        return Output::usage(e);
    }
    let progress = crate::progress::for_inputs(&request.wheels, request.common.quiet);
    let result = metapackage(&request.wheels, &settings, &request.options, progress.as_ref());
    drop(progress);
    match result {
        Ok(meta) if request.common.json => Output { stdout: render::metapackage_json(&meta), ..Output::default() },
        Ok(meta) => Output { stdout: render::metapackage_text(&meta), ..Output::default() },
        Err(e) => Output::failure(e),
    }
}

/// `index`'s request. The index reads no setting the other commands share (no policy, no
/// library search, no configuration key): its options are its own.
#[derive(Debug, Clone)]
pub struct IndexRequest {
    pub inputs: Vec<PathBuf>,
    pub options: IndexOptions,
    pub json: bool,
}

pub fn run_index(request: &IndexRequest) -> Output {
    match release::index::build(&request.inputs, &request.options) {
        Ok(summary) => {
            let stdout = if request.json { render::index_json(&summary) } else { render::index_text(&summary) };
            let code = if summary.skipped.is_empty() { 0 } else { 1 };
            Output { stdout, stderr: render::index_messages(&summary), code }
        }
        Err(e) if e.is_usage() => Output::usage(e),
        Err(e) => Output::failure(e),
    }
}

/// `check`'s request.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub dirs: Vec<PathBuf>,
    pub common: Common,
    /// Fail on warnings too.
    pub strict: bool,
}

pub fn run_check(request: &CheckRequest) -> Output {
    if let Some(missing) = crate::wheel::inputs::missing(&request.dirs).first() {
        return Output::usage(format!("no such file or directory: {}", missing.display()));
    }
    let settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let findings = release::check::check(&request.dirs, &settings.analyze, &settings.policies);
    let report = CheckReport::new(&findings);
    let stdout = if request.common.json { report.to_json() } else { report.to_text() };
    let failing = if request.strict { report.errors + report.warnings } else { report.errors };
    Output { stdout, stderr: Vec::new(), code: u8::from(failing > 0) }
}

/// Build a metapackage pinning every wheel in `paths` (see [`release::metapackage`]): each
/// wheel's name, version, platform tags and GPU targets, from its metadata and device code.
pub fn metapackage(
    paths: &[PathBuf],
    settings: &Settings,
    options: &release::metapackage::MetapackageOptions,
    progress: &dyn Progress,
) -> Result<release::metapackage::Metapackage, Error> {
    let scanned = parallel::map(paths, |path| -> Result<release::metapackage::Pinned, Error> {
        let wheel = Wheel::open(path)?;
        if !wheel.installer_problems.is_empty() {
            return Err(Error::Uninstallable { problems: wheel.installer_problems.clone() });
        }
        let analysis = analysis::scan(&wheel, &settings.analyze, progress)?;
        Ok(release::metapackage::Pinned {
            name: wheel.metadata.name.clone(),
            version: wheel.metadata.version.text.clone(),
            wheel: wheel.filename.to_string(),
            platform_tags: wheel.filename.platform_tags.clone(),
            gpu_targets: analysis.gpu_targets(),
        })
    });
    // The first failure in argument order is the one reported.
    let scanned: Vec<release::metapackage::Pinned> = scanned.into_iter().collect::<Result<_, _>>()?;
    release::metapackage::build(&scanned, options).map_err(|e| Error::Metapackage(Box::new(e)))
}
