//! `variants` (PEP 825) on a real HIP fat library built here with Debian's clang: each variant
//! is read by readers that are not wheelfix's (clang's bundler lists every bundle's code
//! objects; Python's `jsonschema` validates each variant.json and the index's variants.json
//! against the PEP's own schema, `schemas/variant-schema-0.1.1.json`), and uv, which implements
//! PEP 825 behind `--preview-features wheel-variants`, installs from the index wheelfix wrote:
//! the gfx942 variant when told the machine has gfx942, the null variant when it knows nothing.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::gpugen::{GFX942, GFX950, bundle_for, host_with_fatbin};
use support::hip::{bundler_list, bundler_unbundle, bundles, library, objects};
use support::python::{assert_true_record, run, tools_venv, validate};
use support::wheelgen::{WheelSpec, write_zip};
use support::{read_member, show_report, stderr, stdout, wheelfix};
use wheelfix::report::variants::{VariantsDocument, VariantsEntry, WheelVariants};

const SCHEMA: &str = "variant-schema-0.1.1.json";

fn hip_wheel(dir: &Path) -> PathBuf {
    let lib = std::fs::read(library(dir, &objects(dir), "lld")).unwrap();
    WheelSpec::new("hipdemo", "1.0+rocm7.0.2", "py3-none-linux_x86_64")
        .file("hipdemo/__init__.py", "")
        .file("hipdemo/libk.so", lib)
        .write(&dir.join("in"))
}

/// The processors of a bundle's code objects, as clang's bundler lists them.
fn bundled_targets(dir: &Path, library: &[u8]) -> Vec<String> {
    let mut targets = Vec::new();
    for bundle in bundles(library) {
        for id in bundler_list(dir, &bundle) {
            if let Some(target) = id.strip_prefix("hipv4-amdgcn-amd-amdhsa--") {
                targets.push(target.to_string());
            }
        }
    }
    targets.sort();
    targets.dedup();
    targets
}

/// A variant wheel's `variant.json`: in `{name}-{version}.dist-info`, as its file name says.
fn variant_json_of(wheel: &Path) -> Vec<u8> {
    let name = wheel.file_name().unwrap().to_str().unwrap();
    let parts: Vec<&str> = name.split('-').collect();
    read_member(wheel, &format!("{}-{}.dist-info/variant.json", parts[0], parts[1]))
}

/// The text of the release page's command in `<code class="cmd{class}">`, as a person copies it.
fn page_command(site: &Path, class: &str) -> String {
    let page = std::fs::read_to_string(site.join("release.html")).unwrap();
    let marker = format!("<code class=\"cmd{class}\"");
    let rest = &page[page.find(&marker).unwrap_or_else(|| panic!("no {marker} in {page}"))..];
    support::html_text(&rest[rest.find('>').unwrap() + 1..rest.find("</code>").unwrap()])
}

