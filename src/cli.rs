//! The command line: clap's definitions of every command and flag (the library takes typed
//! values and knows no clap), and each parsed command turned into the library's request
//! ([`Command::into_run`]). Why one file: flat declarations, one struct per
//! command, that `--help`, the man pages and the completions are all generated from.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use wheelfix::Destination;
use wheelfix::cmd::{self, Common};
use wheelfix::index::IndexOptions;
use wheelfix::metapackage::MetapackageOptions;
use wheelfix::settings::Flags;

#[derive(Parser)]
#[command(
    name = "wheelfix",
    version,
    about = "Audit Python wheels and make their platform tags, versions and metadata true",
    long_about = None,
    after_help = "Examples:\n  wheelfix show dist/*.whl\n  wheelfix repair -w wheelhouse/ dist/*.whl\n  wheelfix retag --rocm-version 10.1.0 -w wheelhouse/ dist/*.whl\n\nSettings can live in pyproject.toml under [tool.wheelfix]; `wheelfix show --config` prints them."
)]
pub struct Cli {
    /// Show the library search and the decisions (on stderr).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Explain the platform tag each wheel honestly meets, and why.
    ///
    /// A directory or a file that is not a wheel is read as installed files: the tag they meet,
    /// their libraries as the loader finds them, their device code and kpack archives.
    #[command(
        after_help = "Examples:\n  wheelfix show dist/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl\n  wheelfix show --json dist/*.whl\n  wheelfix show .venv/lib/python3.12/site-packages/torch/lib"
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
    /// Keep only some GPU targets' device code: one fat build cut per architecture.
    #[command(
        after_help = "Examples:\n  wheelfix thin --gpu-target gfx950 -w wheelhouse/gfx950/ dist/*.whl\n  wheelfix thin --gpu-target gfx90a --gpu-target gfx942 --in-place dist/*.whl\n\nIn every offload bundle (plain or compressed) of every host binary, the host entry and the code\nobjects that run on a requested target stay (its feature variants, and the generic targets that\ncover it); each bundle is rewritten at its own offset, the freed bytes zeroed. File name,\nversion and tags stay; RECORD is written true."
    )]
    Thin(ThinArgs),
    /// Split each fat wheel into a host wheel and one device wheel per GPU target (kpack).
    #[command(
        after_help = "Examples:\n  wheelfix split --all-targets -w wheelhouse/ dist/*.whl\n  wheelfix split --gpu-target gfx942 --gpu-target gfx950 --device-name 'amd-{name}-device-{target}' -w wheelhouse/ dist/torch-*.whl\n  pip install --find-links wheelhouse/ 'torch[device-gfx942]'\n\nIn every host binary, each offload bundle becomes a kpack reference and each HIP wrapper a HIPK\nwrapper; the code objects go into one kpack archive per target, beside the binary\n(.kpack/<file>_<target>.kpack), in that target's device wheel. The host wheel keeps its name,\nversion and tags and gains the extras device-<target> and device-all, each pinning its device\nwheels at the exact version; each device wheel requires the host at the exact version."
    )]
    Split(SplitArgs),
    /// Write variant wheels (PEP 825): one per GPU processor, each thinned to its code and
    /// labelled, for installers that pick the wheel for the machine's GPU.
    #[command(
        after_help = "Examples:\n  wheelfix variants --all-targets --null --plain -w wheelhouse/ dist/*.whl\n  wheelfix index -o site/gfx942 wheelhouse/gfx942/\n  uv pip install --preview-features wheel-variants --index-url file://$PWD/site/gfx942 torch\n\nBy default each processor gets an index of its own (`-w DIR/<processor>/`): its variant, the\nnull and plain copies, all declaring the processor statically, which is the one form uv chooses\nfrom today (it runs no provider plugin for `amd`); --one-index puts every variant in `-w`.\n\nEach variant is the fat wheel thinned to one processor's code (as thin does it, proof included),\nnamed with a variant label after its platform tag (`-gfx942.whl`) and carrying\n`*.dist-info/variant.json`: the properties `amd :: gfx_arch :: <processor>` (and\n`amd :: rocm_version` where the version names ROCm). --null writes the fat wheel as the `null`\nvariant, --plain the fat wheel unlabelled. `index` writes `<name>-<version>-variants.json`."
    )]
    Variants(VariantsArgs),
    /// Write a metapackage wheel that pins every given wheel at its exact version.
    #[command(
        after_help = "Example:\n  wheelfix metapackage --name rocm-torch --rocm-version 10.1.0 --gpu-target gfx950 -o index-src/gfx950/ wheelhouse/gfx950/*.whl"
    )]
    Metapackage(MetapackageArgs),
    /// Write the selector of a multi-architecture release: one wheel per platform whose extras
    /// (`device-<target>`, `device-all`) are that platform's device wheels, pinned exactly.
    #[command(
        after_help = "Example:\n  wheelfix selector --name rocm -o selector/ dist-linux/*.whl dist-windows/*.whl\n  pip install --find-links selector/ --find-links dist-linux/ 'rocm[device-gfx950]'\n\nEvery input is required at its exact version on its platform; a host whose device wheels\n(`<name>-device-<target>`) serve some of its GPUs only, only under those GPUs' extras. The output depends only on the set of inputs, not their order: build it\nonce from every platform's wheels, never once per platform."
    )]
    Selector(SelectorArgs),
    /// Write a static pip index (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata) for directories of wheels.
    #[command(
        after_help = "Example:\n  wheelfix index -o site/gfx950/ --base-url https://example.org/releases/download/v1/ --python 3.14 wheelhouse/gfx950/"
    )]
    Index(IndexArgs),
    /// Lint a release set: conflicting uploads, selector extras, pins, labels, architectures, tags.
    #[command(after_help = "Examples:\n  wheelfix check dist-linux/ dist-windows/\n  wheelfix check --json site/")]
    Check(CheckArgs),
    /// Gather architecture indexes into one directory to publish, with a landing page across them.
    #[command(
        after_help = "Example:\n  wheelfix site -o public/ --site-url https://rocm.example/ site/gfx942 site/gfx950\n\nEach index becomes public/<name>/ with its release page rendered for that URL; public/index.html\nlinks them, with each one's ROCm version, install command and check summary."
    )]
    Site(SiteArgs),
    /// The dependency tree of an ELF file or a wheel member, as the loader resolves it.
    ///
    /// Each library with the directory it was found in and why that directory was searched; for
    /// a wheel without MEMBER, every host binary.
    #[command(
        after_help = "Examples:\n  wheelfix lddtree /usr/bin/python3\n  wheelfix lddtree dist/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl torch/_C.cpython-312-x86_64-linux-gnu.so\n  wheelfix lddtree --json build/lib/_ext.so"
    )]
    Lddtree(LddtreeArgs),
    /// Say whether an installed environment can run on this machine's GPUs, before the first
    /// kernel launch does: device code for each GPU (in the binaries, or in the kpack archives
    /// their markers lead to), kernel databases, one ROCm ABI, libraries the loader finds.
    #[command(
        after_help = "Examples:\n  wheelfix doctor\n  wheelfix doctor .venv\n  wheelfix doctor --gpu gfx942 /opt/venv/lib/python3.12/site-packages\n  wheelfix doctor --json $(which python)\n\nExit status: 0 ready, 1 problems, 2 usage."
    )]
    Doctor(DoctorArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  wheelfix completions bash > /etc/bash_completion.d/wheelfix\n  wheelfix completions zsh > \"${fpath[1]}/_wheelfix\"\n  wheelfix completions fish > ~/.config/fish/completions/wheelfix.fish"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a man page per command (`wheelfix.1`, `wheelfix-show.1`, …) into DIR (for packagers;
    /// the Python wheel installs them in share/man/man1).
    #[command(hide = true)]
    Manpages {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[derive(Args)]
pub struct DoctorArgs {
    /// site-packages directories, virtual environments or Python executables, each a path
    /// (default: the python3 on PATH, as pip would pick it).
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Check for this GPU instead of this machine's (repeatable). Ex) gfx942, gfx90a:xnack+
    #[arg(long = "gpu", value_name = "TARGET")]
    gpus: Vec<String>,
    /// Read DIR as /sys (the KFD topology of another machine or a container).
    #[arg(long, value_name = "DIR")]
    sysfs: Option<PathBuf>,
    /// Search these directories (colon-separated) instead of the system's library path.
    #[arg(long, value_name = "PATHS")]
    ldpaths: Option<String>,
    /// The index the fixes install from, over the one a distribution's METADATA records
    /// (`--index-url` of split, retag and selector).
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct LddtreeArgs {
    /// An ELF file, a wheel, or a directory of installed files.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The wheel member (or file under the directory) to show (default: every host binary).
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
pub struct MetapackageArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// The metapackage's project name. Ex) rocm-torch
    #[arg(long)]
    name: String,
    /// The ROCm version, the public part of the metapackage's version. Ex) 10.1.0
    #[arg(long, value_name = "VERSION")]
    rocm_version: String,
    /// The GPU architecture of this set. Ex) gfx950. Repeatable for a multi-architecture index
    /// (one `device-<target>` extra each).
    #[arg(long, value_name = "TARGET", required = true)]
    gpu_target: Vec<String>,
    /// Output directory.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR", default_value = ".")]
    output_dir: PathBuf,
    /// The index the release will be published in (its simple index URL): recorded in the
    /// METADATA written (`Project-URL: Package index, <URL>`), so that `doctor`'s fixes install
    /// from it. Default: `index-url` of [tool.wheelfix].
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
pub struct SelectorArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// The selector's project name. Ex) rocm
    #[arg(long)]
    name: String,
    /// Its version; default: the one version every input has.
    #[arg(long, value_name = "VERSION")]
    version: Option<String>,
    /// The index the release will be published in (its simple index URL): recorded in the
    /// METADATA written (`Project-URL: Package index, <URL>`), so that `doctor`'s fixes install
    /// from it.
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,

    /// Output directory.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR", default_value = ".")]
    output_dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct IndexArgs {
    /// Directories (or files) of wheels.
    #[arg(required = true, value_name = "DIR")]
    inputs: Vec<PathBuf>,
    /// Output directory, replaced whole and atomically when an earlier run wrote it; it must not
    /// be, contain or lie inside an input directory (the inputs are never touched).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// The directory URL where the wheels are hosted (a release's assets): links are
    /// `<URL>/<file>`, with or without a trailing slash. Relative links when absent.
    #[arg(long, value_name = "URL", value_parser = web_url)]
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
    /// Where the index will be served, for the release page's install commands (Ex:
    /// https://rocm.example/gfx950/). Default: the output directory's file:// URL.
    #[arg(long, value_name = "URL", value_parser = web_url)]
    site_url: Option<String>,
    /// The release page's heading. Default: the output directory's name.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// A JSON map of GPU processor → the GPUs it serves, for the release page, over the table
    /// wheelfix carries (policies/gpu-names.json). Ex) {"gfx1151": "Radeon 8060S"}
    #[arg(long, value_name = "FILE")]
    gpu_names: Option<PathBuf>,
    /// Write no release page (release.html, release.json), and so read no wheel beyond its
    /// METADATA.
    #[arg(long)]
    no_page: bool,
    /// Publish nothing when `check` finds an error in the set (the findings are printed).
    #[arg(long)]
    fail_on_check: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SiteArgs {
    /// Index directories written by `wheelfix index` (one per GPU architecture).
    #[arg(required = true, value_name = "INDEX")]
    sites: Vec<PathBuf>,
    /// Output directory: `<DIR>/index.html` and `<DIR>/<name>/` per index; replaced whole when an
    /// earlier run wrote it.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// Where DIR will be served; each index's install commands then use `<URL>/<name>/`.
    /// Default: DIR's file:// URL.
    #[arg(long, value_name = "URL", value_parser = web_url)]
    site_url: Option<String>,
    /// The landing page's heading.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Publish nothing when an index's check found an error (as its release.json records).
    #[arg(long)]
    fail_on_check: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ResolverArg {
    Pip,
    Uv,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Directories of wheels and sdists.
    #[arg(required_unless_present = "resolve", value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Compare the set with this upstream index (PEP 691 JSON, else PEP 503 HTML); repeatable.
    /// Ex) https://pypi.org/simple
    #[arg(long, value_name = "URL", value_parser = index_url)]
    upstream: Vec<String>,
    /// Seconds each request to an index may take.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout: u64,
    /// Resolve these requirements with a real resolver against --index-url (the set's index)
    /// and --extra-index-url, and report what came from elsewhere; repeatable.
    /// Ex) 'rocm-torch[device-gfx950]'
    #[arg(long, value_name = "REQUIREMENT", value_parser = requirement)]
    resolve: Vec<String>,
    /// The set's index for --resolve. Ex) https://rocm.example/gfx950/
    #[arg(long, value_name = "URL", requires = "resolve", value_parser = index_url)]
    index_url: Option<String>,
    /// Upstream indexes for --resolve (default: the --upstream ones, else PyPI); repeatable.
    #[arg(long, value_name = "URL", requires = "resolve", value_parser = index_url)]
    extra_index_url: Vec<String>,
    /// The Python to resolve for. Ex) 3.12
    #[arg(long, value_name = "X.Y", requires = "resolve")]
    python: Option<String>,
    /// A platform tag to resolve for; repeatable. A manylinux or musllinux tag also admits
    /// `linux_<arch>` wheels, as a real host does. uv takes the first. Ex) manylinux_2_28_x86_64
    #[arg(long = "platform", value_name = "TAG", requires = "resolve")]
    platforms: Vec<String>,
    /// Fail when the resolution holds a distribution whose name matches; repeatable.
    /// Ex) 'nvidia-*', '*-cu1[0-9]'
    #[arg(long, value_name = "GLOB", requires = "resolve")]
    forbid: Vec<String>,
    /// The resolver: pip (`python3 -m pip install --dry-run --report`) or uv (`uv pip compile`),
    /// from PATH.
    #[arg(long, value_enum, default_value = "pip", requires = "resolve")]
    resolver: ResolverArg,
    /// With uv: search the set's index first (`--index-url <upstream> --extra-index-url <set>`,
    /// the release page's uv command) instead of the flags' order, which uv reads as upstream first.
    #[arg(long, requires = "resolve")]
    site_first: bool,
    /// Skip hashing every member against RECORD (sizes and rows are still compared).
    #[arg(long)]
    no_verify: bool,
    /// Fail (exit 1) on warnings too, not only on errors.
    #[arg(long)]
    strict: bool,
    /// List errors only; warnings are still counted.
    #[arg(long)]
    errors_only: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
pub struct RepairArgs {
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
pub struct CommonArgs {
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
    /// The flags every command shares, and what the command makes of its own.
    fn common(&self, complete: impl FnOnce(&mut Flags)) -> Common {
        let mut flags = Flags {
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
        };
        complete(&mut flags);
        Common { flags, config: self.config.clone().flatten(), json: self.json, quiet: self.quiet }
    }
}

#[derive(Args)]
pub struct VersionArgs {
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
    /// The index the release will be published in (its simple index URL): recorded in the
    /// METADATA written (`Project-URL: Package index, <URL>`), so that `doctor`'s fixes install
    /// from it. Default: `index-url` of [tool.wheelfix].
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,
}

impl VersionArgs {
    fn fill(&self, flags: &mut Flags) {
        flags.rocm_version = self.rocm_version.clone();
        flags.local_version = self.local_version.clone();
        flags.mark_pure = self.mark_pure;
        flags.no_mark = self.no_mark.clone();
        flags.index_dir = self.index_dir.clone();
        flags.index_url = self.index_url.clone();
    }
}

#[derive(Args)]
pub struct ShowArgs {
    /// Wheels; or installed files: a directory, or a file that is not a wheel.
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
pub enum JsonFormat {
    Wheelfix,
    Auditwheel,
}

#[derive(Args)]
pub struct RetagArgs {
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

#[derive(Args)]
pub struct ThinArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// A GPU target to keep (`gfx942`, `gfx90a:xnack-`); repeatable. Default: `gpu-targets` of
    /// [tool.wheelfix].
    #[arg(long = "gpu-target", value_name = "TARGET")]
    gpu_targets: Vec<String>,
    /// Directory for the output wheels (same file names).
    #[arg(
        short = 'w',
        long = "wheel-dir",
        value_name = "DIR",
        conflicts_with = "in_place",
        required_unless_present = "in_place"
    )]
    wheel_dir: Option<PathBuf>,
    /// Replace each input wheel (atomically) instead of writing a copy.
    #[arg(long)]
    in_place: bool,
    /// Thin a wheel whose device code has nothing for a requested target anyway (else it fails).
    #[arg(long)]
    allow_missing: bool,
    /// Also remove standalone code-object files (`.co`, `.hsaco`) for other targets.
    #[arg(long)]
    prune_files: bool,
    #[command(flatten)]
    rewrite: RewriteArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// The flags of the commands that rewrite fat binaries (`thin`, `split`).
#[derive(Args)]
pub struct RewriteArgs {
    /// Take the pages the removed device code held out of each host binary, so that it also
    /// installs smaller (the default; addresses stay, the loader fills them with zeros).
    #[arg(long, overrides_with = "no_compact")]
    compact: bool,
    /// Leave the removed device code's bytes in each host binary as zeros: the file keeps its
    /// size and its layout.
    #[arg(long, overrides_with = "compact")]
    no_compact: bool,
    /// Skip the sha256 check of every member against RECORD.
    #[arg(long)]
    no_verify: bool,
    /// Deflate level of the rewritten members (zlib levels 0-9; default 6, and 9 for a member
    /// that would come out larger than it was).
    #[arg(long, value_name = "LEVEL", value_parser = clap::value_parser!(u32).range(0..=9))]
    zip_compression_level: Option<u32>,
}

impl RewriteArgs {
    /// The common flags, with these and the `--gpu-target`s.
    fn common(&self, common: &CommonArgs, gpu_targets: &[String]) -> Common {
        common.common(|f| {
            f.writing(self.no_verify);
            f.gpu_targets = gpu_targets.to_vec();
            f.zip_compression_level = self.zip_compression_level;
        })
    }
}

#[derive(Args)]
pub struct SplitArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// A GPU processor to write a device wheel for (`gfx942`); repeatable. Default: `gpu-targets`
    /// of [tool.wheelfix].
    #[arg(long = "gpu-target", value_name = "TARGET")]
    gpu_targets: Vec<String>,
    /// A device wheel for every processor the wheel has code for.
    #[arg(long)]
    all_targets: bool,
    /// The device wheels' project name: `{name}` is the host's, `{target}` the processor
    /// (`amd-{name}-device-{target}` gives TheRock's names). Default: `device-name` of
    /// [tool.wheelfix], else `{name}-device-{target}`.
    #[arg(long, value_name = "TEMPLATE")]
    device_name: Option<String>,
    /// Directory for the host and device wheels.
    #[arg(short = 'w', long = "wheel-dir", value_name = "DIR", default_value = "wheelhouse")]
    wheel_dir: PathBuf,
    /// One device wheel per processor (`gfx1100`), sub-family (`gfx110x`) or family (`gfx11`);
    /// the host has an extra per processor and per group either way. Default: `group-by` of
    /// [tool.wheelfix], else `target`.
    #[arg(long, value_enum)]
    group_by: Option<GroupByArg>,
    /// Put the device code of all the wheel's binaries in one kpack archive per processor,
    /// `.kpack/NAME_<processor>.kpack` in their common directory (kpack's own layout, NAME its
    /// group: `rocm`, `torch`). Default: an archive per binary, beside it.
    #[arg(long = "group", value_name = "NAME", value_parser = kpack_group)]
    kpack_group: Option<String>,
    /// TheRock's layout: the archives in `DIR/.kpack/` (one per target id, named after --group,
    /// else the project's name in lower case with `_` for `-`), kernel names and keys relative
    /// to DIR, as TheRock's splitter writes them (`--overlay-root torch`). A binary outside DIR
    /// is refused.
    #[arg(long, value_name = "DIR", value_parser = overlay_root)]
    overlay_root: Option<String>,
    /// One kpack archive per processor (`_gfx90a.kpack` holding `gfx90a:xnack+` and
    /// `gfx90a:xnack-`), or one per target id as TheRock writes them (`_gfx90a:xnack+.kpack`,
    /// `_gfx90a:xnack-.kpack`); the runtime finds either. Default: `archive-per` of
    /// [tool.wheelfix], else `target-id` with --overlay-root, `processor` without.
    #[arg(long, value_enum)]
    archive_per: Option<ArchivePerArg>,
    /// Remove from the host the device code of processors no device wheel takes (with
    /// --gpu-target). Without it, such code is a refusal: split never loses code silently.
    #[arg(long)]
    drop_other_targets: bool,
    /// The backwards-compatible host: it requires every device wheel it was split into, not
    /// only through extras, so `pip install <host>` brings all its device code as the fat
    /// wheel held it. Publish it in an index of its own (its file name is the extras-only
    /// host's).
    #[arg(long)]
    require_devices: bool,
    /// A requirement every device wheel gains, `@GFXARCH@` standing for its processor, as
    /// TheRock's splitter takes it (repeatable): `--device-requires-dist
    /// 'rocm-sdk-device-@GFXARCH@==7.1.0'`. A device wheel of several processors (--group-by
    /// family, subfamily) gains only those without `@GFXARCH@`. Default: `device-requires-dist`
    /// of [tool.wheelfix].
    #[arg(long = "device-requires-dist", value_name = "REQUIREMENT", value_parser = device_requirement)]
    device_requires_dist: Vec<String>,
    /// The index the release will be published in (its simple index URL): recorded in the
    /// METADATA of the host and device wheels (`Project-URL: Package index, <URL>`), so that
    /// `doctor`'s fixes install from it. Default: `index-url` of [tool.wheelfix].
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,
    #[command(flatten)]
    rewrite: RewriteArgs,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
pub struct VariantsArgs {
    #[arg(required = true, value_name = "WHEEL")]
    wheels: Vec<PathBuf>,
    /// A GPU processor to write a variant for (`gfx942`); repeatable. Default: `gpu-targets` of
    /// [tool.wheelfix].
    #[arg(long = "gpu-target", value_name = "TARGET")]
    gpu_targets: Vec<String>,
    /// A variant for every processor the wheel has code for.
    #[arg(long)]
    all_targets: bool,
    /// One variant per processor (`gfx1100`), sub-family (`gfx110x`) or family (`gfx11`); a
    /// group's variant lists each of its processors. Default: `group-by` of [tool.wheelfix],
    /// else `target`.
    #[arg(long, value_enum)]
    group_by: Option<GroupByArg>,
    /// Directory for the variant wheels.
    #[arg(short = 'w', long = "wheel-dir", value_name = "DIR", default_value = "wheelhouse")]
    wheel_dir: PathBuf,
    /// Write a variant even where the wheel has no code for a requested processor.
    #[arg(long)]
    allow_missing: bool,
    /// Also write the fat wheel as the `null` variant: what an installer takes when no other
    /// variant fits the machine.
    #[arg(long)]
    null: bool,
    /// Also copy the fat wheel, unlabelled, for installers that know no variants.
    #[arg(long)]
    plain: bool,
    /// Declare the variant provider in every variant.json: `amd`, AMD's provider plugin
    /// (`amd-variant-provider`), which an installer runs to read the machine's GPUs.
    #[arg(long, value_parser = ["amd"])]
    provider: Option<String>,
    /// Declare that every machine installing from this index has this processor (repeatable):
    /// for a site index that serves one kind of machine; the installer then needs no plugin.
    #[arg(long = "static-gpu-target", value_name = "TARGET", conflicts_with = "provider")]
    static_gpu_targets: Vec<String>,
    /// Every variant in `-w`, one index, declaring no provider (PEP 825 alone: an installer
    /// that knows no provider for `amd`, uv today included, takes the null variant). Implied by
    /// --provider and --static-gpu-target. Default: one index per GPU, `-w DIR/<processor>/`,
    /// whose variants declare that processor statically, the one form uv chooses from today.
    #[arg(long)]
    one_index: bool,
    /// The index the variants will be published in (its simple index URL): recorded in the
    /// METADATA of each (`Project-URL: Package index, <URL>`), so that `doctor`'s fixes install
    /// from it. Default: `index-url` of [tool.wheelfix].
    #[arg(long, value_name = "URL", value_parser = index_url)]
    index_url: Option<String>,
    #[command(flatten)]
    rewrite: RewriteArgs,
    #[command(flatten)]
    common: CommonArgs,
}

fn variants_request(args: VariantsArgs) -> cmd::variants::VariantsRequest {
    let mut common = args.rewrite.common(&args.common, &args.gpu_targets);
    common.flags.index_url = args.index_url;
    cmd::variants::VariantsRequest {
        wheels: args.wheels,
        common,
        wheel_dir: args.wheel_dir,
        all_targets: args.all_targets,
        group_by: args.group_by.map(GroupByArg::into),
        allow_missing: args.allow_missing,
        null: args.null,
        plain: args.plain,
        provider_plugin: args.provider.is_some(),
        per_gpu_index: !args.one_index && args.provider.is_none() && args.static_gpu_targets.is_empty(),
        static_targets: args.static_gpu_targets,
        compact: !args.rewrite.no_compact,
    }
}

fn split_request(args: SplitArgs) -> cmd::split::SplitRequest {
    let mut common = args.rewrite.common(&args.common, &args.gpu_targets);
    common.flags.index_url = args.index_url;
    common.flags.split = wheelfix::settings::SplitFlags {
        device_name: args.device_name,
        group_by: args.group_by.map(GroupByArg::into),
        kpack_group: args.kpack_group,
        overlay_root: args.overlay_root,
        archive_per: args.archive_per.map(ArchivePerArg::into),
        device_requires_dist: args.device_requires_dist,
    };
    cmd::split::SplitRequest {
        wheels: args.wheels,
        common,
        wheel_dir: args.wheel_dir,
        targets: args.gpu_targets,
        all_targets: args.all_targets,
        drop_other_targets: args.drop_other_targets,
        require_devices: args.require_devices,
        compact: !args.rewrite.no_compact,
    }
}

fn thin_request(args: ThinArgs) -> cmd::thin::ThinRequest {
    let common = args.rewrite.common(&args.common, &args.gpu_targets);
    cmd::thin::ThinRequest {
        wheels: args.wheels,
        common,
        destination: Destination::chosen(args.in_place, args.wheel_dir),
        allow_missing: args.allow_missing,
        prune_files: args.prune_files,
        compact: !args.rewrite.no_compact,
    }
}

/// `--group-by`, as clap lists it (the library's `GroupBy` knows no clap).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GroupByArg {
    /// `gfx1100`
    Target,
    /// `gfx110x`: gfx1100–gfx1103 (the processor name without its last character)
    Subfamily,
    /// `gfx11`: every gfx11 processor (the name without its last two characters)
    Family,
}

impl From<GroupByArg> for cmd::split::GroupBy {
    fn from(arg: GroupByArg) -> cmd::split::GroupBy {
        match arg {
            GroupByArg::Target => cmd::split::GroupBy::Target,
            GroupByArg::Subfamily => cmd::split::GroupBy::Subfamily,
            GroupByArg::Family => cmd::split::GroupBy::Family,
        }
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ArchivePerArg {
    /// `_gfx90a.kpack`, every target id of the processor in it
    Processor,
    /// `_gfx90a:xnack+.kpack`, `_gfx90a:xnack-.kpack`: TheRock's
    TargetId,
}

impl From<ArchivePerArg> for cmd::split::ArchivePer {
    fn from(arg: ArchivePerArg) -> cmd::split::ArchivePer {
        match arg {
            ArchivePerArg::Processor => cmd::split::ArchivePer::Processor,
            ArchivePerArg::TargetId => cmd::split::ArchivePer::TargetId,
        }
    }
}

/// An overlay root ([`cmd::split::check_overlay_root`]), without a trailing `/`.
fn overlay_root(text: &str) -> Result<String, cmd::split::SettingError> {
    cmd::split::check_overlay_root(text).map(|()| text.trim_end_matches('/').to_string())
}

/// A device wheel's requirement ([`cmd::split::check_device_requirement`]), without the
/// spaces around it.
fn device_requirement(text: &str) -> Result<String, cmd::split::SettingError> {
    cmd::split::check_device_requirement(text).map(|()| text.trim().to_string())
}

/// A kpack group name ([`cmd::split::check_kpack_group`]).
fn kpack_group(text: &str) -> Result<String, cmd::split::SettingError> {
    cmd::split::check_kpack_group(text).map(|()| text.to_string())
}

/// A URL a page links or a command prints: `http` or `https` only.
fn web_url(text: &str) -> Result<String, wheelfix::index::UrlError> {
    wheelfix::index::web_url(text, false).map(str::to_string)
}

/// An index a resolver or `check --upstream` reads: also a local `file://` one.
fn index_url(text: &str) -> Result<String, wheelfix::index::UrlError> {
    wheelfix::index::web_url(text, true).map(str::to_string)
}

/// A requirement handed to a resolver: a PEP 508 requirement, never an option.
fn requirement(text: &str) -> Result<String, wheelfix::upstream::resolve::ResolveError> {
    wheelfix::upstream::resolve::requirement(text)
}

/// What a parsed command line asks for: a command of the library, or what the binary does
/// itself (shell completions, man pages).
pub enum Run {
    Command(Box<cmd::Command>),
    Completions(clap_complete::Shell),
    Manpages(PathBuf),
}

impl Command {
    /// The library's request for this command, or what the binary does itself.
    pub fn into_run(self) -> Run {
        Run::Command(Box::new(match self {
            Command::Show(args) => cmd::Command::Show(show_request(args)),
            Command::Retag(args) => cmd::Command::Retag(retag_request(args)),
            Command::Thin(args) => cmd::Command::Thin(thin_request(args)),
            Command::Split(args) => cmd::Command::Split(split_request(args)),
            Command::Variants(args) => cmd::Command::Variants(variants_request(args)),
            Command::Repair(args) => cmd::Command::Repair(repair_request(args)),
            Command::Selector(args) => cmd::Command::Selector(cmd::release::SelectorRequest {
                wheels: args.wheels,
                name: args.name,
                version: args.version,
                output_dir: args.output_dir,
                index_url: args.index_url,
                json: args.json,
            }),
            Command::Metapackage(args) => cmd::Command::Metapackage(cmd::release::MetapackageRequest {
                common: args.common.common(|_| {}),
                options: MetapackageOptions {
                    name: args.name,
                    rocm_version: args.rocm_version,
                    gpu_targets: args.gpu_target,
                    output_dir: args.output_dir,
                    source_date_epoch: None,
                    index_url: args.index_url,
                },
                wheels: args.wheels,
            }),
            Command::Index(args) => cmd::Command::Index(cmd::release::IndexRequest {
                options: IndexOptions {
                    base_url: args.base_url,
                    python: args.python,
                    upload_dir: args.upload_dir,
                    core_metadata: !args.no_core_metadata,
                    ..IndexOptions::new(args.output)
                },
                inputs: args.inputs,
                json: args.json,
                page: (!args.no_page).then_some(cmd::release::PageRequest {
                    title: args.title,
                    site_url: args.site_url,
                    gpu_names: args.gpu_names,
                }),
                fail_on_check: args.fail_on_check,
            }),
            Command::Site(args) => cmd::Command::Site(cmd::release::SiteRequest {
                sites: args.sites,
                output: args.output,
                title: args.title,
                site_url: args.site_url,
                json: args.json,
                fail_on_check: args.fail_on_check,
            }),
            Command::Check(args) => cmd::Command::Check(cmd::release::CheckRequest {
                common: args.common.common(|f| f.verify = !args.no_verify),
                upstream: wheelfix::check::UpstreamOptions {
                    urls: args.upstream.clone(),
                    timeout: std::time::Duration::from_secs(args.timeout),
                },
                resolve: (!args.resolve.is_empty()).then_some(cmd::release::ResolveArgs {
                    requirements: args.resolve,
                    index_url: args.index_url,
                    extra_index_urls: args.extra_index_url,
                    python: args.python,
                    platforms: args.platforms,
                    forbid: args.forbid,
                    resolver: match args.resolver {
                        ResolverArg::Pip => wheelfix::upstream::resolve::Resolver::Pip,
                        ResolverArg::Uv => wheelfix::upstream::resolve::Resolver::Uv,
                    },
                    site_first: args.site_first,
                }),
                dirs: args.dirs,
                strict: args.strict,
                errors_only: args.errors_only,
            }),
            Command::Lddtree(args) => cmd::Command::Lddtree(cmd::lddtree::LddtreeRequest {
                file: args.file,
                member: args.member,
                ldpaths: args.ldpaths,
                json: args.json,
            }),
            Command::Doctor(args) => cmd::Command::Doctor(cmd::doctor::DoctorRequest {
                paths: args.paths,
                gpus: args.gpus,
                sysfs: args.sysfs,
                ldpaths: args.ldpaths,
                index_url: args.index_url,
                json: args.json,
            }),
            Command::Completions { shell } => return Run::Completions(shell),
            Command::Manpages { dir } => return Run::Manpages(dir),
        }))
    }
}

fn show_request(args: ShowArgs) -> cmd::show::ShowRequest {
    let auditwheel_json = args.json_format == Some(JsonFormat::Auditwheel);
    let mut common = args.common.common(|f| {
        args.versions.fill(f);
        f.verify = args.verify;
        f.gpu_targets = args.expect_gpu_targets.clone();
        f.showing(!args.wheels.is_empty());
    });
    common.json |= args.json_format == Some(JsonFormat::Wheelfix);
    cmd::show::ShowRequest { wheels: args.wheels, common, auditwheel_json, allow_pure: args.allow_pure_python_wheel }
}

fn retag_request(args: RetagArgs) -> cmd::write::WriteRequest {
    let common = args.common.common(|f| {
        args.versions.fill(f);
        f.retagging(args.no_verify, args.plat.clone(), args.only_plat);
    });
    cmd::write::WriteRequest {
        wheels: args.wheels,
        common,
        destination: Destination::chosen(args.in_place, args.wheel_dir),
    }
}

fn repair_request(args: RepairArgs) -> cmd::write::WriteRequest {
    // `--allow-pure-python-wheel` is accepted for auditwheel's sake: pure wheels are copied.
    let _ = args.allow_pure_python_wheel;
    let common = args.common.common(|f| {
        args.versions.fill(f);
        f.retagging(args.no_verify, args.plat.clone(), args.only_plat);
        f.keep_tags = args.no_update_tags;
        f.lib_sdir = args.lib_sdir.clone();
        f.repair = true;
        f.zip_compression_level = args.zip_compression_level;
        f.patcher = args.patcher.clone();
        f.strip = args.strip;
    });
    cmd::write::WriteRequest { wheels: args.wheels, common, destination: Destination::Directory(args.wheel_dir) }
}
