//! Settings: resolved once per run from the command line and `[tool.wheelfix]`
//! ([`crate::config`]), each value with where it came from, then turned into the ready objects
//! the pipeline uses (policies, the exclusion list, the library search, the marking).
//!
//! The command line wins over the environment (auditwheel's `AUDITWHEEL_*` variables, as the
//! manylinux images and cibuildwheel set them), which wins over the configuration file, which
//! wins over the defaults.
//!
//! Why one file: every flag, variable and
//! configuration key resolved in one place, with its origin, so that no other module reads the
//! environment.

use std::fmt;
use std::path::PathBuf;

use crate::analysis::linkage::LibrarySearch;
use crate::analysis::{AnalyzeOptions, budget};
use crate::config::LoadedConfig;
use crate::exclude::ExcludeList;
use crate::plan::tags::{Plat, TagRequest};
use crate::policy::Policies;
use crate::version::{LocalLabel, MarkOptions, Marking};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error(transparent)]
    Exclude(#[from] crate::exclude::ExcludeError),
    #[error(transparent)]
    Version(#[from] crate::version::VersionError),
    #[error("--mark-pure, --no-mark and --index-dir need --rocm-version or --local-version")]
    MarkingWithoutLabel,
    #[error("memory `{0}` is not a size (write it like 512M or 2G)")]
    Memory(String),
    #[error("{origin}: `{value}` is not a platform tag wheelfix has a policy for (Ex: manylinux_2_28_x86_64, or auto)")]
    Plat { origin: Origin, value: String },
    #[error("{origin}: `{value}` is not a compression level (0-9)")]
    CompressionLevel { origin: Origin, value: String },
    #[error("{origin}: `{value}` is not a patcher (patchelf, lief-patchelf or none)")]
    Patcher { origin: Origin, value: String },
    #[error(
        "{origin}: lib-sdir `{value}` would leave the wheel or name no directory: it is a suffix of the distribution name (Ex: .libs, .libs/vendored)"
    )]
    LibSdir { origin: Origin, value: String },
    #[error("{key} = {value:?} in [tool.wheelfix]: {why}")]
    Split { key: &'static str, value: String, why: crate::plan::split::SettingError },
    #[error("{name}={value} is not {what}")]
    Environment { name: &'static str, value: String, what: &'static str },
    #[error("index URL: {why}")]
    IndexUrl { url: String, why: crate::index::UrlError },
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    CommandLine,
    /// An environment variable, by name.
    Environment(&'static str),
    ConfigFile(PathBuf),
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::CommandLine => f.write_str("command line"),
            Origin::Environment(name) => write!(f, "environment {name}"),
            Origin::ConfigFile(p) => write!(f, "{}", p.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub origin: Origin,
}

/// What the command line gave, as plain values (`None` or empty: not given). The binary fills
/// this from its argument parser.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub exclude: Vec<String>,
    pub no_rocm_exclude: bool,
    pub policy_files: Vec<PathBuf>,
    pub ldpaths: Option<String>,
    pub disable_isa_ext_check: bool,
    pub strict_record: bool,
    /// `--plat` (`retag`, `repair`).
    pub plat: Option<String>,
    pub only_plat: bool,
    /// `repair --no-update-tags`.
    pub keep_tags: bool,
    pub rocm_version: Option<String>,
    pub local_version: Option<String>,
    /// `--index-url`: the index the release is published in.
    pub index_url: Option<String>,
    pub mark_pure: bool,
    pub no_mark: Vec<String>,
    pub index_dir: Option<PathBuf>,
    /// `-L` (`repair`).
    pub lib_sdir: Option<String>,
    /// `--expect-gpu-target` (`show`).
    pub gpu_targets: Vec<String>,
    /// Hash every member against RECORD.
    pub verify: bool,
    /// Hash the members whose RECORD row cannot be written again (the writing commands).
    pub hash_for_record: bool,
    /// `--memory`.
    pub memory: Option<String>,
    /// `-z` (`repair`).
    pub zip_compression_level: Option<u32>,
    /// `--patcher` (`repair`).
    pub patcher: Option<String>,
    /// `--strip` (`repair`).
    pub strip: bool,
    /// `--with-wheels`.
    pub with_wheels: Vec<PathBuf>,
    /// `--no-driver-exclude`.
    pub no_driver_exclude: bool,
    /// The command is `repair`, the one `AUDITWHEEL_PLAT` applies to (as in auditwheel).
    pub repair: bool,
    /// The command writes wheels (its default memory budget is the larger one).
    pub writes: bool,
    /// The command has no use for device code inside host binaries (`retag`, `repair`).
    pub ignores_device_code: bool,
    /// `split`'s flags for its device wheels and archives.
    pub split: SplitFlags,
}

/// `split`'s flags that `[tool.wheelfix]` may also set (`None` or empty: not given).
#[derive(Debug, Clone, Default)]
pub struct SplitFlags {
    /// `--device-name`: the device wheels' project names, `{name}` and `{target}` filled in.
    pub device_name: Option<String>,
    /// `--group-by`: a device wheel per processor, sub-family or family.
    pub group_by: Option<crate::plan::split::GroupBy>,
    /// `--group`: the kpack group whose archives the wheel's binaries share.
    pub kpack_group: Option<String>,
    /// `--overlay-root`: TheRock's layout under this directory of the installed tree.
    pub overlay_root: Option<String>,
    /// `--archive-per`: an archive per processor or per target ID.
    pub archive_per: Option<crate::plan::split::ArchivePer>,
    /// `--device-requires-dist`: requirements every device wheel gains.
    pub device_requires_dist: Vec<String>,
}

impl Flags {
    /// A command that writes wheels: every member hashed against RECORD unless `--no-verify`,
    /// and always those whose RECORD row is written anew.
    pub fn writing(&mut self, no_verify: bool) {
        self.verify = !no_verify;
        self.hash_for_record = true;
        self.writes = true;
    }

    /// `show`: without wheels it prints the settings `repair` would use (`show --config`), the
    /// environment's included.
    pub fn showing(&mut self, wheels_given: bool) {
        self.repair = !wheels_given;
    }

    /// `retag` and `repair`: writing, with the tag asked for; the tag does not depend on device
    /// code, so it is not read.
    pub fn retagging(&mut self, no_verify: bool, plat: Option<String>, only_plat: bool) {
        self.writing(no_verify);
        self.ignores_device_code = true;
        self.plat = plat;
        self.only_plat = only_plat;
    }
}

/// Every setting of a run, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_file: Option<PathBuf>,
    pub exclude: Setting<Vec<String>>,
    pub rocm_exclusion: Setting<bool>,
    /// `--plat`: `auto` or a tag.
    pub plat: Setting<Option<Plat>>,
    /// `--only-plat`.
    pub only_plat: bool,
    /// `repair --no-update-tags`.
    pub keep_tags: bool,
    pub rocm_version: Setting<Option<String>>,
    /// The index the release is published in (`--index-url`, `index-url`), recorded in every
    /// METADATA written (`Project-URL: Package index, <URL>`) so that `doctor`'s fixes name it.
    pub index_url: Setting<Option<String>>,
    pub local_version: Setting<Option<String>>,
    pub lib_sdir: Setting<String>,
    pub gpu_targets: Setting<Vec<String>>,
    pub no_mark: Setting<Vec<String>>,
    pub strict_record: Setting<bool>,
    /// Bytes of the memory budget.
    pub memory: Setting<u64>,
    /// Deflate level of the members `repair` writes anew.
    pub zip_compression_level: Setting<u32>,
    /// `AUDITWHEEL_LD_LIBRARY_PATH`: directories searched before `LD_LIBRARY_PATH`.
    pub extra_library_path: Setting<Option<String>>,
    /// auditwheel's `--patcher`.
    pub patcher: Setting<PatcherChoice>,
    /// `repair --strip`.
    pub strip: bool,
    /// Wheels installed beside the audited ones (`--with-wheels`), whose files resolve RPATH
    /// entries that leave a wheel.
    pub with_wheels: Setting<Vec<PathBuf>>,
    pub driver_exclusion: Setting<bool>,
    pub disable_isa_check: bool,
    pub marking: Option<Marking>,
    /// The policies: auditwheel's, or `--policy-file`'s.
    pub policies: Policies,
    pub analyze: AnalyzeOptions,
    /// `split`'s device wheels and archives: each from its flag, else `[tool.wheelfix]`, else
    /// its default, checked.
    pub split: SplitSettings,
    /// The bytes of inflated copies `thin` and `split` may keep on disk at once
    /// (`WHEELFIX_COPY_ROOM`; `0` keeps none).
    pub copy_room: u64,
    /// `SOURCE_DATE_EPOCH`: the time of members written anew.
    pub source_date_epoch: Option<i64>,
    /// The tests' hook (`WHEELFIX_TEST_DAMAGE_OUTPUT=1`, read only in a build with the cargo
    /// feature `test-hooks`, which the tests enable): damage what `thin` and `split` write
    /// before their proof, so that a test shows the proof catches it.
    pub damage_output: bool,
}

