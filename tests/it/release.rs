//! The release set: metapackage + index installed with pip from a local index, and `check`
//! finding each failure the seeds describe (and nothing on a clean set).

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::ElfSpec;
use support::gpugen::{GFX942, GFX950};
use support::python::{run, system_python};
use support::sets::{gfx950_set, gpu_wheel, py3_wheel};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};
use wheelfix::check::Severity;

fn arg_list<'a>(base: &[&'a str], paths: &'a [PathBuf]) -> Vec<&'a str> {
    let mut out = base.to_vec();
    out.extend(paths.iter().map(|p| p.to_str().unwrap()));
    out
}

fn only_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

#[test]
fn metapackage_and_index_install_exactly_the_pinned_versions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = gfx950_set(&d.join("wheelhouse/gfx950"));
    let meta = ["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", "gfx950", "-o"];
    let out = wheelfix(d, &arg_list(&[&meta[..], &["meta/gfx950"]].concat(), &wheels));
    assert!(out.status.success(), "{}", stderr(&out));
    let metapackage = only_file(&d.join("meta/gfx950"));
    let name = metapackage.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("rocm_torch-10.1.0+gfx950.") && name.ends_with("-py3-none-linux_x86_64.whl"), "{name}");
    // Deterministic: the same inputs give the same bytes.
    let again = wheelfix(d, &arg_list(&[&meta[..], &["meta2"]].concat(), &wheels));
    assert!(again.status.success());
    assert_eq!(std::fs::read(&metapackage).unwrap(), std::fs::read(only_file(&d.join("meta2"))).unwrap());
    let text = stdout(&out);
    assert!(text.contains("torch==2.15.0a0+git31a77fc.rocm10.1.0; extra == \"device-gfx950\""), "{text}");

    let out = wheelfix(d, &["index", "-o", "site/gfx950", "--python", "3.14", "wheelhouse/gfx950", "meta/gfx950"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("torch-2.15.0a0+git31a77fc.rocm10.1.0-cp312-cp312-manylinux_2_17_x86_64.whl: its tags (cp312) exclude Python 3.14"), "{}", stderr(&out));
    let page = std::fs::read_to_string(d.join("site/gfx950/torch/index.html")).unwrap();
    assert!(
        page.contains("torch-2.15.0a0%2Bgit31a77fc.rocm10.1.0-cp312-cp312-manylinux_2_17_x86_64.whl#sha256="),
        "{page}"
    );
    assert!(page.contains("data-core-metadata=\"sha256=") && page.contains("data-dist-info-metadata=\"sha256="));
    assert!(
        d.join("site/gfx950/torch/torch-2.15.0a0+git31a77fc.rocm10.1.0-cp312-cp312-manylinux_2_17_x86_64.whl.metadata")
            .exists()
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("site/gfx950/torch/index.json")).unwrap()).unwrap();
    assert_eq!(json["meta"]["api-version"], "1.1");
    assert_eq!(json["files"][0]["hashes"]["sha256"].as_str().unwrap().len(), 64);

    // pip installs exactly the pinned set from the local index (the test's Python is not 3.12:
    // the cp312 wheels install with --python-version into a target directory).
    let site = d.join("installed");
    let index_url = format!("file://{}", d.join("site/gfx950").display());
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "--index-url", &index_url])
        .args([
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "linux_x86_64",
            "--target",
        ])
        .arg(&site)
        .arg("rocm-torch[device-gfx950]"));
    let mut installed: Vec<String> = std::fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    installed.sort();
    assert_eq!(
        installed,
        [
            "nixl-1.5.2+rocm10.1.0.dist-info",
            format!("{}.dist-info", name.trim_end_matches("-py3-none-linux_x86_64.whl")).as_str(),
            "torch-2.15.0a0+git31a77fc.rocm10.1.0.dist-info",
            "triton-3.9.0+gitaad2a60d.rocm10.1.0.dist-info",
        ]
    );

    // pip download verifies the #sha256 of the link: a tampered file is refused.
    let download = |dest: &str| {
        Command::new(system_python())
            .args([
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--index-url",
                &index_url,
                "-d",
                dest,
                "nixl",
            ])
            .current_dir(d)
            .output()
            .unwrap()
    };
    assert!(download("dl-ok").status.success());
    let served = d.join("site/gfx950/nixl/nixl-1.5.2+rocm10.1.0-py3-none-any.whl");
    let mut bytes = std::fs::read(&served).unwrap();
    std::fs::remove_file(&served).unwrap();
    bytes.extend(b"tampered");
    std::fs::write(&served, bytes).unwrap();
    let bad = download("dl-bad");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("HASHES"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[test]
fn metapackage_refuses_inconsistent_sets() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut wheels = gfx950_set(&d.join("set"));
    let meta =
        ["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", "gfx950", "-o", "out"];
    let gfx942 = gpu_wheel("aiterish", "0.1+rocm10.1.0", &[("gfx942", GFX942)], &[]).write(d);
    let out = wheelfix(d, &arg_list(&meta, &[wheels.clone(), vec![gfx942]].concat()));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has device code for gfx942 but none for gfx950"), "{}", stderr(&out));

    let windows =
        WheelSpec::new("winpkg", "1.0+rocm10.1.0", "py3-none-win_amd64").file("winpkg/__init__.py", "").write(d);
    let out = wheelfix(d, &arg_list(&meta, &[wheels.clone(), vec![windows]].concat()));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("different platforms: linux_x86_64") && stderr(&out).contains("win_amd64"),
        "{}",
        stderr(&out)
    );

    wheels.push(py3_wheel("nixl", "1.5.3+rocm10.1.0", &[]).write(&d.join("set")));
    let out = wheelfix(d, &arg_list(&meta, &wheels));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("two versions of nixl"), "{}", stderr(&out));
    assert!(!d.join("out").exists() || std::fs::read_dir(d.join("out")).unwrap().next().is_none());
}

