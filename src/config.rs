//! `[tool.wheelfix]` in `pyproject.toml`: the defaults a project always uses. Command-line flags
//! override them.
//!
//! ```toml
//! [tool.wheelfix]
//! exclude = ["libcuda.so.*"]
//! plat = "manylinux_2_28_x86_64"
//! rocm-version = "10.1.0"
//! lib-sdir = ".libs"
//! gpu-targets = ["gfx950"]
//! no-mark = ["triton-kernels"]
//! strict-record = true
//! memory = "2G"
//! zip-compression-level = 6
//! with-wheels = ["../deps"]
//! device-name = "amd-{name}-device-{target}"
//! group-by = "target"
//! group = "rocm"
//! overlay-root = "torch"
//! archive-per = "target-id"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// The keys of `[tool.wheelfix]`. Unknown keys are an error that names the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    pub exclude: Option<Vec<String>>,
    pub plat: Option<String>,
    pub rocm_version: Option<String>,
    pub local_version: Option<String>,
    pub lib_sdir: Option<String>,
    pub gpu_targets: Option<Vec<String>>,
    pub no_mark: Option<Vec<String>>,
    pub strict_record: Option<bool>,
    /// `--memory`. Ex) `"2G"`
    pub memory: Option<String>,
    /// `repair -z`.
    pub zip_compression_level: Option<u32>,
    /// `--with-wheels`: wheel files or directories, relative to this file's directory.
    pub with_wheels: Option<Vec<String>>,
    /// `split --device-name`.
    pub device_name: Option<String>,
    /// `split --group-by`: `target`, `subfamily` or `family`.
    pub group_by: Option<String>,
    /// `split --group`: the kpack group whose archives the wheel's binaries share.
    pub group: Option<String>,
    /// `split --overlay-root`: TheRock's layout, the archives in `<root>/.kpack/`.
    pub overlay_root: Option<String>,
    /// `split --archive-per`: `processor` or `target-id`.
    pub archive_per: Option<String>,
    /// `split --device-requires-dist`: requirements every device wheel gains.
    pub device_requires_dist: Option<Vec<String>>,
    /// `--index-url`: the index the release is published in, recorded in what is written.
    pub index_url: Option<String>,
}

/// A configuration and the file it came from (`None`: no file, all defaults).
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    pub path: Option<PathBuf>,
    pub config: Config,
}

#[derive(Deserialize)]
struct PyProject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    wheelfix: Option<toml::Value>,
}

/// The largest `pyproject.toml` read.
const MAX_CONFIG: u64 = 16 << 20;

/// Read `[tool.wheelfix]` from a `pyproject.toml` (an empty configuration when the table is absent).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let display = path.display().to_string();
    let text = crate::files::read_text_bounded(path, MAX_CONFIG)
        .map_err(|source| ConfigError::Read { path: display.clone(), source })?;
    let project: PyProject = toml::from_str(&text)
        .map_err(|e| ConfigError::Invalid { path: display.clone(), message: e.message().to_string() })?;
    let Some(table) = project.tool.and_then(|t| t.wheelfix) else { return Ok(Config::default()) };
    table.try_into().map_err(|e: toml::de::Error| ConfigError::Invalid {
        path: display,
        message: format!("[tool.wheelfix]: {}", e.message()),
    })
}

/// The closest `pyproject.toml` with a `[tool.wheelfix]` table, from `start` upward. One that
/// exists but cannot be read or parsed is an error naming it: whether it holds the table cannot
/// be known, and passing over it would apply a parent directory's configuration instead.
pub fn discover(start: &Path) -> Result<Option<PathBuf>, ConfigError> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        let candidate = d.join("pyproject.toml");
        let display = || candidate.display().to_string();
        match crate::files::read_text_bounded(&candidate, MAX_CONFIG) {
            Ok(text) => {
                let project = toml::from_str::<PyProject>(&text)
                    .map_err(|e| ConfigError::Invalid { path: display(), message: e.message().to_string() })?;
                if project.tool.is_some_and(|t| t.wheelfix.is_some()) {
                    return Ok(Some(candidate));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(ConfigError::Read { path: display(), source }),
        }
        dir = d.parent();
    }
    Ok(None)
}

/// `--config FILE`, else the discovered file, else defaults.
pub fn resolve(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    let path = match explicit {
        Some(p) => Some(p.to_path_buf()),
        None => match std::env::current_dir() {
            Ok(cwd) => discover(&cwd)?,
            Err(_) => None,
        },
    };
    match path {
        Some(p) => Ok(LoadedConfig { config: load(&p)?, path: Some(p) }),
        None => Ok(LoadedConfig::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_table_and_names_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pyproject.toml");
        std::fs::write(
            &path,
            "[project]\nname = 'x'\n[tool.wheelfix]\nexclude = ['libcuda.so.*']\nrocm-version = '10.1.0'\n",
        )
        .unwrap();
        let config = load(&path).unwrap();
        assert_eq!(config.exclude.as_deref(), Some(&["libcuda.so.*".to_string()][..]));
        assert_eq!(config.rocm_version.as_deref(), Some("10.1.0"));
        std::fs::write(&path, "[tool.wheelfix]\nexclud = ['x']\n").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("unknown field `exclud`"), "{err}");
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(&path, "[tool.wheelfix]\nplat = 'manylinux_2_28_x86_64'\n").unwrap();
        assert_eq!(discover(&sub).unwrap(), Some(path.clone()));
        // A nearer file that does not parse is an error naming it, not a reason to use the parent's.
        let near = sub.join("pyproject.toml");
        std::fs::write(&near, "[tool.wheelfix\nplat = 'x'\n").unwrap();
        let err = discover(&sub).unwrap_err().to_string();
        assert!(err.contains(&near.display().to_string()), "{err}");
        std::fs::write(&near, "[project]\nname = 'x'\n").unwrap();
        assert_eq!(discover(&sub).unwrap(), Some(path));
    }
}