/// How `split` names and lays out its device wheels and archives, resolved.
#[derive(Debug, Clone)]
pub struct SplitSettings {
    /// The device wheels' project names. Ex) `{name}-device-{target}` (the default),
    /// TheRock's `amd-{name}-device-{target}`
    pub device_name: Setting<String>,
    pub group_by: Setting<crate::plan::split::GroupBy>,
    /// The kpack group whose archives the wheel's binaries share; `None`: an archive per binary.
    pub kpack_group: Setting<Option<String>>,
    /// TheRock's overlay root, without a trailing `/`.
    pub overlay_root: Setting<Option<String>>,
    /// An archive per processor, or per target ID (the default under an overlay root, as
    /// TheRock's).
    pub archive_per: Setting<crate::plan::split::ArchivePer>,
    /// Requirements every device wheel gains, `@GFXARCH@` its processor.
    pub device_requires_dist: Setting<Vec<String>>,
}

impl Default for SplitSettings {
    fn default() -> Self {
        SplitSettings {
            device_name: Setting::default_of(crate::plan::split::DEFAULT_DEVICE_NAME.to_string()),
            group_by: Setting::default_of(crate::plan::split::GroupBy::Target),
            kpack_group: Setting::default_of(None),
            overlay_root: Setting::default_of(None),
            archive_per: Setting::default_of(crate::plan::split::ArchivePer::Processor),
            device_requires_dist: Setting::default_of(Vec::new()),
        }
    }
}

impl<T> Setting<T> {
    /// A setting's default value.
    fn default_of(value: T) -> Setting<T> {
        Setting { value, origin: Origin::Default }
    }
}