/// An sdist `rocm-7.13.0.tar.gz` whose PKG-INFO offers `device-*` extras for `targets`.
fn selector_sdist(dir: &Path, targets: &[(&str, Option<&str>)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut pkg_info = String::from(
        "Metadata-Version: 2.4\nName: rocm\nVersion: 7.13.0+rocm\nRequires-Dist: rocm-sdk-core==7.13.0+rocm\n",
    );
    for (t, marker) in targets {
        let marker = marker.map(|m| format!(" and sys_platform == \"{m}\"")).unwrap_or_default();
        pkg_info.push_str(&format!("Provides-Extra: device-{t}\nRequires-Dist: rocm-sdk-device-{t}==7.13.0+rocm; extra == \"device-{t}\"{marker}\n"));
    }
    pkg_info.push_str("Provides-Extra: device-all\n");
    for (t, _) in targets {
        pkg_info.push_str(&format!("Requires-Dist: rocm-sdk-device-{t}==7.13.0+rocm; extra == \"device-all\"\n"));
    }
    let path = dir.join("rocm-7.13.0.tar.gz");
    let file = std::fs::File::create(&path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()));
    let mut header = tar::Header::new_gnu();
    header.set_size(pkg_info.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, "rocm-7.13.0/PKG-INFO", pkg_info.as_bytes()).unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
    path
}

fn device_wheel(dir: &Path, target: &str, platform: &str) -> PathBuf {
    WheelSpec::new(&format!("rocm_sdk_device_{target}"), "7.13.0+rocm", &format!("py3-none-{platform}"))
        .file(&format!("_rocm_sdk_devices/{target}.kpack"), b"KPAK\x01\0\0\0".to_vec())
        .write(dir)
}

fn findings(d: &Path, dirs: &[&str]) -> (i32, Vec<(String, String)>) {
    let mut args = vec!["check", "--json"];
    args.extend_from_slice(dirs);
    let out = wheelfix(d, &args);
    let list = support::check_document(&out).findings.into_iter().map(|f| (f.kind.to_string(), f.message)).collect();
    (out.status.code().unwrap(), list)
}

