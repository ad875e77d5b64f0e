//! `check --resolve`: the seeds' weekly re-resolve as one command. A real resolver from the
//! environment (pip's `install --dry-run --report`, or `uv pip compile`) resolves requirements
//! against the set's index and the upstream ones, for a target Python and platform; what it
//! chose is then held against the set: a distribution of the set's projects taken from
//! elsewhere, a forbidden name (`nvidia-*`), or no resolution at all.

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
    /// A platform tag. Ex) `manylinux_2_28_x86_64`
    pub platform: Option<String>,
    pub resolver: Resolver,
    /// uv only: search the set's index first, as the release page's uv command does
    /// (`--index-url <upstream> --extra-index-url <set>`), rather than the flags' order.
    pub site_first: bool,
}

/// One distribution the resolver chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// Normalised. Ex) `nixl-cu12`
    pub name: String,
    pub version: String,
    /// Where it comes from: the file's URL (pip) or its index's (uv).
    pub source: String,
}

/// The resolver's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Resolution {
    /// The resolver and its version. Ex) `pip 26.3`
    pub resolver: String,
    /// The command, as run.
    pub command: Vec<String>,
    pub distributions: Vec<Resolved>,
    /// The resolver's message when it found no resolution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Resolve with the chosen resolver. `Err` when it cannot be run at all.
pub fn resolve(request: &ResolveRequest, scratch: &std::path::Path) -> Result<Resolution, String> {
    match request.resolver {
        Resolver::Pip => resolve_with_pip(request, scratch),
        Resolver::Uv => resolve_with_uv(request),
    }
}

fn version_of(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{program}` (is it installed and on PATH?): {e}"))?;
    if !out.status.success() {
        return Err(format!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The last lines of a resolver's message: what it says about the failure.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

fn resolve_with_pip(request: &ResolveRequest, scratch: &std::path::Path) -> Result<Resolution, String> {
    let python = "python3";
    // `pip 26.3 from /…/pip (python 3.11)` → `pip 26.3`
    let version = version_of(python, &["-m", "pip", "--version"])?;
    let resolver = version.split(" from ").next().unwrap_or(&version).to_string();
    let report = scratch.join("pip-report.json");
    let mut args: Vec<String> =
        ["-m", "pip", "install", "--dry-run", "--ignore-installed", "--disable-pip-version-check"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(["--quiet".into(), "--report".into(), report.display().to_string()]);
    args.extend(index_args(&request.index_url, &request.extra_index_urls));
    if let Some(python) = &request.python {
        args.extend(["--python-version".into(), python.clone()]);
    }
    if let Some(platform) = &request.platform {
        args.extend(["--platform".into(), platform.clone()]);
    }
    if request.python.is_some() || request.platform.is_some() {
        // pip resolves for another interpreter or platform only from wheels.
        args.push("--only-binary=:all:".into());
    }
    args.extend(request.requirements.iter().cloned());
    let out = Command::new(python).args(&args).output().map_err(|e| format!("cannot run {python}: {e}"))?;
    let mut command = vec![python.to_string()];
    command.extend(args);
    if !out.status.success() {
        let message = tail(&String::from_utf8_lossy(&out.stderr));
        return Ok(Resolution { resolver, command, distributions: Vec::new(), failure: Some(message) });
    }
    let text = std::fs::read_to_string(&report).map_err(|e| format!("pip wrote no report: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("pip's report: {e}"))?;
    let mut distributions: Vec<Resolved> = value["install"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|item| Resolved {
                    name: crate::wheel::name::PackageName::new(item["metadata"]["name"].as_str().unwrap_or_default())
                        .to_string(),
                    version: item["metadata"]["version"].as_str().unwrap_or_default().to_string(),
                    source: item["download_info"]["url"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    distributions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Resolution { resolver, command, distributions, failure: None })
}

/// `--index-url first --extra-index-url e…`
fn index_args(first: &str, extras: &[String]) -> Vec<String> {
    let mut args = vec!["--index-url".to_string(), first.to_string()];
    for url in extras {
        args.extend(["--extra-index-url".into(), url.clone()]);
    }
    args
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

fn resolve_with_uv(request: &ResolveRequest) -> Result<Resolution, String> {
    let uv = "uv";
    let resolver = version_of(uv, &["--version"])?;
    // uv searches `--extra-index-url` first and stops at the first index that has a name. As
    // given (pip's order), the upstream comes first; `site_first` gives the release page's order.
    let mut args: Vec<String> =
        ["pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--emit-index-annotation"]
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
    if let Some(platform) = &request.platform {
        args.extend(["--python-platform".into(), uv_platform(platform)]);
    }
    let mut child = Command::new(uv)
        .args(&args)
        .env("UV_NO_CACHE", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {uv}: {e}"))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all((request.requirements.join("\n") + "\n").as_bytes()).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| format!("{uv}: {e}"))?;
    let mut command = vec![uv.to_string()];
    command.extend(args);
    if !out.status.success() {
        let message = tail(&String::from_utf8_lossy(&out.stderr));
        return Ok(Resolution { resolver, command, distributions: Vec::new(), failure: Some(message) });
    }
    let mut distributions: Vec<Resolved> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim();
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
    fn platforms_as_uv_names_them() {
        assert_eq!(uv_platform("manylinux_2_28_x86_64"), "x86_64-manylinux_2_28");
        assert_eq!(uv_platform("linux_aarch64"), "aarch64-unknown-linux-gnu");
        assert_eq!(uv_platform("win_amd64"), "x86_64-pc-windows-msvc");
    }
}
