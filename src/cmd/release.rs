//! `metapackage`, `index` and `check`: the commands on sets of wheels.

use std::path::PathBuf;

use super::pipeline::Error;
use super::{Common, Output, WheelFailed};
use crate::index::IndexOptions;
use crate::metapackage::MetapackageOptions;
use crate::progress::Progress;
use crate::report::release::{self as render, CheckReport};
use crate::settings::Settings;
use crate::wheel::Wheel;
use crate::{analysis, check, index, metapackage, parallel, upstream};

/// `metapackage`'s request.
#[derive(Debug, Clone)]
pub struct MetapackageRequest {
    pub wheels: Vec<PathBuf>,
    pub common: Common,
    pub options: MetapackageOptions,
}

/// `selector`'s request: the release's wheels of every platform.
#[derive(Debug, Clone)]
pub struct SelectorRequest {
    pub wheels: Vec<PathBuf>,
    pub name: String,
    pub version: Option<String>,
    pub output_dir: PathBuf,
    /// `--index-url`: the index the release is published in, recorded in the selector.
    pub index_url: Option<String>,
    pub json: bool,
}

pub fn run_selector(request: &SelectorRequest) -> Output {
    // Only the environment matters here (`SOURCE_DATE_EPOCH`): no configuration file is read.
    let settings = match Settings::resolve(&crate::settings::Flags::default(), &super::no_config()) {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let read: Vec<Result<metapackage::selector::SelectorInput, WheelFailed<crate::wheel::WheelError>>> =
        crate::parallel::map(&request.wheels, |path| {
            let wheel = crate::wheel::WheelMetadata::open(path).map_err(|error| WheelFailed::new(path, error))?;
            Ok(metapackage::selector::SelectorInput {
                name: wheel.metadata.name.clone(),
                version: wheel.metadata.version.text.clone(),
                platform_tags: wheel.filename.platform_tags.clone(),
                wheel: wheel.filename.to_string(),
                wheelfix_metapackage: wheel.is_wheelfix_metapackage(),
                requires: wheel
                    .metadata
                    .requires_dist
                    .iter()
                    .filter(|r| r.marker_extras.is_empty())
                    .map(|r| r.package.to_string())
                    .collect(),
            })
        });
    let mut inputs = Vec::new();
    for r in read {
        match r {
            Ok(input) => inputs.push(input),
            Err(e) => return Output::failure(e),
        }
    }
    let options = metapackage::selector::SelectorOptions {
        name: request.name.clone(),
        version: request.version.clone(),
        output_dir: request.output_dir.clone(),
        source_date_epoch: settings.source_date_epoch,
        index_url: request.index_url.clone(),
    };
    match metapackage::selector::build(&inputs, &options) {
        Ok(written) if request.json => {
            #[derive(serde::Serialize)]
            struct Written<'a> {
                selectors: &'a [metapackage::selector::SelectorWheel],
            }
            let body = Written { selectors: &written };
            Output {
                stdout: crate::report::json::to_text(&crate::report::json::Versioned::new(&body)),
                ..Output::default()
            }
        }
        Ok(written) => {
            let mut text = String::new();
            for w in &written {
                text.push_str(&format!("wrote {} ({}: {})\n", w.path, w.platform, w.extras.join(", ")));
            }
            Output { stdout: text, ..Output::default() }
        }
        Err(e) if e.is_usage() => Output::usage(e),
        Err(e) => Output::failure(e),
    }
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

/// `index`'s request. The PEP 503 pages read no setting the other commands share; the release
/// page reads the set as `check` does, with the embedded policies and default library search.
#[derive(Debug, Clone)]
pub struct IndexRequest {
    pub inputs: Vec<PathBuf>,
    pub options: IndexOptions,
    pub json: bool,
    /// The release page, unless `--no-page`.
    pub page: Option<PageRequest>,
    /// `--fail-on-check`: publish nothing when `check` finds an error in the set.
    pub fail_on_check: bool,
}

/// What the release page needs to know that the files do not say.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    /// Its heading. Default: the output directory's name (`gfx950`).
    pub title: Option<String>,
    /// Where the index will be served (for the install commands). Default: its `file://` URL.
    pub site_url: Option<String>,
    /// `--gpu-names`: a JSON map of processor → the GPUs it serves, over the built-in table.
    pub gpu_names: Option<PathBuf>,
}

