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
    split_project_with(dir, name, tag, targets, false)
}

/// [`split_project`], the host declaring a `device-<target>` extra per device wheel (and
/// `device-all`) as `split` writes it, when `extras`.
fn split_project_with(dir: &Path, name: &str, tag: &str, targets: &[&str], extras: bool) -> Vec<PathBuf> {
    let version = "1.0+rocm7.1.0";
    let mut host = WheelSpec::new(name, version, tag).file(&format!("{name}/__init__.py"), "");
    if extras {
        let project = name.replace('_', "-");
        for t in targets {
            host.metadata.push(format!("Provides-Extra: device-{t}"));
            host.metadata.push(format!("Requires-Dist: {project}-device-{t}=={version}; extra == \"device-{t}\""));
            host.metadata.push(format!("Requires-Dist: {project}[device-{t}]; extra == \"device-all\""));
        }
        host.metadata.push("Provides-Extra: device-all".into());
    }
    let mut wheels = vec![host.write(dir)];
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

/// The glibc of this machine, as `(2, minor)`'s minor (pip's platform tags go up to it).
fn machine_glibc_minor() -> u32 {
    let out =
        Command::new(system_python()).args(["-c", "import platform; print(platform.libc_ver()[1])"]).output().unwrap();
    let version = String::from_utf8(out.stdout).unwrap();
    let minor = version.trim().split_once('.').and_then(|(_, m)| m.parse().ok());
    minor.unwrap_or_else(|| panic!("a glibc machine: {version:?}"))
}

/// The pip and uv commands of one GPU's card (landing page) or row (release page), as the
/// browser shows them.
fn gpu_commands(dom: &str, start: &str, end: &str) -> (String, String, String) {
    let block = &dom[dom.find(start).unwrap_or_else(|| panic!("no `{start}` in {dom}"))..];
    let block = &block[..block.find(end).unwrap()];
    let command_of = |class: &str| {
        let open = format!("<code class=\"cmd {class}\">");
        let at = block.find(&open).unwrap() + open.len();
        support::html_text(&block[at..at + block[at..].find("</code>").unwrap()])
    };
    // Its text, tags taken out.
    let mut text = String::new();
    let mut in_tag = false;
    for c in block.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    (command_of("pip"), command_of("uv"), support::html_text(&text))
}

#[test]
fn every_gpu_command_on_both_pages_runs_as_printed_and_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    // `wfxbase` serves both GPUs on any Python 3; `wfxnlm` serves gfx1100 only, for CPython
    // 3.11, and needs a glibc newer than this machine's.
    let newer = machine_glibc_minor() + 3;
    split_project_with(&set, "wfxbase", "py3-none-manylinux_2_28_x86_64", &["gfx942", "gfx1100"], true);
    split_project_with(&set, "wfxnlm", &format!("cp311-cp311-manylinux_2_{newer}_x86_64"), &["gfx1100"], true);
    let inputs: Vec<String> =
        std::fs::read_dir(&set).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    let mut args = vec!["selector", "--name", "wfx-gpu", "-o", "sel"];
    args.extend(inputs.iter().map(String::as_str));
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let www = d.join("www");
    let server = support::http::Server::start(&www);
    let base = server.url("public/");
    let out = wheelfix(d, &["index", "-o", "built/rel", "set", "sel"]);
    assert!(out.status.success(), "{}", stderr(&out));
    support::python::validate("release.schema.json", &std::fs::read(d.join("built/rel/release.json")).unwrap());
    let out = wheelfix(d, &["site", "-o", www.join("public").to_str().unwrap(), "--site-url", &base, "built/rel"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let landing = support::browser::dump_dom(&server.url("public/index.html"));
    let release = support::browser::dump_dom(&server.url("public/rel/release.html"));

    let card =
        |target: &str| gpu_commands(&landing, &format!("<div class=\"gpu-card\" data-gpu=\"{target}\""), "</div>");
    let row = |target: &str| gpu_commands(&release, &format!("<tr data-gpu=\"{target}\""), "</tr>");
    let (pip942, uv942, card942) = card("gfx942");
    let (pip1100, _, card1100) = card("gfx1100");
    // The landing page's commands are the release page's, exactly.
    assert_eq!(row("gfx942").0, pip942);
    assert_eq!(row("gfx942").1, uv942);
    assert_eq!(row("gfx1100").0, pip1100);
    // Each says what it needs of the machine and names what it leaves out.
    assert!(card942.contains("Linux with glibc 2.28+ · Python: any Python 3"), "{card942}");
    assert!(card942.contains("Not for this GPU (no device code for it): wfxnlm"), "{card942}");
    assert!(row("gfx942").2.contains("Not for this GPU (no device code for it): wfxnlm"), "{}", row("gfx942").2);
    assert!(card1100.contains(&format!("Linux with glibc 2.{newer}+ · Python: CPython 3.11")), "{card1100}");
    assert!(!card1100.contains("Not for this GPU"), "{card1100}");
    assert!(row("gfx1100").2.contains(&format!("glibc 2.{newer}+")), "{}", row("gfx1100").2);

    // Run as printed in a fresh shell on this machine: gfx942's commands install the release
    // without wfxnlm, whose glibc this machine lacks.
    let uv_dir = support::envs::uv().parent().unwrap().display().to_string();
    for (tool, command) in [("pip", &pip942), ("uv", &uv942)] {
        let (venv, site) = support::envs::new_venv(d, &format!("venv-{tool}"));
        let line = format!(". {}/bin/activate && PATH=$PATH:{uv_dir} && {command}", venv.display());
        support::envs::paste(d, &line);
        let mut installed: Vec<String> = std::fs::read_dir(&site)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".dist-info") && n.starts_with("wfx"))
            .collect();
        installed.sort();
        assert_eq!(
            installed,
            [
                "wfx_gpu-1.0+rocm7.1.0.dist-info",
                "wfxbase-1.0+rocm7.1.0.dist-info",
                "wfxbase_device_gfx942-1.0+rocm7.1.0.dist-info"
            ],
            "{tool}: `{command}`"
        );
    }
    // gfx1100's needs wfxnlm: pip says it cannot have it here, as the card's glibc said.
    let (venv, _) = support::envs::new_venv(d, "venv-gfx1100");
    let out = support::envs::fresh_shell(d, &format!(". {}/bin/activate && {pip1100}", venv.display()));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wfxnlm"), "{}", String::from_utf8_lossy(&out.stderr));
}
