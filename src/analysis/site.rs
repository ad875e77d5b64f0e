//! A virtual `site-packages`: the wheels that will be installed beside the one being audited
//! (`--with-wheels`, and the other wheels of the same invocation), laid out by install path
//! without extracting anything, so that an RPATH entry that leaves a wheel
//! (`$ORIGIN/../../nvidia/cublas/lib`) can be resolved the way the loader will resolve it once
//! everything is installed.
//!
//! Only central directories are read to build it; a library's own ELF facts are read when a
//! lookup finds it, within the run's memory budget.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use serde::Serialize;

use crate::wheel::Wheel;
use crate::wheel::name::PackageName;
use crate::wheel::requirement::{Requirement, required_projects};

/// The wheel a library comes from, and where it lies in site-packages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Provider {
    /// Normalised project name. Ex) `nvidia-cublas`
    pub name: String,
    pub version: String,
    /// The wheel's file name.
    pub wheel: String,
    /// Install path of the library. Ex) `nvidia/cublas/lib/libcublas.so.13`
    pub path: String,
    /// The wheel's platform tags (file name).
    #[serde(skip)]
    pub platform_tags: Vec<String>,
}

/// One wheel of the site.
pub struct SiteWheel {
    pub wheel: Wheel,
    pub path: PathBuf,
}

/// The virtual site-packages.
#[derive(Default)]
pub struct SitePackages {
    wheels: Vec<SiteWheel>,
    /// Install path → (wheel, member index).
    files: HashMap<String, (usize, usize)>,
    /// File name → install paths with that name (`libc10.so` → `torch/lib/libc10.so`).
    by_name: HashMap<String, Vec<String>>,
    /// Project → its wheels (indices into `wheels`).
    by_project: HashMap<PackageName, Vec<usize>>,
    /// Inputs that could not be used, and why (a corrupt wheel, two versions of one project).
    pub problems: Vec<String>,
}

impl std::fmt::Debug for SitePackages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SitePackages").field("wheels", &self.wheels.len()).field("files", &self.files.len()).finish()
    }
}

impl SitePackages {
    /// The site of these wheel files and directories of wheels. A wheel that cannot be opened,
    /// and every version of a project given more than once, are left out with a problem each.
    pub fn open(inputs: &[PathBuf]) -> SitePackages {
        let paths = crate::files::collect_files(inputs, &[".whl"]);
        let opened: Vec<(PathBuf, Result<Wheel, crate::wheel::WheelError>)> =
            crate::parallel::map(&paths, |p| (p.clone(), Wheel::open(p)));
        let mut site = SitePackages::default();
        let mut by_project: BTreeMap<PackageName, Vec<(PathBuf, Wheel)>> = BTreeMap::new();
        for (path, wheel) in opened {
            match wheel {
                Ok(w) => by_project.entry(w.metadata.package.clone()).or_default().push((path, w)),
                Err(e) => site.problems.push(format!("{}: cannot be used as a provider: {e}", path.display())),
            }
        }
        for (project, mut wheels) in by_project {
            // The same file given twice (a directory and its wheel) is one wheel.
            wheels.sort_by(|a, b| a.0.cmp(&b.0));
            wheels.dedup_by(|a, b| crate::files::same_file(&a.0, &b.0));
            let versions: BTreeSet<&str> = wheels.iter().map(|(_, w)| w.metadata.version.text.as_str()).collect();
            if versions.len() > 1 {
                site.problems.push(format!(
                    "{project}: --with-wheels holds {} versions ({}); only one can be installed, so none of them is used: give one",
                    versions.len(),
                    versions.into_iter().collect::<Vec<_>>().join(", ")
                ));
                continue;
            }
            for (path, wheel) in wheels {
                let index = site.wheels.len();
                for (member_index, member) in wheel.archive.members().iter().enumerate() {
                    if member.is_dir() {
                        continue;
                    }
                    if let Some(install) = wheel.install_path(&member.name) {
                        let name = install.rsplit('/').next().unwrap_or_default().to_string();
                        if !site.files.contains_key(&install) {
                            site.by_name.entry(name).or_default().push(install.clone());
                        }
                        site.files.entry(install).or_insert((index, member_index));
                    }
                }
                site.by_project.entry(wheel.metadata.package.clone()).or_default().push(index);
                site.wheels.push(SiteWheel { wheel, path });
            }
        }
        site
    }

    pub fn is_empty(&self) -> bool {
        self.wheels.is_empty()
    }

    /// The file at `install_path`, unless it belongs to `consumer` itself (whose own files are
    /// resolved inside it). Returns the wheel and the member's index.
    pub fn find(&self, install_path: &str, consumer: &PackageName) -> Option<(&SiteWheel, usize)> {
        let &(wheel, member) = self.files.get(install_path)?;
        let site_wheel = &self.wheels[wheel];
        (site_wheel.wheel.metadata.package != *consumer).then_some((site_wheel, member))
    }