/// Read `--gpu-names`: a JSON object of strings, at most 1 MiB.
fn read_gpu_names(path: &std::path::Path) -> Result<std::collections::BTreeMap<String, String>, GpuNamesError> {
    let path_text = || path.display().to_string();
    let text = crate::files::read_text_bounded(path, 1 << 20)
        .map_err(|source| GpuNamesError::Read { path: path_text(), source })?;
    serde_json::from_str(&text).map_err(|source| GpuNamesError::NotAMap { path: path_text(), source })
}

/// Why `--gpu-names` cannot be read.
#[derive(Debug, thiserror::Error)]
enum GpuNamesError {
    #[error("--gpu-names {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "--gpu-names {path}: not a JSON object of processor → GPU names (Ex: {{\"gfx1151\": \"Radeon 8060S\"}}): {source}"
    )]
    NotAMap { path: String, source: serde_json::Error },
}

/// The directory URL a site is served at: the one given, else the output directory's own
/// `file://` URL (what `pip install --index-url` takes for a local site).
fn site_url(given: Option<&str>, output: &std::path::Path) -> String {
    match given {
        Some(url) => index::directory_url(url),
        None => {
            let path = std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf());
            index::directory_url(&format!("file://{}", path.display()))
        }
    }
}

/// The settings the release page reads the set with: `check`'s defaults (every member hashed).
fn page_settings() -> Result<Settings, super::UsageError> {
    let flags = crate::settings::Flags { verify: true, ..Default::default() };
    Common { flags, config: None, json: false, quiet: true }.settings()
}

/// `release.html` and `release.json` for an index of the set `survey` read.
fn release_pages(
    request: &IndexRequest,
    page: &PageRequest,
    survey: &check::Survey,
    gpu_names: std::collections::BTreeMap<String, String>,
) -> Vec<(String, Vec<u8>)> {
    let output = &request.options.output;
    let title = page.title.clone().unwrap_or_else(|| {
        let name = index::resolved_name(output);
        if name.is_empty() { "release".into() } else { name }
    });
    let base = request.options.base_url.as_deref().map(index::directory_url);
    let href = |project: &str, file: &str| match &base {
        Some(base) => format!("{base}{}", index::url_quote(file)),
        None => format!("{project}/{}", index::url_quote(file)),
    };
    let mut page =
        crate::report::page::ReleasePage::new(&title, &site_url(page.site_url.as_deref(), output), survey, href);
    page.gpu_names = gpu_names;
    vec![("release.html".into(), page.to_html(None).into_bytes()), ("release.json".into(), page.to_json().into_bytes())]
}

pub fn run_index(request: &IndexRequest) -> Output {
    let inputs_exist = crate::files::missing(&request.inputs).is_empty();
    let gpu_names = match request.page.as_ref().and_then(|p| p.gpu_names.as_deref()) {
        Some(path) => match read_gpu_names(path) {
            Ok(names) => names,
            Err(e) => return Output::usage(e),
        },
        None => Default::default(),
    };
    // One read of the set serves both the check `--fail-on-check` asks for and the page.
    let survey = if inputs_exist && (request.fail_on_check || request.page.is_some()) {
        let settings = match page_settings() {
            Ok(s) => s,
            Err(e) => return Output::usage(e),
        };
        Some(check::survey(&request.inputs, &settings.examine_options(), &Default::default(), &Default::default()))
    } else {
        None
    };
    if request.fail_on_check
        && let Some(survey) = &survey
    {
        let errors: Vec<&check::Finding> =
            survey.findings.iter().filter(|f| f.severity == check::Severity::Error).collect();
        if !errors.is_empty() {
            let mut stderr: Vec<String> =
                errors.iter().map(|f| format!("wheelfix: error: check: {}: {}", f.kind, f.message)).collect();
            stderr.push(format!(
                "wheelfix: error: --fail-on-check: check found {} in the set; nothing was published",
                crate::log::plural(errors.len(), "error")
            ));
            return Output { stdout: String::new(), stderr, code: 1 };
        }
    }
    let mut request = request.clone();
    if let (Some(page), Some(survey)) = (&request.page, &survey) {
        request.options.pages = release_pages(&request, page, survey, gpu_names);
    }
    let request = &request;
    match index::build(&request.inputs, &request.options) {
        Ok(summary) => {
            let stdout = if request.json { render::index_json(&summary) } else { render::index_text(&summary) };
            let code = if summary.skipped.is_empty() { 0 } else { 1 };
            let mut stderr = render::index_messages(&summary);
            if let Some(survey) = &survey {
                let errors = survey.findings.iter().filter(|f| f.severity == check::Severity::Error).count();
                if errors > 0 {
                    stderr.push(check_warning("the set", errors, survey.findings.len() - errors));
                }
            }
            Output { stdout, stderr, code }
        }
        Err(e) if e.is_usage() => Output::usage(e),
        Err(e) => Output::failure(e),
    }
}