impl Sources<'_> {
    /// `split`'s settings: each flag, else its `[tool.wheelfix]` key, else its default, each
    /// checked as its flag is.
    fn split(&self) -> Result<SplitSettings, SettingsError> {
        use crate::plan::split::{
            ArchivePer, GroupBy, check_device_name, check_device_requirement, check_kpack_group, check_overlay_root,
        };
        let (flags, config) = (&self.flags.split, &self.loaded.config);
        let bad = |key: &'static str, value: &str, why: crate::plan::split::SettingError| SettingsError::Split {
            key,
            value: value.into(),
            why,
        };
        let defaults = SplitSettings::default();
        let device_name = self.pick(&flags.device_name, &config.device_name);
        if let Some(template) = &device_name.value {
            check_device_name(template).map_err(|why| bad("device-name", template, why))?;
        }
        let group_by = match (&flags.group_by, &config.group_by) {
            (Some(g), _) => Setting { value: *g, origin: Origin::CommandLine },
            (None, Some(text)) => Setting {
                value: text.parse::<GroupBy>().map_err(|why| bad("group-by", text, why))?,
                origin: self.file(),
            },
            (None, None) => defaults.group_by,
        };
        let kpack_group = self.pick(&flags.kpack_group, &config.group);
        if let Some(group) = &kpack_group.value {
            check_kpack_group(group).map_err(|why| bad("group", group, why))?;
        }
        let mut overlay_root = self.pick(&flags.overlay_root, &config.overlay_root);
        if let Some(root) = &overlay_root.value {
            check_overlay_root(root).map_err(|why| bad("overlay-root", root, why))?;
        }
        overlay_root.value = overlay_root.value.map(|r| r.trim_end_matches('/').to_string());
        let archive_per = match (&flags.archive_per, &config.archive_per) {
            (Some(a), _) => Setting { value: *a, origin: Origin::CommandLine },
            (None, Some(text)) => Setting {
                value: text.parse::<ArchivePer>().map_err(|why| bad("archive-per", text, From::from(why)))?,
                origin: self.file(),
            },
            // TheRock's layout has an archive per target ID.
            (None, None) if overlay_root.value.is_some() => Setting::default_of(ArchivePer::TargetId),
            (None, None) => defaults.archive_per,
        };
        let mut device_requires_dist = self.pick_list(&flags.device_requires_dist, &config.device_requires_dist);
        for requirement in &device_requires_dist.value {
            check_device_requirement(requirement).map_err(|why| bad("device-requires-dist", requirement, why))?;
        }
        device_requires_dist.value = device_requires_dist.value.iter().map(|r| r.trim().to_string()).collect();
        Ok(SplitSettings {
            device_name: Setting {
                value: device_name.value.unwrap_or(defaults.device_name.value),
                origin: device_name.origin,
            },
            group_by,
            kpack_group,
            overlay_root,
            archive_per,
            device_requires_dist,
        })
    }
}

/// A variable of this process's environment, unset when empty: the one place wheelfix reads
/// its environment; everything else is given this function, or a test's in its place.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The directories ROCm installs in that the environment names (`ROCM_PATH`, `HIP_PATH`): a
/// library found under one is ROCm's.
pub fn rocm_prefixes(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    ["ROCM_PATH", "HIP_PATH"].iter().filter_map(|name| env(name)).collect()
}

/// `WHEELFIX_COPY_ROOM`: a size (`4G`), `0` for none; unset, 16 GiB.
fn copy_room(env: &dyn Fn(&str) -> Option<String>) -> Result<u64, SettingsError> {
    let Some(text) = env("WHEELFIX_COPY_ROOM") else { return Ok(crate::analysis::copy::DEFAULT_ROOM) };
    if text.trim() == "0" {
        return Ok(0);
    }
    budget::parse_size(&text).ok_or(SettingsError::Environment {
        name: "WHEELFIX_COPY_ROOM",
        value: text,
        what: "a size (like 4G, or 0 for none)",
    })
}

/// `SOURCE_DATE_EPOCH`: seconds since 1970.
fn source_date_epoch(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<i64>, SettingsError> {
    let Some(text) = env("SOURCE_DATE_EPOCH").filter(|t| !t.trim().is_empty()) else { return Ok(None) };
    text.trim().parse().map(Some).map_err(|_| SettingsError::Environment {
        name: "SOURCE_DATE_EPOCH",
        value: text,
        what: "a number of seconds",
    })
}

/// auditwheel's `--patcher` choice: `patchelf` and `lief-patchelf` both mean wheelfix's own ELF
/// writer (same result); `none` patches nothing, so that a wheel whose files need patching fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatcherChoice {
    Patchelf,
    LiefPatchelf,
    None,
}

impl PatcherChoice {
    pub fn parse(name: &str) -> Option<PatcherChoice> {
        match name {
            "patchelf" => Some(PatcherChoice::Patchelf),
            "lief-patchelf" => Some(PatcherChoice::LiefPatchelf),
            "none" => Some(PatcherChoice::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PatcherChoice::Patchelf => "patchelf",
            PatcherChoice::LiefPatchelf => "lief-patchelf",
            PatcherChoice::None => "none",
        }
    }

    /// The patcher that does what the choice says.
    pub fn patcher(self) -> &'static dyn crate::elf::patch::Patcher {
        match self {
            PatcherChoice::None => &crate::elf::patch::NoPatcher,
            PatcherChoice::Patchelf | PatcherChoice::LiefPatchelf => &crate::elf::patch::InProcessPatcher,
        }
    }
}

/// Whether `-L` names a directory inside the wheel once appended to the distribution name:
/// no `..`, `.` or empty part after its first, no backslash, NUL or control character.
/// Ex) `.libs`, `_vendor/libs` → yes; `/../../../tmp/x` → no
pub fn is_lib_sdir(suffix: &str) -> bool {
    let mut parts = suffix.split('/');
    let first = parts.next().unwrap_or_default();
    let bad_char = |p: &str| p.chars().any(|c| c == '\\' || c.is_control());
    !bad_char(first) && parts.all(|p| !matches!(p, "" | "." | "..") && !bad_char(p))
}

/// The environment variables auditwheel reads, which wheelfix honours the same way.
pub const ENV_PLAT: &str = "AUDITWHEEL_PLAT";
pub const ENV_ZIP_COMPRESSION_LEVEL: &str = "AUDITWHEEL_ZIP_COMPRESSION_LEVEL";
pub const ENV_LD_LIBRARY_PATH: &str = "AUDITWHEEL_LD_LIBRARY_PATH";
pub const ENV_PATCHER: &str = "AUDITWHEEL_PATCHER";

/// Where a run's settings come from, strongest first: the command line, the environment, the
/// configuration file; each setting's own rule below.
struct Sources<'a> {
    flags: &'a Flags,
    env: &'a dyn Fn(&str) -> Option<String>,
    loaded: &'a LoadedConfig,
}

