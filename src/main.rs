//! The `wheelfix` command: parse arguments, call the library, render, exit with the truth.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use wheelfix::config::LoadedConfig;
use wheelfix::progress::{NoProgress, Progress};
use wheelfix::release::check::Severity;
use wheelfix::report::ShowReport;
use wheelfix::settings::{Flags, Settings};
use wheelfix::version::{OrderingHazard, VersionChange};
use wheelfix::{Destination, RetagOutcome};

#[derive(Parser)]
#[command(
    name = "wheelfix",
    version,
    about = "Audit Python wheels and make their platform tags, versions and metadata true",
    long_about = None,
    after_help = "Examples:\n  wheelfix show dist/*.whl\n  wheelfix repair -w wheelhouse/ dist/*.whl\n  wheelfix retag --rocm-version 10.1.0 -w wheelhouse/ dist/*.whl\n\nSettings can live in pyproject.toml under [tool.wheelfix]; `wheelfix show --config` prints them."
)]
struct Cli {
    /// Show the library search and the decisions (on stderr).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explain the platform tag each wheel honestly meets, and why.
    #[command(
        after_help = "Examples:\n  wheelfix show dist/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl\n  wheelfix show --json dist/*.whl"
    )]
    Show(ShowArgs),
    /// Write wheels with their true platform tags (file name and WHEEL).
    #[command(
        after_help = "Examples:\n  wheelfix retag dist/*.whl -w wheelhouse/\n  wheelfix retag --in-place dist/*.whl"
    )]
    Retag(RetagArgs),
    /// Vendor external (non-ROCm) shared libraries into each wheel and write its true tags.
    #[command(
        after_help = "Examples:\n  wheelfix repair -w wheelhouse/ dist/*.whl\n  wheelfix repair --exclude 'libcuda.so.*' --plat manylinux_2_28_x86_64 -w wheelhouse/ dist/mypkg.whl\n  # cibuildwheel: repair-wheel-command = \"wheelfix repair -w {dest_dir} {wheel}\""
    )]
    Repair(RepairArgs),
    /// Write a metapackage wheel that pins every given wheel at its exact version.
    #[command(
        after_help = "Example:\n  wheelfix metapackage --name rocm-torch --rocm-version 10.1.0 --gpu-target gfx950 -o index-src/gfx950/ wheelhouse/gfx950/*.whl"
    )]
    Metapackage(MetapackageArgs),
    /// Write a static pip index (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata) for directories of wheels.
    #[command(
        after_help = "Example:\n  wheelfix index -o site/gfx950/ --base-url https://example.org/releases/download/v1/ --python 3.14 wheelhouse/gfx950/"
    )]
    Index(IndexArgs),
    /// Lint a release set: conflicting uploads, selector extras, pins, labels, architectures, tags.
    #[command(after_help = "Examples:\n  wheelfix check dist-linux/ dist-windows/\n  wheelfix check --json site/")]
    Check(CheckArgs),
    /// The dependency tree of an ELF file or a wheel member, as the loader resolves it.
    ///
    /// Each library with the directory it was found in and why that directory was searched; for
    /// a wheel without MEMBER, every host binary.
    #[command(
        after_help = "Examples:\n  wheelfix lddtree /usr/bin/python3\n  wheelfix lddtree dist/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl torch/_C.cpython-312-x86_64-linux-gnu.so\n  wheelfix lddtree --json build/lib/_ext.so"
    )]
    Lddtree(LddtreeArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  wheelfix completions bash > /etc/bash_completion.d/wheelfix\n  wheelfix completions zsh > \"${fpath[1]}/_wheelfix\"\n  wheelfix completions fish > ~/.config/fish/completions/wheelfix.fish"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
struct LddtreeArgs {
    /// An ELF file, or a wheel.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The wheel member to show (default: every host binary of the wheel).
    #[arg(value_name = "MEMBER")]
    member: Option<String>,
    /// Search these directories (colon-separated) instead of the system's library path.
    #[arg(long, value_name = "PATHS")]
    ldpaths: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct MetapackageArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// The metapackage's project name. Ex) rocm-torch
    #[arg(long)]
    name: String,
    /// The ROCm version, the public part of the metapackage's version. Ex) 10.1.0
    #[arg(long, value_name = "VERSION")]
    rocm_version: String,
    /// The GPU architecture of this set. Ex) gfx950
    #[arg(long, value_name = "TARGET")]
    gpu_target: String,
    /// Output directory.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR", default_value = ".")]
    output_dir: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct IndexArgs {
    /// Directories (or files) of wheels.
    #[arg(required = true, value_name = "DIR")]
    inputs: Vec<PathBuf>,
    /// Output directory, replaced whole and atomically when an earlier run wrote it; it must not
    /// be, contain or lie inside an input directory (the inputs are never touched).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// The directory URL where the wheels are hosted (a release's assets): links are
    /// `<URL>/<file>`, with or without a trailing slash. Relative links when absent.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Collect every file to upload to --base-url in DIR: the wheels (hard links) and their PEP 658
    /// `.metadata` sidecars, which installers fetch beside each wheel.
    #[arg(long, value_name = "DIR")]
    upload_dir: Option<PathBuf>,
    /// Write no PEP 658 metadata (no `data-core-metadata`, no sidecars), for hosts that can only
    /// serve the wheels.
    #[arg(long)]
    no_core_metadata: bool,
    /// Name every wheel whose Requires-Python or tags exclude this interpreter. Ex) 3.14
    #[arg(long, value_name = "X.Y")]
    python: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// Directories of wheels and sdists.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Skip hashing every member against RECORD (sizes and rows are still compared).
    #[arg(long)]
    no_verify: bool,
    /// Fail (exit 1) on warnings too, not only on errors.
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct RepairArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// Directory for the output wheels.
    #[arg(short = 'w', long = "wheel-dir", value_name = "DIR", default_value = "wheelhouse")]
    wheel_dir: PathBuf,
    /// The policy to repair to (`auto`: the most compatible the wheel can meet); fails if it
    /// cannot. Default: $AUDITWHEEL_PLAT, else `plat` in [tool.wheelfix], else auto.
    #[arg(long, value_name = "TAG")]
    plat: Option<String>,
    /// Write only the --plat tag (`auto` when no --plat is given).
    #[arg(long)]
    only_plat: bool,
    /// Suffix of the directory (after the distribution name) that receives the libraries.
    #[arg(short = 'L', long = "lib-sdir", value_name = "SUFFIX")]
    lib_sdir: Option<String>,
    /// Strip symbols (`strip -s`) from the vendored libraries and from every ELF file of the
    /// wheel, before patching, as auditwheel does.
    #[arg(long)]
    strip: bool,
    /// Deflate level (0-9) for the members written anew. Default: $AUDITWHEEL_ZIP_COMPRESSION_LEVEL,
    /// else `zip-compression-level` in [tool.wheelfix], else 6.
    #[arg(short = 'z', long = "zip-compression-level", value_name = "LEVEL", value_parser = clap::value_parser!(u32).range(0..=9))]
    zip_compression_level: Option<u32>,
    /// Skip the sha256 check of every member against RECORD.
    #[arg(long)]
    no_verify: bool,
    /// Keep the wheel's tags as they are (vendor and patch only).
    #[arg(long, conflicts_with_all = ["plat", "only_plat"])]
    no_update_tags: bool,
    /// Accepted for auditwheel compatibility: wheelfix never refuses a pure wheel (it is copied).
    #[arg(long)]
    allow_pure_python_wheel: bool,
    /// auditwheel's patcher choice: `patchelf` and `lief-patchelf` both use wheelfix's own ELF
    /// writer; `none` fails a wheel whose files need patching. Default: $AUDITWHEEL_PATCHER.
    #[arg(long, value_name = "PATCHER")]
    patcher: Option<String>,
    #[command(flatten)]
    versions: VersionArgs,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CommonArgs {
    /// Replace the embedded manylinux or musllinux policy file (auditwheel's JSON schema).
    #[arg(long = "policy-file", value_name = "FILE")]
    policy_files: Vec<PathBuf>,
    /// A library the environment provides (glob on the soname or the resolved path); repeatable.
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// Do not treat the libraries ROCm ships as provided by the environment.
    #[arg(long)]
    no_rocm_exclude: bool,
    /// Do not treat GPU driver libraries (libcuda.so.1, libnvidia-ml.so.1) as provided by the
    /// machine's driver.
    #[arg(long)]
    no_driver_exclude: bool,
    /// Wheels (files or directories) that will be installed beside the audited ones; an RPATH
    /// entry that leaves a wheel is resolved among their files, as a dependency. Repeatable.
    #[arg(long = "with-wheels", value_name = "PATH")]
    with_wheels: Vec<PathBuf>,
    /// Search these directories (colon-separated) instead of the system's library path
    /// ($AUDITWHEEL_LD_LIBRARY_PATH is searched first, before $LD_LIBRARY_PATH, in every case).
    #[arg(long, value_name = "PATHS")]
    ldpaths: Option<String>,
    /// Do not lower the tag for x86-64 ISA extensions (x86-64-v2 and above).
    #[arg(long)]
    disable_isa_ext_check: bool,
    /// Fail a wheel whose RECORD disagrees with its archive in any way (stale sizes or hashes,
    /// missing or extra rows, md5 or no hashes) instead of reporting it and writing a true RECORD.
    #[arg(long)]
    strict_record: bool,
    /// The memory wheelfix's buffers may take, across all wheels and cores (`512M`, `2G`).
    /// Defaults: 160M for show and check, 384M for retag and repair (plus the libraries repair
    /// patches). More buys speed on wheels with large members.
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Read `[tool.wheelfix]` from this file instead of the closest pyproject.toml; `show --config`
    /// without wheels prints the resolved settings and where each came from.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    config: Option<Option<PathBuf>>,
}

impl CommonArgs {
    fn load_config(&self) -> Result<LoadedConfig, String> {
        let explicit = self.config.clone().flatten();
        wheelfix::config::resolve(explicit.as_deref()).map_err(|e| e.to_string())
    }

    /// The flags every command shares, as plain values.
    fn flags(&self) -> Flags {
        Flags {
            exclude: self.exclude.clone(),
            no_rocm_exclude: self.no_rocm_exclude,
            no_driver_exclude: self.no_driver_exclude,
            with_wheels: self.with_wheels.clone(),
            policy_files: self.policy_files.clone(),
            ldpaths: self.ldpaths.clone(),
            disable_isa_ext_check: self.disable_isa_ext_check,
            strict_record: self.strict_record,
            memory: self.memory.clone(),
            ..Flags::default()
        }
    }

    /// Resolve the run's settings from these flags (completed by `complete`) and the
    /// configuration file.
    fn settings(&self, complete: impl FnOnce(&mut Flags)) -> Result<Settings, String> {
        let loaded = self.load_config()?;
        let mut flags = self.flags();
        complete(&mut flags);
        Settings::resolve(&flags, &loaded).map_err(|e| e.to_string())
    }
}

#[derive(Args)]
struct VersionArgs {
    /// Append `+rocm<VERSION>` to the version of every wheel with compiled code (a host binary or
    /// device code; pure wheels only with --mark-pure or when they require a wheel of the batch that
    /// is marked), keeping git hashes; a version that
    /// already names ROCm and the --no-mark projects are left alone.
    #[arg(long, value_name = "VERSION", conflicts_with = "local_version")]
    rocm_version: Option<String>,
    /// Append this local label instead (the general form of --rocm-version). Ex) `cu128`
    #[arg(long, value_name = "LABEL")]
    local_version: Option<String>,
    /// Mark pure-Python wheels too.
    #[arg(long)]
    mark_pure: bool,
    /// Leave this project's version alone; repeatable.
    #[arg(long = "no-mark", value_name = "NAME")]
    no_mark: Vec<String>,
    /// Directory of wheels already published, checked for local labels that sort against their ROCm order.
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
}

impl VersionArgs {
    fn fill(&self, flags: &mut Flags) {
        flags.rocm_version = self.rocm_version.clone();
        flags.local_version = self.local_version.clone();
        flags.mark_pure = self.mark_pure;
        flags.no_mark = self.no_mark.clone();
        flags.index_dir = self.index_dir.clone();
    }
}

#[derive(Args)]
struct ShowArgs {
    #[arg(value_name = "WHEEL", required_unless_present = "config")]
    wheels: Vec<PathBuf>,
    /// Also check every member's sha256 against RECORD.
    #[arg(long)]
    verify: bool,
    /// Accepted for auditwheel compatibility: pure wheels are always reported (exit 0).
    #[arg(long)]
    allow_pure_python_wheel: bool,
    /// Fail (exit 1) for each wheel that has device code but none for this GPU target; repeatable.
    #[arg(long = "expect-gpu-target", value_name = "TARGET")]
    expect_gpu_targets: Vec<String>,
    /// The JSON document: wheelfix's own (`--json`), or exactly what `auditwheel show --json`
    /// prints (one document per wheel, in order; implies --json).
    #[arg(long, value_enum, value_name = "FORMAT")]
    json_format: Option<JsonFormat>,
    #[command(flatten)]
    versions: VersionArgs,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum JsonFormat {
    Wheelfix,
    Auditwheel,
}

#[derive(Args)]
struct RetagArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// Directory for the output wheels.
    #[arg(short = 'w', long = "wheel-dir", value_name = "DIR", conflicts_with = "in_place")]
    wheel_dir: Option<PathBuf>,
    /// Replace each input wheel (atomically) instead of writing a copy.
    #[arg(long)]
    in_place: bool,
    /// The tag to write (`auto`: the derived one); fails if the wheel does not meet it.
    #[arg(long, value_name = "TAG")]
    plat: Option<String>,
    /// Write only the --plat tag (`auto` when no --plat is given), not the derived one nor the
    /// honoured claimed ones.
    #[arg(long)]
    only_plat: bool,
    /// Skip the sha256 check of every member against RECORD.
    #[arg(long)]
    no_verify: bool,
    #[command(flatten)]
    versions: VersionArgs,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    wheelfix::parallel::fix_allocator_thresholds();
    let cli = Cli::parse();
    wheelfix::log::set_verbose(cli.verbose);
    wheelfix::wheel::output::install_signal_cleanup();
    let result = match cli.command {
        Command::Show(args) => run_show(args),
        Command::Retag(args) => run_retag(args),
        Command::Repair(args) => run_repair(args),
        Command::Metapackage(args) => run_metapackage(args),
        Command::Index(args) => run_index(args),
        Command::Check(args) => run_check(args),
        Command::Lddtree(args) => run_lddtree(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command, "wheelfix", &mut out);
            print_out(&String::from_utf8_lossy(&out));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("wheelfix: error: {message}");
            ExitCode::from(2)
        }
    }
}

/// A byte progress bar on stderr, only when stderr is a terminal.
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

fn progress_bar(wheels: &[PathBuf], quiet: bool) -> Box<dyn Progress> {
    if quiet || !std::io::stderr().is_terminal() {
        return Box::new(NoProgress);
    }
    let total: u64 = wheels.iter().filter_map(|w| std::fs::metadata(w).ok()).map(|m| m.len()).sum();
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {wide_bar} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Box::new(Bar(bar))
}

fn run_show(args: ShowArgs) -> Result<ExitCode, String> {
    let settings = args.common.settings(|f| {
        args.versions.fill(f);
        f.verify = args.verify;
        f.gpu_targets = args.expect_gpu_targets.clone();
        // `show --config` shows what `repair` would use, environment included.
        f.repair = args.wheels.is_empty();
    })?;
    if args.wheels.is_empty() {
        print_out(&config_text(&settings));
        return Ok(ExitCode::SUCCESS);
    }
    if args.json_format == Some(JsonFormat::Auditwheel) {
        return Ok(show_auditwheel(&args, &settings));
    }
    let json = args.common.json || args.json_format == Some(JsonFormat::Wheelfix);
    let marking = settings.marking.is_some();
    let progress = progress_bar(&args.wheels, args.common.quiet);
    let batch = wheelfix::show_batch(&args.wheels, &settings, progress.as_ref());
    drop(progress);
    let mut reports: Vec<(ShowReport, Option<VersionChange>)> = batch
        .results
        .into_iter()
        .zip(&args.wheels)
        .map(|(result, path)| match result {
            Ok((report, change)) => (report, marking.then_some(change)),
            Err(e) => (ShowReport::failed(&display_name(path), format!("{}: {e}", path.display())), None),
        })
        .collect();
    for (report, _) in &mut reports {
        report.check_gpu_targets(&settings.gpu_targets.value);
    }
    let failed = reports.iter().filter(|(r, _)| r.error.is_some() || !r.missing_gpu_targets.is_empty()).count();
    if json {
        let values: Vec<serde_json::Value> = reports
            .iter()
            .map(|(report, change)| {
                let mut value = serde_json::to_value(report).expect("reports serialise");
                if let (Some(change), Some(object)) = (change, value.as_object_mut()) {
                    object.insert(
                        "local_version".into(),
                        serde_json::to_value(&change.local_version).expect("serialises"),
                    );
                    object.insert("pins".into(), serde_json::to_value(&change.pins).expect("serialises"));
                }
                value
            })
            .collect();
        print_out(&(serde_json::to_string_pretty(&values).expect("reports serialise") + "\n"));
    } else {
        let text: Vec<String> = reports
            .iter()
            .map(|(report, change)| {
                let mut text = report.to_text();
                if let Some(change) = change {
                    text.push_str(&version_text(change));
                }
                text
            })
            .collect();
        print_out(&text.join("\n"));
        for (r, _) in reports.iter().filter(|(r, _)| r.error.is_some()) {
            eprintln!("wheelfix: error: {}", r.error.as_deref().unwrap_or_default());
        }
    }
    for (r, _) in reports.iter().filter(|(r, _)| !r.missing_gpu_targets.is_empty()) {
        eprintln!(
            "wheelfix: error: {} has device code for {} but none for {}",
            r.wheel,
            r.gpu_targets.join(", "),
            r.missing_gpu_targets.join(", ")
        );
    }
    print_hazards(&batch.hazards);
    Ok(finish(failed, reports.len()))
}

/// `show --json-format auditwheel`: auditwheel's documents; a wheel that fails, or that
/// auditwheel would refuse (not a platform wheel), gives its error form and exit 1, as there.
fn show_auditwheel(args: &ShowArgs, settings: &Settings) -> ExitCode {
    let progress = progress_bar(&args.wheels, args.common.quiet);
    let documents =
        wheelfix::show_auditwheel_batch(&args.wheels, settings, args.allow_pure_python_wheel, progress.as_ref());
    drop(progress);
    let mut failed = 0;
    for (path, document) in args.wheels.iter().zip(documents) {
        let document = document.unwrap_or_else(|e| {
            wheelfix::report::auditwheel::error(&display_name(path), &format!("{}: {e}", path.display()))
        });
        failed += usize::from(document.is_error);
        print_out(&document.text);
    }
    finish(failed, args.wheels.len())
}

/// `show --config`: every setting, its value and where it came from.
fn config_text(settings: &Settings) -> String {
    let file = settings.config_file.as_ref().map(|p| p.display().to_string());
    let mut out = format!("{:<20} {}\n", "config file", file.unwrap_or_else(|| "(none found)".into()));
    for (key, value, from) in settings.describe() {
        out.push_str(&format!("{key:<20} {value:<40} ({from})\n"));
    }
    out
}

/// The version decision and pin rewrites of one wheel, as text lines.
fn version_text(change: &VersionChange) -> String {
    let mut out = String::new();
    if let Some(d) = &change.local_version {
        match &d.new_version {
            Some(new) => out.push_str(&format!("  version: {} -> {new} ({})\n", d.version, d.reason)),
            None => out.push_str(&format!("  version: {} unchanged ({})\n", d.version, d.reason)),
        }
    }
    for pin in &change.pins {
        match &pin.new_requirement {
            Some(new) => out.push_str(&format!("  pin: {} -> {new}\n", pin.requirement)),
            None => out.push_str(&format!("  warning: `{}`: {}\n", pin.requirement, pin.message)),
        }
    }
    out
}

fn print_hazards(hazards: &[OrderingHazard]) {
    for h in hazards {
        eprintln!("wheelfix: warning: {} (ROCm/TheRock#7183)", h.message);
    }
}

/// The flags `retag` and `repair` share: hash every member unless told not to, and always
/// those whose RECORD row must be written anew; the tag asked for; the version marking.
fn writing_flags(f: &mut Flags, versions: &VersionArgs, no_verify: bool, plat: &Option<String>, only_plat: bool) {
    versions.fill(f);
    f.verify = !no_verify;
    f.hash_for_record = true;
    f.writes = true;
    f.plat = plat.clone();
    f.only_plat = only_plat;
}

fn run_retag(args: RetagArgs) -> Result<ExitCode, String> {
    let settings =
        args.common.settings(|f| writing_flags(f, &args.versions, args.no_verify, &args.plat, args.only_plat))?;
    let destination = if args.in_place {
        Destination::InPlace
    } else {
        Destination::Directory(args.wheel_dir.clone().unwrap_or_else(|| PathBuf::from("wheelhouse")))
    };
    let progress = progress_bar(&args.wheels, args.common.quiet);
    let batch = wheelfix::retag_batch(&args.wheels, &settings, &destination, progress.as_ref());
    drop(progress);
    Ok(report_outcomes(&args.wheels, batch, settings.marking.is_some(), args.common.json))
}

fn run_repair(args: RepairArgs) -> Result<ExitCode, String> {
    let settings = args.common.settings(|f| {
        writing_flags(f, &args.versions, args.no_verify, &args.plat, args.only_plat);
        f.keep_tags = args.no_update_tags;
        f.lib_sdir = args.lib_sdir.clone();
        f.repair = true;
        f.zip_compression_level = args.zip_compression_level;
        f.patcher = args.patcher.clone();
        f.strip = args.strip;
    })?;
    let _ = args.allow_pure_python_wheel;
    let destination = Destination::Directory(args.wheel_dir.clone());
    let progress = progress_bar(&args.wheels, args.common.quiet);
    let batch = wheelfix::repair_batch(&args.wheels, &settings, &destination, progress.as_ref());
    drop(progress);
    Ok(report_outcomes(&args.wheels, batch, settings.marking.is_some(), args.common.json))
}

fn run_lddtree(args: LddtreeArgs) -> Result<ExitCode, String> {
    let flags = Flags { ldpaths: args.ldpaths.clone(), ..Flags::default() };
    let settings = Settings::resolve(&flags, &LoadedConfig::default()).map_err(|e| e.to_string())?;
    match wheelfix::lddtree(&args.file, args.member.as_deref(), &settings) {
        Ok(trees) => {
            if args.json {
                let value = serde_json::json!({"version": wheelfix::report::JSON_VERSION, "trees": trees});
                print_out(&(serde_json::to_string_pretty(&value).expect("serialises") + "\n"));
            } else {
                print_out(&trees.iter().map(|t| t.to_text()).collect::<Vec<_>>().join("\n"));
            }
            let missing = trees.iter().flat_map(|t| t.libs.values()).filter(|l| l.path.is_none()).count();
            Ok(if missing == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Err(e) => {
            eprintln!("wheelfix: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn run_metapackage(args: MetapackageArgs) -> Result<ExitCode, String> {
    let settings = args.common.settings(|_| {})?;
    let options = wheelfix::release::metapackage::MetapackageOptions {
        name: args.name.clone(),
        rocm_version: args.rocm_version.clone(),
        gpu_target: args.gpu_target.clone(),
        output_dir: args.output_dir.clone(),
    };
    options.validate().map_err(|e| e.to_string())?;
    let progress = progress_bar(&args.wheels, args.common.quiet);
    let result = wheelfix::metapackage(&args.wheels, &settings, &options, progress.as_ref());
    drop(progress);
    match result {
        Ok(meta) => {
            if args.common.json {
                print_out(&(serde_json::to_string_pretty(&with_version(&meta)).expect("serialises") + "\n"));
            } else {
                let mut text = format!("wrote {} ({} pins)\n", meta.path, meta.pins.len());
                for pin in &meta.pins {
                    text.push_str(&format!("  {pin}\n"));
                }
                print_out(&text);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("wheelfix: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn run_index(args: IndexArgs) -> Result<ExitCode, String> {
    let options = wheelfix::release::index::IndexOptions {
        base_url: args.base_url.clone(),
        python: args.python.clone(),
        upload_dir: args.upload_dir.clone(),
        core_metadata: !args.no_core_metadata,
        ..wheelfix::release::index::IndexOptions::new(args.output.clone())
    };
    match wheelfix::release::index::build(&args.inputs, &options) {
        Ok(summary) => {
            if args.json {
                print_out(&(serde_json::to_string_pretty(&with_version(&summary)).expect("serialises") + "\n"));
            } else if summary.files.is_empty() {
                print_out(&format!("nothing written to {}: no file could be indexed\n", summary.output));
            } else {
                print_out(&format!(
                    "wrote {} ({} projects, {} files)\n",
                    summary.output,
                    summary.projects,
                    summary.files.len()
                ));
                if let Some(upload) = &summary.upload_dir {
                    print_out(&format!("files to upload beside the wheels: {upload}\n"));
                }
            }
            for note in &summary.notes {
                eprintln!("wheelfix: note: {note}");
            }
            for skipped in &summary.skipped {
                eprintln!("wheelfix: error: {}: left out of the index: {}", skipped.file, skipped.reason);
            }
            if summary.skipped.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("wheelfix: {} file(s) left out of the index", summary.skipped.len());
                Ok(ExitCode::from(1))
            }
        }
        Err(e) if e.is_usage() => Err(e.to_string()),
        Err(e) => {
            eprintln!("wheelfix: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn run_check(args: CheckArgs) -> Result<ExitCode, String> {
    if let Some(missing) = wheelfix::wheel::inputs::missing(&args.dirs).first() {
        return Err(format!("no such file or directory: {}", missing.display()));
    }
    let settings = args.common.settings(|f| f.verify = !args.no_verify)?;
    let findings = wheelfix::release::check::check(&args.dirs, &settings.analyze, &settings.policies);
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    let warnings = findings.len() - errors;
    if args.common.json {
        let value = serde_json::json!({
            "version": wheelfix::report::JSON_VERSION,
            "errors": errors,
            "warnings": warnings,
            "findings": findings,
        });
        print_out(&(serde_json::to_string_pretty(&value).expect("serialises") + "\n"));
    } else {
        let mut text = String::new();
        for f in &findings {
            text.push_str(&format!("{}: {}: {}\n", f.severity.as_str(), f.kind, f.message));
            for file in &f.files {
                text.push_str(&format!("  {file}\n"));
            }
        }
        text.push_str(&format!("{errors} error(s), {warnings} warning(s)\n"));
        print_out(&text);
    }
    let failing = if args.strict { errors + warnings } else { errors };
    Ok(if failing == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Print what `retag`/`repair` did, errors on stderr, and the exit code.
fn report_outcomes(wheels: &[PathBuf], batch: wheelfix::Batch<RetagOutcome>, marking: bool, json: bool) -> ExitCode {
    let results: Vec<(&PathBuf, Result<RetagOutcome, String>)> = wheels
        .iter()
        .zip(batch.results)
        .map(|(path, r)| (path, r.map_err(|e| format!("{}: {e}", path.display()))))
        .collect();
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if json {
        let values: Vec<serde_json::Value> = results
            .iter()
            .map(|(path, r)| match r {
                Ok(outcome) => {
                    let mut value = serde_json::to_value(outcome).expect("serialises");
                    if let Some(object) = value.as_object_mut() {
                        object.insert("version".into(), wheelfix::report::JSON_VERSION.into());
                        object.insert("platform_tag".into(), outcome.platform_tag.clone().into());
                        object.insert("symbol_tag".into(), outcome.symbol_tag.clone().into());
                        if !marking {
                            object.remove("local_version");
                            object.remove("pins");
                        }
                    }
                    value
                }
                Err(e) => serde_json::json!({"version": wheelfix::report::JSON_VERSION, "wheel": display_name(path), "error": e}),
            })
            .collect();
        print_out(&(serde_json::to_string_pretty(&values).expect("serialises") + "\n"));
    } else {
        let mut text = String::new();
        for (_, r) in &results {
            if let Ok(outcome) = r {
                match &outcome.output {
                    Some(out) if outcome.changed => text.push_str(&format!("{} -> {out}\n", outcome.wheel)),
                    Some(out) => text.push_str(&format!("{} -> {out} (already true)\n", outcome.wheel)),
                    None => text.push_str(&format!("{}: tags already true, left as it is\n", outcome.wheel)),
                }
                for graft in &outcome.grafts {
                    text.push_str(&format!("  vendored {} from {} as {}\n", graft.soname, graft.source, graft.member));
                }
                if marking {
                    text.push_str(&version_text(&outcome.version_change));
                }
            }
        }
        print_out(&text);
    }
    for (_, r) in &results {
        match r {
            Ok(outcome) if !outcome.record_corrected.is_empty() => eprintln!(
                "wheelfix: note: {}: its RECORD disagreed with the archive ({}); the output's RECORD lists every file with its sha256 and size",
                outcome.wheel,
                outcome.record_corrected.summarize()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("wheelfix: error: {e}"),
        }
    }
    print_hazards(&batch.hazards);
    finish(failed, results.len())
}

/// A JSON object with the document format's `version` first.
fn with_version(value: &impl serde::Serialize) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    object.insert("version".into(), wheelfix::report::JSON_VERSION.into());
    if let serde_json::Value::Object(fields) = serde_json::to_value(value).expect("serialises") {
        object.extend(fields);
    }
    serde_json::Value::Object(object)
}

fn display_name(path: &std::path::Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn print_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("wheelfix: error: cannot write output: {e}");
    }
}

fn finish(failed: usize, total: usize) -> ExitCode {
    if failed > 0 {
        eprintln!("wheelfix: {failed} of {total} wheel(s) failed");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