/// `site`'s request.
#[derive(Debug, Clone)]
pub struct SiteRequest {
    /// Index directories, each written by `index`.
    pub sites: Vec<PathBuf>,
    pub output: PathBuf,
    pub title: Option<String>,
    /// Where the output directory will be served; each index is `<URL>/<name>/`.
    pub site_url: Option<String>,
    pub json: bool,
    /// `--fail-on-check`: publish nothing when an index's check found an error.
    pub fail_on_check: bool,
}

pub fn run_site(request: &SiteRequest) -> Output {
    use crate::report::page::{ReleasePage, landing_html};
    let members = match index::site::members(&request.sites, &request.output) {
        Ok(m) => m,
        Err(e) if e.is_usage() => return Output::usage(e),
        Err(e) => return Output::failure(e),
    };
    if request.fail_on_check {
        let mut failing = Vec::new();
        for m in &members {
            let check =
                serde_json::from_slice::<ReleaseCheckOnly>(&m.release_json).map(|p| p.check.errors).unwrap_or(0);
            if check > 0 {
                failing.push(format!("{} ({})", m.name, crate::log::plural(check, "error")));
            }
        }
        if !failing.is_empty() {
            return Output::failure(format!(
                "--fail-on-check: the check of {} found errors (run `wheelfix check` on them); nothing was published",
                failing.join(", ")
            ));
        }
    }
    let base = site_url(request.site_url.as_deref(), &request.output);
    let mut pages = Vec::new();
    let mut sites = Vec::new();
    for m in &members {
        let mut page: ReleasePage = match serde_json::from_slice(&m.release_json) {
            Ok(p) => p,
            Err(e) => return Output::failure(format!("{}/release.json: {e}", m.dir.display())),
        };
        if let Some(bad) = page.files.iter().find(|f| !index::safe_href(&f.href)) {
            return Output::failure(format!(
                "{}/release.json: the link {:?} of {} is neither an http(s) URL nor a plain relative path; the page is not published",
                m.dir.display(),
                bad.href,
                bad.file_name
            ));
        }
        page.site_url = format!("{base}{}/", index::url_quote(&m.name));
        let dir = PathBuf::from(&m.name);
        pages.push((dir.join("release.html"), page.to_html(Some("../index.html")).into_bytes()));
        pages.push((dir.join("release.json"), page.to_json().into_bytes()));
        sites.push((m.name.clone(), page));
    }
    let title = request.title.clone().unwrap_or_else(|| "ROCm release".into());
    pages.push((PathBuf::from("index.html"), landing_html(&title, &sites).into_bytes()));
    match index::site::build(&members, &request.output, &pages) {
        Ok(built) => {
            let stdout = if request.json {
                crate::report::release::SiteSummary {
                    version: crate::report::json::JSON_VERSION,
                    output: request.output.display().to_string(),
                    indexes: sites
                        .iter()
                        .map(|(name, page)| crate::report::release::SiteIndex {
                            name,
                            url: &page.site_url,
                            files: page.files.len(),
                            errors: page.check.errors,
                            warnings: page.check.warnings,
                        })
                        .collect(),
                    left_out: &built.left_out,
                }
                .to_json()
            } else {
                let indexes = if sites.len() == 1 { "1 index".to_string() } else { format!("{} indexes", sites.len()) };
                let mut text = format!("wrote {} with {indexes}:\n", request.output.display());
                for (name, page) in &sites {
                    text.push_str(&format!(
                        "  {name}/: {}, check {}, {}, {}\n",
                        crate::log::plural(page.files.len(), "file"),
                        crate::log::plural(page.check.errors, "error"),
                        crate::log::plural(page.check.warnings, "warning"),
                        page.site_url
                    ));
                }
                text
            };
            let mut stderr: Vec<String> =
                built.left_out.iter().map(|l| format!("wheelfix: note: not published: {l}")).collect();
            for (name, page) in sites.iter().filter(|(_, p)| p.check.errors > 0) {
                stderr.push(check_warning(&format!("the {name} index"), page.check.errors, page.check.warnings));
            }
            Output { stdout, stderr, code: 0 }
        }
        Err(e) if e.is_usage() => Output::usage(e),
        Err(e) => Output::failure(e),
    }
}