impl Sources<'_> {
    /// The configuration file, as an origin.
    fn file(&self) -> Origin {
        self.loaded.path.clone().map(Origin::ConfigFile).unwrap_or(Origin::Default)
    }

    fn pick_list(&self, cli: &[String], file_value: &Option<Vec<String>>) -> Setting<Vec<String>> {
        if !cli.is_empty() {
            Setting { value: cli.to_vec(), origin: Origin::CommandLine }
        } else if let Some(v) = file_value {
            Setting { value: v.clone(), origin: self.file() }
        } else {
            Setting { value: Vec::new(), origin: Origin::Default }
        }
    }

    fn pick(&self, cli: &Option<String>, file_value: &Option<String>) -> Setting<Option<String>> {
        match (cli, file_value) {
            (Some(v), _) => Setting { value: Some(v.clone()), origin: Origin::CommandLine },
            (None, Some(v)) => Setting { value: Some(v.clone()), origin: self.file() },
            (None, None) => Setting { value: None, origin: Origin::Default },
        }
    }

    /// On unless a `--no-…` flag turns it off.
    fn unless(off: bool) -> Setting<bool> {
        Setting { value: !off, origin: if off { Origin::CommandLine } else { Origin::Default } }
    }

    /// `--rocm-version` and `--local-version`: from the command line or from the file, never
    /// half of each.
    fn labels(&self) -> (Setting<Option<String>>, Setting<Option<String>>) {
        let (flags, config) = (self.flags, &self.loaded.config);
        if flags.rocm_version.is_some() || flags.local_version.is_some() {
            (self.pick(&flags.rocm_version, &None), self.pick(&flags.local_version, &None))
        } else {
            (self.pick(&None, &config.rocm_version), self.pick(&None, &config.local_version))
        }
    }

    /// `-L`, checked to name a directory inside the wheel.
    fn lib_sdir(&self) -> Result<Setting<String>, SettingsError> {
        let lib_sdir = match self.pick(&self.flags.lib_sdir, &self.loaded.config.lib_sdir) {
            Setting { value: Some(v), origin } => Setting { value: v, origin },
            Setting { value: None, origin } => Setting { value: ".libs".into(), origin },
        };
        if !is_lib_sdir(&lib_sdir.value) {
            return Err(SettingsError::LibSdir { origin: lib_sdir.origin, value: lib_sdir.value });
        }
        Ok(lib_sdir)
    }

    fn strict_record(&self) -> Setting<bool> {
        if self.flags.strict_record {
            return Setting { value: true, origin: Origin::CommandLine };
        }
        match self.loaded.config.strict_record {
            Some(v) => Setting { value: v, origin: self.file() },
            None => Setting { value: false, origin: Origin::Default },
        }
    }

    /// `--plat` (`AUDITWHEEL_PLAT` only for `repair`, as in auditwheel): `auto`, or a tag the
    /// policies know.
    fn plat(&self, policies: &Policies) -> Result<Setting<Option<Plat>>, SettingsError> {
        let text = match (&self.flags.plat, (self.env)(ENV_PLAT)) {
            (None, Some(v)) if self.flags.repair => Setting { value: Some(v), origin: Origin::Environment(ENV_PLAT) },
            _ => self.pick(&self.flags.plat, &self.loaded.config.plat),
        };
        if let Some(value) = &text.value
            && value != "auto"
            && !policies.knows_tag(value)
        {
            return Err(SettingsError::Plat { origin: text.origin, value: value.clone() });
        }
        Ok(Setting { value: text.value.as_deref().map(Plat::parse), origin: text.origin })
    }

    fn zip_compression_level(&self) -> Result<Setting<u32>, SettingsError> {
        match (self.flags.zip_compression_level, (self.env)(ENV_ZIP_COMPRESSION_LEVEL)) {
            (Some(level), _) => Ok(Setting { value: level, origin: Origin::CommandLine }),
            (None, Some(text)) => {
                let origin = Origin::Environment(ENV_ZIP_COMPRESSION_LEVEL);
                match text.trim().parse::<u32>() {
                    Ok(level) if level <= 9 => Ok(Setting { value: level, origin }),
                    _ => Err(SettingsError::CompressionLevel { origin, value: text }),
                }
            }
            (None, None) => match self.loaded.config.zip_compression_level {
                Some(level) if level <= 9 => Ok(Setting { value: level, origin: self.file() }),
                Some(level) => Err(SettingsError::CompressionLevel { origin: self.file(), value: level.to_string() }),
                None => Ok(Setting { value: 6, origin: Origin::Default }),
            },
        }
    }

    fn patcher(&self) -> Result<Setting<PatcherChoice>, SettingsError> {
        let (value, origin) = match (&self.flags.patcher, (self.env)(ENV_PATCHER)) {
            (Some(p), _) => (p.clone(), Origin::CommandLine),
            (None, Some(p)) => (p, Origin::Environment(ENV_PATCHER)),
            (None, None) => ("patchelf".into(), Origin::Default),
        };
        match PatcherChoice::parse(&value) {
            Some(choice) => Ok(Setting { value: choice, origin }),
            None => Err(SettingsError::Patcher { origin, value }),
        }
    }

    /// `--memory`; the writing commands' default is the larger one.
    fn memory(&self) -> Result<Setting<u64>, SettingsError> {
        match self.pick(&self.flags.memory, &self.loaded.config.memory) {
            Setting { value: Some(text), origin } => {
                let bytes = budget::parse_size(&text).ok_or(SettingsError::Memory(text.clone()))?;
                Ok(Setting { value: bytes, origin })
            }
            Setting { value: None, origin } => {
                let bytes = if self.flags.writes { budget::DEFAULT_WRITE } else { budget::DEFAULT_SHOW };
                Ok(Setting { value: bytes, origin })
            }
        }
    }

    /// The version marking, when a label is given; the marking flags need one.
    fn marking(
        &self,
        rocm_version: &Setting<Option<String>>,
        local_version: &Setting<Option<String>>,
        no_mark: &Setting<Vec<String>>,
    ) -> Result<Option<Marking>, SettingsError> {
        let flags = self.flags;
        let label = match (&rocm_version.value, &local_version.value) {
            (Some(v), _) => LocalLabel::rocm(v)?,
            (None, Some(l)) => LocalLabel::new(l)?,
            (None, None) if flags.mark_pure || !flags.no_mark.is_empty() || flags.index_dir.is_some() => {
                return Err(SettingsError::MarkingWithoutLabel);
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(Marking {
            options: MarkOptions { label, mark_pure: flags.mark_pure, no_mark: no_mark.value.clone() },
            index_dir: flags.index_dir.clone(),
        }))
    }

    /// `--with-wheels`; the file's paths are relative to its directory.
    fn with_wheels(&self) -> Setting<Vec<PathBuf>> {
        if !self.flags.with_wheels.is_empty() {
            Setting { value: self.flags.with_wheels.clone(), origin: Origin::CommandLine }
        } else if let Some(list) = &self.loaded.config.with_wheels {
            let base = self.loaded.path.as_deref().and_then(|p| p.parent()).map(PathBuf::from).unwrap_or_default();
            Setting { value: list.iter().map(|p| base.join(p)).collect(), origin: self.file() }
        } else {
            Setting { value: Vec::new(), origin: Origin::Default }
        }
    }
}

