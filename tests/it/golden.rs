//! The bytes of every output, pinned: `show --json`, `retag`, `repair`, `metapackage` and
//! `index` on a fixed set of fixtures, each output reduced to its sha256 in one snapshot. A
//! change of structure must leave this snapshot as it is; a change of behaviour shows here as
//! the outputs it changes.

use crate::support;

use std::path::Path;

use sha2::{Digest, Sha256};
use support::elfgen::ElfSpec;
use support::gpugen::{GFX942, GFX950, bundle_for, host_with_fatbin};
use support::wheelgen::WheelSpec;
use support::{stderr, wheelfix};

fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// Every file under `dir`, relative path → short sha256, sorted.
fn tree(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        if p.is_dir() {
            tree(&p, root, out);
        } else if !rel.ends_with(".wheelfix-output") {
            out.push(format!("{rel} {}", sha(&std::fs::read(&p).unwrap())));
        }
    }
}

/// The fixtures: wheels for retag (claims, purelib, aliases, versions and pins, stale RECORD),
/// for repair (a vendored library with a dependency of its own, a ROCm library, libpython, an
/// executable script), GPU code, and a pure wheel.
fn fixtures(d: &Path) -> Vec<std::path::PathBuf> {
    let libs = d.join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    let inner = ElfSpec { soname: Some("libinner.so.1".into()), ..Default::default() }
        .needs_version("sin", "libm.so.6", "GLIBC_2.2.5")
        .build();
    std::fs::write(libs.join("libinner.so.1"), inner).unwrap();
    let outer = ElfSpec { soname: Some("libouter.so.2".into()), ..Default::default() }
        .needs("libinner.so.1")
        .needs_version("strlen", "libc.so.6", "GLIBC_2.14")
        .build();
    std::fs::write(libs.join("libouter.so.2"), outer).unwrap();

    let w = d.join("in");
    let mut wheels = Vec::new();
    let ext = |m: &str| ElfSpec::extension(m);
    wheels.push(
        WheelSpec::new("plain", "1.0", "cp312-cp312-linux_x86_64")
            .file("plain/_core.so", ext("_core").needs_version("f", "libc.so.6", "GLIBC_2.17").build())
            .file("plain/__init__.py", "")
            .write(&w),
    );
    let mut liar = WheelSpec::new("liar", "2.0", "cp312-cp312-manylinux2014_x86_64")
        .file("liar/_core.so", ext("_core").needs_version("g", "libstdc++.so.6", "GLIBCXX_3.4.21").build());
    liar.wheel_tags = Some(vec!["cp312-cp312-linux_x86_64".into()]);
    liar.purelib = true;
    wheels.push(liar.write(&w));
    let mut torch = WheelSpec::new("torch", "2.15.0a0+git31a77fc", "cp312-cp312-linux_x86_64")
        .file("torch/_C.so", host_with_fatbin("_C", bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6)))
        .file("torch/__init__.py", "");
    torch.metadata = vec!["Requires-Dist: triton==3.9.0+gitaad2a60d".into()];
    wheels.push(torch.write(&w));
    wheels.push(
        WheelSpec::new("triton", "3.9.0+gitaad2a60d", "cp312-cp312-linux_x86_64")
            .file("triton/_t.so", ext("_t").build())
            .write(&w),
    );
    let mut stale = WheelSpec::new("stale", "1.0", "cp312-cp312-linux_x86_64")
        .file("stale/_core.so", ext("_core").build())
        .file("stale/extra.txt", "x");
    stale.unrecorded.push("stale/extra.txt".into());
    wheels.push(stale.write(&w));
    let mut repairable = WheelSpec::new("needy", "1.0", "cp312-cp312-linux_x86_64")
        .file(
            "needy/_core.so",
            ElfSpec { rpath: Some("$ORIGIN/../needy.libs:/build/lib".into()), ..ext("_core") }
                .needs("libouter.so.2")
                .needs("libamdhip64.so.7")
                .needs("libpython3.12.so.1.0")
                .build(),
        )
        .file("needy/sub/_deep.so", ext("_deep").needs("libinner.so.1").build())
        .file("needy-1.0.data/scripts/needy-tool", ElfSpec::default().needs("libouter.so.2").build())
        .file("needy/__init__.py", "");
    repairable.metadata = vec!["Requires-Python: >=3.10".into()];
    wheels.push(repairable.write(&w));
    wheels.push(WheelSpec::new("purely", "1.0", "py3-none-any").file("purely/__init__.py", "x = 1\n").write(&w));
    wheels
}

#[test]
fn every_output_is_byte_identical_to_the_pinned_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = fixtures(d);
    let libs = d.join("libs");
    let ldpaths = libs.to_str().unwrap();
    let names: Vec<&str> = wheels.iter().map(|p| p.to_str().unwrap()).collect();
    let mut lines = Vec::new();
    let run = |args: &[&str]| {
        let out = wheelfix(d, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().replace(&d.display().to_string(), "$TMP")
    };

    for (wheel, name) in wheels.iter().zip(&names) {
        let file = wheel.file_name().unwrap().to_str().unwrap();
        let show = run(&["show", "--json", "--ldpaths", ldpaths, name]);
        lines.push(format!("show {file} {}", sha(show.as_bytes())));
        let text = run(&["show", "--ldpaths", ldpaths, name]);
        lines.push(format!("show-text {file} {}", sha(text.as_bytes())));
    }
    let mut args = vec!["retag", "--json", "-w", "retagged"];
    args.extend(&names);
    lines.push(format!("retag-json {}", sha(run(&args).as_bytes())));
    let mut args = vec!["retag", "-w", "marked", "--rocm-version", "10.1.0"];
    args.extend(&names);
    run(&args);
    let mut args = vec!["repair", "--json", "--ldpaths", ldpaths, "-w", "repaired"];
    args.extend(&names);
    lines.push(format!("repair-json {}", sha(run(&args).as_bytes())));
    let marked: Vec<String> = std::fs::read_dir(d.join("marked"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| !p.contains("needy") && !p.contains("purely"))
        .collect();
    let mut sorted = marked.clone();
    sorted.sort();
    let mut args =
        vec!["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", "gfx950", "-o", "meta"];
    args.extend(sorted.iter().map(String::as_str));
    run(&args);
    // The release pages' install commands name where the site is served: a fixed URL here, not
    // this run's temporary directory.
    run(&["index", "-o", "site", "--python", "3.12", "--site-url", "https://example.org/site/", "marked", "meta"]);
    let remote = ["index", "-o", "site-remote", "--base-url", "https://example.org/dl/"];
    run(&[&remote[..], &["--site-url", "https://example.org/site-remote/", "marked", "meta"]].concat());
    for out in ["retagged", "marked", "repaired", "meta", "site", "site-remote"] {
        tree(&d.join(out), d, &mut lines);
    }
    insta::assert_snapshot!(lines.join("\n"));
}
