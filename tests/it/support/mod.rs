//! Shared helpers for the integration tests.

pub mod browser;
pub mod envs;
pub use wheelfix::elf::fixtures as elfgen;
pub mod gpugen;
pub mod hip;
pub mod http;
pub mod python;
pub mod rawzip;
pub mod sets;
pub mod wheelgen;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use wheelfix::report::release::CheckDocument;
use wheelfix::report::{ShowJsonEntry, ShowReport};

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

/// `show --json` of one wheel, read as the typed report.
pub fn show_report(cwd: &Path, wheel: &Path, extra: &[&str]) -> ShowReport {
    let mut args = vec!["show", "--json"];
    args.extend_from_slice(extra);
    args.push(wheel.to_str().unwrap());
    let out = wheelfix(cwd, &args);
    show_reports(&out).into_iter().next().unwrap_or_else(|| panic!("show --json printed no report: {}", stderr(&out)))
}

/// Every report `show --json` printed, typed.
pub fn show_reports(out: &Output) -> Vec<ShowReport> {
    show_entries(out).into_iter().map(|entry| entry.report).collect()
}

/// Every entry `show --json` printed: the report, and the version fields of a marking run.
pub fn show_entries(out: &Output) -> Vec<ShowJsonEntry> {
    entries(out, &[])
}

/// A report's notes, a line each (`file: message`), to search.
pub fn notes(report: &ShowReport) -> String {
    report.notes.iter().map(|n| format!("{}: {}\n", n.file, n.message)).collect()
}

/// The `release.json` of a site, typed (the data of its release page).
pub fn release_page(path: &Path) -> wheelfix::report::page::ReleasePage {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    typed(serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display())), &[])
}

/// The texts of platform tags, to compare with literals.
pub fn tag_texts(tags: &[wheelfix::wheel::platform_tag::PlatformTag]) -> Vec<String> {
    tags.iter().map(|t| t.to_string()).collect()
}

/// `check --json`'s document, typed.
pub fn check_document(out: &Output) -> CheckDocument {
    document(out, &[])
}

/// A command's `--json` document read as `T` (see [`typed`]); `others` are the keys of another
/// document flattened into it, such as the format's `version`.
pub fn document<T: serde::de::DeserializeOwned + serde::Serialize>(out: &Output, others: &[&str]) -> T {
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("printed no JSON ({e}): {}{}", stdout(out), stderr(out)));
    typed(printed, others)
}

/// The entries of a batch document (`thin --json`, `split --json`, `retag --json`: one per
/// wheel), each read as `T` (see [`typed`]).
pub fn entries<T: serde::de::DeserializeOwned + serde::Serialize>(out: &Output, others: &[&str]) -> Vec<T> {
    let printed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("printed no JSON list ({e}): {}{}", stdout(out), stderr(out)));
    printed.into_iter().map(|entry| typed(entry, others)).collect()
}

/// A printed JSON object read as `T`, which must print it back the same (but for the keys
/// `others`, fields of another document flattened into it): a field `T` lacks, or reads wrong,
/// fails here rather than going unread.
pub fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(printed: serde_json::Value, others: &[&str]) -> T {
    try_typed(printed, others).unwrap_or_else(|e| panic!("{e}"))
}

/// [`typed`], with what went wrong as an error (the sweep reports it and goes on).
pub fn try_typed<T: serde::de::DeserializeOwned + serde::Serialize>(
    mut printed: serde_json::Value,
    others: &[&str],
) -> Result<T, String> {
    let name = std::any::type_name::<T>();
    let value: T = serde_json::from_value(printed.clone()).map_err(|e| format!("does not read as {name} ({e})"))?;
    if let Some(object) = printed.as_object_mut() {
        object.retain(|key, _| !others.contains(&key.as_str()));
    }
    let back = serde_json::to_value(&value).unwrap();
    if back != printed {
        return Err(format!("{name} does not print back what was printed:\n{printed:#}\nread back:\n{back:#}"));
    }
    Ok(value)
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

/// The wheels of an opt-in test: the directory the environment variable `var` names, and every
/// `.whl` under it. A test that is run has its input: an unset variable, a path that is no
/// directory, or a directory without a wheel fails it (it never passes having compared
/// nothing), naming the variable and what to set it to.
pub fn opt_in_wheels(var: &str, what: &str) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let dir = std::env::var_os(var).unwrap_or_else(|| panic!("set {var} to {what}"));
    let dir = std::path::PathBuf::from(dir);
    assert!(dir.is_dir(), "{var}={}: not a directory; set it to {what}", dir.display());
    let mut wheels = Vec::new();
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{var}: {}: {e}", d.display())).flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "whl") {
                wheels.push(path);
            }
        }
    }
    wheels.sort();
    assert!(!wheels.is_empty(), "{var}={}: no wheel in it; set it to {what}", dir.display());
    (dir, wheels)
}

/// A file an opt-in test reads, named by the environment variable `var`: it must exist.
pub fn opt_in_file(var: &str, what: &str) -> std::path::PathBuf {
    let path = std::path::PathBuf::from(std::env::var_os(var).unwrap_or_else(|| panic!("set {var} to {what}")));
    assert!(path.exists(), "{var}={}: no such file; set it to {what}", path.display());
    path
}

/// Rename, in a wheel, every member `from` → `to` (RECORD's rows too), as another tool would
/// have named it; written with Python's zipfile.
pub fn rename_member(wheel: &Path, from: &str, to: &str) {
    let script = r#"
import sys, zipfile
path, old, new = sys.argv[1:4]
members = [(i, zipfile.ZipFile(path).read(i.filename)) for i in zipfile.ZipFile(path).infolist()]
with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
    for info, data in members:
        name = info.filename.replace(old, new)
        if name.endswith('.dist-info/RECORD'):
            data = data.replace(old.encode(), new.encode())
        z.writestr(name, data)
"#;
    python::run(std::process::Command::new(python::system_python()).args(["-c", script]).arg(wheel).args([from, to]));
}