#[test]
fn sdists_are_indexed_with_their_hash_but_no_metadata_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sdist = selector_sdist(&d.join("set"), &[("gfx950", None)]);
    device_wheel(&d.join("set"), "gfx950", "linux_x86_64");
    let out = wheelfix(d, &["index", "-o", "site", "set"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(d.join("site/rocm/index.html")).unwrap();
    let sha = support::python::run(
        Command::new(system_python())
            .args(["-c", "import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())"])
            .arg(&sdist),
    );
    assert!(page.contains(&format!("href=\"rocm-7.13.0.tar.gz#sha256={}\">", sha.trim())), "{page}");
    assert!(!d.join("site/rocm/rocm-7.13.0.tar.gz.metadata").exists());
    assert!(d.join("site/rocm-sdk-device-gfx950/index.html").exists());
}

#[test]
fn a_clean_set_has_no_findings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = gfx950_set(&d.join("gfx950"));
    let meta =
        ["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", "gfx950", "-o", "gfx950"];
    assert!(wheelfix(d, &arg_list(&meta, &wheels)).status.success());
    let core =
        WheelSpec::new("rocm_sdk_core", "7.13.0+rocm", "py3-none-linux_x86_64").file("_rocm_sdk_core/x.txt", "x");
    core.write(&d.join("linux"));
    device_wheel(&d.join("linux"), "gfx942", "linux_x86_64");
    selector_sdist(&d.join("linux"), &[("gfx942", None)]);
    let (code, list) = findings(d, &["gfx950", "linux"]);
    assert!(list.is_empty(), "{list:?}");
    assert_eq!(code, 0);
}

#[test]
fn check_finds_each_failure_of_the_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The `rocm` sdist race: Linux and Windows builds under one file name, different extras.
    let core = WheelSpec::new("rocm_sdk_core", "7.13.0+rocm", "py3-none-linux_x86_64").file("c/x.txt", "x");
    core.write(&d.join("linux"));
    device_wheel(&d.join("linux"), "gfx942", "linux_x86_64");
    device_wheel(&d.join("linux"), "gfx950", "linux_x86_64");
    device_wheel(&d.join("windows"), "gfx1201", "win_amd64");
    selector_sdist(
        &d.join("linux"),
        &[("gfx942", Some("linux")), ("gfx950", Some("linux")), ("gfx1201", Some("win32"))],
    );
    selector_sdist(&d.join("windows"), &[("gfx1201", Some("linux"))]);
    // Pins PyPI could satisfy, a missing label, labels out of ROCm order.
    py3_wheel("nixl", "1.5.2", &["nixl-rocm==1.5.2"]).write(&d.join("linux"));
    py3_wheel("nixl_rocm", "1.5.2+rocm10.1.0", &[]).write(&d.join("linux"));
    py3_wheel("atom", "0.1.9+rocm10.1.0", &[]).write(&d.join("linux"));
    py3_wheel("atom", "0.1.9+rocm7.14.0", &[]).write(&d.join("old"));
    // A gfx942 wheel in the gfx950 index; a platform wheel marked purelib with a WHEEL tag mismatch.
    gpu_wheel("aiterish", "0.1+rocm10.1.0", &[("gfx942", GFX942)], &[]).write(&d.join("site/gfx950"));
    let mut odd = WheelSpec::new("oddtags", "1.0+rocm10.1.0", "cp312-cp312-manylinux_2_28_x86_64")
        .file("o/_o.so", ElfSpec::extension("_o").build());
    odd.purelib = true;
    odd.wheel_tags = Some(vec!["cp312-cp312-linux_x86_64".into()]);
    odd.write(&d.join("linux"));

    let (code, list) = findings(d, &["linux", "windows", "old", "site"]);
    assert_eq!(code, 1);
    let has = |kind: &str, text: &str| list.iter().any(|(k, m)| k == kind && m.contains(text));
    assert!(has("filename-conflict", "rocm-7.13.0.tar.gz exists with 2 different contents"), "{list:#?}");
    assert!(has("missing-extra", "no extra `device-gfx942` for rocm-sdk-device-gfx942"), "{list:#?}");
    assert!(has("device-all-incomplete", "`device-all` does not include rocm-sdk-device-gfx950"), "{list:#?}");
    assert!(has("platform-marker", "rocm-sdk-device-gfx1201 is required on sys_platform == \"linux\""), "{list:#?}");
    assert!(has("no-local-version", "nixl 1.5.2 has no local version label"), "{list:#?}");
    assert!(has("loose-pin", "`nixl-rocm==1.5.2` is not an exact pin"), "{list:#?}");
    assert!(has("local-label-order", "atom 0.1.9+rocm10.1.0 sorts below 0.1.9+rocm7.14.0"), "{list:#?}");
    assert!(has("wrong-architecture", "is in the gfx950 index but its device code is for gfx942"), "{list:#?}");
    assert!(has("purelib-platform-wheel", "oddtags-1.0+rocm10.1.0"), "{list:#?}");
    assert!(has("tag-mismatch", "only in WHEEL: cp312-cp312-linux_x86_64"), "{list:#?}");
    let text = wheelfix(d, &["check", "linux", "windows"]);
    assert_eq!(text.status.code(), Some(1));
    assert!(stdout(&text).contains("error: no-local-version: nixl 1.5.2"), "{}", stdout(&text));
    let text = stdout(&text);
    assert!(text.contains(" errors, "), "{text}");
    // Errors first, grouped by kind, with the fix where there is one.
    let (errors_at, warnings_at) = (text.find("error ").unwrap(), text.find("warning ").unwrap_or(usize::MAX));
    assert!(errors_at < warnings_at, "{text}");
    assert!(text.contains("error loose-pin (") && text.contains("  fix: pin exactly"), "{text}");
    // The sdist race: what differs between the two contents, and where.
    assert!(
        text.contains(
            "linux/rocm-7.13.0.tar.gz has extras device-gfx942, device-gfx950 that windows/rocm-7.13.0.tar.gz lacks"
        ),
        "{text}"
    );
    let only = stdout(&wheelfix(d, &["check", "--errors-only", "linux", "windows"]));
    assert!(!only.contains("  warning:") && only.contains("error loose-pin ("), "{only}");
}