    /// A library named `soname` that a project of `declared` ships anywhere: the loader reuses
    /// a library already loaded under that soname, so a wheel that requires the project (torch,
    /// for its C++ extensions) works if that project loaded it first. Only one such file may
    /// exist, or the answer would be a guess.
    pub fn find_loaded(
        &self,
        soname: &str,
        consumer: &PackageName,
        declared: &BTreeSet<PackageName>,
    ) -> Option<(&SiteWheel, usize, String)> {
        let candidates: Vec<(&SiteWheel, usize, &String)> = self
            .by_name
            .get(soname)?
            .iter()
            .filter_map(|install| {
                let (w, m) = self.find(install, consumer)?;
                declared.contains(&w.wheel.metadata.package).then_some((w, m, install))
            })
            .collect();
        match candidates.as_slice() {
            [(w, m, install)] => Some((*w, *m, (*install).clone())),
            _ => None,
        }
    }

    /// The provider record of a file found by [`SitePackages::find`].
    pub fn provider(site_wheel: &SiteWheel, install_path: &str) -> Provider {
        let w = &site_wheel.wheel;
        Provider {
            name: w.metadata.package.to_string(),
            version: w.metadata.version.text.clone(),
            wheel: w.filename.to_string(),
            path: install_path.to_string(),
            platform_tags: w.filename.platform_tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    /// The projects `requires` names, directly or through the requirements of the site's wheels
    /// (every requirement counts, extras included).
    pub fn declared(&self, requires: &[Requirement]) -> BTreeSet<PackageName> {
        required_projects(requires, |name| {
            let wheels = self.by_project.get(name).map(Vec::as_slice).unwrap_or_default();
            wheels.iter().map(|&w| self.wheels[w].wheel.metadata.requires_dist.as_slice()).collect()
        })
    }
}

/// The requirement of `requires` that probably provides the site-packages directory `dir`
/// (`nvidia/cublas/lib` ← `nvidia-cublas`, `_rocm_sdk_core/lib` ← `rocm-sdk-core`,
/// `torch/lib` ← `torch`), by name.
pub fn probable_provider<'a>(dir: &str, requires: &'a [Requirement]) -> Option<&'a str> {
    let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty() && *p != "lib" && *p != "lib64").collect();
    let mut candidates: Vec<String> = Vec::new();
    for n in (1..=parts.len()).rev() {
        candidates.push(parts[..n].join("-"));
    }
    // `_rocm_sdk_core` names the project `rocm-sdk-core`.
    let candidates: Vec<PackageName> = candidates.iter().map(|c| PackageName::new(c.trim_start_matches('_'))).collect();
    requires
        .iter()
        .find(|r| {
            let name = r.package.as_str();
            // `nvidia-cublas`, or a CUDA-versioned name (`nvidia-cublas-cu12`).
            let cuda_suffixed = |c: &str| {
                name.strip_prefix(c)
                    .and_then(|rest| rest.strip_prefix("-cu"))
                    .is_some_and(|v| !v.is_empty() && v.chars().all(|ch| ch.is_ascii_digit()))
            };
            candidates.iter().any(|c| c.as_str() == name || cuda_suffixed(c.as_str()))
        })
        .map(|r| r.text.as_str())
}

/// The requirement whose name or extras name the library. Ex) `libcupti.so.13` ←
/// `cuda-toolkit[cublas,cupti]==13.2.2`, `libnccl.so.2` ← `nvidia-nccl-cu13`
pub fn requirement_naming<'a>(soname: &str, requires: &'a [Requirement]) -> Option<&'a str> {
    let stem = PackageName::new(soname.strip_prefix("lib")?.split(".so").next()?);
    if stem.as_str().len() < 3 {
        return None;
    }
    requires
        .iter()
        .find(|r| {
            r.package.as_str().split('-').any(|part| part == stem.as_str())
                || r.extras().any(|e| PackageName::new(e) == stem)
        })
        .map(|r| r.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_that_name_a_directory() {
        let parse = |list: &[&str]| list.iter().map(|r| Requirement::parse(r)).collect::<Vec<_>>();
        let requires =
            parse(&["nvidia-cublas==13.1.0.3; platform_system == \"Linux\"", "rocm-sdk-core==7.13.0", "torch>=2.9"]);
        assert_eq!(probable_provider("nvidia/cublas/lib", &requires), Some(requires[0].text.as_str()));
        assert_eq!(probable_provider("_rocm_sdk_core/lib", &requires), Some(requires[1].text.as_str()));
        assert_eq!(probable_provider("torch/lib", &requires), Some(requires[2].text.as_str()));
        assert_eq!(probable_provider("nvidia/cudnn/lib", &requires), None);
        let toolkit = parse(&["cuda-toolkit[cublas,cupti]==13.2.2", "nvidia-nccl-cu13"]);
        assert_eq!(requirement_naming("libcupti.so.13", &toolkit), Some(toolkit[0].text.as_str()));
        assert_eq!(requirement_naming("libnccl.so.2", &toolkit), Some(toolkit[1].text.as_str()));
        assert_eq!(requirement_naming("libfoo.so.1", &toolkit), None);
        let cu13 = parse(&["nvidia-cudnn-cu13==9.26.0.51"]);
        assert_eq!(probable_provider("nvidia/cudnn/lib", &cu13), Some(cu13[0].text.as_str()));
    }
}
