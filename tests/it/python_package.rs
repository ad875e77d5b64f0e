//! wheelfix as a Python package: built once, as released (maturin with zig, `bindings = "bin"`),
//! audited by itself, installed into a fresh virtual environment with its man pages, and run.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::python::{run, system_python};
use wheelfix::platform::{Arch, Libc};
use wheelfix::policy::Policies;

/// The wheel a build wrote into `dist`.
fn built_wheel(dist: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .unwrap()
}

/// A fresh virtual environment in `dir` with `wheel` installed; checks `wheelfix --version`.
fn install_into_fresh_venv(dir: &Path, wheel: &Path) -> std::path::PathBuf {
    let venv = dir.join("venv");
    run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(wheel));
    let version = run(Command::new(venv.join("bin/wheelfix")).arg("--version"));
    assert_eq!(version.trim(), format!("wheelfix {}", env!("CARGO_PKG_VERSION")));
    venv
}

/// The release build (`release/build-wheel.sh`): maturin with zig against glibc 2.17. The wheel
/// is `manylinux2014`, wheelfix's own audit agrees (no symbol newer than glibc 2.17), the binary
/// runs, and its man pages are installed.
#[test]
fn the_release_wheel_is_manylinux2014_and_passes_its_own_audit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    run(Command::new(root.join("release/build-wheel.sh")).arg(&dist).current_dir(root));
    let wheel = built_wheel(&dist);
    let name = wheel.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.ends_with("-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"), "{name}");

    let audit = run(Command::new(env!("CARGO_BIN_EXE_wheelfix")).args(["show", "--json"]).arg(&wheel));
    let report = reports_of(&audit);
    let set = Policies::embedded().for_platform(Arch::X86_64, Libc::Glibc, &[]);
    let priority = |tag: &str| set.by_tag(&wheelfix::wheel::platform_tag::PlatformTag::parse(tag)).map(|p| p.priority);
    let derived = report[0].platform_tag.as_deref().unwrap();
    assert!(
        priority(derived).unwrap() >= priority("manylinux_2_17_x86_64").unwrap(),
        "the release binary must run on glibc 2.17, but meets {derived}: {audit}"
    );

    let venv = install_into_fresh_venv(dir.path(), &wheel);
    // Real work through the paths that copy files (std's copy_file_range) and rename outputs.
    let out = dir.path().join("out");
    run(Command::new(venv.join("bin/wheelfix"))
        .args(["retag", "-q", "-w"])
        .arg(&out)
        .arg(root.join("testdata/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl")));
    let site = dir.path().join("site");
    run(Command::new(venv.join("bin/wheelfix")).args(["index", "-o"]).arg(&site).arg(&out));
    assert!(site.join("rocm-demo/index.html").exists());

    // The man pages install under the environment's share/man/man1, where `man` finds them.
    let man = venv.join("share/man/man1");
    for page in ["wheelfix.1", "wheelfix-show.1", "wheelfix-split.1"] {
        assert!(man.join(page).is_file(), "{} is not installed", man.join(page).display());
    }
    let page = std::fs::read_to_string(man.join("wheelfix-retag.1")).unwrap();
    assert!(page.contains(".TH wheelfix-retag") && page.contains("rocm\\-version"), "{page}");
}

/// The aarch64 release wheel (`release/build-wheel.sh --target aarch64`, cross-built with zig
/// against glibc 2.17): it cannot run here, so wheelfix audits it: an aarch64 binary whose
/// symbol versions meet `manylinux_2_17_aarch64`, the tag its name claims, with its man pages.
#[test]
fn the_aarch64_release_wheel_is_manylinux2014_by_its_own_audit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    run(Command::new(root.join("release/build-wheel.sh")).args(["--target", "aarch64"]).arg(&dist).current_dir(root));
    let wheel = built_wheel(&dist);
    let name = wheel.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.ends_with("-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl"), "{name}");

    let audit = run(Command::new(env!("CARGO_BIN_EXE_wheelfix")).args(["show", "--json"]).arg(&wheel));
    let report = reports_of(&audit);
    assert_eq!(report[0].arch.as_deref(), Some("aarch64"), "{audit}");
    assert_eq!(report[0].host_binaries, 1, "{audit}");
    let set = Policies::embedded().for_platform(Arch::Aarch64, Libc::Glibc, &[]);
    let priority = |tag: &str| set.by_tag(&wheelfix::wheel::platform_tag::PlatformTag::parse(tag)).map(|p| p.priority);
    let derived = report[0].platform_tag.as_deref().unwrap();
    assert!(
        priority(derived).unwrap() >= priority("manylinux_2_17_aarch64").unwrap(),
        "the aarch64 binary must load with glibc 2.17, but meets {derived}: {audit}"
    );
    let listing = run(Command::new(system_python())
        .args(["-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"])
        .arg(&wheel));
    assert!(listing.contains(".data/data/share/man/man1/wheelfix-split.1"), "{listing}");
    assert!(listing.contains(".data/scripts/wheelfix"), "{listing}");
}

/// The reports of `show --json`'s printed text, typed.
fn reports_of(text: &str) -> Vec<wheelfix::report::ShowReport> {
    let printed: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
    printed.into_iter().map(|entry| support::typed(entry, &[])).collect()
}