/// What `index` and `site` say when the page they wrote shows errors: published all the same
/// (only `--fail-on-check` refuses), but not in silence.
fn check_warning(what: &str, errors: usize, warnings: usize) -> String {
    format!(
        "wheelfix: warning: check found {} and {} in {what}; the page shows them (`wheelfix check` lists them, `--fail-on-check` publishes nothing while there are errors)",
        crate::log::plural(errors, "error"),
        crate::log::plural(warnings, "warning")
    )
}

/// The check summary of a `release.json`, read before anything else of it.
#[derive(serde::Deserialize)]
struct ReleaseCheckOnly {
    check: crate::report::page::PageCheck,
}

/// `check`'s request.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub dirs: Vec<PathBuf>,
    pub common: Common,
    /// Fail on warnings too.
    pub strict: bool,
    /// List errors only (warnings are still counted).
    pub errors_only: bool,
    /// `--upstream`: indexes to compare the set with.
    pub upstream: check::UpstreamOptions,
    /// `--resolve`: a resolution to hold against the set's index.
    pub resolve: Option<ResolveArgs>,
}

/// `check --resolve`'s arguments.
#[derive(Debug, Clone)]
pub struct ResolveArgs {
    pub requirements: Vec<String>,
    /// The set's index (required with `--resolve`).
    pub index_url: Option<String>,
    /// `--extra-index-url`: where the rest comes from; when none is given, the `--upstream`
    /// indexes, else PyPI (see [`ResolveArgs::extra_indexes`]).
    pub extra_index_urls: Vec<String>,
    pub python: Option<String>,
    pub platforms: Vec<String>,
    pub forbid: Vec<String>,
    pub resolver: upstream::resolve::Resolver,
    pub site_first: bool,
}

impl ResolveArgs {
    /// The indexes besides the set's: those given, else the upstreams compared with, else PyPI
    /// (where a user's `pip install` takes the rest from).
    fn extra_indexes(&self, upstream: &check::UpstreamOptions) -> Vec<String> {
        if !self.extra_index_urls.is_empty() {
            self.extra_index_urls.clone()
        } else if !upstream.urls.is_empty() {
            upstream.urls.clone()
        } else {
            vec![crate::report::page::PYPI.to_string()]
        }
    }
}

