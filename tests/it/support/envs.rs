//! Installed environments for `doctor`: a HIP extension and its wheel, virtual environments made
//! by `venv` or by uv, fake `/sys` trees, stub HIP runtimes, `doctor` run twice (text and JSON),
//! and a person's fresh shell (`env -i`) in which printed commands run verbatim.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::elfgen::ElfSpec;
use super::gpugen::{GFX90A, GFX942, bundle_for, section};
use super::python::{run, system_python, tools_venv, validate};
use super::wheelgen::WheelSpec;
use wheelfix::report::doctor::DoctorDocument;

/// A HIP extension with one wrapped bundle: gfx942 (either mode) and gfx90a with XNACK on only;
/// it needs the HIP runtime of ROCm `rocm_major`.
pub fn hip_extension(rocm_major: u32) -> Vec<u8> {
    // e_flags: the processor, XNACK any (0x100) or on (0x300), SRAMECC any (0x400).
    let fatbin = bundle_for(&[("gfx942", GFX942 | 0x500), ("gfx90a:xnack+", GFX90A | 0x700)], 5);
    let wrapper = [0x4849_5046u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
    let wrapper = [wrapper, vec![0u8; 16]].concat();
    ElfSpec {
        sections: vec![section(".hip_fatbin", 1, fatbin), section(".hipFatBinSegment", 1, wrapper)],
        ..ElfSpec::extension("_k")
    }
    .needs(&format!("libamdhip64.so.{rocm_major}"))
    .build()
}

/// `demo_gpu` at `version`: a package with [`hip_extension`] for ROCm 7.
pub fn fat_wheel_at(dir: &Path, version: &str) -> PathBuf {
    WheelSpec::new("demo_gpu", version, "py3-none-linux_x86_64")
        .file("demo_gpu/__init__.py", "")
        .file("demo_gpu/_k.so", hip_extension(7))
        .write(dir)
}

pub fn fat_wheel(dir: &Path) -> PathBuf {
    fat_wheel_at(dir, "1.0")
}

/// The site-packages of the virtual environment `venv`.
pub fn site_of(venv: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let python = std::fs::read_dir(&lib).unwrap().next().unwrap().unwrap().file_name();
    let site = lib.join(python).join("site-packages");
    assert!(site.is_dir(), "{}", site.display());
    site
}

/// A virtual environment with pip, and its site-packages.
pub fn new_venv(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let venv = dir.join(name);
    run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
    let site = site_of(&venv);
    (venv, site)
}

/// uv, from the tools' environment.
pub fn uv() -> PathBuf {
    tools_venv().join("bin/uv")
}

/// A virtual environment made by `uv venv` (no pip in it), and its site-packages.
pub fn new_uv_venv(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let venv = dir.join(name);
    let line = format!("{} venv --quiet --python {} {}", uv().display(), system_python(), venv.display());
    let out = fresh_shell(dir, &line);
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    let site = site_of(&venv);
    (venv, site)
}

/// Install from a directory of wheels, offline.
pub fn pip_install(venv: &Path, wheels: &Path, requirement: &str) {
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--find-links"])
        .arg(wheels)
        .arg(requirement));
}

/// `line` run by bash in a fresh shell, as a person pastes it: no variable but `HOME` (under
/// `dir`) and the system's `PATH`, so no pip or uv configuration of this machine applies.
pub fn fresh_shell(dir: &Path, line: &str) -> Output {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new("env")
        .arg("-i")
        .arg(format!("HOME={}", home.display()))
        .arg("PATH=/usr/local/bin:/usr/bin:/bin")
        .args(["bash", "-c", line])
        .current_dir(dir)
        .output()
        .unwrap()
}