impl Settings {
    /// What the first stages read of the run's settings ([`crate::examine::examine`]).
    pub fn examine_options(&self) -> crate::examine::ExamineOptions<'_> {
        crate::examine::ExamineOptions {
            analyze: &self.analyze,
            policies: &self.policies,
            plat: self.plat.value.as_ref().and_then(|p| p.tag()),
            strict_record: self.strict_record.value,
            disable_isa_check: self.disable_isa_check,
        }
    }

    /// Resolve from the flags, the process environment and the configuration file.
    pub fn resolve(flags: &Flags, loaded: &LoadedConfig) -> Result<Settings, SettingsError> {
        Self::resolve_with(flags, &process_env, loaded)
    }

    /// Resolve with `env` standing for the environment (a variable set to an empty value counts
    /// as unset, as in auditwheel's argparse defaults).
    pub fn resolve_with(
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
        loaded: &LoadedConfig,
    ) -> Result<Settings, SettingsError> {
        let from = Sources { flags, env, loaded };
        let config = &loaded.config;
        let exclude = from.pick_list(&flags.exclude, &config.exclude);
        let rocm_exclusion = Sources::unless(flags.no_rocm_exclude);
        let driver_exclusion = Sources::unless(flags.no_driver_exclude);
        let (rocm_version, local_version) = from.labels();
        let index_url = from.pick(&flags.index_url, &config.index_url);
        if let Some(url) = &index_url.value {
            crate::index::web_url(url, true).map_err(|why| SettingsError::IndexUrl { url: url.clone(), why })?;
        }
        let no_mark = from.pick_list(&flags.no_mark, &config.no_mark);
        // In this order, so that of several wrong settings the same one is named first.
        let lib_sdir = from.lib_sdir()?;
        let zip_compression_level = from.zip_compression_level()?;
        let patcher = from.patcher()?;
        let extra_library_path = match env(ENV_LD_LIBRARY_PATH) {
            Some(v) => Setting { value: Some(v), origin: Origin::Environment(ENV_LD_LIBRARY_PATH) },
            None => Setting { value: None, origin: Origin::Default },
        };
        let memory = from.memory()?;
        let marking = from.marking(&rocm_version, &local_version, &no_mark)?;
        let policies = Policies::with_files(&flags.policy_files)?;
        let plat = from.plat(&policies)?;
        let exclusion = ExcludeList::new(rocm_exclusion.value, &exclude.value)?.with_drivers(driver_exclusion.value);
        let exclusion = exclusion.with_rocm_prefixes(rocm_prefixes(env));
        let mut search = LibrarySearch::from_environment(flags.ldpaths.as_deref(), env("LD_LIBRARY_PATH").as_deref());
        if let Some(extra) = &extra_library_path.value {
            search.set_extra_dirs(extra);
        }
        let mut analyze = AnalyzeOptions::new(exclusion, search);
        analyze.verify_hashes = flags.verify;
        analyze.hash_for_record = flags.hash_for_record;
        analyze.device_code = !flags.ignores_device_code;
        analyze.memory = std::sync::Arc::new(budget::MemoryBudget::new(memory.value));
        // `WHEELFIX_PARALLEL_INFLATE_MIN=32M`: inflate members of that compressed size and more
        // on every thread of the pool (`off`, or unset: never). Opt-in: see `parallel_inflate`.
        if let Some(text) = env("WHEELFIX_PARALLEL_INFLATE_MIN") {
            let min = if text == "off" { None } else { budget::parse_size(&text) };
            if min.is_some() && !cfg!(feature = "parallel-inflate") {
                eprintln!(
                    "wheelfix: warning: WHEELFIX_PARALLEL_INFLATE_MIN is ignored: this build has no parallel inflate (cargo feature `parallel-inflate`)"
                );
            }
            analyze.parallel_inflate = min.and_then(crate::zip::ParallelInflate::with_pool_threads);
        }
        let split = from.split()?;
        Ok(Settings {
            config_file: loaded.path.clone(),
            split,
            copy_room: copy_room(env)?,
            source_date_epoch: source_date_epoch(env)?,
            damage_output: cfg!(feature = "test-hooks") && env("WHEELFIX_TEST_DAMAGE_OUTPUT").as_deref() == Some("1"),
            exclude,
            rocm_exclusion,
            plat,
            only_plat: flags.only_plat,
            keep_tags: flags.keep_tags,
            rocm_version,
            index_url,
            local_version,
            lib_sdir,
            gpu_targets: from.pick_list(&flags.gpu_targets, &config.gpu_targets),
            no_mark,
            strict_record: from.strict_record(),
            memory,
            zip_compression_level,
            extra_library_path,
            patcher,
            strip: flags.strip,
            with_wheels: from.with_wheels(),
            driver_exclusion,
            disable_isa_check: flags.disable_isa_ext_check,
            marking,
            policies,
            analyze,
        })
    }

    /// The tag the run asks for (`--plat`, `--only-plat`, `--no-update-tags`).
    pub fn tag_request(&self) -> TagRequest {
        TagRequest {
            plat: self.plat.value.as_ref().and_then(Plat::tag).cloned(),
            only_plat: self.only_plat,
            keep_tags: self.keep_tags,
        }
    }

    /// Default settings around ready analysis options (for library users and benchmarks).
    pub fn with_options(analyze: AnalyzeOptions) -> Settings {
        let default = |v| Setting { value: v, origin: Origin::Default };
        Settings {
            config_file: None,
            split: SplitSettings::default(),
            copy_room: crate::analysis::copy::DEFAULT_ROOM,
            source_date_epoch: None,
            damage_output: false,
            exclude: default(Vec::new()),
            rocm_exclusion: Setting { value: true, origin: Origin::Default },
            plat: Setting { value: None, origin: Origin::Default },
            only_plat: false,
            keep_tags: false,
            rocm_version: Setting { value: None, origin: Origin::Default },
            index_url: Setting { value: None, origin: Origin::Default },
            local_version: Setting { value: None, origin: Origin::Default },
            lib_sdir: Setting { value: ".libs".into(), origin: Origin::Default },
            gpu_targets: default(Vec::new()),
            no_mark: default(Vec::new()),
            strict_record: Setting { value: false, origin: Origin::Default },
            memory: Setting { value: analyze.memory.total(), origin: Origin::Default },
            zip_compression_level: Setting { value: 6, origin: Origin::Default },
            extra_library_path: Setting { value: None, origin: Origin::Default },
            patcher: Setting { value: PatcherChoice::Patchelf, origin: Origin::Default },
            strip: false,
            with_wheels: Setting { value: Vec::new(), origin: Origin::Default },
            driver_exclusion: Setting { value: true, origin: Origin::Default },
            disable_isa_check: false,
            marking: None,
            policies: Policies::embedded(),
            analyze,
        }
    }

    /// What `repair` is asked to do besides vendoring.
    pub fn repair(&self) -> crate::plan::repair::RepairSettings {
        crate::plan::repair::RepairSettings {
            lib_sdir: self.lib_sdir.value.clone(),
            strip: self.strip,
            compression_level: self.zip_compression_level.value,
        }
    }

    /// `show --config`: the configuration file, every setting, its value and where it came from.
    pub fn describe_text(&self) -> String {
        let file = self.config_file.as_ref().map(|p| p.display().to_string());
        let mut out = format!("{:<20} {}\n", "config file", file.unwrap_or_else(|| "(none found)".into()));
        for (key, value, from) in self.describe() {
            out.push_str(&format!("{key:<20} {value:<40} ({from})\n"));
        }
        out
    }

    /// Every setting as `(key, value, where it came from)`, for `show --config`.
    pub fn describe(&self) -> Vec<(&'static str, String, String)> {
        let list = |v: &[String]| format!("[{}]", v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "));
        let text = |v: &Option<String>| v.as_ref().map(|v| format!("{v:?}")).unwrap_or_else(|| "(none)".into());
        let split = &self.split;
        vec![
            ("exclude", list(&self.exclude.value), self.exclude.origin.to_string()),
            ("plat", text(&self.plat.value.as_ref().map(Plat::to_string)), self.plat.origin.to_string()),
            ("rocm-version", text(&self.rocm_version.value), self.rocm_version.origin.to_string()),
            ("local-version", text(&self.local_version.value), self.local_version.origin.to_string()),
            ("lib-sdir", format!("{:?}", self.lib_sdir.value), self.lib_sdir.origin.to_string()),
            ("gpu-targets", list(&self.gpu_targets.value), self.gpu_targets.origin.to_string()),
            ("no-mark", list(&self.no_mark.value), self.no_mark.origin.to_string()),
            ("strict-record", self.strict_record.value.to_string(), self.strict_record.origin.to_string()),
            ("memory", format!("{}M", self.memory.value >> 20), self.memory.origin.to_string()),
            (
                "zip-compression-level",
                self.zip_compression_level.value.to_string(),
                self.zip_compression_level.origin.to_string(),
            ),
            ("extra library path", text(&self.extra_library_path.value), self.extra_library_path.origin.to_string()),
            ("patcher", format!("{:?}", self.patcher.value.as_str()), self.patcher.origin.to_string()),
            ("rocm exclusion list", self.rocm_exclusion.value.to_string(), self.rocm_exclusion.origin.to_string()),
            ("gpu driver list", self.driver_exclusion.value.to_string(), self.driver_exclusion.origin.to_string()),
            (
                "with-wheels",
                format!(
                    "[{}]",
                    self.with_wheels
                        .value
                        .iter()
                        .map(|p| format!("{:?}", p.display().to_string()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                self.with_wheels.origin.to_string(),
            ),
            ("device-name", format!("{:?}", split.device_name.value), split.device_name.origin.to_string()),
            ("group-by", format!("{:?}", split.group_by.value.to_string()), split.group_by.origin.to_string()),
            ("group", text(&split.kpack_group.value), split.kpack_group.origin.to_string()),
            ("overlay-root", text(&split.overlay_root.value), split.overlay_root.origin.to_string()),
            ("archive-per", format!("{:?}", split.archive_per.value.to_string()), split.archive_per.origin.to_string()),
            (
                "device-requires-dist",
                list(&split.device_requires_dist.value),
                split.device_requires_dist.origin.to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::wheel::platform_tag::PlatformTag;

    fn file(config: Config) -> LoadedConfig {
        LoadedConfig { path: Some(PathBuf::from("/project/pyproject.toml")), config }
    }

    #[test]
    fn show_config_lists_splits_keys_and_where_they_came_from() {
        let config = Config {
            archive_per: Some("target-id".into()),
            overlay_root: Some("torch/".into()),
            group_by: Some("family".into()),
            device_requires_dist: Some(vec![" rocm-sdk-device-@GFXARCH@==7.1.0".into()]),
            ..Config::default()
        };
        let settings = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config)).unwrap();
        assert_eq!(settings.split.archive_per.value, crate::plan::split::ArchivePer::TargetId);
        let described = settings.describe();
        let row = |key: &str| described.iter().find(|(k, _, _)| *k == key).map(|(_, v, o)| (v.clone(), o.clone()));
        let from_file = "/project/pyproject.toml".to_string();
        assert_eq!(row("archive-per"), Some(("\"target-id\"".into(), from_file.clone())));
        assert_eq!(row("overlay-root"), Some(("\"torch\"".into(), from_file.clone())));
        assert_eq!(row("group-by"), Some(("\"family\"".into(), from_file)));
        assert_eq!(row("group"), Some(("(none)".into(), "default".into())));
        let requirement = "[\"rocm-sdk-device-@GFXARCH@==7.1.0\"]".to_string();
        assert_eq!(row("device-requires-dist"), Some((requirement, "/project/pyproject.toml".into())));
    }

    #[test]
    fn splits_flags_win_over_the_file_and_an_overlay_root_means_an_archive_per_target_id() {
        let config = Config {
            device_name: Some("amd-{name}-device-{target}".into()),
            group_by: Some("family".into()),
            ..Config::default()
        };
        let flags = Flags {
            split: SplitFlags {
                group_by: Some(crate::plan::split::GroupBy::Target),
                overlay_root: Some("torch/".into()),
                ..SplitFlags::default()
            },
            ..Flags::default()
        };
        let split = Settings::resolve_with(&flags, &env_of(&[]), &file(config)).unwrap().split;
        assert_eq!(split.device_name.value, "amd-{name}-device-{target}");
        assert_eq!(split.device_name.origin, Origin::ConfigFile("/project/pyproject.toml".into()));
        assert_eq!(
            (split.group_by.value, split.group_by.origin),
            (crate::plan::split::GroupBy::Target, Origin::CommandLine)
        );
        assert_eq!(split.overlay_root.value.as_deref(), Some("torch"));
        assert_eq!(split.archive_per.value, crate::plan::split::ArchivePer::TargetId);
        let bad =
            Flags { split: SplitFlags { kpack_group: Some(".x".into()), ..SplitFlags::default() }, ..Flags::default() };
        assert!(Settings::resolve_with(&bad, &env_of(&[]), &LoadedConfig::default()).is_err());
    }

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_command_line_wins_over_the_environment_which_wins_over_the_file() {
        let config = Config {
            plat: Some("manylinux_2_17_x86_64".into()),
            zip_compression_level: Some(3),
            lib_sdir: Some(".vendored".into()),
            memory: Some("1G".into()),
            ..Config::default()
        };
        let env =
            env_of(&[(ENV_PLAT, "manylinux_2_28_x86_64"), (ENV_ZIP_COMPRESSION_LEVEL, "9"), (ENV_PATCHER, "none")]);
        // repair: AUDITWHEEL_PLAT and the compression level from the environment.
        let repair = Flags { repair: true, ..Flags::default() };
        let s = Settings::resolve_with(&repair, &env, &file(config.clone())).unwrap();
        assert_eq!(s.plat.value, Some(Plat::parse("manylinux_2_28_x86_64")));
        assert_eq!(s.plat.origin, Origin::Environment(ENV_PLAT));
        assert_eq!((s.zip_compression_level.value, s.patcher.value), (9, PatcherChoice::None));
        assert_eq!(s.lib_sdir.value, ".vendored");
        assert_eq!(s.lib_sdir.origin, Origin::ConfigFile(PathBuf::from("/project/pyproject.toml")));
        assert_eq!(s.memory.value, 1 << 30);
        // The command line over both.
        let flags = Flags {
            repair: true,
            plat: Some("auto".into()),
            zip_compression_level: Some(1),
            lib_sdir: Some(".libs".into()),
            patcher: Some("patchelf".into()),
            ..Flags::default()
        };
        let s = Settings::resolve_with(&flags, &env, &file(config.clone())).unwrap();
        assert_eq!((s.plat.value, s.plat.origin), (Some(Plat::Auto), Origin::CommandLine));
        assert_eq!((s.zip_compression_level.value, s.patcher.value), (1, PatcherChoice::Patchelf));
        assert_eq!(s.lib_sdir.value, ".libs");
        // AUDITWHEEL_PLAT is repair's only, as in auditwheel: retag reads the file.
        let s = Settings::resolve_with(&Flags::default(), &env, &file(config)).unwrap();
        assert_eq!(s.plat.value, Some(Plat::parse("manylinux_2_17_x86_64")));
        assert_eq!(s.tag_request().plat, Some(PlatformTag::parse("manylinux_2_17_x86_64")));
    }

    #[test]
    fn labels_come_whole_from_one_place_and_marking_flags_need_one() {
        let config = Config { rocm_version: Some("6.4.1".into()), ..Config::default() };
        let none = env_of(&[]);
        let s = Settings::resolve_with(&Flags::default(), &none, &file(config.clone())).unwrap();
        assert_eq!(s.rocm_version.value.as_deref(), Some("6.4.1"));
        assert_eq!(s.marking.unwrap().options.label.label, "rocm6.4.1");
        // `--local-version` on the command line drops the file's ROCm version.
        let flags = Flags { local_version: Some("cu128".into()), ..Flags::default() };
        let s = Settings::resolve_with(&flags, &none, &file(config)).unwrap();
        assert_eq!((s.rocm_version.value, s.local_version.value.as_deref()), (None, Some("cu128")));
        let flags = Flags { mark_pure: true, ..Flags::default() };
        let err = Settings::resolve_with(&flags, &none, &LoadedConfig::default()).unwrap_err();
        assert!(matches!(err, SettingsError::MarkingWithoutLabel), "{err}");
    }

    #[test]
    fn wrong_values_name_where_they_came_from() {
        let env = env_of(&[(ENV_ZIP_COMPRESSION_LEVEL, "11"), (ENV_PATCHER, "lief")]);
        let err = Settings::resolve_with(&Flags::default(), &env, &LoadedConfig::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment AUDITWHEEL_ZIP_COMPRESSION_LEVEL: `11` is not a compression level (0-9)"
        );
        let env = env_of(&[(ENV_PATCHER, "lief")]);
        let err = Settings::resolve_with(&Flags::default(), &env, &LoadedConfig::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment AUDITWHEEL_PATCHER: `lief` is not a patcher (patchelf, lief-patchelf or none)"
        );
        let config = Config {
            lib_sdir: Some("/../../tmp".into()),
            plat: Some("manylinux_9_9_x86_64".into()),
            ..Config::default()
        };
        let err = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config.clone())).unwrap_err();
        assert!(
            err.to_string().starts_with("/project/pyproject.toml: lib-sdir `/../../tmp` would leave the wheel"),
            "{err}"
        );
        let config = Config { lib_sdir: None, ..config };
        let err = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config)).unwrap_err();
        assert!(
            err.to_string().starts_with("/project/pyproject.toml: `manylinux_9_9_x86_64` is not a platform tag"),
            "{err}"
        );
    }

    #[test]
    fn every_variable_comes_through_the_injected_environment() {
        let env = env_of(&[("WHEELFIX_COPY_ROOM", "4G"), ("SOURCE_DATE_EPOCH", " 1700000000 ")]);
        let s = Settings::resolve_with(&Flags::default(), &env, &LoadedConfig::default()).unwrap();
        assert_eq!((s.copy_room, s.source_date_epoch), (4 << 30, Some(1_700_000_000)));
        let s = Settings::resolve_with(
            &Flags::default(),
            &env_of(&[("WHEELFIX_COPY_ROOM", "0")]),
            &file(Config::default()),
        );
        assert_eq!((s.as_ref().unwrap().copy_room, s.unwrap().source_date_epoch), (0, None));
        let s = Settings::resolve_with(&Flags::default(), &env_of(&[]), &LoadedConfig::default()).unwrap();
        assert_eq!(s.copy_room, crate::analysis::copy::DEFAULT_ROOM);
        for (name, value, message) in [
            ("WHEELFIX_COPY_ROOM", "lots", "WHEELFIX_COPY_ROOM=lots is not a size (like 4G, or 0 for none)"),
            ("SOURCE_DATE_EPOCH", "yesterday", "SOURCE_DATE_EPOCH=yesterday is not a number of seconds"),
        ] {
            let vars: &'static [(&'static str, &'static str)] = Box::leak(Box::new([(name, value)]));
            let err = Settings::resolve_with(&Flags::default(), &env_of(vars), &LoadedConfig::default()).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn split_naming_in_the_file_is_typed_and_checked_once() {
        let config = Config { group_by: Some("family".into()), group: Some("rocm".into()), ..Config::default() };
        let s = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config)).unwrap();
        assert_eq!(
            (s.split.group_by.value, s.split.kpack_group.value.as_deref()),
            (crate::plan::split::GroupBy::Family, Some("rocm"))
        );
        for (config, message) in [
            (
                Config { group_by: Some("galaxy".into()), ..Config::default() },
                "group-by = \"galaxy\" in [tool.wheelfix]: target, subfamily or family",
            ),
            (Config { group: Some("../up".into()), ..Config::default() }, "group = \"../up\" in [tool.wheelfix]"),
            (
                Config { overlay_root: Some("/abs".into()), ..Config::default() },
                "overlay-root = \"/abs\" in [tool.wheelfix]",
            ),
            (
                Config { archive_per: Some("target".into()), ..Config::default() },
                "archive-per = \"target\" in [tool.wheelfix]: processor or target-id",
            ),
            (Config { device_name: Some("{name}-gpu".into()), ..Config::default() }, "has no {target}"),
            (
                Config {
                    device_requires_dist: Some(vec!["ok==1".into(), "x @ https://e.com/x.whl".into()]),
                    ..Config::default()
                },
                "device-requires-dist = \"x @ https://e.com/x.whl\" in [tool.wheelfix]: device requirement `x @ https://e.com/x.whl` names a URL",
            ),
        ] {
            let err = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config)).unwrap_err();
            assert!(err.to_string().contains(message), "{err}");
        }
    }

    #[test]
    fn with_wheels_from_the_file_are_relative_to_it() {
        let config = Config { with_wheels: Some(vec!["deps".into()]), ..Config::default() };
        let s = Settings::resolve_with(&Flags::default(), &env_of(&[]), &file(config)).unwrap();
        assert_eq!(s.with_wheels.value, [PathBuf::from("/project/deps")]);
        let flags = Flags { with_wheels: vec![PathBuf::from("here")], ..Flags::default() };
        let s = Settings::resolve_with(&flags, &env_of(&[]), &LoadedConfig::default()).unwrap();
        assert_eq!((s.with_wheels.value, s.with_wheels.origin), (vec![PathBuf::from("here")], Origin::CommandLine));
    }
}