/// `command` run exactly as printed, by `sh`, with uv of the test tools and pip of a new
/// environment on the PATH; the label of the variant it installed of `project` (from the
/// installed variant.json; empty for a plain wheel), and the environment's site-packages.
fn installs(dir: &Path, command: &str, venv_name: &str, project: &str) -> (String, PathBuf) {
    let venv = dir.join(venv_name);
    run(Command::new(support::python::system_python()).args(["-m", "venv"]).arg(&venv));
    let path = format!(
        "{}:{}:{}",
        venv.join("bin").display(),
        tools_venv().join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("PATH", path)
        .env("VIRTUAL_ENV", &venv)
        .env("UV_NO_CACHE", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "`{command}`: {}", String::from_utf8_lossy(&out.stderr));
    let site_packages =
        std::fs::read_dir(venv.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
    let dist_info = std::fs::read_dir(&site_packages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".dist-info") && p.to_string_lossy().contains(project))
        .unwrap_or_else(|| panic!("`{command}` installed no {project}"));
    let label = match std::fs::read(dist_info.join("variant.json")) {
        Ok(bytes) => {
            let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            doc["variants"].as_object().unwrap().keys().next().unwrap().clone()
        }
        Err(_) => String::new(),
    };
    (label, site_packages)
}

#[test]
fn each_variant_holds_its_processors_code_and_uv_chooses_it_from_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fat = hip_wheel(d);
    let fat_targets = bundled_targets(d, &read_member(&fat, "hipdemo/libk.so"));
    assert!(fat_targets.contains(&"gfx11-generic".to_string()), "{fat_targets:?}");

    let out = wheelfix(
        d,
        &["variants", "--one-index", "--all-targets", "--null", "--plain", "-w", "out", fat.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("wheelfix: note: these variants declare no provider: uv takes the null variant"));
    let text = stdout(&out);
    assert!(text.contains("4 variants"), "{text}");
    let variant = |label: &str| d.join(format!("out/hipdemo-1.0+rocm7.0.2-py3-none-linux_x86_64-{label}.whl"));
    let expected: &[(&str, &[&str])] = &[
        ("gfx90a", &["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-"]),
        ("gfx942", &["gfx942"]),
        ("gfx1100", &["gfx1100", "gfx11-generic"]),
    ];
    for (label, targets) in expected {
        let wheel = variant(label);
        assert_true_record(&wheel);
        let mut want: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        want.sort();
        assert_eq!(bundled_targets(d, &read_member(&wheel, "hipdemo/libk.so")), want, "{label}");
        let metadata = variant_json_of(&wheel);
        validate(SCHEMA, &metadata);
        let doc: serde_json::Value = serde_json::from_slice(&metadata).unwrap();
        assert_eq!(doc["variants"][label]["amd"]["gfx_arch"], serde_json::json!([label]), "{doc}");
        assert_eq!(doc["variants"][label]["amd"]["rocm_version"], serde_json::json!(["7.0.2"]), "{doc}");
        let variant = show_report(d, &wheel, &[]).variant.expect("a variant wheel");
        assert_eq!(variant.label, *label);
        assert!(variant.properties.contains(&format!("amd :: gfx_arch :: {label}")), "{variant:?}");
    }
    // The null variant is the fat wheel, labelled; the plain wheel is the input's bytes.
    assert_eq!(bundled_targets(d, &read_member(&variant("null"), "hipdemo/libk.so")), fat_targets);
    validate(SCHEMA, &variant_json_of(&variant("null")));
    assert_eq!(std::fs::read(d.join("out").join(fat.file_name().unwrap())).unwrap(), std::fs::read(&fat).unwrap());

    // The index serves the version's variants.json, linked from the project page.
    let out = wheelfix(d, &["index", "-o", "site", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let index_file = d.join("site/hipdemo/hipdemo-1.0+rocm7.0.2-variants.json");
    let all = std::fs::read(&index_file).unwrap();
    validate(SCHEMA, &all);
    let doc: serde_json::Value = serde_json::from_slice(&all).unwrap();
    let labels: Vec<&String> = doc["variants"].as_object().unwrap().keys().collect();
    assert_eq!(labels, ["gfx1100", "gfx90a", "gfx942", "null"]);
    let page = std::fs::read_to_string(d.join("site/hipdemo/index.html")).unwrap();
    assert!(page.contains("href=\"hipdemo-1.0%2Brocm7.0.2-variants.json#sha256="), "{page}");
    let out = wheelfix(d, &["check", "out"]);
    assert!(!stdout(&out).contains("variant-"), "{}", stdout(&out));

    // The release page's commands, run as printed: uv, knowing no provider for the `amd`
    // namespace, takes the null variant (the page says so); pip, which knows no variants, the
    // plain wheel.
    let page = std::fs::read_to_string(d.join("site/release.html")).unwrap();
    assert!(
        page.contains("no provider is declared, so uv knows nothing of the machine and takes the null variant"),
        "{page}"
    );
    for label in ["gfx90a", "gfx942", "gfx1100", "null"] {
        assert!(page.contains(&format!("<tr data-variant=\"{label}\">")), "{label}: {page}");
    }
    let uv = page_command(&d.join("site"), " uv-variants");
    assert!(uv.starts_with("uv pip install --preview-features wheel-variants --index-url https://pypi.org/simple --extra-index-url file://"), "{uv}");
    assert!(uv.ends_with(" hipdemo==1.0+rocm7.0.2"), "{uv}");
    let (label, _) = installs(d, &uv, "venv-uv", "hipdemo");
    assert_eq!(label, "null");
    let pip = page_command(&d.join("site"), "");
    assert!(pip.starts_with("pip install"), "{pip}");
    let (label, site_packages) = installs(d, &pip, "venv-pip", "hipdemo");
    assert_eq!(label, "", "pip installs the plain wheel");
    assert_eq!(bundled_targets(d, &std::fs::read(site_packages.join("hipdemo/libk.so")).unwrap()), fat_targets);
    validate("release.schema.json", &std::fs::read(d.join("site/release.json")).unwrap());

    // Told the machines have gfx942 (a static provider), uv takes the gfx942 variant, whose
    // library holds gfx942 code only.
    let out = wheelfix(
        d,
        &[
            "variants",
            "--all-targets",
            "--null",
            "--static-gpu-target",
            "gfx942",
            "-w",
            "out942",
            fat.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wheelfix(d, &["index", "-o", "site942", "out942"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(d.join("site942/release.html")).unwrap();
    let provider = "the machine's properties come from <code>amd: declared for every machine: gfx_arch gfx942; rocm_version 7.0.2</code>";
    assert!(page.contains(provider), "{page}");
    assert!(page.contains("pip knows no variants yet: it installs none of these"), "{page}");
    let (label, site_packages) =
        installs(d, &page_command(&d.join("site942"), " uv-variants"), "venv-uv942", "hipdemo");
    assert_eq!(label, "gfx942");
    let installed = std::fs::read(site_packages.join("hipdemo/libk.so")).unwrap();
    assert_eq!(bundled_targets(d, &installed), ["gfx942"]);
}

/// A variant wheel written by hand: `properties` in its variant.json, gfx942 code inside.
fn hand_variant(dir: &Path, label: &str, variant_json: &str) -> PathBuf {
    let spec = WheelSpec::new("handmade", "1.0+rocm7.0.2", "py3-none-linux_x86_64")
        .file("handmade/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942)], 5)))
        .file("handmade-1.0+rocm7.0.2.dist-info/variant.json", variant_json);
    let path = dir.join(format!("handmade-1.0+rocm7.0.2-py3-none-linux_x86_64-{label}.whl"));
    write_zip(&path, &spec.members());
    path
}

fn variant_json(label: &str, arch: &str) -> String {
    format!(
        r#"{{"$schema": "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json", "default-priorities": {{"namespace": ["amd"]}}, "variants": {{"{label}": {{"amd": {{"gfx_arch": ["{arch}"]}}}}}}}}"#
    )
}

#[test]
fn check_and_index_catch_variants_that_lie_conflict_or_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    std::fs::create_dir_all(&set).unwrap();
    // Says gfx950, holds gfx942.
    hand_variant(&set, "gfx950", &variant_json("gfx950", "gfx950"));
    // Another label with the same properties.
    hand_variant(&set, "mi355", &variant_json("mi355", "gfx950"));
    // A schema of the future: unsupported, as the PEP requires.
    let future = variant_json("gfx942", "gfx942").replace("v0.1.1", "v7.0.0");
    let unreadable = hand_variant(&set, "gfx942", &future);

    let out = wheelfix(d, &["check", "set"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    for kind in [
        "variant-code-mismatch",
        "variant-extra-code",
        "variant-duplicate-properties",
        "variant-metadata",
        "variant-no-fallback",
    ] {
        assert!(text.contains(kind), "{kind}: {text}");
    }
    assert!(text.contains("v7.0.0") && text.contains("unsupported"), "{text}");

    // The index lists what it can and says why it left the unreadable one out (exit 1).
    let out = wheelfix(d, &["index", "-o", "site", "set"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(unreadable.file_name().unwrap().to_str().unwrap()), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("site/handmade/handmade-1.0+rocm7.0.2-variants.json")).unwrap())
            .unwrap();
    assert_eq!(doc["variants"].as_object().unwrap().keys().collect::<Vec<_>>(), ["gfx950", "mi355"]);

    // A variant is not made again into variants; a processor without code is refused.
    let out = wheelfix(
        d,
        &[
            "variants",
            "--all-targets",
            "-w",
            "again",
            set.join("handmade-1.0+rocm7.0.2-py3-none-linux_x86_64-gfx950.whl").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already the variant `gfx950`"), "{}", stderr(&out));
    let plain = WheelSpec::new("plainfat", "1.0", "py3-none-linux_x86_64")
        .file("plainfat/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942)], 5)))
        .write(&d.join("in"));
    let out = wheelfix(d, &["variants", "--gpu-target", "gfx950", "-w", "none", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nothing for gfx950"), "{}", stderr(&out));
    assert!(!d.join("none/plainfat-1.0-py3-none-linux_x86_64-gfx950.whl").exists());
    // With --all-targets, a processor only some binaries have code for gets its variant, as
    // the fat wheel serves it (as `split --all-targets` does), and the others' lack is reported.
    let uneven = WheelSpec::new("uneven", "1.0", "py3-none-linux_x86_64")
        .file("uneven/_a.so", host_with_fatbin("_a", bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 5)))
        .file("uneven/_b.so", host_with_fatbin("_b", bundle_for(&[("gfx942", GFX942)], 5)))
        .write(&d.join("in"));
    let out =
        wheelfix(d, &["variants", "--json", "--one-index", "--all-targets", "-w", "uneven", uneven.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: VariantsDocument = support::document(&out, &[]);
    let gfx950 = done(&doc.wheels[0]).variants.iter().find(|v| v.label == "gfx950").unwrap();
    assert_eq!(gfx950.thin.missing, ["gfx950"], "{gfx950:?}");
    let variant = d.join("uneven/uneven-1.0-py3-none-linux_x86_64-gfx950.whl");
    assert!(!stdout(&wheelfix(d, &["check", variant.to_str().unwrap()])).contains("variant-code-mismatch"));
    // A wheel without device code has no variant, and says so in variants' words.
    let pure = WheelSpec::new("purepkg", "1.0", "py3-none-any").file("purepkg/__init__.py", "").write(&d.join("in"));
    let out = wheelfix(d, &["variants", "--all-targets", "-w", "pure", pure.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no device code in offload bundles: there is no variant to write"),
        "{}",
        stderr(&out)
    );
    let out =
        wheelfix(d, &["variants", "--gpu-target", "gfx942", "--provider", "amd", "-w", "ok", plain.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_slice(&variant_json_of(&d.join("ok/plainfat-1.0-py3-none-linux_x86_64-gfx942.whl"))).unwrap();
    assert_eq!(doc["providers"]["amd"]["requires"], serde_json::json!(["amd-variant-provider"]));
    assert_eq!(doc["$schema"], serde_json::json!("https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"));
}

/// [`support::gpugen::big_fat_library`] in a wheel: large enough to be streamed (not read
/// whole) under `--memory 2M`.
fn big_fat_wheel(dir: &Path) -> PathBuf {
    let library = support::gpugen::big_fat_library();
    WheelSpec::new("bigfat", "1.0", "py3-none-linux_x86_64").file("bigfat/big.so", library).write(&dir.join("in"))
}

/// How the fat member is read: a name, `variants`' flags, its environment.
type Way<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);

/// What a variant of `label` must hold, judged by clang's bundler (not wheelfix's reader, nor
/// `thin`, which shares its planning and rewriting): in each bundle of the fat library, the code
/// objects whose target is `label`'s processor, byte for byte, and no other; the rest of the
/// file loads as the original does.
fn assert_holds_exactly_its_processors_code(dir: &Path, fat: &[u8], variant: &[u8], label: &str, what: &str) {
    let originals = bundles(fat);
    let spaces = support::hip::bundle_spaces(fat, variant);
    assert_eq!(originals.len(), spaces.len(), "{what}: every bundle keeps its place");
    // The label's processor's code, and a generic processor's that covers it (LLVM's table).
    let runs_here = |id: &str| {
        let processor = id.split("--").nth(1).unwrap_or_default().split(':').next().unwrap_or_default();
        processor == label || wheelfix::gpu::targets::generic_covers(processor).is_some_and(|c| c.contains(&label))
    };
    for (original, space) in originals.iter().zip(&spaces) {
        let before = bundler_list(dir, original);
        let kept: Vec<String> = before.iter().filter(|id| id.starts_with("host-") || runs_here(id)).cloned().collect();
        assert_eq!(bundler_list(dir, space), kept, "{what}: the bundle's entries, as clang lists them");
        for id in kept.iter().filter(|id| !id.starts_with("host-")) {
            let (ours, theirs) = (bundler_unbundle(dir, space, id), bundler_unbundle(dir, original, id));
            assert!(ours == theirs, "{what}: {id} is not the fat bundle's code object, byte for byte");
        }
    }
    support::hip::assert_same_memory_outside_fatbin(fat, variant);
}

#[test]
fn every_variant_holds_exactly_its_processors_code_however_the_fat_member_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = [(hip_wheel(d), "hipdemo/libk.so"), (big_fat_wheel(d), "bigfat/big.so")];
    let inputs: Vec<Vec<u8>> = wheels.iter().map(|(w, _)| std::fs::read(w).unwrap()).collect();
    let paths: Vec<&str> = wheels.iter().map(|(w, _)| w.to_str().unwrap()).collect();
    // Every variant of a wheel reads the one copy the analysis inflated (read whole, or
    // streamed under a small memory budget), or, with no room for copies, inflates its own.
    let ways: &[Way<'_>] = &[
        ("whole", &[], &[]),
        ("streamed", &["--memory", "2M"], &[]),
        ("no-copies", &[], &[("WHEELFIX_COPY_ROOM", "0")]),
    ];
    let mut labels_seen = Vec::new();
    for (way, flags, env) in ways {
        let out_dir = format!("out-{way}");
        let mut args = vec!["variants", "--json", "--one-index", "--all-targets", "-w", &out_dir];
        args.extend_from_slice(flags);
        args.extend_from_slice(&paths);
        let out = support::wheelfix_env(d, &args, env);
        assert!(out.status.success(), "{way}: {}", stderr(&out));
        let report: VariantsDocument = support::document(&out, &[]);
        for ((wheel, member), entry) in wheels.iter().zip(&report.wheels) {
            let labels: Vec<String> = done(entry).variants.iter().map(|v| v.label.clone()).collect();
            assert!(labels.len() >= 3, "{way}: {labels:?}");
            labels_seen.push(labels.clone());
            let fat = read_member(wheel, member);
            let stem = wheel.file_name().unwrap().to_str().unwrap().trim_end_matches(".whl");
            for label in &labels {
                let variant = d.join(&out_dir).join(format!("{stem}-{label}.whl"));
                let thinned = read_member(&variant, member);
                if *way == "whole" {
                    assert_holds_exactly_its_processors_code(d, &fat, &thinned, label, &format!("{stem} {label}"));
                } else {
                    // However the fat member was read, the variant is the same bytes.
                    let whole = read_member(&d.join("out-whole").join(format!("{stem}-{label}.whl")), member);
                    assert!(thinned == whole, "{way}: {label}: {member} differs from the variant read whole");
                }
                assert_true_record(&variant);
            }
        }
        let left: Vec<String> = std::fs::read_dir(d.join(&out_dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".whl") && !n.ends_with("-variants.json"))
            .collect();
        assert!(left.is_empty(), "{way}: no temporary files left: {left:?}");
    }
    // The same variants every way.
    assert!(labels_seen.chunks(wheels.len()).all(|c| c == &labels_seen[..wheels.len()]), "{labels_seen:?}");
    for ((wheel, _), before) in wheels.iter().zip(&inputs) {
        assert!(&std::fs::read(wheel).unwrap() == before, "the input {} is unchanged", wheel.display());
    }
}

/// The variants of a wheel that was made into them.
fn done(entry: &VariantsEntry) -> &WheelVariants {
    match entry {
        VariantsEntry::Done { variants, .. } => variants,
        VariantsEntry::Failed { wheel, error, .. } => panic!("{wheel}: {error}"),
    }
}

#[test]
fn two_builds_under_one_file_name_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Two builds of fat-1.0: different code under one file name.
    let build = |sub: &str, flags: u32| {
        WheelSpec::new("fat", "1.0+rocm7.1.0", "py3-none-linux_x86_64")
            .file("fat/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942), ("gfx950", flags)], 6)))
            .write(&d.join(sub))
    };
    let a = build("a", GFX950);
    let b = build("b", GFX950 | 0x100);
    assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let out =
        wheelfix(d, &["variants", "--all-targets", "--null", "-w", "wh", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("2 wheels of this run would be written to"), "{err}");
    let written: Vec<_> = std::fs::read_dir(d.join("wh")).map(|r| r.collect()).unwrap_or_default();
    assert!(written.is_empty(), "nothing written: {written:?}");
}
