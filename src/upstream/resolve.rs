//! `check --resolve`: the seeds' weekly re-resolve as one command. A real resolver from the
//! environment (pip's `install --dry-run --report`, or `uv pip compile`) resolves requirements
//! against the set's index and the upstream ones, for a target Python and platform; what it
//! chose is then held against the set: a distribution of the set's projects taken from
//! elsewhere, a forbidden name (`nvidia-*`), or no resolution at all.
//!
//! Why one file: two resolvers' command
//! lines and reports, and the findings drawn from either, kept beside each other so that
//! they are read against each other.

use std::collections::BTreeSet;
use std::process::Command;

use serde::Serialize;

/// Which resolver runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `python3 -m pip` (the `python3` on PATH).
    Pip,
    /// `uv pip compile` (the `uv` on PATH).
    Uv,
}

/// What to resolve, and where.
#[derive(Debug, Clone)]
pub struct ResolveRequest {
    /// Ex) [`rocm-torch[device-gfx950]`]
    pub requirements: Vec<String>,
    /// The set's index. Ex) `https://rocm.example/gfx950/`
    pub index_url: String,
    /// Upstream indexes. Ex) [`https://pypi.org/simple`]
    pub extra_index_urls: Vec<String>,
    /// Ex) `3.12`
    pub python: Option<String>,
    /// The platform tags to resolve for, as given (repeatable). Ex) [`manylinux_2_28_x86_64`]
    pub platforms: Vec<String>,
    pub resolver: Resolver,
    /// uv only: search the set's index first, as the release page's uv command does
    /// (`--index-url <upstream> --extra-index-url <set>`), rather than the flags' order.
    pub site_first: bool,
    /// How long one request of the resolver to an index may take (passed on to it).
    pub timeout: std::time::Duration,
}

impl ResolveRequest {
    /// How long the whole resolution may take: twenty requests' time (`--timeout`, 30 s by
    /// default: ten minutes). A resolver past it is stopped and the check fails saying so.
    pub fn deadline(&self) -> std::time::Duration {
        self.timeout.max(std::time::Duration::from_secs(1)) * 20
    }
}

/// One distribution the resolver chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Resolved {
    /// Normalised. Ex) `nixl-cu12`
    pub name: String,
    pub version: String,
    /// Where it comes from: the file's URL (pip) or its index's (uv).
    pub source: String,
    /// The resolved distributions that require it (normalised names); none for one that was
    /// asked for. What `resolve-forbidden` follows to say how a name came in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<String>,
}

impl Resolution {
    /// How `name` came into the resolution: the first chain of requirements from a
    /// distribution that was asked for. Ex) [`rocm-stack`, `nixl`, `nixl-cu12`]
    pub fn chain(&self, name: &str) -> Vec<String> {
        let by_name: std::collections::BTreeMap<&str, &Resolved> =
            self.distributions.iter().map(|d| (d.name.as_str(), d)).collect();
        // Breadth first towards a root, so the chain is a shortest one.
        let mut came_from: std::collections::BTreeMap<&str, &str> = Default::default();
        let mut queue = std::collections::VecDeque::from([name]);
        while let Some(current) = queue.pop_front() {
            let Some(d) = by_name.get(current) else { continue };
            if d.required_by.is_empty() {
                let mut chain = vec![current.to_string()];
                let mut at = current;
                while let Some(next) = came_from.get(at) {
                    chain.push(next.to_string());
                    at = next;
                }
                return chain;
            }
            for parent in &d.required_by {
                if parent != name && !came_from.contains_key(parent.as_str()) {
                    came_from.insert(parent.as_str(), current);
                    queue.push_back(parent.as_str());
                }
            }
        }
        vec![name.to_string()]
    }
}

/// The resolver's outcome.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Resolution {
    /// The resolver and its version. Ex) `pip 26.3`
    pub resolver: String,
    /// The command, as run.
    pub command: Vec<String>,
    pub distributions: Vec<Resolved>,
    /// The resolver's message when it found no resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Why a resolution was not made. A resolution the resolver ran and could not satisfy is no
