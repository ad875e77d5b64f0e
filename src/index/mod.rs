//! `wheelfix index`: a static pip index (PEP 503 HTML and PEP 691 JSON) with `#sha256=` on every
//! link, `data-requires-python` from each wheel's METADATA, and PEP 658/714 metadata sidecars, so
//! installers resolve without downloading multi-GB wheels.
//!
//! Layout of the output directory: `index.html` and `index.json` (the project list), and per
//! normalised project `<project>/index.html`, `<project>/index.json` and
//! `<project>/<wheel>.metadata`. Without `--base-url` the wheels are linked (or copied) beside
//! their page and the links are relative, so `pip install --index-url file:///…/site/` works;
//! with it, links are `<base-url>/<file name>` (the base URL is a directory, whether or not it
//! ends in `/`), and installers fetch `<link>.metadata` beside each wheel: `--upload-dir` collects
//! every file to upload there (the wheels and their sidecars), and `--no-core-metadata` writes an
//! index without PEP 658 for hosts that cannot serve sidecars.
//!
//! The JSON follows PEP 691 with PEP 700 (api-version 1.1): every file has `size`, every project
//! page `versions`; optional keys (`requires-python`) are left out rather than `null`.
//!
//! Why one file: the index is one pass that
//! reads every file, refuses unsafe places, then writes pages, sidecars, variants files and uploads
//! that must agree with each other; each step is its own function.

pub mod site;
pub mod upload;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::wheel::WheelFilename;
use crate::wheel::variant::{self, VariantMetadata};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{path}: {message}")]
    Wheel { path: String, message: String },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    #[error(transparent)]
    Upload(#[from] upload::UploadError),
    #[error("a part of a variant set, which the index does not publish (write the release's variants again into an empty directory): {}", .0.join("; "))]
    PartialVariantSet(Vec<String>),
    #[error("no wheels found in the inputs")]
    Empty,
    #[error("no such file or directory: {0}")]
    Missing(String),
    #[error(
        "{name} is given {} times with different bytes ({}): one index can serve only one file of a name; nothing was written",
        files.len(), files.join(", ")
    )]
    SameNameDifferentBytes { name: String, files: Vec<String> },
    #[error(
        "the output directory {output} {relation} the input {input}: index never moves, replaces or deletes its inputs, so the site must be written elsewhere (Ex: -o site/)"
    )]
    Overlap { output: String, input: String, relation: &'static str },
    #[error("--upload-dir {0} is the site's own directory (-o) or lies in it; choose a directory of its own")]
    UploadInSite(String),
}

impl IndexError {
    /// A usage error (exit 2) rather than a failure of the run.
    pub fn is_usage(&self) -> bool {
        matches!(self, IndexError::Overlap { .. } | IndexError::UploadInSite(_) | IndexError::Missing(_))
    }
}

/// An absolute, symlink-free form of a path that may not exist yet.
pub(super) fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match path.file_name() {
        Some(name) => resolved(crate::output::parent_dir(path)).join(name),
        None => path.to_path_buf(),
    }
}

