//! wheelfix as a Python package: built with maturin (`bindings = "bin"`), installed into a fresh
//! virtual environment, run, and audited by itself.

mod support;

use std::path::Path;
use std::process::Command;

use support::python::{run, system_python, tools_venv};
use wheelfix::platform::{Arch, Libc};
use wheelfix::policy::Policies;

#[test]
fn the_wheelfix_wheel_installs_runs_and_passes_its_own_audit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    run(Command::new(tools_venv().join("bin/maturin"))
        .args(["build", "--release", "--quiet", "-o"])
        .arg(&dist)
        .current_dir(root)
        .env("PATH", format!("{}:{}", tools_venv().join("bin").display(), std::env::var("PATH").unwrap_or_default())));
    let wheel = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .unwrap();
    let name = wheel.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with(&format!("wheelfix-{}-py3-none-", env!("CARGO_PKG_VERSION"))), "{name}");

    let venv = dir.path().join("venv");
    run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(&wheel));
    let version = run(Command::new(venv.join("bin/wheelfix")).arg("--version"));
    assert_eq!(version.trim(), format!("wheelfix {}", env!("CARGO_PKG_VERSION")));
    let shown = run(Command::new(venv.join("bin/wheelfix"))
        .args(["show", "--json"])
        .arg(root.join("testdata/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl")));
    assert!(shown.contains("\"platform_tag\": \"manylinux_2_24_x86_64\""), "{shown}");

    // Its own audit: the tag it meets is no newer than the one its file name claims.
    let audit = run(Command::new(venv.join("bin/wheelfix")).args(["show", "--json"]).arg(&wheel));
    let report: serde_json::Value = serde_json::from_str(&audit).unwrap();
    let derived = report[0]["platform_tag"].as_str().unwrap().to_string();
    let set = Policies::embedded().for_platform(Arch::X86_64, Libc::Glibc, &[]);
    let priority = |tag: &str| set.by_tag(&wheelfix::wheel::platform_tag::PlatformTag::parse(tag)).map(|p| p.priority);
    let claimed = report[0]["tags"].as_array().unwrap().iter().filter_map(|t| priority(t.as_str().unwrap())).min();
    let claimed = claimed.unwrap_or_else(|| panic!("the wheel claims no manylinux tag: {name}"));
    let derived_priority = priority(&derived).unwrap_or_else(|| panic!("wheelfix's own wheel is {derived}: {audit}"));
    assert!(derived_priority >= claimed, "claims priority {claimed}, meets {derived}");
}
