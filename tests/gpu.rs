//! GPU code detection: every container kind, its targets and code object versions, lying
//! headers, GPU-only wheels, and `--expect-gpu-target`.

mod support;

use std::path::Path;

use support::elfgen::ElfSpec;
use support::gpugen::*;
use support::wheelgen::WheelSpec;
use support::{show_json, stderr, wheelfix};

fn gpu_of(report: &serde_json::Value, file: &str) -> serde_json::Value {
    report["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["file"] == file)
        .cloned()
        .unwrap_or_else(|| panic!("{file} in {report}"))
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().map(str::to_string).unwrap_or_else(|| s.to_string())).collect()
}

fn platform_wheel(dir: &Path, name: &str, files: Vec<(&str, Vec<u8>)>) -> std::path::PathBuf {
    let mut spec = WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64");
    for (path, data) in files {
        spec = spec.file(path, data);
    }
    spec.write(dir)
}

#[test]
fn standalone_amdgpu_code_objects_give_target_ids_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = WheelSpec::new("kernels", "1.0", "py3-none-any")
        .file("kernels/a.co", amdgpu_object(0x500 | GFX942, 5)) // xnack any, sramecc any: plain id
        .file("kernels/b.hsaco", amdgpu_object(0xc00 | 0x200 | GFX942, 4)) // sramecc on, xnack off
        .file("kernels/c.co", amdgpu_object(0x300 | GFX90A, 4)) // xnack on
        .file("kernels/d.bin", amdgpu_object(0x51, 6)) // generic target, any member name
        .file("kernels/__init__.py", "")
        .write(dir.path());
    let report = show_json(dir.path(), &wheel, &[]);
    assert_eq!(strings(&gpu_of(&report, "kernels/a.co")["targets"]), ["gfx942"]);
    assert_eq!(strings(&gpu_of(&report, "kernels/a.co")["code_object_versions"]), ["5"]);
    assert_eq!(strings(&gpu_of(&report, "kernels/b.hsaco")["targets"]), ["gfx942:sramecc+:xnack-"]);
    assert_eq!(strings(&gpu_of(&report, "kernels/c.co")["targets"]), ["gfx90a:xnack+"]);
    assert_eq!(strings(&gpu_of(&report, "kernels/d.bin")["targets"]), ["gfx9-generic"]);
    assert_eq!(gpu_of(&report, "kernels/a.co")["container"], "amdgpu-elf");
    assert_eq!(strings(&report["gpu_targets"]), ["gfx9-generic", "gfx90a", "gfx942"]);
    // GPU-only: reported, not refused, and no host-architecture noise.
    assert_eq!(report["gpu_only"], true);
    assert_eq!(report["pure"], true);
    assert!(report["notes"].as_array().unwrap().is_empty(), "{}", report["notes"]);
    let out = wheelfix(dir.path(), &["show", wheel.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no platform tag can express a GPU architecture"));
}

#[test]
fn a_gpu_only_wheel_keeps_its_tag_through_retag() {
    let dir = tempfile::tempdir().unwrap();
    let wheel =
        WheelSpec::new("aiterish", "0.1", "py3-none-any").file("k/x.co", amdgpu_object(GFX950, 6)).write(dir.path());
    let out = wheelfix(dir.path(), &["retag", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = dir.path().join("out/aiterish-0.1-py3-none-any.whl");
    assert_eq!(std::fs::read(written).unwrap(), std::fs::read(&wheel).unwrap());
}

#[test]
fn bundles_in_host_binaries_and_files() {
    let dir = tempfile::tempdir().unwrap();
    // Two concatenated bundles in one .hip_fatbin, different targets and versions.
    let mut fatbin = bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6);
    fatbin.extend(bundle_for(&[("gfx90a:xnack+", 0x300 | GFX90A), ("gfx1201", GFX1201)], 5));
    let wheel = platform_wheel(
        dir.path(),
        "fat",
        vec![
            ("fat/_k.so", host_with_fatbin("_k", fatbin)),
            ("fat/extra.hipfb", bundle_for(&[("gfx1201", GFX1201)], 6)),
            ("fat/gpu.so", amdgpu_object(GFX942, 6)),
        ],
    );
    let report = show_json(dir.path(), &wheel, &[]);
    let host = gpu_of(&report, "fat/_k.so");
    assert_eq!(host["container"], "hip-fatbin");
    assert_eq!(strings(&host["targets"]), ["gfx1201", "gfx90a:xnack+", "gfx942", "gfx950"]);
    assert_eq!(strings(&host["code_object_versions"]), ["5", "6"]);
    assert_eq!(host["objects"], 4);
    assert!(strings(&host["notes"]).contains(&"2 offload bundle(s)".to_string()));
    assert_eq!(gpu_of(&report, "fat/extra.hipfb")["container"], "offload-bundle");
    assert_eq!(strings(&report["gpu_targets"]), ["gfx1201", "gfx90a", "gfx942", "gfx950"]);
    // The AMDGPU .so is device code, not a host binary of an unknown architecture.
    assert_eq!(report["host_binaries"], 1);
    assert!(report["notes"].as_array().unwrap().is_empty(), "{}", report["notes"]);
    assert_eq!(report["platform_tag"], "manylinux_2_5_x86_64");
}

#[test]
fn compressed_bundles_of_every_version_and_method() {
    let dir = tempfile::tempdir().unwrap();
    let inner = bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6);
    let cases = [(1, false), (2, false), (2, true), (3, false), (3, true)];
    for (version, zstd) in cases {
        let mut blob = ccob(&inner, version, zstd);
        if version != 1 {
            // Back to back with page padding, as clang lays them out: both must be read.
            blob.resize(blob.len().div_ceil(4096) * 4096, 0);
            blob.extend(ccob(&bundle_for(&[("gfx1201", GFX1201)], 5), version, zstd));
        }
        let name = format!("c{version}{}", if zstd { "zstd" } else { "zlib" });
        let wheel = platform_wheel(
            dir.path(),
            &name,
            vec![("p/_k.so", host_with_fatbin("_k", blob)), ("p/file.ccob", ccob(&inner, version, zstd))],
        );
        let report = show_json(dir.path(), &wheel, &[]);
        let host = gpu_of(&report, "p/_k.so");
        let method = if zstd { "zstd" } else { "zlib" };
        let expected: &[&str] = if version == 1 { &["gfx942", "gfx950"] } else { &["gfx1201", "gfx942", "gfx950"] };
        assert_eq!(strings(&host["targets"]), expected, "v{version} {method}: {host}");
        assert!(strings(&host["notes"]).iter().any(|n| n.contains(&format!("CCOB v{version} {method}"))), "{host}");
        assert!(!strings(&host["code_object_versions"]).is_empty(), "{host}");
        let file = gpu_of(&report, "p/file.ccob");
        assert_eq!(file["container"], "compressed-offload-bundle");
        assert_eq!(strings(&file["targets"]), ["gfx942", "gfx950"]);
    }
}

#[test]
fn lying_headers_and_decode_bombs_give_notes_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = bundle_for(&[("gfx942", GFX942)], 6);
    let mut huge_count = good.clone();
    huge_count[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut past_end = good.clone();
    let first_entry = 32 + 24 + "host-x86_64-unknown-linux-gnu-".len();
    past_end[first_entry + 8..first_entry + 16].copy_from_slice(&(1u64 << 40).to_le_bytes()); // size
    let truncated = good[..40].to_vec();
    let ccob_past_end = ccob_raw(&zstd::encode_all(&good[..], 3).unwrap(), 3, 1, good.len() as u64, Some(1 << 40));
    let bad_method = ccob_raw(b"xx", 3, 7, 10, None);
    // A bomb: 256 MiB of zeros behind a real bundle header (past the 64 MiB decode bound).
    let mut bomb_inner = good.clone();
    bomb_inner.resize(256 << 20, 0);
    let bomb = ccob(&bomb_inner, 3, true);
    drop(bomb_inner);
    let garbage = ccob_raw(b"this is not zstd data at all", 3, 1, 100, None);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("count", huge_count, "entries"),
        ("past", past_end, "past the end"),
        ("trunc", truncated, "truncated"),
        ("ccobend", ccob_past_end, "remain"),
        ("method", bad_method, "unknown compression method 7"),
        ("garbage", garbage, "cannot decode"),
    ];
    for (name, blob, expect) in cases {
        let wheel = platform_wheel(
            dir.path(),
            name,
            vec![("p/_k.so", host_with_fatbin("_k", blob.clone())), ("p/f.bin", blob)],
        );
        let out = wheelfix(dir.path(), &["show", "--json", wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let notes = strings(&gpu_of(&report[0], "p/_k.so")["notes"]).join(" | ");
        assert!(notes.contains(expect), "{name}: {notes}");
    }
    let start = std::time::Instant::now();
    let wheel = platform_wheel(dir.path(), "bomb", vec![("p/_k.so", host_with_fatbin("_k", bomb))]);
    let report = show_json(dir.path(), &wheel, &[]);
    assert_eq!(strings(&gpu_of(&report, "p/_k.so")["targets"]), ["gfx942"]);
    // Not a timing assertion: the bound is on bytes, this only reports.
    eprintln!("bomb read in {:?}", start.elapsed());
}

#[test]
fn kpack_split_code_and_archives() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = platform_wheel(
        dir.path(),
        "split",
        vec![
            ("p/_k.so", kpack_split_host("_k")),
            ("p/.kpack/foo_lib_gfx942.kpack", kpack_archive(&["gfx942", "gfx950"])),
        ],
    );
    let report = show_json(dir.path(), &wheel, &[]);
    let host = gpu_of(&report, "p/_k.so");
    assert_eq!(host["container"], "kpack-split");
    let notes = strings(&host["notes"]).join(" | ");
    assert!(notes.contains("kernel name: libfoo") && notes.contains("foo_lib_@GFXARCH@.kpack"), "{notes}");
    let archive = gpu_of(&report, "p/.kpack/foo_lib_gfx942.kpack");
    assert_eq!(archive["container"], "kpack-archive");
    assert_eq!(strings(&archive["targets"]), ["gfx942", "gfx950"]);
    assert_eq!(archive["objects"], 2);
}

#[test]
fn nvidia_cubins_and_fatbins() {
    let dir = tempfile::tempdir().unwrap();
    let host =
        ElfSpec { sections: vec![section(".nv_fatbin", 1, nv_fatbin(&[80, 90]))], ..ElfSpec::extension("_cu") }.build();
    let wheel = platform_wheel(dir.path(), "cuda", vec![("c/_cu.so", host), ("c/k.cubin", cubin(90))]);
    let report = show_json(dir.path(), &wheel, &[]);
    assert_eq!(strings(&gpu_of(&report, "c/_cu.so")["targets"]), ["sm_80", "sm_90"]);
    assert_eq!(gpu_of(&report, "c/k.cubin")["container"], "cubin");
    assert_eq!(strings(&gpu_of(&report, "c/k.cubin")["targets"]), ["sm_90"]);
    assert_eq!(report["host_binaries"], 1);
}

#[test]
fn expect_gpu_target_fails_wheels_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let gfx942_only = platform_wheel(
        dir.path(),
        "only942",
        vec![("p/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942)], 6)))],
    );
    let both = platform_wheel(
        dir.path(),
        "both",
        vec![(
            "p/_k.so",
            host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942), ("gfx950:xnack+", 0x300 | GFX950)], 6)),
        )],
    );
    let no_device = platform_wheel(dir.path(), "nodev", vec![("p/_k.so", ElfSpec::extension("_k").build())]);
    let args = |w: &Path| vec!["show", "--expect-gpu-target", "gfx950", w.to_str().unwrap().to_string().leak()];
    let out = wheelfix(dir.path(), &args(&gfx942_only));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("only942-1.0-cp312-cp312-linux_x86_64.whl has device code for gfx942 but none for gfx950"),
        "{}",
        stderr(&out)
    );
    assert_eq!(wheelfix(dir.path(), &args(&both)).status.code(), Some(0), "feature suffixes do not matter");
    assert_eq!(wheelfix(dir.path(), &args(&no_device)).status.code(), Some(0), "no device code: nothing to check");
    let out = wheelfix(dir.path(), &["show", "--json", "--expect-gpu-target", "gfx950", gfx942_only.to_str().unwrap()]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(strings(&report[0]["missing_gpu_targets"]), ["gfx950"]);
}