#[test]
fn warnings_fail_check_only_with_strict() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = gfx950_set(&d.join("gfx950"));
    // The seeds' triton_kernels 1.0.0: pure, requiring nothing marked, so left unmarked.
    py3_wheel("triton_kernels", "1.0.0", &[]).write(&d.join("gfx950"));
    let meta =
        ["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", "gfx950", "-o", "gfx950"];
    assert!(wheelfix(d, &arg_list(&meta, &wheels)).status.success());
    let out = wheelfix(d, &["check", "--json", "gfx950"]);
    let value = support::check_document(&out);
    assert_eq!(out.status.code(), Some(0), "{value:#?}");
    assert_eq!((value.errors, value.warnings), (0, 1), "{value:#?}");
    let finding = &value.findings[0];
    assert_eq!((finding.kind.name(), finding.severity), ("no-local-version", Severity::Warning));
    assert!(finding.message.contains("triton-kernels 1.0.0 (pure Python)"), "{finding:?}");
    let strict = wheelfix(d, &["check", "--strict", "gfx950"]);
    assert_eq!(strict.status.code(), Some(1), "{}", stdout(&strict));
    assert!(stdout(&strict).contains("warning: no-local-version: triton-kernels 1.0.0"), "{}", stdout(&strict));
    assert!(stdout(&strict).contains("0 errors, 1 warning"), "{}", stdout(&strict));
    let only = wheelfix(d, &["check", "--strict", "--errors-only", "gfx950"]);
    assert_eq!(only.status.code(), Some(1), "counted, if not listed");
    let only = stdout(&only);
    assert!(!only.contains("warning:") && only.contains("0 errors, 1 warning (warnings not listed"), "{only}");
}

/// A metapackage as `wheelfix metapackage` writes one: nothing but its `.dist-info`.
fn metapackage_wheel(dir: &Path, version: &str, pins: &[&str]) -> PathBuf {
    let mut spec = WheelSpec::new("rocm_torch", version, "py3-none-linux_x86_64");
    spec.metadata = pins.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    spec.write(dir)
}

