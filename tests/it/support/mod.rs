//! Shared helpers for the integration tests.

pub mod browser;
pub mod elfgen;
pub mod gpugen;
pub mod hip;
pub mod http;
pub mod python;
pub mod rawzip;
pub mod sets;
pub mod wheelgen;

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Run the real `wheelfix` binary with `args` in `cwd`.
pub fn wheelfix(cwd: &Path, args: &[&str]) -> Output {
    wheelfix_env(cwd, args, &[])
}

/// [`wheelfix`] with environment variables set (the `AUDITWHEEL_*` ones of the test's own
/// environment, as a manylinux image sets them, are removed first).
pub fn wheelfix_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wheelfix"));
    command.args(args).current_dir(cwd).env_remove("SOURCE_DATE_EPOCH").env("LD_LIBRARY_PATH", "");
    for name in ["AUDITWHEEL_PLAT", "AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "AUDITWHEEL_LD_LIBRARY_PATH"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("wheelfix runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `show --json` of one wheel, parsed.
pub fn show_json(cwd: &Path, wheel: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["show", "--json"];
    args.extend_from_slice(extra);
    let wheel = wheel.to_str().unwrap();
    args.push(wheel);
    let out = wheelfix(cwd, &args);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("show --json printed no JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    value[0].clone()
}

/// Run wheelfix and return its output and peak RSS in bytes, as `/usr/bin/time` reports it
/// (`ru_maxrss` of the waited child). The child is started by a small Python process, not by
/// this one: a process started from a large one has that one's peak in its `ru_maxrss` (the
/// kernel carries the old address space's high-water mark across exec), and this test process
/// holds the libraries it generated.
pub fn run_measured(dir: &Path, args: &[&str]) -> (Output, u64) {
    run_measured_env(dir, args, &[])
}

/// [`run_measured`] with environment variables set.
pub fn run_measured_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, u64) {
    const MEASURE: &str = "import resource, subprocess, sys\n\
        code = subprocess.run(sys.argv[1:]).returncode\n\
        sys.stderr.write('\\nWHEELFIX-MAXRSS-KB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
        sys.exit(code)\n";
    let output = Command::new("python3")
        .arg("-c")
        .arg(MEASURE)
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    let (rest, peak) = text.rsplit_once("\nWHEELFIX-MAXRSS-KB ").expect("the measuring wrapper ran");
    let kb: u64 = peak.trim().parse().unwrap();
    (Output { stderr: rest.as_bytes().to_vec(), ..output }, kb * 1024)
}

/// Write `bytes` as an executable at `path`, never holding it open for writing in this process.
/// Test threads fork all the time; a child forked while this process had the file open for
/// writing keeps that descriptor until its exec, and running the file then fails with ETXTBSY
/// ("Text file busy"). So the bytes go to a side file and `cp`, another process, makes the
/// executable.
pub fn write_executable(path: &Path, bytes: &[u8]) {
    let side = path.with_extension("side");
    std::fs::write(&side, bytes).unwrap();
    let status = Command::new("cp").arg(&side).arg(path).status().unwrap();
    assert!(status.success(), "cp {} {}", side.display(), path.display());
    std::fs::remove_file(&side).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under `dir` (recursively) with its bytes, by path relative to it, sorted.
pub fn files_with_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// One member of a wheel, read whole.
pub fn read_member(wheel: &Path, name: &str) -> Vec<u8> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let mut file = zip.by_name(name).unwrap_or_else(|e| panic!("{}: `{name}`: {e}", wheel.display()));
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut data).unwrap();
    data
}

/// HTML text as a person copies it: the entities a page escapes, decoded.
pub fn html_text(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}