/// error: it is the release's finding ([`Resolution::failure`]).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{text:?} is not a PEP 508 requirement: {why}")]
    NotPep508 { text: String, why: String },
    #[error("{0:?} names a URL; --resolve takes requirements by name, resolved from the indexes")]
    ByUrl(String),
    /// An option or a second line where a requirement was expected.
    #[error("{0:?} is not a requirement")]
    NotARequirement(String),
    /// A program (`what`: how it was called) could not be run, or ran past its deadline.
    #[error("{what}: {problem}")]
    Run { what: String, problem: RunProblem },
    /// A version query that exited non-zero.
    #[error("`{command}` failed: {stderr}")]
    QueryFailed { command: String, stderr: String },
    /// pip's `--report` could not be read.
    #[error("pip's report: {0}")]
    Report(String),
    /// The resolver failed for a reason of its own (a usage error, a crash), not the release's.
    #[error(
        "{resolver} could not run the resolution (this says nothing of the release): {message}\ncommand: {command}"
    )]
    Resolver { resolver: String, message: String, command: String },
    /// A pip too old for `install --dry-run --report`.
    #[error(
        "`python3 -m pip` is {0}; --resolve needs pip {major}.{minor} or newer (`install --dry-run --report`): `python3 -m pip install -U pip`, a python3 whose pip is newer first on PATH, or --resolver uv",
        major = PIP_MIN.0,
        minor = PIP_MIN.1
    )]
    OldPip(String),
}

/// Why a resolver's process gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum RunProblem {
    #[error("cannot run it (is it installed and on PATH?): {0}")]
    Spawn(std::io::Error),
    #[error("{0}")]
    Wait(std::io::Error),
    #[error("stopped after {0} s without an answer (the deadline is twenty times --timeout)")]
    Deadline(u64),
}

/// A requirement as `--resolve` takes it: one PEP 508 requirement by name (no URL, no option,
/// no second line), written back in its normal form, which is what the resolver receives.
/// Ex) `rocm-torch[device-gfx950]`; not `--report=x`, `-rFILE`, `a\nb`
pub fn requirement(text: &str) -> Result<String, ResolveError> {
    use crate::wheel::requirement::{ByNameError, by_name};
    let normal = by_name(text).map_err(|e| match e {
        ByNameError::NotPep508(why) => ResolveError::NotPep508 { text: text.into(), why },
        ByNameError::Url => ResolveError::ByUrl(text.into()),
    })?;
    if normal.starts_with('-') || normal.contains(['\n', '\r']) {
        return Err(ResolveError::NotARequirement(text.into()));
    }
    Ok(normal)
}

/// Resolve with the chosen resolver. `Err` when it cannot be run at all.
pub fn resolve(request: &ResolveRequest, scratch: &std::path::Path) -> Result<Resolution, ResolveError> {
    match request.resolver {
        Resolver::Pip => resolve_with_pip(request, scratch),
        Resolver::Uv => resolve_with_uv(request, scratch),
    }
}