pub fn run_check(request: &CheckRequest) -> Output {
    if let Some(missing) = crate::files::missing(&request.dirs).first() {
        return Output::usage(format!("no such file or directory: {}", missing.display()));
    }
    if request.resolve.as_ref().is_some_and(|r| r.index_url.is_none()) {
        return Output::usage(
            "--resolve needs --index-url, the set's index (Ex: --index-url https://rocm.example/gfx950/)",
        );
    }
    let settings = match request.common.settings() {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    let mut findings = if request.dirs.is_empty() {
        Vec::new()
    } else {
        // `--with-wheels`: the wheels installed beside the set, as `show` reads them.
        let site = crate::cmd::pipeline::batch_site(&[], &settings);
        // A set is judged as it is: `--plat` (or $AUDITWHEEL_PLAT) names what `repair` should
        // aim for, which says nothing about the files published.
        let options = crate::examine::ExamineOptions { plat: None, ..settings.examine_options() };
        check::survey(&request.dirs, &options, &site, &request.upstream).findings
    };
    let mut resolution = None;
    if let Some(args) = &request.resolve {
        match resolve(args, &request.upstream) {
            Ok((r, mut found)) => {
                findings.append(&mut found);
                resolution = Some(r);
            }
            Err(e) => return Output::failure(e),
        }
    }
    findings.sort();
    let report = CheckReport::new(&findings, request.errors_only).with_resolution(resolution.as_ref());
    let stdout = if request.common.json { report.to_json() } else { report.to_text() };
    let failing = if request.strict { report.errors + report.warnings } else { report.errors };
    Output { stdout, stderr: Vec::new(), code: u8::from(failing > 0) }
}

/// Why `check --resolve` could not resolve or judge.
#[derive(Debug, thiserror::Error)]
enum ResolveRunError {
    #[error("cannot make a scratch directory: {0}")]
    Scratch(std::io::Error),
    #[error(transparent)]
    Resolve(#[from] upstream::resolve::ResolveError),
    #[error(transparent)]
    Judge(#[from] check::ResolutionError),
}

/// Resolve as `args` asks, in a scratch directory of this run, and judge the outcome.
fn resolve(
    args: &ResolveArgs,
    upstream: &check::UpstreamOptions,
) -> Result<(upstream::resolve::Resolution, Vec<check::Finding>), ResolveRunError> {
    let timeout = upstream.timeout;
    let index_url = args.index_url.clone().unwrap_or_default();
    let request = upstream::resolve::ResolveRequest {
        requirements: args.requirements.clone(),
        index_url: index_url.clone(),
        extra_index_urls: args.extra_indexes(upstream),
        python: args.python.clone(),
        platforms: args.platforms.clone(),
        resolver: args.resolver,
        site_first: args.site_first,
        timeout,
    };
    let scratch = tempfile::tempdir().map_err(ResolveRunError::Scratch)?;
    let resolution = upstream::resolve::resolve(&request, scratch.path())?;
    let site = upstream::Upstream::new(&index_url, timeout);
    let findings = check::resolution_findings(&resolution, &site, &args.forbid)?;
    Ok((resolution, findings))
}

/// Build a metapackage pinning every wheel in `paths` (see [`release::metapackage`]): each
/// wheel's name, version, platform tags and GPU targets, from its metadata and device code.
pub fn metapackage(
    paths: &[PathBuf],
    settings: &Settings,
    options: &metapackage::MetapackageOptions,
    progress: &dyn Progress,
) -> Result<metapackage::Metapackage, Error> {
    let scanned = parallel::map(paths, |path| -> Result<metapackage::Pinned, Error> {
        let wheel = Wheel::open(path)?;
        if !wheel.installer_problems.is_empty() {
            return Err(Error::Uninstallable { problems: wheel.installer_problems.clone() });
        }
        let analysis = analysis::scan(&wheel, &settings.analyze, progress)?;
        Ok(metapackage::Pinned {
            name: wheel.metadata.name.clone(),
            version: wheel.metadata.version.text.clone(),
            wheel: wheel.filename.to_string(),
            platform_tags: wheel.filename.platform_tags.clone(),
            gpu_targets: analysis.gpu_targets(),
            uncovered: {
                let requested: Vec<_> =
                    options.gpu_targets.iter().filter_map(|t| crate::gpu::TargetId::parse(t).ok()).collect();
                crate::gpu::targets::uncovered(&analysis.gpu, &requested)
            },
            extras: wheel.metadata.provides_extra.clone(),
            brings: wheel
                .metadata
                .requires_dist
                .iter()
                .filter(|r| r.extra.as_deref().and_then(crate::extra::DeviceExtra::parse).is_some())
                .map(|r| r.package.to_string())
                .collect(),
        })
    });
    // The first failure in argument order is the one reported.
    let scanned: Vec<metapackage::Pinned> = scanned.into_iter().collect::<Result<_, _>>()?;
    let options = metapackage::MetapackageOptions { source_date_epoch: settings.source_date_epoch, ..options.clone() };
    metapackage::build(&scanned, &options).map_err(|e| Error::Metapackage(Box::new(e)))
}