/// The last name of a path, resolved. Ex) `site/gfx950/` → `gfx950`
pub fn resolved_name(path: &Path) -> String {
    resolved(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Refuse an output directory that is, contains, or lies inside an input directory (or holds an
/// input file): writing the site must never touch a wheel it indexes.
pub(super) fn refuse_overlap(inputs: &[PathBuf], output: &Path) -> Result<(), IndexError> {
    let out = resolved(output);
    for input in inputs {
        let inp = resolved(input);
        let relation = if out == inp {
            Some("is")
        } else if inp.starts_with(&out) {
            Some("contains")
        } else if input.is_dir() && out.starts_with(&inp) {
            Some("lies inside")
        } else {
            None
        };
        if let Some(relation) = relation {
            return Err(IndexError::Overlap {
                output: output.display().to_string(),
                input: input.display().to_string(),
                relation,
            });
        }
    }
    Ok(())
}

/// Settings of an index build.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub output: PathBuf,
    pub base_url: Option<String>,
    /// `--python 3.14`: name every wheel that excludes this interpreter.
    pub python: Option<String>,
    /// `--upload-dir`: every file to upload beside the wheels at `base_url` (the wheels, linked,
    /// and their `.metadata` sidecars).
    pub upload_dir: Option<PathBuf>,
    /// PEP 658/714 metadata (`data-core-metadata`, sidecars); off with `--no-core-metadata`.
    pub core_metadata: bool,
    /// Files for people written at the site's root beside the PEP 503 pages (the release page
    /// `release.html` and its data `release.json`): (name, bytes).
    pub pages: Vec<(String, Vec<u8>)>,
}

impl IndexOptions {
    pub fn new(output: PathBuf) -> IndexOptions {
        IndexOptions { output, base_url: None, python: None, upload_dir: None, core_metadata: true, pages: Vec::new() }
    }
}

/// One file of the index.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IndexedFile {
    pub project: String,
    pub filename: String,
    pub version: String,
    pub sha256: String,
    /// Bytes (PEP 700).
    pub size: u64,
    pub requires_python: Option<String>,
    /// sha256 of the `.metadata` sidecar (wheels only).
    pub metadata_sha256: Option<String>,
    #[serde(skip)]
    path: PathBuf,
    #[serde(skip)]
    metadata: Vec<u8>,
    /// A variant wheel's `variant.json`, read (PEP 825).
    #[serde(skip)]
    variant: Option<VariantMetadata>,
    /// The bytes of a file the index makes itself (`{name}-{version}-variants.json`): written
    /// into the site and linked from it, never uploaded beside the wheels.
    #[serde(skip)]
    generated: Option<Vec<u8>>,
}

/// A file of the inputs that is not in the index, and why.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
}

/// What an index build did (`index --json`, read back by [`serde::Deserialize`] as well).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IndexSummary {
    pub output: String,
    pub projects: usize,
    pub files: Vec<IndexedFile>,
    /// Where the files to upload beside the wheels were collected (`--upload-dir`).
    pub upload_dir: Option<String>,
    /// Files of the inputs left out: unreadable, or wheels pip refuses to install. The rest of
    /// the site is written; the run fails (exit 1).
    pub skipped: Vec<Skipped>,
    /// Wheels that exclude the `--python` interpreter, files given twice with the same bytes,
    /// what changed in the upload directory.
    pub notes: Vec<String>,
}

/// The inputs exist; the site and the upload directory lie outside them and apart.
fn refuse_places(inputs: &[PathBuf], options: &IndexOptions) -> Result<(), IndexError> {
    if let Some(missing) = crate::files::missing(inputs).first() {
        return Err(IndexError::Missing(missing.display().to_string()));
    }
    refuse_overlap(inputs, &options.output)?;
    if let Some(upload) = &options.upload_dir {
        refuse_overlap(inputs, upload)?;
        let (site, up) = (resolved(&options.output), resolved(upload));
        if up.starts_with(&site) || site.starts_with(&up) {
            return Err(IndexError::UploadInSite(upload.display().to_string()));
        }
    }
    Ok(())
}

/// Write the site's pages into `dir`: a page (HTML and JSON) per project and the root's; each
/// wheel and sidecar beside its page when the links are relative, or the sidecars alone when
/// they must be uploaded by hand (no `uploading` directory). Returns how many projects it has.
fn write_site(
    dir: &Path,
    files: &[IndexedFile],
    base_url: Option<&str>,
    uploading: bool,
    pages: &[(String, Vec<u8>)],
) -> Result<usize, IndexError> {
    let mut projects: BTreeMap<&str, Vec<&IndexedFile>> = BTreeMap::new();
    for f in files {
        projects.entry(f.project.as_str()).or_default().push(f);
    }
    for (project, list) in &projects {
        let project_dir = dir.join(project);
        create_dir(&project_dir)?;
        for f in list {
            if base_url.is_none() || f.generated.is_some() {
                write_beside(&project_dir, f)?;
            } else if !uploading && f.metadata_sha256.is_some() {
                // No upload directory: the sidecar waits in the site for the user to upload.
                write(&project_dir.join(format!("{}.metadata", f.filename)), &f.metadata)?;
            }
        }
        write(&project_dir.join("index.html"), project_html(project, list, base_url).as_bytes())?;
        write(&project_dir.join("index.json"), project_json(project, list, base_url).as_bytes())?;
    }
    write(&dir.join("index.html"), root_html(projects.keys().copied()).as_bytes())?;
    let listing = pep691::ProjectList {
        meta: pep691::Meta::CURRENT,
        projects: projects.keys().map(|&name| pep691::Name { name }).collect(),
    };
    write(&dir.join("index.json"), (serde_json::to_string_pretty(&listing).expect("serialises") + "\n").as_bytes())?;
    for (name, bytes) in pages {
        write(&dir.join(name), bytes)?;
    }
    Ok(projects.len())
}