fn version_of(program: &str, args: &[&str], scratch: &std::path::Path) -> Result<String, ResolveError> {
    let mut command = Command::new(program);
    command.args(args).current_dir(scratch);
    let called = format!("{program} {}", args.join(" "));
    let out = run_bounded(command, None, std::time::Duration::from_secs(120))
        .map_err(|problem| ResolveError::Run { what: format!("`{called}`"), problem })?;
    if !out.success {
        return Err(ResolveError::QueryFailed { command: called, stderr: out.stderr_tail.trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The largest pip report read, and the most of a resolver's standard output kept (uv's is the
/// resolution: a line a distribution).
const REPORT_MAX: u64 = 256 << 20;
const STDOUT_MAX: usize = 64 << 20;
/// The end of a resolver's standard error kept for its message.
const STDERR_TAIL: usize = 64 << 10;

/// What a resolver run left: whether it succeeded, its standard output (at most
/// [`STDOUT_MAX`]), and the end of its standard error.
struct Ran {
    success: bool,
    stdout: Vec<u8>,
    stderr_tail: String,
}

/// Run `command` with `input` on its standard input, keeping a bounded part of what it prints,
/// and stop it (its whole process group) when it runs past `deadline`.
fn run_bounded(mut command: Command, input: Option<Vec<u8>>, deadline: std::time::Duration) -> Result<Ran, RunProblem> {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    command
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().map_err(RunProblem::Spawn)?;
    let feeder = match (input, child.stdin.take()) {
        (Some(bytes), Some(mut stdin)) => Some(std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        })),
        _ => None,
    };
    let mut stdout = child.stdout.take().expect("piped");
    let stdout_reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut stdout).take(STDOUT_MAX as u64).read_to_end(&mut kept);
        // Past the bound, read on and drop, so that the resolver never blocks on a full pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        kept
    });
    let mut stderr = child.stderr.take().expect("piped");
    let stderr_reader = std::thread::spawn(move || {
        let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
        let mut buf = [0u8; 16 << 10];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend(&buf[..n]);
            let over = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..over);
        }
        String::from_utf8_lossy(tail.make_contiguous()).into_owned()
    });
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait().map_err(RunProblem::Wait)? {
            Some(status) => break Some(status),
            None if started.elapsed() > deadline => {
                // SAFETY: signals the process group this child leads.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    };
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr_tail = stderr_reader.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Ran { success: status.success(), stdout, stderr_tail }),
        None => Err(RunProblem::Deadline(deadline.as_secs())),
    }
}

/// A command as the report shows it: passwords in its URLs as `****`.
fn shown_command(program: &str, args: Vec<String>) -> Vec<String> {
    std::iter::once(program.to_string())
        .chain(args.into_iter().map(|a| if a.contains("://") { super::redact(&a) } else { a }))
        .collect()
}

/// The last lines of a resolver's message: what it says about the failure.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