#[test]
fn check_finds_sets_that_cannot_install() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("gfx950");
    // A label mismatch: the wheel wants rocm10.1.0's nixl-rocm, the set has rocm7.14.0's.
    py3_wheel("nixl_rocm", "1.5.2+rocm7.14.0", &[]).write(&set);
    let nixl = py3_wheel("nixl", "1.5.2+rocm10.1.0", &["nixl-rocm==1.5.2+rocm10.1.0"]).write(&set);
    // A metapackage pinning a cp311-only wheel beside a cp312-only one.
    let mut torch = gpu_wheel("torch", "2.15.0+rocm10.1.0", &[("gfx950", GFX950)], &[]);
    (torch.python, torch.abi) = ("cp311".into(), "cp311".into());
    torch.wheel_tags = Some(vec!["cp311-cp311-manylinux_2_17_x86_64".into()]);
    torch.write(&set);
    gpu_wheel("triton", "3.9.0+rocm10.1.0", &[("gfx950", GFX950)], &[]).write(&set);
    let pins = ["torch==2.15.0+rocm10.1.0", "triton==3.9.0+rocm10.1.0", "nixl==1.5.2+rocm10.1.0"];
    let old = metapackage_wheel(&set, "10.1.0+gfx950.9b0c71d2", &pins);
    let new = metapackage_wheel(&set, "10.1.0+gfx950.424e84fe", &pins);

    let (code, list) = findings(d, &["gfx950"]);
    assert_eq!(code, 1, "{list:#?}");
    let has = |kind: &str, text: &str| list.iter().any(|(k, m)| k == kind && m.contains(text));
    assert!(
        has(
            "unmet-requirement",
            "nixl 1.5.2+rocm10.1.0 requires `nixl-rocm==1.5.2+rocm10.1.0`, which no file of the set meets (the set has nixl-rocm 1.5.2+rocm7.14.0)"
        ),
        "{list:#?}"
    );
    assert!(has("no-common-python", "torch on 3.11; triton on 3.12; nixl on 3.6 and later"), "{list:#?}");
    assert!(has("duplicate-metapackage", "2 metapackages of rocm-torch"), "{list:#?}");
    assert!(has("duplicate-metapackage", "installers take 10.1.0+gfx950.9b0c71d2"), "{list:#?}");
    // Each names its files.
    let out = wheelfix(d, &["check", "--json", "gfx950"]);
    let value = support::check_document(&out);
    let files_of = |kind: &str| -> Vec<String> { value.of_kind(kind).flat_map(|f| f.files.clone()).collect() };
    assert!(files_of("unmet-requirement").iter().any(|f| f.ends_with(nixl.file_name().unwrap().to_str().unwrap())));
    assert!(files_of("unmet-requirement").iter().any(|f| f.contains("nixl_rocm-1.5.2+rocm7.14.0")));
    let dups = files_of("duplicate-metapackage");
    let named = |p: &Path| dups.iter().any(|f| f.ends_with(p.file_name().unwrap().to_str().unwrap()));
    assert!(named(&old) && named(&new), "{dups:?}");

    // The same set, mended: one metapackage, matching labels, one Python: no finding of these kinds.
    std::fs::remove_file(&old).unwrap();
    std::fs::remove_file(set.join("nixl_rocm-1.5.2+rocm7.14.0-py3-none-any.whl")).unwrap();
    py3_wheel("nixl_rocm", "1.5.2+rocm10.1.0", &[]).write(&set);
    std::fs::remove_file(set.join("torch-2.15.0+rocm10.1.0-cp311-cp311-manylinux_2_17_x86_64.whl")).unwrap();
    gpu_wheel("torch", "2.15.0+rocm10.1.0", &[("gfx950", GFX950)], &[]).write(&set);
    let (_, list) = findings(d, &["gfx950"]);
    let kinds = ["unmet-requirement", "no-common-python", "duplicate-metapackage"];
    assert!(!list.iter().any(|(k, _)| kinds.contains(&k.as_str())), "{list:#?}");
}
