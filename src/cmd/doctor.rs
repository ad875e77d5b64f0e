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
    let mut sites = Vec::new();
    let paths = if request.paths.is_empty() { vec![PathBuf::from("python3")] } else { request.paths.clone() };
    for path in &paths {
        match site_packages(path) {
            Ok(found) => sites.extend(found),
            Err(e) => return Output::usage(e),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    sites.retain(|s| seen.insert(s.canonicalize().unwrap_or_else(|_| s.clone())));
    let search = LibrarySearch::from_environment(request.ldpaths.as_deref(), env("LD_LIBRARY_PATH").as_deref());
    let devices: Vec<_> = machine.gpus.iter().map(|g| g.requested()).collect();
    let mut diagnoses: Vec<Diagnosis> = Vec::new();
    for root in &sites {
        let site = match Site::read(root) {
            Ok(site) => site,
            Err(e) => return Output::failure(e),
        };
        let environment = installed::examine(site, &devices, &search);
        diagnoses.push(doctor::diagnose(&environment, &machine));
    }
    let stdout = if request.json {
        crate::report::doctor::doctor_json(&diagnoses)
    } else {
        crate::report::doctor::doctor_text(&diagnoses)
    };
    let code = u8::from(diagnoses.iter().any(|d| d.errors() > 0));
    Output { stdout, stderr: Vec::new(), code }
}

/// The site-packages directories a path names: itself (a directory of `*.dist-info`), those of
/// a virtual environment (`pyvenv.cfg`), or a Python's `purelib` and `platlib`.
fn site_packages(path: &Path) -> Result<Vec<PathBuf>, SiteError> {
    let refused = |problem| SiteError { path: path.to_path_buf(), problem };
    if path.is_dir() {
        if path.join("pyvenv.cfg").is_file() {
            let mut found = Vec::new();
            for lib in ["lib", "lib64"] {
                let Ok(entries) = std::fs::read_dir(path.join(lib)) else { continue };
                for e in entries.filter_map(|e| e.ok()) {
                    let site = e.path().join("site-packages");
                    if e.file_name().to_string_lossy().starts_with("python") && site.is_dir() {
                        found.push(site);
                    }
                }
            }
            found.sort();
            return if found.is_empty() { Err(refused(SiteProblem::VenvWithoutSite)) } else { Ok(found) };
        }
        let has_dist_info = std::fs::read_dir(path)
            .map_err(|e| refused(SiteProblem::Unreadable(e)))?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(".dist-info"));
        let named = path.file_name().is_some_and(|n| n == "site-packages" || n == "dist-packages");
        return if has_dist_info || named { Ok(vec![path.to_path_buf()]) } else { Err(refused(SiteProblem::NotASite)) };
    }
    python_site_packages(path)
}

/// What a Python reports as its `purelib` and `platlib`.
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
    let mut found: Vec<PathBuf> =
        String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).filter(|p| p.is_dir()).collect();
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
    #[error("its site-packages directories do not exist")]
    NoSitePackages,
}