pub fn build(inputs: &[PathBuf], options: &IndexOptions) -> Result<IndexSummary, IndexError> {
    refuse_places(inputs, options)?;
    let wheels = crate::files::collect_files(inputs, &[".whl", ".tar.gz"]);
    if wheels.is_empty() {
        return Err(IndexError::Empty);
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for (path, read) in wheels.iter().zip(crate::parallel::map(&wheels, |p| read_file(p))) {
        match read {
            Ok(f) => files.push(f),
            Err(reason) => skipped.push(Skipped { file: path.display().to_string(), reason: reason.to_string() }),
        }
    }
    let mut notes = Vec::new();
    let mut files = one_per_name(files, &mut notes)?;
    refuse_partial_variant_sets(inputs, &files)?;
    variants_files(&mut files, &mut skipped);
    if files.is_empty() && !skipped.is_empty() {
        // Nothing could be read: no site to write.
        return Ok(IndexSummary {
            output: options.output.display().to_string(),
            projects: 0,
            files,
            upload_dir: options.upload_dir.as_ref().map(|p| p.display().to_string()),
            skipped,
            notes,
        });
    }
    files.sort_by(|a, b| (&a.project, &a.filename).cmp(&(&b.project, &b.filename)));
    if !options.core_metadata {
        for f in &mut files {
            f.metadata_sha256 = None;
        }
    }
    notes.extend(options.python.as_deref().map(|py| python_notes(&files, py)).unwrap_or_default());
    let base_url = options.base_url.as_deref().map(directory_url);
    if base_url.is_some() && options.upload_dir.is_none() && files.iter().any(|f| f.metadata_sha256.is_some()) {
        notes.push(format!(
            "the pages link to {} and announce PEP 658 metadata: upload each wheel's .metadata file (in the site's project folders) beside it, or installers fail on a 404; --upload-dir DIR collects every file to upload, --no-core-metadata leaves PEP 658 out",
            base_url.as_deref().unwrap_or_default()
        ));
    }

    // Every conflict in the upload directory is found before anything is written.
    let mut upload = match &options.upload_dir {
        Some(dir) => Some(upload::UploadDir::plan(dir, &resolved(&options.output), uploads(&files))?),
        None => None,
    };

    let output = &options.output;
    // The site is built beside its destination and swapped in whole; nothing of the inputs
    // moves, and every file of the site is new (the wheels are new names of the inputs).
    let temp = crate::output::TempDir::create(output)?;
    let projects = write_site(temp.path(), &files, base_url.as_deref(), upload.is_some(), &options.pages)?;
    // The files the new site links are in place before it is.
    if let Some(upload) = &mut upload {
        upload.apply()?;
        notes.append(&mut upload.notes);
    }
    temp.commit()?;
    if let Some(upload) = upload {
        upload.finish();
    }
    Ok(IndexSummary {
        output: output.display().to_string(),
        projects,
        files,
        upload_dir: options.upload_dir.as_ref().map(|p| p.display().to_string()),
        skipped,
        notes,
    })
}

/// One file per file name: files given more than once with the same bytes (a directory given
/// twice, a hard link) are listed once; different bytes under one name are an error naming
/// every copy, since an index, and the upload beside it, can only hold one.
fn one_per_name(files: Vec<IndexedFile>, notes: &mut Vec<String>) -> Result<Vec<IndexedFile>, IndexError> {
    let mut by_name: BTreeMap<String, Vec<IndexedFile>> = BTreeMap::new();
    for f in files {
        by_name.entry(f.filename.clone()).or_default().push(f);
    }
    let mut out = Vec::new();
    for (name, mut copies) in by_name {
        copies.sort_by(|a, b| a.path.cmp(&b.path));
        let first = copies[0].sha256.clone();
        if copies.iter().any(|c| c.sha256 != first) {
            return Err(IndexError::SameNameDifferentBytes {
                name,
                files: copies.iter().map(|c| c.path.display().to_string()).collect(),
            });
        }
        if copies.len() > 1 {
            notes.push(format!("{name} is given {} times with the same bytes: listed once", copies.len()));
        }
        out.push(copies.swap_remove(0));
    }
    Ok(out)
}

/// What the upload directory gets for these files: each wheel and its sidecar.
fn uploads(files: &[IndexedFile]) -> Vec<upload::Upload> {
    use upload::{Source, Upload};
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.generated.is_none()) {
        out.push(Upload { name: f.filename.clone(), sha256: f.sha256.clone(), source: Source::File(f.path.clone()) });
        if let Some(sha256) = &f.metadata_sha256 {
            out.push(Upload {
                name: format!("{}.metadata", f.filename),
                sha256: sha256.clone(),
                source: Source::Bytes(f.metadata.clone()),
            });
        }
    }
    out
}

