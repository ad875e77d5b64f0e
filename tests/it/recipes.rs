//! The README's recipes, run exactly as written on fixture wheels: the cibuildwheel
//! `repair-wheel-command`, the GitHub Actions job's commands, and the ROCm release flow.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::gpugen::{GFX942, GFX950, bundle_for, host_with_fatbin};
use support::python::{python_tag, system_python};
use support::wheelgen::WheelSpec;

/// The fenced block after `<!-- recipe: NAME -->` in the guide's recipes page.
fn recipe(name: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/recipes.md")).unwrap();
    let marker = format!("<!-- recipe: {name} -->");
    let after =
        &readme[readme.find(&marker).unwrap_or_else(|| panic!("docs/src/recipes.md has no {marker}")) + marker.len()..];
    let start = after.find("```").unwrap();
    let body = &after[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_string()
}

/// A directory with `wheelfix` (this build) and `pip` (the test Python's) for the recipes.
fn tool_dir(d: &Path) -> PathBuf {
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wheelfix"), bin.join("wheelfix")).unwrap();
    let pip = bin.join("pip");
    let script = format!("#!/bin/sh\nexec {} -m pip --disable-pip-version-check \"$@\"\n", system_python());
    support::write_executable(&pip, script.as_bytes());
    bin
}

/// Run a script with bash (`-euo pipefail`) in `d`, the recipe tools first on PATH.
fn sh(d: &Path, script: &str) -> std::process::Output {
    let bin = if d.join("bin").exists() { d.join("bin") } else { tool_dir(d) };
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("bash").args(["-euo", "pipefail", "-c", script]).current_dir(d).env("PATH", path).output().unwrap()
}

/// Compiled wheels for this interpreter, with gfx950 device code, plus a pure one, in `dist/`.
fn dist(d: &Path) {
    dist_for(d, &[("gfx950", GFX950)]);
}

/// [`dist`] with device code for each of `targets`.
fn dist_for(d: &Path, targets: &[(&str, u32)]) {
    let py = python_tag();
    for (name, version, requires) in
        [("torch", "2.15.0a0+git31a77fc", "triton==3.9.0+gitaad2a60d"), ("triton", "3.9.0+gitaad2a60d", "")]
    {
        let module = format!("_{name}");
        let mut spec = WheelSpec::new(name, version, &format!("{py}-{py}-linux_x86_64"))
            .file(&format!("{name}/__init__.py"), "")
            .file(&format!("{name}/{module}.so"), host_with_fatbin(&module, bundle_for(targets, 6)));
        if !requires.is_empty() {
            spec.metadata = vec![format!("Requires-Dist: {requires}")];
        }
        spec.write(&d.join("dist"));
    }
    // Pure and requiring nothing marked: the version rules leave it unmarked (a warning in check).
    WheelSpec::new("triton_kernels", "1.0.0", "py3-none-any")
        .file("triton_kernels/__init__.py", "")
        .write(&d.join("dist"));
}

fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_release_flow_recipe_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dist(d);
    let out = sh(d, &recipe("release-flow"));
    assert_ok(&out, "the release flow");
    let installed: Vec<String> = std::fs::read_dir(d.join("installed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    assert!(installed.iter().any(|n| n == "torch-2.15.0a0+git31a77fc.rocm10.1.0.dist-info"), "{installed:?}");
    assert!(installed.iter().any(|n| n == "triton-3.9.0+gitaad2a60d.rocm10.1.0.dist-info"), "{installed:?}");
    assert!(installed.iter().any(|n| n.starts_with("rocm_torch-10.1.0+gfx950.")), "{installed:?}");
}

#[test]
fn the_github_actions_recipe_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dist(d);
    // Mark the fixture versions first so that `check` has a clean set to pass.
    assert_ok(&sh(d, "wheelfix retag --rocm-version 10.1.0 --in-place dist/*.whl"), "marking");
    let commands: Vec<String> = recipe("github-actions")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- run: ").map(str::to_string))
        .filter(|c| c != "pip install wheelfix") // the binary under test is already on PATH
        .collect();
    assert_eq!(commands.len(), 3, "{commands:?}");
    for command in commands {
        assert_ok(&sh(d, &command), &command);
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("wheelfix-report.json")).unwrap()).unwrap();
    assert_eq!(report.as_array().unwrap().len(), 3);
}

#[test]
fn the_cibuildwheel_recipe_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dist(d);
    let block = recipe("cibuildwheel");
    let command =
        block.lines().find_map(|l| l.strip_prefix("repair-wheel-command = ")).unwrap().trim_matches('"').to_string();
    let wheel = std::fs::read_dir(d.join("dist")).unwrap().next().unwrap().unwrap().path();
    let command = command.replace("{dest_dir}", "repaired").replace("{wheel}", wheel.to_str().unwrap());
    assert_ok(&sh(d, &command), &command);
    assert_eq!(std::fs::read_dir(d.join("repaired")).unwrap().count(), 1);
}

#[test]
fn the_fat_build_recipe_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dist_for(d, &[("gfx942", GFX942), ("gfx950", GFX950)]);
    let out = sh(d, &recipe("fat-build"));
    assert_ok(&out, "the fat build");
    for arch in ["gfx942", "gfx950"] {
        let torch = std::fs::read_dir(d.join("wheelhouse").join(arch))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("torch-"))
            .unwrap();
        let report = support::show_report(d, &torch, &[]);
        assert_eq!(report.gpu_targets, [arch], "{arch}: {report:#?}");
        assert!(d.join("site").join(arch).join("index.html").exists(), "{arch}");
        let page = std::fs::read_to_string(d.join("public").join(arch).join("release.html")).unwrap();
        assert!(page.contains(&format!("<code>{arch}</code>")), "{arch}: {page}");
    }
    let installed: Vec<String> = std::fs::read_dir(d.join("installed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    assert!(installed.iter().any(|n| n.starts_with("rocm_torch-10.1.0+gfx942.")), "{installed:?}");
    assert!(installed.iter().any(|n| n == "torch-2.15.0a0+git31a77fc.rocm10.1.0.dist-info"), "{installed:?}");
}

#[test]
fn the_fat_build_recipe_run_twice_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dist_for(d, &[("gfx942", GFX942), ("gfx950", GFX950)]);
    assert_ok(&sh(d, &recipe("fat-build")), "the fat build");
    let first: Vec<_> =
        ["wheelhouse", "site", "public"].iter().map(|p| support::files_with_bytes(&d.join(p))).collect();
    let out = sh(d, &recipe("fat-build"));
    assert_ok(&out, "the fat build, run again");
    let again: Vec<_> =
        ["wheelhouse", "site", "public"].iter().map(|p| support::files_with_bytes(&d.join(p))).collect();
    for (a, b) in first.iter().zip(&again) {
        let names = |t: &Vec<(String, Vec<u8>)>| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(a), names(b), "the same files");
        for ((name, x), (_, y)) in a.iter().zip(b) {
            assert!(x == y, "{name} changed on the rerun");
        }
    }
    // Without the fresh directory, retag refuses the second copy and says why.
    let unsafe_rerun = recipe("fat-build").replace("  rm -rf \"wheelhouse/$arch/\"\n", "");
    let out = sh(d, &unsafe_rerun);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the directory still holds the output of an earlier run"), "{err}");
}