fn resolve_with_pip(request: &ResolveRequest, scratch: &std::path::Path) -> Result<Resolution, ResolveError> {
    let python = "python3";
    // `pip 26.3 from /…/pip (python 3.11)` → `pip 26.3`
    let version = version_of(python, &["-I", "-m", "pip", "--version"], scratch)?;
    let resolver = version.split(" from ").next().unwrap_or(&version).to_string();
    check_pip_version(&resolver)?;
    let report = scratch.join("pip-report.json");
    // Isolated (`-I`: no PYTHON* variables, no user site, not the working directory's
    // modules), run in the scratch directory, so that a `pip/` where wheelfix was started is
    // never what runs.
    let mut args: Vec<String> =
        ["-I", "-m", "pip", "install", "--dry-run", "--ignore-installed", "--disable-pip-version-check"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(["--quiet".into(), "--report".into(), report.display().to_string()]);
    args.extend(["--timeout".into(), request.timeout.as_secs().max(1).to_string()]);
    args.extend(index_args(&request.index_url, &request.extra_index_urls));
    if let Some(python) = &request.python {
        args.extend(["--python-version".into(), python.clone()]);
    }
    for platform in host_platforms(&request.platforms) {
        args.extend(["--platform".into(), platform]);
    }
    if request.python.is_some() || !request.platforms.is_empty() {
        // pip resolves for another interpreter or platform only from wheels, and before 23.3
        // only "installing via --target" (a dry run writes nothing there either).
        args.push("--only-binary=:all:".into());
        args.extend(["--target".into(), scratch.join("target").display().to_string()]);
    }
    // After `--`, every requirement is a requirement, whatever it looks like.
    args.push("--".into());
    args.extend(request.requirements.iter().cloned());
    let mut child = Command::new(python);
    child.args(&args).current_dir(scratch);
    let out = run_bounded(child, None, request.deadline())
        .map_err(|problem| ResolveError::Run { what: format!("{python} -m pip"), problem })?;
    let command = shown_command(python, args);
    if !out.success {
        let mut stderr = out.stderr_tail.clone();
        // pip resolves for the Python it runs on unless told another: a set of wheels for
        // another Python "requires a different Python". Say what to run.
        let runs_on = version.rsplit_once("(python ").map(|(_, v)| v.trim_end_matches(')').to_string());
        let lower = stderr.to_ascii_lowercase();
        let other_python = lower.contains("a different python");
        if request.python.is_none() && other_python {
            let on = runs_on.as_deref().unwrap_or("this machine's");
            stderr.push_str(&format!(
                "\npip resolved for the Python it runs on ({python} is Python {on}); the set's wheels are for another: give check --python X.Y (the Python your users run) to resolve for it"
            ));
        }
        return failed(resolver, command, &stderr);
    }
    let items = read_report(&report)?;
    let name_of = |item: &ReportItem| crate::wheel::name::PackageName::new(&item.metadata.name).to_string();
    let mut distributions: Vec<Resolved> = items
        .iter()
        .map(|item| Resolved {
            name: name_of(item),
            version: item.metadata.version.clone(),
            source: item.download_info.url.clone(),
            required_by: Vec::new(),
        })
        .collect();
    // Who requires whom, from each item's Requires-Dist: a requirement counts when its marker
    // holds for the item's active extras (asked for, or named by a requirement on the item).
    // Other markers are not evaluated: this names a chain, it decides nothing.
    let mut extras: std::collections::BTreeMap<String, BTreeSet<String>> =
        items.iter().map(|item| (name_of(item), item.requested_extras.iter().cloned().collect())).collect();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    for _ in 0..items.len().max(1) {
        let before = (edges.len(), extras.values().map(BTreeSet::len).sum::<usize>());
        for item in &items {
            let parent = name_of(item);
            let active = extras.get(&parent).cloned().unwrap_or_default();
            for text in &item.metadata.requires_dist {
                let r = crate::wheel::requirement::Requirement::parse(text);
                let child = r.package.to_string();
                if child == parent || !extras.contains_key(&child) || !r.active_with(&active) {
                    continue;
                }
                edges.insert((parent.clone(), child.clone()));
                let named: Vec<String> = r.extras().map(String::from).collect();
                extras.entry(child).or_default().extend(named);
            }
        }
        if before == (edges.len(), extras.values().map(BTreeSet::len).sum::<usize>()) {
            break;
        }
    }
    for d in &mut distributions {
        d.required_by = edges.iter().filter(|(_, child)| *child == d.name).map(|(p, _)| p.clone()).collect();
    }
    distributions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Resolution { resolver, command, distributions, failure: None })
}

