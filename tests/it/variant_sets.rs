//! A variant set is one build, published whole: `variants` writes a release's variants, its
//! null variant, its plain copy and its `{name}-{version}-variants.json` together, or none of
//! them (failures and signals included); `check` and `index` refuse a part of a set, provider
//! data no installer may act on, and static properties that hide the other variants.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::gpugen::{GFX90A, GFX942, GFX950, bundle_for, host_with_fatbin};
use support::wheelgen::{WheelSpec, write_zip};
use support::{stderr, stdout, wheelfix};
use wheelfix::report::variants::{VariantsDocument, VariantsEntry};

/// A fat wheel of `project` 1.0+rocm7.1.0 with gfx942 and gfx950 code, for `python`.
fn fat(dir: &Path, project: &str, python: &str, gfx950_flags: u32) -> PathBuf {
    let tag = format!("{python}-{python}-linux_x86_64");
    WheelSpec::new(project, "1.0+rocm7.1.0", &tag)
        .file(
            &format!("{project}/_k.so"),
            host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942), ("gfx950", gfx950_flags)], 6)),
        )
        .write(dir)
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn copy_dir(from: &Path, to: &Path, leave_out: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for name in names(from).iter().filter(|n| !leave_out.contains(&n.as_str())) {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
}

fn kinds(d: &Path, dir: &str) -> (Option<i32>, Vec<String>) {
    let out = wheelfix(d, &["check", "--json", dir]);
    (out.status.code(), support::check_document(&out).findings.into_iter().map(|f| f.kind.to_string()).collect())
}

#[test]
fn a_release_is_published_whole_and_a_part_of_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cp311 = fat(&d.join("in"), "fat", "cp311", GFX950);
    let cp312 = fat(&d.join("in"), "fat", "cp312", GFX950);
    let args = |w: &str| -> Vec<String> {
        ["variants", "--json", "--one-index", "--all-targets", "--null", "--plain", "-w", w]
            .iter()
            .map(|s| s.to_string())
            .chain([cp311.display().to_string(), cp312.display().to_string()])
            .collect()
    };
    let run = |w: &str| wheelfix(d, &args(w).iter().map(String::as_str).collect::<Vec<_>>());
    let out = run("wh");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: VariantsDocument = support::document(&out, &[]);
    for entry in &doc.wheels {
        let VariantsEntry::Done { variants, .. } = entry else { panic!("{entry:?}") };
        assert_eq!(variants.set_files, ["wh/fat-1.0+rocm7.1.0-variants.json"]);
        assert!(variants.variants.iter().all(|v| v.thin.output.as_deref().unwrap().starts_with("wh/")));
    }
    let written = names(&d.join("wh"));
    assert_eq!(written.len(), 2 * 4 + 1, "three variants and a plain copy per build, one set file: {written:?}");
    let set: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("wh/fat-1.0+rocm7.1.0-variants.json")).unwrap()).unwrap();
    assert_eq!(set["variants"].as_object().unwrap().keys().collect::<Vec<_>>(), ["gfx942", "gfx950", "null"]);
    let (code, found) = kinds(d, "wh");
    assert_eq!(code, Some(0), "{found:?}");
    assert!(!found.iter().any(|k| k.starts_with("variant-")), "{found:?}");
    let out = wheelfix(d, &["index", "-o", "site", "wh"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The same run again: the same bytes, left as they are.
    let before: Vec<Vec<u8>> = written.iter().map(|n| std::fs::read(d.join("wh").join(n)).unwrap()).collect();
    let out = run("wh");
    assert!(out.status.success(), "{}", stderr(&out));
    let after: Vec<Vec<u8>> = written.iter().map(|n| std::fs::read(d.join("wh").join(n)).unwrap()).collect();
    assert!(before == after);

    // One variant of one build missing: check and index refuse the part, naming the build.
    let missing = "fat-1.0+rocm7.1.0-cp312-cp312-linux_x86_64-gfx950.whl";
    copy_dir(&d.join("wh"), &d.join("part"), &[missing]);
    let out = wheelfix(d, &["check", "part"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("variant-set-incomplete"), "{text}");
    assert!(text.contains("fat-1.0+rocm7.1.0-cp312-cp312-linux_x86_64.whl: the variants gfx950"), "{text}");
    let out = wheelfix(d, &["index", "-o", "site-part", "part"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!d.join("site-part").exists(), "nothing published");
    // Without the set file, the other build still shows what is missing.
    copy_dir(&d.join("wh"), &d.join("part2"), &[missing, "fat-1.0+rocm7.1.0-variants.json"]);
    let (code, found) = kinds(d, "part2");
    assert_eq!(code, Some(1));
    assert!(found.contains(&"variant-set-incomplete".to_string()), "{found:?}");
    // A label missing from every build: only the set file can tell.
    copy_dir(&d.join("wh"), &d.join("part3"), &[missing, "fat-1.0+rocm7.1.0-cp311-cp311-linux_x86_64-gfx950.whl"]);
    let (code, found) = kinds(d, "part3");
    assert_eq!(code, Some(1));
    assert!(found.contains(&"variant-set-incomplete".to_string()), "{found:?}");
    // A set file whose wheels are all gone.
    std::fs::create_dir_all(d.join("alone")).unwrap();
    std::fs::copy(d.join("wh/fat-1.0+rocm7.1.0-variants.json"), d.join("alone/fat-1.0+rocm7.1.0-variants.json"))
        .unwrap();
    std::fs::copy(&cp311, d.join("alone").join(cp311.file_name().unwrap())).unwrap();
    let (code, found) = kinds(d, "alone");
    assert_eq!(code, Some(1));
    assert!(found.contains(&"variant-set-incomplete".to_string()), "{found:?}");

    // Another build under the same file names into the same wheelhouse: refused, and the set
    // there stays the earlier one, whole.
    let other = fat(&d.join("other"), "fat", "cp311", GFX950 | 0x100);
    let out = wheelfix(d, &["variants", "--one-index", "--all-targets", "--null", "-w", "wh", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("nothing of its release was published"), "{}", stderr(&out));
    assert_eq!(names(&d.join("wh")), written);
    let after: Vec<Vec<u8>> = written.iter().map(|n| std::fs::read(d.join("wh").join(n)).unwrap()).collect();
    assert!(before == after);
    // One input of a release failing keeps the other's variants back too.
    let broken = d.join("in2");
    std::fs::create_dir_all(&broken).unwrap();
    let good = fat(&broken, "fat", "cp311", GFX950);
    let bad = broken.join("fat-1.0+rocm7.1.0-cp312-cp312-linux_x86_64.whl");
    std::fs::write(&bad, b"PK\x03\x04 not a zip").unwrap();
    let out = wheelfix(
        d,
        &["variants", "--one-index", "--all-targets", "-w", "wh2", good.to_str().unwrap(), bad.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("of the same name and version, failed"), "{}", stderr(&out));
    assert!(names(&d.join("wh2")).is_empty(), "{:?}", names(&d.join("wh2")));
}

/// A variant wheel of `handmade` whose variant.json declares `providers`.
fn with_providers(dir: &Path, providers: &str) -> PathBuf {
    let json = format!(
        r#"{{"$schema": "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json", "default-priorities": {{"namespace": ["amd"]}}, "providers": {{"amd": {providers}}}, "variants": {{"gfx942": {{"amd": {{"gfx_arch": ["gfx942"]}}}}}}}}"#
    );
    let spec = WheelSpec::new("handmade", "1.0", "py3-none-linux_x86_64")
        .file("handmade/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942)], 5)))
        .file("handmade-1.0.dist-info/variant.json", json);
    let path = dir.join("handmade-1.0-py3-none-linux_x86_64-gfx942.whl");
    write_zip(&path, &spec.members());
    path
}

#[test]
fn provider_data_no_installer_may_act_on_is_refused_by_check_and_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        ("url", r#"{"requires": ["evil @ https://evil.example/e.whl"], "plugin-api": "evil.plugin:P"}"#, "names a URL"),
        ("pep508", r#"{"requires": ["not a requirement!"], "plugin-api": "a.b:C"}"#, "not a PEP 508 requirement"),
        ("api", r#"{"requires": ["amd-variant-provider"], "plugin-api": "garbage"}"#, "module.path:Object"),
        ("markup", r#"{"requires": ["ok"], "plugin-api": "<script>alert(1)</script>"}"#, "module.path:Object"),
        ("static", r#"{"static-properties": {"gfx_arch": ["<b>gfx942</b>"]}}"#, "static property"),
    ];
    for (name, providers, says) in cases {
        let set = d.join(name);
        std::fs::create_dir_all(&set).unwrap();
        with_providers(&set, providers);
        let out = wheelfix(d, &["check", name]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let text = stdout(&out);
        assert!(text.contains("variant-provider-invalid") && text.contains(says), "{name}: {text}");
        let site = format!("site-{name}");
        let out = wheelfix(d, &["index", "-o", &site, name]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(!d.join(&site).exists(), "{name}: nothing published");
    }
    // The form wheelfix writes passes.
    let set = d.join("good");
    std::fs::create_dir_all(&set).unwrap();
    with_providers(
        &set,
        r#"{"requires": ["amd-variant-provider"], "plugin-api": "amd_variant_provider.plugin:AMDVariantPlugin"}"#,
    );
    let (_, found) = kinds(d, "good");
    assert!(!found.contains(&"variant-provider-invalid".to_string()), "{found:?}");
}

#[test]
fn static_properties_that_hide_the_other_variants_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = fat(&d.join("in"), "fat", "cp311", GFX950);
    let w = wheel.to_str().unwrap();
    // One CI job's flag decides for the whole version: gfx950's variant is never chosen.
    let out = wheelfix(d, &["variants", "--all-targets", "--static-gpu-target", "gfx942", "-w", "all", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wheelfix(d, &["check", "all"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("variant-static-hides") && text.contains("-gfx950.whl can never be chosen"), "{text}");
    // An index of gfx942 machines with gfx942's variant alone is what static properties are for.
    let out =
        wheelfix(d, &["variants", "--gpu-target", "gfx942", "--null", "--static-gpu-target", "gfx942", "-w", "one", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, found) = kinds(d, "one");
    assert!(!found.contains(&"variant-static-hides".to_string()), "{found:?}");
    // Its page lists the processors that have a variant (not the null variant's every GPU),
    // in a variant index's words.
    let out = wheelfix(d, &["index", "-o", "site", "one"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(d.join("site/release.html")).unwrap();
    let list = &html[html.find("<ul class=\"gpus\">").expect("the GPU list")..];
    let list = &list[..list.find("</ul>").unwrap()];
    assert!(list.contains("gfx942") && !list.contains("gfx950"), "{list}");
    assert!(html.contains("the variant-aware command below installs its variant"), "{html}");
    assert!(!html.contains("install from the index of that name"), "{html}");
}

#[test]
fn a_signal_at_any_point_leaves_each_release_whole_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs: Vec<String> =
        ["one", "two", "three"].iter().map(|p| fat(&d.join("in"), p, "cp311", GFX950).display().to_string()).collect();
    // Each release whole: two variants, the null one and its set file.
    let per_release = 4;
    for at in 1..=8 {
        let wh = d.join(format!("wh{at}"));
        std::fs::create_dir_all(&wh).unwrap();
        std::fs::write(wh.join("earlier.txt"), "kept").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
            .args(["variants", "--one-index", "--all-targets", "--null", "-w", wh.to_str().unwrap()])
            .args(&inputs)
            .current_dir(d)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Once `at` files are being written or published (in the run's directory or in -w).
        let started = std::time::Instant::now();
        let count = || -> usize {
            std::fs::read_dir(&wh)
                .unwrap()
                .flatten()
                .map(
                    |e| if e.path().is_dir() { std::fs::read_dir(e.path()).map(|r| r.count()).unwrap_or(0) } else { 1 },
                )
                .sum()
        };
        while count() < at + 1 && started.elapsed() < std::time::Duration::from_secs(30) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        support::python::run(Command::new("kill").args(["-INT", &child.id().to_string()]));
        let status = child.wait().unwrap();
        assert!(matches!(status.code(), Some(0) | Some(130)), "{at}: {status:?}");
        let left = names(&wh);
        for project in ["one", "two", "three"] {
            let of: Vec<&String> = left.iter().filter(|n| n.starts_with(&format!("{project}-"))).collect();
            assert!(of.is_empty() || of.len() == per_release, "{at}: {project} is part of a set: {left:?}");
        }
        assert!(left.contains(&"earlier.txt".to_string()), "{at}: {left:?}");
        assert!(left.iter().all(|n| !n.starts_with('.')), "{at}: nothing of the run is left: {left:?}");
        if status.code() == Some(0) {
            assert_eq!(left.len(), 1 + 3 * per_release, "{at}: {left:?}");
        }
    }
}

/// The command of `class` on a release page, as a person copies it.
fn page_command(page: &str, class: &str) -> String {
    let marker = format!("<code class=\"cmd{class}\"");
    let rest = &page[page.find(&marker).unwrap_or_else(|| panic!("no {marker} in {page}"))..];
    support::html_text(&rest[rest.find('>').unwrap() + 1..rest.find("</code>").unwrap()])
}

/// The label of the variant of `project` installed in the environment `venv` (empty for a
/// plain wheel).
fn installed_label(venv: &Path, project: &str) -> String {
    let site = support::envs::site_of(venv);
    let dist_info = std::fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".dist-info") && p.to_string_lossy().contains(project))
        .unwrap_or_else(|| panic!("no {project} installed in {}", site.display()));
    match std::fs::read(dist_info.join("variant.json")) {
        Ok(bytes) => {
            let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            doc["variants"].as_object().unwrap().keys().next().unwrap().clone()
        }
        Err(_) => String::new(),
    }
}

#[test]
fn uv_from_pypi_installs_each_gpus_variant_from_its_index_and_pip_the_plain_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uv = support::envs::uv();
    let version = Command::new(&uv).arg("--version").output().unwrap();
    eprintln!("uv from PyPI: {}", String::from_utf8_lossy(&version.stdout).trim());
    let wheel = WheelSpec::new("gpuvar", "1.0+rocm7.1.0", "py3-none-linux_x86_64")
        .file(
            "gpuvar/_k.so",
            host_with_fatbin("_k", bundle_for(&[("gfx90a", GFX90A), ("gfx942", GFX942), ("gfx950", GFX950)], 6)),
        )
        .write(&d.join("in"));
    // The default: one index per GPU.
    let out = wheelfix(d, &["variants", "--all-targets", "--null", "--plain", "-w", "wh", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let gpus = ["gfx90a", "gfx942", "gfx950"];
    assert_eq!(names(&d.join("wh")), gpus);
    // The null variant and the plain copy are stored once, linked into every GPU's index.
    for shared in
        ["gpuvar-1.0+rocm7.1.0-py3-none-linux_x86_64-null.whl", "gpuvar-1.0+rocm7.1.0-py3-none-linux_x86_64.whl"]
    {
        use std::os::unix::fs::MetadataExt;
        let inodes: Vec<u64> =
            gpus.iter().map(|g| std::fs::metadata(d.join("wh").join(g).join(shared)).unwrap().ino()).collect();
        assert!(inodes.iter().all(|i| *i == inodes[0]), "{shared}: {inodes:?}");
    }
    let www = d.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let server = support::http::Server::start(&www);
    let uv_dir = uv.parent().unwrap().display().to_string();
    for gpu in gpus {
        assert_eq!(
            names(&d.join("wh").join(gpu)),
            [
                format!("gpuvar-1.0+rocm7.1.0-py3-none-linux_x86_64-{gpu}.whl"),
                "gpuvar-1.0+rocm7.1.0-py3-none-linux_x86_64-null.whl".to_string(),
                "gpuvar-1.0+rocm7.1.0-py3-none-linux_x86_64.whl".to_string(),
                "gpuvar-1.0+rocm7.1.0-variants.json".to_string(),
            ]
        );
        let (code, found) = kinds(d, &format!("wh/{gpu}"));
        assert!(!found.iter().any(|k| k.starts_with("variant-")), "{gpu}: {code:?} {found:?}");
        let site = www.join(gpu);
        let url = server.url(&format!("{gpu}/"));
        let out = wheelfix(d, &["index", "-o", site.to_str().unwrap(), "--site-url", &url, &format!("wh/{gpu}")]);
        assert!(out.status.success(), "{}", stderr(&out));
        let page = std::fs::read_to_string(site.join("release.html")).unwrap();
        // uv, run as the page prints it in a fresh shell, installs this GPU's variant.
        let command = page_command(&page, " uv-variants");
        assert!(command.contains(&url), "{command}");
        let (venv, _) = support::envs::new_venv(d, &format!("venv-uv-{gpu}"));
        support::envs::paste(d, &format!(". {}/bin/activate && PATH=$PATH:{uv_dir} && {command}", venv.display()));
        assert_eq!(installed_label(&venv, "gpuvar"), gpu, "`{command}`");
        // pip, which knows no variants, the plain (fat) wheel.
        let command = page_command(&page, "\" id=\"pip");
        let (venv, _) = support::envs::new_venv(d, &format!("venv-pip-{gpu}"));
        support::envs::paste(d, &format!(". {}/bin/activate && {command}", venv.display()));
        assert_eq!(installed_label(&venv, "gpuvar"), "", "`{command}`");
    }
}

#[test]
fn variants_of_one_version_that_name_different_features_are_inconsistent() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    std::fs::create_dir_all(&set).unwrap();
    let hand = |label: &str, target: u32, properties: &str| {
        let json = format!(
            r#"{{"$schema": "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json", "default-priorities": {{"namespace": ["amd"]}}, "variants": {{"{label}": {{"amd": {properties}}}}}}}"#
        );
        let spec = WheelSpec::new("mixed", "1.0", "py3-none-linux_x86_64")
            .file("mixed/_k.so", host_with_fatbin("_k", bundle_for(&[(label, target)], 5)))
            .file("mixed-1.0.dist-info/variant.json", json);
        write_zip(&set.join(format!("mixed-1.0-py3-none-linux_x86_64-{label}.whl")), &spec.members());
    };
    hand("gfx942", GFX942, r#"{"gfx_arch": ["gfx942"]}"#);
    hand("gfx950", GFX950, r#"{"gfx_arch": ["gfx950"], "rocm_version": ["7.1.0"]}"#);
    let out = wheelfix(d, &["check", "set"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("variant-inconsistent") && text.contains("name different features"), "{text}");
    assert!(text.contains("gfx950 with amd :: gfx_arch, amd :: rocm_version"), "{text}");
}
