//! `doctor`: whether an installed environment can run on this machine's GPUs, before the first
//! kernel launch says so (`hipErrorInvalidImage`).

use std::path::{Path, PathBuf};

use super::Output;
use crate::analysis::installed::{self, Site};
use crate::analysis::linkage::LibrarySearch;
use crate::analysis::machine::Machine;
use crate::policy::doctor::{self, Diagnosis};

/// `doctor`'s request.
#[derive(Debug, Clone, Default)]
pub struct DoctorRequest {
    /// site-packages directories, virtual environments or Python executables (none: the
    /// `python3` on PATH).
    pub paths: Vec<PathBuf>,
    /// `--gpu`: the GPUs to check for instead of this machine's.
    pub gpus: Vec<String>,
    /// `--sysfs DIR`: read DIR as `/sys`.
    pub sysfs: Option<PathBuf>,
    /// `--ldpaths`: the loader's system directories.
    pub ldpaths: Option<String>,
    /// `--index-url`: the index every fix installs from (over the one a distribution's
    /// METADATA records).
    pub index_url: Option<String>,
    pub json: bool,
}

/// Run `doctor`: exit 0 when every environment is ready for every GPU, 1 on a problem, 2 when a
/// path is no environment or a GPU name is wrong.
pub fn run(request: &DoctorRequest) -> Output {
    let env = crate::settings::process_env;
    let machine = if request.gpus.is_empty() {
        Machine::read(request.sysfs.as_deref().unwrap_or(Path::new("/sys")), &env)
    } else {
        let mut targets = Vec::new();
        for text in &request.gpus {
            match crate::policy::gpus::parse(text) {
                Ok(t) => targets.push(t),
                Err(e) => return Output::usage(format!("--gpu {e}")),
            }
        }
        Machine::named(&targets, &env)
    };
    let path_env = env("PATH").unwrap_or_default();
    let mut sites: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    let paths = match request.paths.is_empty() {
        // The documented default: the `python3` the PATH finds, named by its path.
        true => match on_path(&path_env, "python3") {
            Some(python) => vec![python],
            None => {
                return Output::usage(
                    "no path given, and no python3 on PATH: give the environment, its site-packages or its Python",
                );
            }
        },
        false => request.paths.clone(),
    };
    for path in &paths {
        match site_packages(path) {
            Ok(found) => sites.extend(found),
            Err(e) => return Output::usage(e),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    sites.retain(|(s, _)| seen.insert(s.canonicalize().unwrap_or_else(|_| s.clone())));
    let search = LibrarySearch::from_environment(request.ldpaths.as_deref(), env("LD_LIBRARY_PATH").as_deref());
    // What the runtime loads for, and the GPU's own code where an override hides it.
    let mut devices: Vec<crate::gpu::TargetId> = machine.gpus.iter().map(|g| g.requested()).collect();
    devices.extend(
        machine
            .gpus
            .iter()
            .filter(|g| g.native != g.processor)
            .map(|g| crate::gpu::TargetId::of(&g.native, g.requested().features())),
    );
    let uv = on_path(&path_env, "uv");
    let mut diagnoses: Vec<Diagnosis> = Vec::new();
    for (root, python) in &sites {
        let mut site = match Site::read(root) {
            Ok(site) => site,
            Err(e) => return Output::failure(e),
        };
        if site.installer.python.is_none() {
            site.installer.python = python.clone();
        }
        site.installer.uv = uv.clone();
        let environment = installed::examine(site, &devices, &search);
        let site = &environment.site;
        let fixes = doctor::Fixes::of(&site.installer, request.index_url.as_deref(), &site.distributions);
        diagnoses.push(doctor::diagnose(&environment, &machine, &fixes));
    }
    let stdout = if request.json {
        crate::report::doctor::doctor_json(&diagnoses)
    } else {
        crate::report::doctor::doctor_text(&diagnoses)
    };
    let code = u8::from(diagnoses.iter().any(Diagnosis::fails));
    Output { stdout, stderr: Vec::new(), code }
}

/// The site-packages directories a path names, each with the Python it was asked of (when the
/// path is one): itself (a directory of `*.dist-info`), those of a virtual environment
/// (`pyvenv.cfg`), or a Python's `purelib` and `platlib`, each a site-packages directory
/// itself. A bare name is not a path: a program of that name is never looked up and run.
fn site_packages(path: &Path) -> Result<Vec<(PathBuf, Option<PathBuf>)>, SiteError> {
    let refused = |problem| SiteError { path: path.to_path_buf(), problem };
    if path.is_dir() {
        if path.join("pyvenv.cfg").is_file() {
            let mut found = Vec::new();
            for lib in ["lib", "lib64"] {
                let Ok(entries) = std::fs::read_dir(path.join(lib)) else { continue };
                for e in entries.filter_map(|e| e.ok()) {
                    let site = e.path().join("site-packages");
                    if e.file_name().to_string_lossy().starts_with("python") && site.is_dir() {
                        found.push((site, None));
                    }
                }
            }
            found.sort();
            return if found.is_empty() { Err(refused(SiteProblem::VenvWithoutSite)) } else { Ok(found) };
        }
        return if is_site(path).map_err(|e| refused(SiteProblem::Unreadable(e)))? {
            Ok(vec![(path.to_path_buf(), None)])
        } else {
            Err(refused(SiteProblem::NotASite))
        };
    }
    if path.components().count() == 1 && !path.exists() {
        return Err(refused(SiteProblem::BareName));
    }
    // A file in this directory is run as one (`./name`): a program is never looked up on PATH.
    let python = match path.components().count() == 1 && path.is_relative() {
        true => Path::new(".").join(path),
        false => path.to_path_buf(),
    };
    Ok(python_site_packages(&python)?.into_iter().map(|site| (site, Some(python.clone()))).collect())
}

/// Whether a directory is a site-packages directory: it holds a `*.dist-info`, or is named so.
fn is_site(dir: &Path) -> std::io::Result<bool> {
    let has_dist_info =
        std::fs::read_dir(dir)?.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().ends_with(".dist-info"));
    let named = dir.file_name().is_some_and(|n| n == "site-packages" || n == "dist-packages");
    Ok(has_dist_info || named)
}

/// Where the PATH `path_env` finds the program `name`. Ex) `uv` → `/usr/local/bin/uv`
fn on_path(path_env: &str, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_env)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// What a Python reports as its `purelib` and `platlib`: only directories that are
/// site-packages directories are taken (a program that prints `/` names none).
fn python_site_packages(python: &Path) -> Result<Vec<PathBuf>, SiteError> {
    const SCRIPT: &str = "import sysconfig\nfor k in ('purelib', 'platlib'):\n    print(sysconfig.get_paths()[k])";
    let refused = |problem| SiteError { path: python.to_path_buf(), problem };
    let output = std::process::Command::new(python)
        .args(["-c", SCRIPT])
        .output()
        .map_err(|e| refused(SiteProblem::NotAPython(e)))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
        return Err(refused(SiteProblem::PythonFailed(said)));
    }
    let mut found: Vec<PathBuf> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir() && is_site(p).unwrap_or(false))
        .collect();
    found.dedup();
    if found.is_empty() {
        return Err(refused(SiteProblem::NoSitePackages));
    }
    Ok(found)
}

/// A path `doctor` cannot take as an environment.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
struct SiteError {
    path: PathBuf,
    problem: SiteProblem,
}

#[derive(Debug, thiserror::Error)]
enum SiteProblem {
    #[error("a virtual environment without lib/python*/site-packages")]
    VenvWithoutSite,
    #[error("{0}")]
    Unreadable(std::io::Error),
    #[error("not a site-packages directory (no *.dist-info), a virtual environment or a Python")]
    NotASite,
    #[error("not a site-packages directory, a virtual environment or a Python ({0})")]
    NotAPython(std::io::Error),
    #[error("cannot ask it where it installs ({0})")]
    PythonFailed(String),
    #[error("it names no site-packages directory")]
    NoSitePackages,
    #[error(
        "not a path: give the environment's directory, its site-packages or its Python as a path (a program is not looked up on PATH; for the python3 on PATH: doctor \"$(command -v python3)\")"
    )]
    BareName,
}
