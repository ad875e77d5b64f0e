//! `selector`: the seed-000 race reproduced. Linux and Windows builds of one release carry
//! different device wheels; the selector written from both, in either order, is the same bytes,
//! and pip resolves `rocm[device-gfx950]` to the gfx950 device wheel on Linux and says on
//! Windows that the extra is not there (rather than installing nothing in silence).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::python::{assert_true_record, system_python};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};

const VERSION: &str = "7.14.0a20260519";

/// The wheels of one platform: the core, and a device wheel per target.
fn platform_wheels(dir: &Path, tag: &str, targets: &[&str]) -> Vec<PathBuf> {
    let mut wheels =
        vec![WheelSpec::new("rocm_sdk_core", VERSION, tag).file("_rocm_sdk_core/__init__.py", "").write(dir)];
    for t in targets {
        let name = format!("rocm_sdk_device_{t}");
        let member = format!("_rocm_sdk_libraries/.kpack/blas_lib_{t}.kpack");
        wheels.push(WheelSpec::new(&name, VERSION, tag).file(&member, format!("KPAK {t}")).write(dir));
    }
    wheels
}

fn pip(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(system_python())
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--dry-run", "--no-index", "--ignore-installed"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The projects a pip dry run would install, from its report.
fn would_install(report: &Path) -> Vec<String> {
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    let mut names: Vec<String> =
        report["install"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().into()).collect();
    names.sort();
    names
}

#[test]
fn one_selector_from_every_platform_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let linux = platform_wheels(&d.join("linux"), "py3-none-manylinux_2_28_x86_64", &["gfx942", "gfx950", "gfx1100"]);
    let windows = platform_wheels(&d.join("windows"), "py3-none-win_amd64", &["gfx1100", "gfx1151"]);
    let arg = |p: &PathBuf| p.to_str().unwrap().to_string();
    let mut outputs = Vec::new();
    for (out, first, second) in [("sel-a", &linux, &windows), ("sel-b", &windows, &linux)] {
        let mut args: Vec<String> = vec!["selector".into(), "--name".into(), "rocm".into(), "-o".into(), out.into()];
        args.extend(first.iter().chain(second.iter()).map(arg));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = wheelfix(d, &args);
        assert!(run.status.success(), "{}", stderr(&run));
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(d.join(out))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        files.sort();
        outputs.push(files);
    }
    assert_eq!(outputs[0], outputs[1], "the same bytes from either order");
    let names: Vec<&str> = outputs[0].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("rocm-{VERSION}-py3-none-manylinux_2_28_x86_64.whl").as_str(),
            format!("rocm-{VERSION}-py3-none-win_amd64.whl").as_str()
        ]
    );
    let sel = d.join("sel-a");
    for (name, _) in &outputs[0] {
        let record = assert_true_record(&sel.join(name));
        assert!(record.contains("METADATA"), "{record}");
    }

    // Linux: the extra brings the gfx950 device wheel and the core, pinned.
    let report = d.join("linux.json");
    let out = pip(
        &[
            "--find-links",
            "sel-a",
            "--find-links",
            "linux",
            "--report",
            report.to_str().unwrap(),
            "rocm[device-gfx950]",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(would_install(&report), ["rocm", "rocm-sdk-core", "rocm-sdk-device-gfx950"]);
    let out = pip(
        &["--find-links", "sel-a", "--find-links", "linux", "--report", report.to_str().unwrap(), "rocm[device-all]"],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        would_install(&report),
        ["rocm", "rocm-sdk-core", "rocm-sdk-device-gfx1100", "rocm-sdk-device-gfx942", "rocm-sdk-device-gfx950"]
    );

    // Windows (pip told the platform): no gfx950 there, and pip says so.
    let win = ["--platform", "win_amd64", "--only-binary=:all:", "--target", "t", "--python-version", "3.11"];
    let mut args: Vec<&str> = win.to_vec();
    args.extend(["--find-links", "sel-a", "--find-links", "windows", "--report", report.to_str().unwrap()]);
    args.push("rocm[device-gfx950]");
    let out = pip(&args, d);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not provide the extra 'device-gfx950'"), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(would_install(&report), ["rocm", "rocm-sdk-core"]);
    args.pop();
    args.push("rocm[device-gfx1151]");
    let out = pip(&args, d);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(would_install(&report), ["rocm", "rocm-sdk-core", "rocm-sdk-device-gfx1151"]);

    // check on the whole release: the selectors' extras match each platform's device wheels.
    let set = d.join("set");
    for (i, w) in linux.iter().chain(&windows).enumerate() {
        let sub = set.join(if i < linux.len() { "linux" } else { "windows" });
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::copy(w, sub.join(w.file_name().unwrap())).unwrap();
    }
    for (name, bytes) in &outputs[0] {
        std::fs::write(set.join(name), bytes).unwrap();
    }
    let out = wheelfix(d, &["check", "--json", set.to_str().unwrap()]);
    let report = support::check_document(&out);
    assert!(!report.kinds().iter().any(|k| k.contains("extra")), "{report:#?}");
}

#[test]
fn a_selector_needs_one_version_or_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut wheels = platform_wheels(&d.join("linux"), "py3-none-manylinux_2_28_x86_64", &["gfx942"]);
    wheels.push(WheelSpec::new("rocm_sdk_device_gfx950", "7.15.0", "py3-none-manylinux_2_28_x86_64").write(d));
    let mut args = vec!["selector", "--name", "rocm", "-o", "sel"];
    args.extend(wheels.iter().map(|w| w.to_str().unwrap()));
    let out = wheelfix(d, &args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--version"), "{}", stderr(&out));
    args.extend(["--version", "7.15.0"]);
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wheelfix(d, &["selector", "--name", "bad name", "-o", "sel", wheels[0].to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

/// A project at `version` with one device wheel per target (`py3-none-<tag>` each), the device
/// wheels pinning it as `split` writes them.
fn split_project(dir: &Path, name: &str, tag: &str, targets: &[&str]) -> Vec<PathBuf> {
    let version = "1.0+rocm7.1.0";
    let mut wheels = vec![WheelSpec::new(name, version, tag).file(&format!("{name}/__init__.py"), "").write(dir)];
    for t in targets {
        let device = format!("{name}_device_{t}");
        let member = format!("{name}/.kpack/k_{t}.kpack");
        let project = name.replace('_', "-");
        let mut spec = WheelSpec::new(&device, version, tag).file(&member, format!("KPAK {t}"));
        spec.metadata.push(format!("Requires-Dist: {project}=={version}"));
        wheels.push(spec.write(dir));
    }
    wheels
}

#[test]
fn each_gpus_extra_pulls_only_the_projects_that_serve_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    // `base` serves both GPUs; `nlm` serves gfx1100 only and needs glibc 2.39.
    split_project(&set, "base", "py3-none-manylinux_2_28_x86_64", &["gfx942", "gfx1100"]);
    split_project(&set, "nlm", "py3-none-manylinux_2_39_x86_64", &["gfx1100"]);
    let inputs: Vec<String> =
        std::fs::read_dir(&set).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    let mut args = vec!["selector", "--name", "rocm-gpu", "-o", "sel"];
    args.extend(inputs.iter().map(String::as_str));
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let www = d.join("www");
    let out = wheelfix(d, &["index", "--no-page", "-o", www.join("simple").to_str().unwrap(), "set", "sel"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let server = support::http::Server::start(&www);
    let url = server.url("simple/");
    // On a glibc 2.36 machine, as pip resolves for one (every manylinux_2_x it accepts named:
    // pip takes `--platform` tags as they are).
    let platforms: Vec<String> =
        (17..=36).flat_map(|m| ["--platform".to_string(), format!("manylinux_2_{m}_x86_64")]).collect();
    let resolve = |extra: &str| {
        let report = d.join(format!("{extra}.json"));
        let requirement = format!("rocm-gpu[{extra}]==1.0+rocm7.1.0");
        let out = Command::new(system_python())
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--dry-run", "--ignore-installed"])
            .args(["--only-binary=:all:", "--python-version", "3.11"])
            .args(&platforms)
            .args(["--target", "t", "--index-url", &url, "--report"])
            .arg(&report)
            .arg(&requirement)
            .env_remove("PIP_FIND_LINKS")
            .current_dir(d)
            .output()
            .unwrap();
        (out.status.success(), if out.status.success() { would_install(&report) } else { Vec::new() }, stderr(&out))
    };
    let (ok, installs, err) = resolve("device-gfx942");
    assert!(ok, "gfx942 is not stopped by a project it has no code for: {err}");
    assert_eq!(installs, ["base", "base-device-gfx942", "rocm-gpu"]);
    // gfx1100 needs nlm, which this machine's glibc cannot take: pip says so.
    let (ok, _, err) = resolve("device-gfx1100");
    assert!(!ok && err.contains("nlm"), "{err}");
    // check finds no fault in the selector's extras, and names the project that raises
    // gfx1100's glibc floor.
    let out = wheelfix(d, &["check", "--json", "set", "sel"]);
    let report = support::check_document(&out);
    assert!(!report.kinds().iter().any(|k| k.contains("extra") || k.contains("pin")), "{report:#?}");
    let text = stdout(&wheelfix(d, &["check", "set", "sel"]));
    assert!(
        text.contains("warning: floor-raised-by: nlm raises the glibc that rocm-gpu's command for gfx1100 needs to 2.39; everything else it pulls installs on glibc 2.28"),
        "{text}"
    );
    // A selector written by hand that requires every host for every GPU: an error, naming
    // the project and the GPUs it is pulled for without code.
    let mut old = WheelSpec::new("old_sel", "1.0+rocm7.1.0", "py3-none-manylinux_2_28_x86_64");
    let v = "1.0+rocm7.1.0";
    old.metadata.extend([
        "Provides-Extra: device-gfx942".to_string(),
        "Provides-Extra: device-gfx1100".to_string(),
        "Provides-Extra: device-all".to_string(),
        format!("Requires-Dist: base=={v}"),
        format!("Requires-Dist: nlm=={v}"),
    ]);
    for (t, projects) in [("gfx942", &["base"][..]), ("gfx1100", &["base", "nlm"][..]), ("all", &["base", "nlm"][..])] {
        for p in projects {
            let device = if t == "all" { "gfx942" } else { t };
            old.metadata.push(format!("Requires-Dist: {p}-device-{device}=={v}; extra == \"device-{t}\""));
        }
    }
    old.metadata.push(format!("Requires-Dist: nlm-device-gfx1100=={v}; extra == \"device-all\""));
    old.metadata.push(format!("Requires-Dist: base-device-gfx1100=={v}; extra == \"device-all\""));
    old.write(&d.join("old"));
    let text = stdout(&wheelfix(d, &["check", "set", "old"]));
    assert!(
        text.contains("error: extra-pulls-other-gpu: old-sel 1.0+rocm7.1.0 requires it for every GPU, but nlm has device code for gfx1100 only: the commands for gfx942 install it for nothing"),
        "{text}"
    );
}