/// The API version the JSON pages declare (PEP 700).
const API_VERSION: &str = "1.1";

fn write(path: &Path, data: &[u8]) -> Result<(), IndexError> {
    wheelfix_base::files::write_new_file(path, data)
        .map_err(|source| IndexError::Write { path: path.display().to_string(), source })
}

fn create_dir(path: &Path) -> Result<(), IndexError> {
    std::fs::create_dir_all(path).map_err(|source| IndexError::Write { path: path.display().to_string(), source })
}

/// A file and its `.metadata` sidecar, in `dir` (new names, never a file that exists).
fn write_beside(dir: &Path, f: &IndexedFile) -> Result<(), IndexError> {
    let target = dir.join(&f.filename);
    if let Some(bytes) = &f.generated {
        return write(&target, bytes);
    }
    wheelfix_base::files::link_or_copy(&f.path, &target)
        .map_err(|source| IndexError::Write { path: target.display().to_string(), source })?;
    if f.metadata_sha256.is_some() {
        write(&dir.join(format!("{}.metadata", f.filename)), &f.metadata)?;
    }
    Ok(())
}

/// A base URL as a directory: `https://h/dl` and `https://h/dl/` both give `https://h/dl/`.
pub fn directory_url(base: &str) -> String {
    if base.ends_with('/') { base.to_string() } else { format!("{base}/") }
}

