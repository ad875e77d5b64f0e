//! The commands: each takes its request (what the command line asked, as plain values), runs
//! the stages over its wheels and returns what to print and the exit code: 0 when everything
//! succeeded, 1 when a wheel failed or a check found problems, 2 for a usage error.
//!
//! [`pipeline`] holds the stages every command shares (open, analyse, judge, the batch's
//! versions); [`show`], [`write`] (`retag`, `repair`), [`release`] (`metapackage`, `index`,
//! `check`) and [`lddtree`] one command each.

pub mod doctor;
pub mod lddtree;
pub mod pipeline;
pub mod release;
pub mod show;
pub mod split;
pub mod thin;
pub mod variants;
pub mod write;

/// Text for a terminal, control characters made visible (every command's text output passes it).
pub use crate::report::escape_text;

use std::path::PathBuf;

use crate::config::LoadedConfig;
use crate::settings::{Flags, Settings};

/// Why a command line cannot run (exit 2): nothing is read or written.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Settings(Box<crate::settings::SettingsError>),
    #[error(transparent)]
    GpuTarget(#[from] crate::policy::gpus::GpuTargetError),
    #[error(transparent)]
    Split(#[from] crate::plan::split::SettingError),
    #[error(transparent)]
    Targets(#[from] pipeline::TargetsError),
    #[error("give --provider amd or --static-gpu-target, not both")]
    ProviderAndStatic,
    #[error(transparent)]
    StaticTarget(#[from] crate::gpu::targets::TargetError),
}

impl From<crate::settings::SettingsError> for UsageError {
    fn from(e: crate::settings::SettingsError) -> Self {
        UsageError::Settings(Box::new(e))
    }
}

/// One input's failure, the input named as it was given. Ex) `dist/x.whl: its RECORD …`
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", path.display())]
pub struct WheelFailed<E> {
    pub path: PathBuf,
    pub error: E,
}

impl<E> WheelFailed<E> {
    pub fn new(path: &std::path::Path, error: E) -> Self {
        WheelFailed { path: path.to_path_buf(), error }
    }
}

/// What a command leaves to print: its stdout, then its stderr lines, and its exit code.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: Vec<String>,
    pub code: u8,
}

impl Output {
    /// A usage error (exit 2): the command could not start.
    pub fn usage(message: impl std::fmt::Display) -> Output {
        Output { stdout: String::new(), stderr: vec![format!("wheelfix: error: {message}")], code: 2 }
    }

    /// One failure (exit 1): the command ran and failed.
    fn failure(message: impl std::fmt::Display) -> Output {
        Output { stdout: String::new(), stderr: vec![format!("wheelfix: error: {message}")], code: 1 }
    }

    /// Exit 1 when `failed` wheels failed, with the closing count.
    fn finish(mut self, failed: usize, total: usize) -> Output {
        if let Some(message) = crate::report::outcome::failed_message(failed, total) {
            self.stderr.push(message);
            self.code = 1;
        }
        self
    }
}

/// What every command that reads wheels takes besides its own arguments.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// The flags, as the command line gave them (the command's own filled in).
    pub flags: Flags,
    /// `--config FILE`: read `[tool.wheelfix]` from it instead of the closest pyproject.toml.
    pub config: Option<PathBuf>,
    pub json: bool,
    /// No progress bar.
    pub quiet: bool,
}

impl Common {
    /// The run's settings: the flags over the environment over the configuration file.
    fn settings(&self) -> Result<Settings, UsageError> {
        let loaded = crate::config::resolve(self.config.as_deref())?;
        let settings = Settings::resolve(&self.flags, &loaded)?;
        crate::writer::proof::set_damage_hook(settings.damage_output);
        Ok(settings)
    }
}

/// One command and its request.
pub enum Command {
    Show(show::ShowRequest),
    Retag(write::WriteRequest),
    Thin(thin::ThinRequest),
    Split(split::SplitRequest),
    Repair(write::WriteRequest),
    Metapackage(release::MetapackageRequest),
    Selector(release::SelectorRequest),
    Index(release::IndexRequest),
    Check(release::CheckRequest),
    Site(release::SiteRequest),
    Lddtree(lddtree::LddtreeRequest),
    Doctor(doctor::DoctorRequest),
    Variants(variants::VariantsRequest),
}

/// Run one command.
pub fn run(command: Command) -> Output {
    match command {
        Command::Show(request) => show::run(&request),
        Command::Retag(request) => write::run(&request, write::Job::Retag),
        Command::Repair(request) => write::run(&request, write::Job::Repair),
        Command::Metapackage(request) => release::run_metapackage(&request),
        Command::Selector(request) => release::run_selector(&request),
        Command::Index(request) => release::run_index(&request),
        Command::Check(request) => release::run_check(&request),
        Command::Site(request) => release::run_site(&request),
        Command::Lddtree(request) => lddtree::run(&request),
        Command::Doctor(request) => doctor::run(&request),
        Command::Thin(request) => thin::run(&request),
        Command::Split(request) => split::run(&request),
        Command::Variants(request) => variants::run(&request),
    }
}

/// No configuration file: for the commands whose settings none of its keys touch.
fn no_config() -> LoadedConfig {
    LoadedConfig::default()
}

/// The name of an input for its failure entry: its file name.
fn display_name(path: &std::path::Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_say_ok_failed_or_usage() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("pyproject.toml");
        std::fs::write(&config, "[tool.wheelfix]\nlib-sdir = \".vendored\"\n").unwrap();
        let show = |config: &std::path::Path| {
            run(Command::Show(show::ShowRequest {
                common: Common { config: Some(config.to_path_buf()), ..Common::default() },
                ..show::ShowRequest::default()
            }))
        };
        // No wheels: the settings, each with where it came from.
        let out = show(&config);
        assert_eq!((out.code, out.stderr.len()), (0, 0), "{out:?}");
        let line = out.stdout.lines().find(|l| l.starts_with("lib-sdir")).unwrap();
        assert!(line.contains("\".vendored\"") && line.contains(&config.display().to_string()), "{line}");
        // A configuration that cannot be read is a usage error.
        std::fs::write(&config, "[tool.wheelfix]\nlib-sdir = \"/../x\"\n").unwrap();
        let out = show(&config);
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr[0].starts_with("wheelfix: error: "), "{out:?}");
        // A wheel that fails is exit 1, named, with the count.
        let missing = dir.path().join("gone-1.0-py3-none-any.whl");
        let out =
            run(Command::Show(show::ShowRequest { wheels: vec![missing.clone()], ..show::ShowRequest::default() }));
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.iter().any(|l| l.contains(&missing.display().to_string())), "{out:?}");
        assert_eq!(out.stderr.last().unwrap(), "wheelfix: 1 of 1 wheel failed");
    }
}
