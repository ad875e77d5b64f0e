//! Libraries the environment provides: the built-in ROCm list and `--exclude` globs.
//!
//! A library that matches is never vendored and never blocks a manylinux tag; its DT_NEEDED entry
//! stays as it is.

use globset::{Glob, GlobSet, GlobSetBuilder};

pub const ROCM_LIBRARIES: &str = include_str!("../policies/rocm-libraries.txt");
pub const GPU_DRIVER_LIBRARIES: &str = include_str!("../policies/gpu-driver-libraries.txt");

#[derive(Debug, thiserror::Error)]
#[error("invalid --exclude pattern `{pattern}`: {message}")]
pub struct ExcludeError {
    pub pattern: String,
    pub message: String,
}

/// Compiled exclusion patterns.
#[derive(Debug, Clone)]
pub struct ExcludeList {
    rocm: Option<GlobSet>,
    /// The GPU driver's user-space libraries (`libcuda.so.1`): the machine's driver provides them.
    drivers: Option<GlobSet>,
    user: Vec<(String, GlobSet)>,
    /// Directories ROCm installs in that the environment names (`$ROCM_PATH`, `$HIP_PATH`).
    rocm_prefixes: Vec<String>,
}

fn glob_set(lines: &str) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for line in lines.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        for pattern in line.split_whitespace() {
            builder.add(Glob::new(pattern).expect("built-in patterns are valid globs"));
        }
    }
    builder.build().expect("built-in patterns are valid globs")
}

impl ExcludeList {
    /// `rocm`: use the built-in ROCm list; `user`: `--exclude` globs, matched against the soname
    /// and, once resolved, the library's path.
    pub fn new(rocm: bool, user: &[String]) -> Result<Self, ExcludeError> {
        let rocm = rocm.then(|| {
            let mut builder = GlobSetBuilder::new();
            for line in rocm_patterns() {
                builder.add(Glob::new(line).expect("built-in ROCm patterns are valid globs"));
            }
            builder.build().expect("built-in ROCm patterns are valid globs")
        });
        let mut compiled = Vec::new();
        for pattern in user {
            let glob = Glob::new(pattern)
                .map_err(|e| ExcludeError { pattern: pattern.clone(), message: e.kind().to_string() })?;
            let set = GlobSetBuilder::new()
                .add(glob)
                .build()
                .map_err(|e| ExcludeError { pattern: pattern.clone(), message: e.to_string() })?;
            compiled.push((pattern.clone(), set));
        }
        Ok(ExcludeList {
            rocm,
            drivers: Some(glob_set(GPU_DRIVER_LIBRARIES)),
            user: compiled,
            rocm_prefixes: Vec::new(),
        })
    }

    /// With the built-in GPU driver list (on by default), or without (`--no-driver-exclude`).
    pub fn with_drivers(mut self, on: bool) -> Self {
        self.drivers = on.then(|| glob_set(GPU_DRIVER_LIBRARIES));
        self
    }

    /// Libraries found under these directories are ROCm's too (`$ROCM_PATH`, `$HIP_PATH`).
    pub fn with_rocm_prefixes(mut self, prefixes: Vec<String>) -> Self {
        self.rocm_prefixes = prefixes;
        self
    }

    /// Why the environment provides this library, or `None` when it does not.
    pub fn reason(&self, soname: &str, path: Option<&str>) -> Option<String> {
        if let Some(set) = &self.rocm {
            if set.is_match(soname) {
                return Some("ROCm library, provided by the environment (built-in list)".into());
            }
            if let Some(path) = path
                && is_rocm_path(path, &self.rocm_prefixes)
            {
                return Some(format!("resolved inside a ROCm installation ({path})"));
            }
        }
        for (pattern, set) in &self.user {
            if set.is_match(soname) || path.is_some_and(|p| set.is_match(p)) {
                return Some(format!("excluded by --exclude '{pattern}'"));
            }
        }
        if self.drivers.as_ref().is_some_and(|set| set.is_match(soname)) {
            return Some("GPU driver library, provided by the machine's driver (built-in list)".into());
        }
        None
    }
}

/// The glob lines of the built-in ROCm list.
pub fn rocm_patterns() -> impl Iterator<Item = &'static str> {
    ROCM_LIBRARIES.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// `/opt/rocm*`, a ROCm Python package (`_rocm_sdk_*`), or one of `prefixes` (`$ROCM_PATH`,
/// `$HIP_PATH`: [`crate::settings::rocm_prefixes`]).
fn is_rocm_path(path: &str, prefixes: &[String]) -> bool {
    path.starts_with("/opt/rocm")
        || path.contains("/_rocm_sdk_")
        || prefixes.iter().any(|prefix| path.starts_with(prefix.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocm_list_matches_rocm_and_not_system_libraries() {
        let list = ExcludeList::new(true, &[]).unwrap();
        for rocm in [
            "libamdhip64.so.7",
            "libhsa-runtime64.so.1",
            "librocblas.so.5",
            "libMIOpen.so.1",
            "librccl.so.1",
            "librocm_sysdeps_drm.so.2",
            "libhipsolver_fortran.so",
        ] {
            assert!(list.reason(rocm, None).is_some(), "{rocm}");
        }
        for system in ["libdrm.so.2", "libnuma.so.1", "libstdc++.so.6", "libgomp.so.1"] {
            assert!(list.reason(system, None).is_none(), "{system}");
        }
        assert!(list.reason("libfoo.so", Some("/opt/rocm-7.0/lib/libfoo.so")).is_some());
        assert!(ExcludeList::new(false, &[]).unwrap().reason("libamdhip64.so.7", None).is_none());
    }

    #[test]
    fn user_globs_match_soname_or_path() {
        let list = ExcludeList::new(false, &["libcuda.so.*".into(), "/usr/lib/special/*".into()]).unwrap();
        assert!(list.reason("libcuda.so.1", None).unwrap().contains("libcuda.so.*"));
        assert!(list.reason("libx.so", Some("/usr/lib/special/libx.so")).is_some());
        assert!(ExcludeList::new(false, &["[".into()]).is_err());
    }
}