/// Why a file is left out of the index.
#[derive(Debug, thiserror::Error)]
enum LeftOut {
    #[error(transparent)]
    Unreadable(#[from] crate::distribution::DistributionError),
    #[error("pip refuses to install it: {first}{}", if *more > 0 { format!(" (and {more} more)") } else { String::new() })]
    Uninstallable { first: String, more: usize },
    #[error("its project name is {len} bytes: the index's folder for it cannot be written (a file name has at most {max} bytes)", max = crate::output::NAME_MAX)]
    NameTooLong { len: usize },
    #[error(transparent)]
    Archive(#[from] crate::wheel::ArchiveError),
    /// A variant wheel without a readable `variant.json`: an installer cannot choose it.
    #[error(transparent)]
    Variant(#[from] variant::VariantReadError),
}

/// One file of the index, or why it is left out: unreadable, or a wheel pip refuses.
fn read_file(path: &Path) -> Result<IndexedFile, LeftOut> {
    let dist = crate::distribution::Distribution::read(path)?;
    if let Some(first) = dist.installer_problems.first() {
        return Err(LeftOut::Uninstallable { first: first.clone(), more: dist.installer_problems.len() - 1 });
    }
    let project = dist.metadata.package.to_string();
    if project.len() > crate::output::NAME_MAX {
        return Err(LeftOut::NameTooLong { len: project.len() });
    }
    let is_wheel = dist.wheel.is_some();
    let variant = match dist.wheel.as_ref().and_then(|w| w.variant.as_deref()) {
        Some(label) => Some(read_variant(path, label)?),
        None => None,
    };
    Ok(IndexedFile {
        project,
        filename: dist.file_name,
        version: dist.metadata.version.text.clone(),
        sha256: dist.sha256,
        size: dist.size,
        requires_python: dist.metadata.requires_python,
        // PEP 658 metadata is served for wheels; an sdist's PKG-INFO may be dynamic.
        metadata_sha256: is_wheel.then(|| crate::wheel::digest::hex(&Sha256::digest(&dist.metadata_bytes))),
        path: path.to_path_buf(),
        metadata: dist.metadata_bytes,
        variant,
        generated: None,
    })
}

/// A variant wheel's `variant.json`. Without it an installer cannot choose the wheel: it is
/// left out of the index, with the reason.
fn read_variant(path: &Path, label: &str) -> Result<VariantMetadata, LeftOut> {
    let archive = crate::wheel::Archive::open(path)?;
    Ok(variant::read(&archive, label)?)
}

/// A release's variant set is published whole or not at all: every build has a wheel of each
/// label its `{name}-{version}-variants.json` names (where the inputs hold the one `variants`
/// published with the set), else of each label another build has; a set file needs its wheels.
fn refuse_partial_variant_sets(inputs: &[PathBuf], files: &[IndexedFile]) -> Result<(), IndexError> {
    let mut releases: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for f in files {
        let Ok(name) = crate::wheel::WheelFilename::parse(&f.filename) else { continue };
        let Some(label) = name.variant.clone() else { continue };
        let set_name = crate::wheel::filename::variants_file_name(name.name.as_str(), &name.version.parsed.to_string());
        let build = crate::wheel::WheelFilename { variant: None, ..name.clone() }.to_string();
        releases.entry(set_name).or_default().push((label, build));
    }
    let mut problems = Vec::new();
    let mut set_files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in crate::files::collect_files(inputs, &["-variants.json"]) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !releases.contains_key(&name) {
            problems.push(format!("{}: none of the variant wheels it names is here", path.display()));
        }
        set_files.insert(name, path);
    }
    for (set_name, present) in releases {
        let set = match set_files.get(&set_name).map(|p| (p, variant::read_set_file(p))) {
            Some((path, Err(e))) => {
                problems.push(format!("{}: {e}", path.display()));
                continue;
            }
            Some((_, Ok(set))) => Some(set),
            None => None,
        };
        for (build, missing) in
            variant::missing_variants(present.iter().map(|(l, b)| (l.as_str(), b.clone())), set.as_ref())
        {
            problems.push(format!("{build}: no wheel of the variants {}", missing.join(", ")));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(IndexError::PartialVariantSet(problems)) }
}

/// Each version's `{name}-{version}-variants.json`: every variant wheel's variant.json merged.
/// A wheel whose variant.json contradicts the others' is left out, with the reason.
fn variants_files(files: &mut Vec<IndexedFile>, skipped: &mut Vec<Skipped>) {
    let mut merged: BTreeMap<(String, String), (VariantMetadata, String)> = BTreeMap::new();
    let mut conflicting = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let Some(metadata) = &f.variant else { continue };
        let version = crate::wheel::WheelFilename::parse(&f.filename)
            .map(|w| w.version.parsed.to_string())
            .unwrap_or_else(|_| f.version.clone());
        let key = (f.project.clone(), version);
        match merged.get_mut(&key) {
            None => {
                merged.insert(key, (metadata.clone(), f.requires_python.clone().unwrap_or_default()));
            }
            Some((all, _)) => {
                if let Err(e) = all.merge(metadata) {
                    conflicting.push((i, e.to_string()));
                }
            }
        }
    }
    for (i, reason) in conflicting.into_iter().rev() {
        let f = files.remove(i);
        skipped.push(Skipped {
            file: f.path.display().to_string(),
            reason: format!("its variant.json conflicts with the version's other variant wheels: {reason}"),
        });
    }
    for ((project, version), (metadata, _)) in merged {
        let bytes = metadata.to_bytes();
        files.push(IndexedFile {
            filename: crate::wheel::filename::variants_file_name(&project, &version),
            project,
            version,
            sha256: crate::wheel::digest::hex(&Sha256::digest(&bytes)),
            size: bytes.len() as u64,
            requires_python: None,
            metadata_sha256: None,
            path: PathBuf::new(),
            metadata: Vec::new(),
            variant: None,
            generated: Some(bytes),
        });
    }
}

/// A URL to link or print: `http://` or `https://` (and `file://` where `allow_file`: a local
/// index), with a host, and no whitespace, control character, quote or angle bracket anywhere.
/// Ex) `https://rocm.example/gfx950/`; not `javascript:alert(1)`, `https://h/\nrm -rf`
pub fn web_url(text: &str, allow_file: bool) -> Result<&str, UrlError> {
    let schemes: &'static [&'static str] =
        if allow_file { &["https://", "http://", "file://"] } else { &["https://", "http://"] };
    let refused = |problem| UrlError { url: text.to_string(), problem };
    let lower = text.to_ascii_lowercase();
    let Some(scheme) = schemes.iter().find(|s| lower.starts_with(**s)) else {
        return Err(refused(UrlProblem::Scheme(schemes)));
    };
    if let Some(bad) =
        text.chars().find(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\'))
    {
        return Err(refused(UrlProblem::Character(bad)));
    }
    let rest = &text[scheme.len()..];
    if *scheme != "file://" && (rest.is_empty() || rest.starts_with('/')) {
        return Err(refused(UrlProblem::NoHost));
    }
    Ok(text)
}

/// A URL [`web_url`] refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url:?} is not a URL this takes: {problem}")]
pub struct UrlError {
    pub url: String,
    pub problem: UrlProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlProblem {
    #[error("it must start with {}", .0.join(" or "))]
    Scheme(&'static [&'static str]),
    #[error("it holds {0:?}")]
    Character(char),
    #[error("it names no host")]
    NoHost,
}

/// A link read back from a page's data: a `http(s)` URL, or a path relative to the page made
/// of URL-safe characters. Ex) `rocm-demo/rocm_demo-1.0.0-….whl`; not `javascript:…`
pub fn safe_href(text: &str) -> bool {
    let relative = !text.is_empty()
        && !text.starts_with('/')
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~/%".contains(&b));
    relative || web_url(text, false).is_ok()
}

/// Percent-encode a file name for a URL path (`+` → `%2B`).
pub fn url_quote(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn link(f: &IndexedFile, base_url: Option<&str>) -> String {
    // A file the index makes lives in the site itself, whatever hosts the wheels.
    let base = if f.generated.is_some() { None } else { base_url };
    format!("{}{}", base.unwrap_or(""), url_quote(&f.filename))
}

fn project_html(project: &str, files: &[&IndexedFile], base_url: Option<&str>) -> String {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            serde_json::json!({
                "href": link(f, base_url),
                "sha256": f.sha256,
                "requires_python": f.requires_python,
                "metadata_sha256": f.metadata_sha256,
                "filename": f.filename,
            })
        })
        .collect();
    crate::html::render("simple_project.html", serde_json::json!({"project": project, "files": files}))
}

fn project_json(project: &str, files: &[&IndexedFile], base_url: Option<&str>) -> String {
    let page = pep691::ProjectPage {
        files: files
            .iter()
            .map(|f| {
                let metadata = f.metadata_sha256.as_deref().map(|sha256| pep691::Sha256 { sha256 });
                pep691::File {
                    core_metadata: metadata.clone(),
                    dist_info_metadata: metadata,
                    filename: &f.filename,
                    hashes: pep691::Sha256 { sha256: &f.sha256 },
                    requires_python: f.requires_python.as_deref(),
                    size: f.size,
                    url: link(f, base_url),
                }
            })
            .collect(),
        meta: pep691::Meta::CURRENT,
        name: project,
        versions: files.iter().map(|f| f.version.as_str()).collect(),
    };
    serde_json::to_string_pretty(&page).expect("serialises") + "\n"
}

/// The PEP 691 JSON documents (`application/vnd.pypi.simple.v1+json`). Fields are declared in
/// the order of their keys, the order they are printed in.
mod pep691 {
    use serde::Serialize;