/// [`fresh_shell`], panicking with its output when the line fails.
pub fn paste(dir: &Path, line: &str) {
    let out = fresh_shell(dir, line);
    assert!(
        out.status.success(),
        "`{line}` failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fake `/sys`: KFD nodes `(gfx_target_version, capability)` (0: a CPU node), and the
/// driver's `noretry` when given.
pub fn sysfs(dir: &Path, name: &str, nodes: &[(u32, u64)], noretry: Option<i32>) -> PathBuf {
    let root = dir.join(name);
    for (n, (version, capability)) in nodes.iter().enumerate() {
        let node = root.join(format!("class/kfd/kfd/topology/nodes/{n}"));
        std::fs::create_dir_all(&node).unwrap();
        let text =
            format!("cpu_cores_count 0\nsimd_count 304\ngfx_target_version {version}\ncapability {capability}\n");
        std::fs::write(node.join("properties"), text).unwrap();
    }
    if let Some(noretry) = noretry {
        let p = root.join("module/amdgpu/parameters");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("noretry"), format!("{noretry}\n")).unwrap();
    }
    root
}

/// The stub HIP runtimes of ROCm 6 and 7, in one directory for `LD_LIBRARY_PATH`.
pub fn hip_runtimes(dir: &Path) -> PathBuf {
    let lib = dir.join("rocm-lib");
    std::fs::create_dir_all(&lib).unwrap();
    for major in [6, 7] {
        let name = format!("libamdhip64.so.{major}");
        super::python::cc_shared(&lib, "int hipInit(unsigned f) { return (int)f; }\n", &name, &[]);
    }
    lib
}

pub struct Doctor {
    pub code: i32,
    pub text: String,
    pub json: DoctorDocument,
}

/// `doctor` twice (text and JSON, the JSON validated against its schema), with `env`.
pub fn doctor(d: &Path, args: &[&str], env: &[(&str, &str)]) -> Doctor {
    let out = super::wheelfix_env(d, &[&["doctor"], args].concat(), env);
    let json = super::wheelfix_env(d, &[&["doctor", "--json"], args].concat(), env);
    assert_eq!(out.status.code(), json.status.code(), "{}", super::stderr(&json));
    validate("doctor.schema.json", &json.stdout);
    Doctor { code: out.status.code().unwrap(), text: super::stdout(&out), json: super::document(&json, &[]) }
}

impl Doctor {
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for e in &self.json.environments {
            for p in &e.diagnosis.problems {
                out.push((p.kind.to_string(), p.fix.clone().unwrap_or_default()));
            }
        }
        out
    }

    pub fn kinds(&self) -> Vec<String> {
        self.problems().into_iter().map(|(k, _)| k).collect()
    }

    /// The fix of the first problem of `kind`, as the text report prints it (`fix: …`): what a
    /// person copies.
    pub fn fix(&self, kind: &str) -> String {
        let from_json = self
            .problems()
            .into_iter()
            .find(|(k, _)| k == kind)
            .map(|(_, f)| f)
            .unwrap_or_else(|| panic!("{}", self.text));
        let printed = self
            .text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("fix: "))
            .find(|f| *f == from_json)
            .unwrap_or_else(|| panic!("the text report does not print `fix: {from_json}`:\n{}", self.text));
        printed.to_string()
    }

    /// The environment's status word: `ready`, `problems`, `cannot-tell`, `nothing-to-check`.
    pub fn status(&self) -> String {
        serde_json::to_value(self.json.environments[0].diagnosis.status).unwrap().as_str().unwrap().to_string()
    }
}

/// A release served over HTTP on 127.0.0.1 as a person meets one: a PEP 503 index that
/// `wheelfix index` writes from directories of wheels, at [`Release::url`].
pub struct Release {
    _server: super::http::Server,
    pub url: String,
    root: PathBuf,
}

impl Release {
    /// An index (empty until published) served from `dir/www`.
    pub fn serve(dir: &Path) -> Release {
        let root = dir.join("www");
        std::fs::create_dir_all(&root).unwrap();
        let server = super::http::Server::start(&root);
        let url = server.url("simple/");
        Release { _server: server, url, root }
    }

    /// (Re)write the index of the wheels in `dirs` (relative to `dir`).
    pub fn publish(&self, dir: &Path, dirs: &[&str]) {
        let out = self.root.join("simple");
        let args = [&["index", "--no-page", "-o", out.to_str().unwrap()], dirs].concat();
        let done = super::wheelfix(dir, &args);
        assert!(done.status.success(), "{}", super::stderr(&done));
    }

    /// What a person runs to install `requirement` into `venv` from this index, with its pip.
    pub fn pip_install(&self, dir: &Path, venv: &Path, requirement: &str) {
        let python = venv.join("bin/python");
        paste(dir, &format!("{} -m pip install -q --index-url {} '{requirement}'", python.display(), self.url));
    }

    /// The same with uv, aimed at the environment's Python.
    pub fn uv_install(&self, dir: &Path, venv: &Path, requirement: &str) {
        let python = venv.join("bin/python");
        let uv = uv();
        paste(
            dir,
            &format!(
                "{} pip install -q --python {} --index-url {} '{requirement}'",
                uv.display(),
                python.display(),
                self.url
            ),
        );
    }
}