/// What a pip report says of one distribution to install; the rest of it (descriptions,
/// hashes, the environment) is skipped as it streams by, never held.
#[derive(serde::Deserialize)]
struct ReportItem {
    #[serde(default)]
    metadata: ReportMetadata,
    #[serde(default)]
    download_info: ReportDownload,
    #[serde(default)]
    requested_extras: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
struct ReportMetadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    requires_dist: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
struct ReportDownload {
    #[serde(default)]
    url: String,
}

/// pip's `--report`, read as a stream into what a resolution needs: memory follows the
/// distributions it installs, not the report's size (a report of 256 MiB, most of it
/// descriptions, costs a few MB); a report over [`REPORT_MAX`] is refused.
fn read_report(path: &std::path::Path) -> Result<Vec<ReportItem>, ResolveError> {
    #[derive(serde::Deserialize)]
    struct Report {
        #[serde(default)]
        install: Vec<ReportItem>,
    }
    let file = crate::files::open_regular(path).map_err(|e| ResolveError::Report(e.to_string()))?;
    let len = file.metadata().map_err(|e| ResolveError::Report(e.to_string()))?.len();
    if len > REPORT_MAX {
        return Err(ResolveError::Report(format!("{len} bytes, over the {REPORT_MAX} read")));
    }
    let reader = std::io::BufReader::new(std::io::Read::take(file, REPORT_MAX));
    let report: Report = serde_json::from_reader(reader).map_err(|e| ResolveError::Report(e.to_string()))?;
    Ok(report.install)
}

/// A resolver that exited non-zero: no resolution of the requirements (a finding of the
/// release), or an error of the resolver itself, which says nothing of the release.
fn failed(resolver: String, command: Vec<String>, stderr: &str) -> Result<Resolution, ResolveError> {
    let message = tail(stderr);
    if !is_no_resolution(&message) {
        return Err(ResolveError::Resolver { resolver, message, command: command.join(" ") });
    }
    Ok(Resolution { resolver, command, distributions: Vec::new(), failure: Some(message) })
}

/// The oldest pip `--resolve` runs: `install --dry-run --report` came in pip 22.2.
const PIP_MIN: (u64, u64) = (22, 2);

/// Refuse a pip older than [`PIP_MIN`], naming it and what to do, rather than reporting its
/// usage error as the release's failure. Ex) `pip 26.3` → ok; `pip 21.3.1` → an error
fn check_pip_version(resolver: &str) -> Result<(), ResolveError> {
    let version = resolver.strip_prefix("pip ").unwrap_or(resolver);
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let found = (parts.next().flatten(), parts.next().flatten().unwrap_or(0));
    match found {
        (Some(major), minor) if (major, minor) >= PIP_MIN => Ok(()),
        _ => Err(ResolveError::OldPip(resolver.to_string())),
    }
}

/// Whether a resolver's message says the requirements have no resolution (nothing satisfies
/// them, or they conflict), rather than that it could not run as asked (an option it does not
/// know, a combination it refuses, a crash): only the first is about the release.
fn is_no_resolution(message: &str) -> bool {
    [
        "No matching distribution found",
        "Could not find a version that satisfies",
        "ResolutionImpossible",
        "conflicting dependencies",
        "does not provide the extra",
        "No solution found",
        "not found in the package registry",
        "was not found in the package registry",
        "requirements are unsatisfiable",
        "because there is no version of",
        "because there are no versions of",
    ]
    .iter()
    .any(|said| message.contains(said))
}

/// `--index-url first --extra-index-url e…`
fn index_args(first: &str, extras: &[String]) -> Vec<String> {
    let mut args = vec!["--index-url".to_string(), first.to_string()];
    for url in extras {
        args.extend(["--extra-index-url".into(), url.clone()]);
    }
    args
}

/// The platform tags pip is given for each tag asked for: pip's `--platform` takes exact tags,
/// so every tag a machine of that platform accepts is listed, as pip lists its own (newest
/// first): `manylinux_2_28_x86_64` → `manylinux_2_28_x86_64` … `manylinux_2_5_x86_64`,
/// `manylinux2014_x86_64`, `manylinux2010_x86_64`, `manylinux1_x86_64`, `linux_x86_64`;
/// `musllinux_1_2_x86_64` → `musllinux_1_2` … `musllinux_1_0`, `linux_x86_64`.
pub fn host_platforms(given: &[String]) -> Vec<String> {
    use crate::wheel::platform_tag::PlatformTag;
    let mut out: Vec<String> = Vec::new();
    for tag in given {
        let mut add = |t: String| {
            if !out.contains(&t) {
                out.push(t);
            }
        };
        add(tag.clone());
        let parsed = PlatformTag::parse(tag);
        let Some(arch) = parsed.arch_name().map(str::to_string) else { continue };
        match &parsed {
            PlatformTag::Manylinux { major: 2, .. } | PlatformTag::LegacyManylinux { .. } => {
                let (_, newest) = parsed.glibc().unwrap_or((2, 5));
                for minor in (5..=newest).rev() {
                    add(format!("manylinux_2_{minor}_{arch}"));
                    // The legacy names of glibc 2.17, 2.12 and 2.5, where pip lists them.
                    match minor {
                        17 => add(format!("manylinux2014_{arch}")),
                        12 => add(format!("manylinux2010_{arch}")),
                        5 => add(format!("manylinux1_{arch}")),
                        _ => {}
                    }
                }
                add(format!("linux_{arch}"));
            }
            PlatformTag::Musllinux { major: 1, minor, .. } => {
                for minor in (0..=*minor).rev() {
                    add(format!("musllinux_1_{minor}_{arch}"));
                }
                add(format!("linux_{arch}"));
            }
            PlatformTag::Manylinux { .. } | PlatformTag::Musllinux { .. } => add(format!("linux_{arch}")),
            _ => {}
        }
    }
    out
}

/// uv's `--python-platform` for a platform tag. Ex) `manylinux_2_28_x86_64` → `x86_64-manylinux_2_28`
fn uv_platform(tag: &str) -> String {
    for arch in ["x86_64", "aarch64", "ppc64le", "s390x", "riscv64", "i686", "armv7l"] {
        if let Some(rest) = tag.strip_suffix(&format!("_{arch}")) {
            return match rest {
                "linux" => format!("{arch}-unknown-linux-gnu"),
                _ => format!("{arch}-{rest}"),
            };
        }
    }
    match tag {
        "win_amd64" => "x86_64-pc-windows-msvc".into(),
        other => other.to_string(),
    }
}

fn resolve_with_uv(request: &ResolveRequest, scratch: &std::path::Path) -> Result<Resolution, ResolveError> {
    let uv = "uv";
    let resolver = version_of(uv, &["--version"], scratch)?;
    // uv searches `--extra-index-url` first and stops at the first index that has a name. As
    // given (pip's order), the upstream comes first; `site_first` gives the release page's order.
    let mut args: Vec<String> =
        ["pip", "compile", "-", "--quiet", "--no-header", "--annotation-style", "split", "--emit-index-annotation"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    match request.extra_index_urls.split_first() {
        Some((first, rest)) if request.site_first => {
            let mut extras = rest.to_vec();
            extras.push(request.index_url.clone());
            args.extend(index_args(first, &extras));
        }
        _ => args.extend(index_args(&request.index_url, &request.extra_index_urls)),
    }
    if let Some(python) = &request.python {
        args.extend(["--python-version".into(), python.clone()]);
    }
    // uv takes one target platform, and a manylinux target admits `linux_<arch>` wheels too.
    if let Some(platform) = request.platforms.first() {
        args.extend(["--python-platform".into(), uv_platform(platform)]);
    }
    let mut child = Command::new(uv);
    child
        .args(&args)
        .env("UV_NO_CACHE", "1")
        .env("UV_HTTP_TIMEOUT", request.timeout.as_secs().max(1).to_string())
        .current_dir(scratch);
    // Each requirement was parsed as PEP 508 and written back in normal form: one line each,
    // never an option line (`-r`, `--index-url`) of a requirements file.
    debug_assert!(request.requirements.iter().all(|r| requirement(r).is_ok()));
    let input = request.requirements.join("\n") + "\n";
    let out = run_bounded(child, Some(input.into_bytes()), request.deadline())
        .map_err(|problem| ResolveError::Run { what: uv.to_string(), problem })?;
    let command = shown_command(uv, args);
    if !out.success {
        return failed(resolver, command, &out.stderr_tail);
    }
    let mut distributions: Vec<Resolved> = Vec::new();
    // uv annotates each line: `# from <index>`, and `# via <parent>` or `# via` followed by
    // one `#   <parent>` line each; `-r -` is the input itself.
    let mut in_via = false;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim();
        let via = |d: &mut Vec<Resolved>, parent: &str| {
            let parent = parent.trim();
            if let Some(last) = d.last_mut()
                && !parent.is_empty()
                && !parent.starts_with('-')
            {
                last.required_by.push(
                    crate::wheel::name::PackageName::new(parent.split(['[', ' ']).next().unwrap_or(parent)).to_string(),
                );
            }
        };
        if let Some(parents) = line.strip_prefix("# via") {
            in_via = parents.trim().is_empty();
            via(&mut distributions, parents);
            continue;
        }
        if in_via && let Some(parent) = line.strip_prefix("#   ") {
            via(&mut distributions, parent);
            continue;
        }
        in_via = false;
        if let Some(index) = line.strip_prefix("# from ") {
            if let Some(last) = distributions.last_mut() {
                last.source = index.trim().to_string();
            }
        } else if let Some((name, version)) = line.split_once("==") {
            let version = version.split([' ', ';']).next().unwrap_or_default();
            let name = name.split('[').next().unwrap_or(name);
            distributions.push(Resolved {
                name: crate::wheel::name::PackageName::new(name.trim()).to_string(),
                version: version.to_string(),
                source: String::new(),
                required_by: Vec::new(),
            });
        }
    }
    distributions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Resolution { resolver, command, distributions, failure: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_pep_508_never_options() {
        assert_eq!(requirement("rocm-torch[device-gfx950]").unwrap(), "rocm-torch[device-gfx950]");
        assert_eq!(
            requirement("a >=1.0 ; python_version >= '3.10'").unwrap(),
            "a>=1.0 ; python_full_version >= '3.10'"
        );
        for bad in
            ["--report=/tmp/x", "-r/etc/passwd", "--index-url=http://evil/", "a\nb", "a @ https://evil/x.whl", ""]
        {
            assert!(requirement(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_host_platform_is_every_tag_it_accepts_as_pip_lists_them() {
        let tags = host_platforms(&["manylinux_2_28_x86_64".to_string()]);
        assert_eq!(tags.len(), 24 + 3 + 1, "{tags:?}");
        assert_eq!(&tags[..2], ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64"]);
        for t in ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"] {
            assert!(tags.contains(&t.to_string()), "{t}: {tags:?}");
        }
        assert_eq!(tags.last().map(String::as_str), Some("linux_x86_64"));
        assert!(!tags.contains(&"manylinux_2_29_x86_64".to_string()));
        let tags = host_platforms(&["manylinux2014_aarch64".to_string()]);
        assert_eq!(tags.first().map(String::as_str), Some("manylinux2014_aarch64"));
        assert!(
            tags.contains(&"manylinux_2_17_aarch64".to_string())
                && !tags.contains(&"manylinux_2_18_aarch64".to_string())
        );
        assert_eq!(
            host_platforms(&["musllinux_1_2_aarch64".to_string()]),
            ["musllinux_1_2_aarch64", "musllinux_1_1_aarch64", "musllinux_1_0_aarch64", "linux_aarch64"]
        );
        assert_eq!(host_platforms(&["linux_x86_64".to_string()]), ["linux_x86_64"]);
        assert_eq!(host_platforms(&["win_amd64".to_string()]), ["win_amd64"]);
    }

    #[test]
    fn platforms_as_uv_names_them() {
        assert_eq!(uv_platform("manylinux_2_28_x86_64"), "x86_64-manylinux_2_28");
        assert_eq!(uv_platform("linux_aarch64"), "aarch64-unknown-linux-gnu");
        assert_eq!(uv_platform("win_amd64"), "x86_64-pc-windows-msvc");
    }
}

#[cfg(test)]
mod report_tests {
    use std::io::Write;

    #[test]
    fn a_report_streams_by_and_only_what_a_resolution_needs_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        // One item whose description is 48 MiB: the report's size is not what is kept.
        write!(f, r#"{{"version":"1","install":[{{"metadata":{{"name":"Nixl","version":"1.5.2","description":""#)
            .unwrap();
        for _ in 0..(48 << 10) {
            f.write_all(&[b'x'; 1024]).unwrap();
        }
        write!(
            f,
            r#"","requires_dist":["nixl-cu12; extra == \"cu12\""]}},"download_info":{{"url":"https://u/nixl.whl","archive_info":{{}}}},"requested_extras":["cu12"]}}],"environment":{{}}}}"#
        )
        .unwrap();
        f.flush().unwrap();
        drop(f);
        let items = super::read_report(&path).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!((items[0].metadata.name.as_str(), items[0].metadata.version.as_str()), ("Nixl", "1.5.2"));
        assert_eq!(items[0].download_info.url, "https://u/nixl.whl");
        assert_eq!(items[0].requested_extras, ["cu12"]);
        assert_eq!(items[0].metadata.requires_dist, ["nixl-cu12; extra == \"cu12\""]);
    }
}