    #[derive(Serialize)]
    pub struct Meta {
        #[serde(rename = "api-version")]
        pub api_version: &'static str,
    }

    impl Meta {
        pub const CURRENT: Meta = Meta { api_version: crate::index::API_VERSION };
    }

    /// `/simple/`: every project.
    #[derive(Serialize)]
    pub struct ProjectList<'a> {
        pub meta: Meta,
        pub projects: Vec<Name<'a>>,
    }

    #[derive(Serialize)]
    pub struct Name<'a> {
        pub name: &'a str,
    }

    /// `/simple/<project>/`: its files.
    #[derive(Serialize)]
    pub struct ProjectPage<'a> {
        pub files: Vec<File<'a>>,
        pub meta: Meta,
        pub name: &'a str,
        pub versions: std::collections::BTreeSet<&'a str>,
    }

    #[derive(Serialize)]
    pub struct File<'a> {
        #[serde(rename = "core-metadata", skip_serializing_if = "Option::is_none")]
        pub core_metadata: Option<Sha256<'a>>,
        /// PEP 658's name for `core-metadata`, for installers that predate PEP 714.
        #[serde(rename = "dist-info-metadata", skip_serializing_if = "Option::is_none")]
        pub dist_info_metadata: Option<Sha256<'a>>,
        pub filename: &'a str,
        pub hashes: Sha256<'a>,
        #[serde(rename = "requires-python", skip_serializing_if = "Option::is_none")]
        pub requires_python: Option<&'a str>,
        pub size: u64,
        pub url: String,
    }

    #[derive(Serialize, Clone)]
    pub struct Sha256<'a> {
        pub sha256: &'a str,
    }
}

fn root_html<'a>(projects: impl Iterator<Item = &'a str>) -> String {
    let projects: Vec<&str> = projects.collect();
    crate::html::render("simple_root.html", serde_json::json!({"projects": projects}))
}

/// Wheels whose Requires-Python or Python tags exclude interpreter `python` (`3.14`).
fn python_notes(files: &[IndexedFile], python: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let Ok(version) = pep440_rs::Version::from_str(python) else {
        return vec![format!("--python {python} is not a version")];
    };
    let (major, minor) = {
        let r = version.release();
        (r.first().copied().unwrap_or(3), r.get(1).copied().unwrap_or(0))
    };
    for f in files {
        if let Some(rp) = &f.requires_python
            && let Ok(spec) = pep440_rs::VersionSpecifiers::from_str(rp)
            && !spec.contains(&version)
        {
            notes.push(format!("{}: Requires-Python `{rp}` excludes Python {python}", f.filename));
            continue;
        }
        let Ok(name) = WheelFilename::parse(&f.filename) else { continue }; // sdists have no tags
        let fits =
            name.python_tags.iter().any(|t| crate::distribution::python_tag_fits(t, &name.abi_tags, major, minor));
        if !fits {
            notes.push(format!("{}: its tags ({}) exclude Python {python}", f.filename, name.python_tags.join(".")));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::pep691::{Meta, Name, ProjectList};
    use super::*;

    /// PEP 691 pages print their keys sorted, as they always did: the types declare their
    /// fields in that order.
    #[test]
    fn pep691_pages_print_their_keys_sorted() {
        let file = |metadata: Option<&str>, python: Option<&str>| IndexedFile {
            filename: "demo-1.0-py3-none-any.whl".into(),
            version: "1.0".into(),
            sha256: "ab".repeat(32),
            size: 12,
            requires_python: python.map(str::to_string),
            metadata_sha256: metadata.map(str::to_string),
            project: "demo".into(),
            path: PathBuf::new(),
            metadata: Vec::new(),
            variant: None,
            generated: None,
        };
        let (a, b) = (file(Some("cd"), Some(">=3.10")), file(None, None));
        let text = project_json("demo", &[&a, &b], Some("https://example.org/"));
        let sorted: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&sorted).unwrap() + "\n");
        assert_eq!(sorted["files"][0]["core-metadata"]["sha256"], "cd");
        assert_eq!(sorted["files"][0]["requires-python"], ">=3.10");
        assert!(sorted["files"][1].get("dist-info-metadata").is_none());
        let list = ProjectList { meta: Meta::CURRENT, projects: vec![Name { name: "demo" }] };
        let text = serde_json::to_string_pretty(&list).unwrap();
        let sorted: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&sorted).unwrap());
    }

    #[test]
    fn quoting_and_escaping() {
        assert_eq!(
            url_quote("torch-2.15.0a0+git31a77fc.rocm10.1.0-cp314-cp314-linux_x86_64.whl"),
            "torch-2.15.0a0%2Bgit31a77fc.rocm10.1.0-cp314-cp314-linux_x86_64.whl"
        );
        assert_eq!(crate::html::escape(">=3.10,<3.14"), "&gt;=3.10,&lt;3.14");
    }

    #[test]
    fn python_tags_against_an_interpreter() {
        assert!(crate::distribution::python_tag_fits("cp314", &["cp314".into()], 3, 14));
        assert!(!crate::distribution::python_tag_fits("cp312", &["cp312".into()], 3, 14));
        assert!(crate::distribution::python_tag_fits("cp311", &["abi3".into()], 3, 14));
        assert!(crate::distribution::python_tag_fits("py3", &["none".into()], 3, 14));
        assert!(!crate::distribution::python_tag_fits("py2", &["none".into()], 3, 14));
    }
}
