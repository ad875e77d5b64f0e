//! GPU code detection: every container kind, its targets and code object versions, lying
//! headers, GPU-only wheels, and `--expect-gpu-target`.

use crate::support;

use std::path::Path;

use support::elfgen::ElfSpec;
use support::gpugen::*;
use support::wheelgen::WheelSpec;
use support::{check_document, show_report, show_reports, stderr, wheelfix};
use wheelfix::check::Severity;
use wheelfix::gpu::{Container, GpuCode};
use wheelfix::report::ShowReport;

fn gpu_of(report: &ShowReport, file: &str) -> GpuCode {
    report.gpu.iter().find(|g| g.file == file).cloned().unwrap_or_else(|| panic!("{file} in {:?}", report.gpu))
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
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(gpu_of(&report, "kernels/a.co").targets, ["gfx942"]);
    assert_eq!(gpu_of(&report, "kernels/a.co").code_object_versions, [5]);
    assert_eq!(gpu_of(&report, "kernels/b.hsaco").targets, ["gfx942:sramecc+:xnack-"]);
    assert_eq!(gpu_of(&report, "kernels/c.co").targets, ["gfx90a:xnack+"]);
    assert_eq!(gpu_of(&report, "kernels/d.bin").targets, ["gfx9-generic"]);
    assert_eq!(gpu_of(&report, "kernels/a.co").container, Container::AmdgpuElf);
    assert_eq!(report.gpu_targets, ["gfx9-generic", "gfx90a", "gfx942"]);
    // GPU-only: reported, not refused, and no host-architecture noise.
    assert!(report.gpu_only);
    assert!(report.pure);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
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
    let report = show_report(dir.path(), &wheel, &[]);
    let host = gpu_of(&report, "fat/_k.so");
    assert_eq!(host.container, Container::HipFatbin);
    assert_eq!(host.targets, ["gfx1201", "gfx90a:xnack+", "gfx942", "gfx950"]);
    assert_eq!(host.code_object_versions, [5, 6]);
    assert_eq!(host.objects, 4);
    assert!(host.notes.contains(&"2 offload bundles".to_string()));
    assert_eq!(gpu_of(&report, "fat/extra.hipfb").container, Container::OffloadBundle);
    assert_eq!(report.gpu_targets, ["gfx90a", "gfx942", "gfx950", "gfx1201"]);
    // The AMDGPU .so is device code, not a host binary of an unknown architecture.
    assert_eq!(report.host_binaries, 1);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
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
        let report = show_report(dir.path(), &wheel, &[]);
        let host = gpu_of(&report, "p/_k.so");
        let method = if zstd { "zstd" } else { "zlib" };
        let expected: &[&str] = if version == 1 { &["gfx942", "gfx950"] } else { &["gfx1201", "gfx942", "gfx950"] };
        assert_eq!(host.targets, expected, "v{version} {method}: {host:?}");
        assert!(host.notes.iter().any(|n| n.contains(&format!("CCOB v{version} {method}"))), "{host:?}");
        assert!(!host.code_object_versions.is_empty(), "{host:?}");
        let file = gpu_of(&report, "p/file.ccob");
        assert_eq!(file.container, Container::CompressedOffloadBundle);
        assert_eq!(file.targets, ["gfx942", "gfx950"]);
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
        let report = show_reports(&out);
        let notes = gpu_of(&report[0], "p/_k.so").notes.join(" | ");
        assert!(notes.contains(expect), "{name}: {notes}");
    }
    let start = std::time::Instant::now();
    let wheel = platform_wheel(dir.path(), "bomb", vec![("p/_k.so", host_with_fatbin("_k", bomb))]);
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(gpu_of(&report, "p/_k.so").targets, ["gfx942"]);
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
    let report = show_report(dir.path(), &wheel, &[]);
    let host = gpu_of(&report, "p/_k.so");
    assert_eq!(host.container, Container::KpackSplit);
    let notes = host.notes.join(" | ");
    assert!(notes.contains("kernel name: libfoo") && notes.contains("foo_lib_@GFXARCH@.kpack"), "{notes}");
    let archive = gpu_of(&report, "p/.kpack/foo_lib_gfx942.kpack");
    assert_eq!(archive.container, Container::KpackArchive);
    assert_eq!(archive.targets, ["gfx942", "gfx950"]);
    assert_eq!(archive.objects, 2);
}

#[test]
fn nvidia_cubins_and_fatbins() {
    let dir = tempfile::tempdir().unwrap();
    let host =
        ElfSpec { sections: vec![section(".nv_fatbin", 1, nv_fatbin(&[80, 90]))], ..ElfSpec::extension("_cu") }.build();
    let wheel = platform_wheel(dir.path(), "cuda", vec![("c/_cu.so", host), ("c/k.cubin", cubin(90))]);
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(gpu_of(&report, "c/_cu.so").targets, ["sm_80", "sm_90"]);
    assert_eq!(gpu_of(&report, "c/k.cubin").container, Container::Cubin);
    assert_eq!(gpu_of(&report, "c/k.cubin").targets, ["sm_90"]);
    assert_eq!(report.host_binaries, 1);
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
    assert_eq!(show_reports(&out)[0].missing_gpu_targets, ["gfx950"]);
}

#[test]
fn old_bundle_ids_name_their_targets_and_ids_without_one_fall_back_to_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let old = bundle_old_ids(&[
        ("gfx906", amdgpu_object(0x2f, 4)),
        ("gfx1010", amdgpu_object(0x33, 4)),
        ("", amdgpu_object(0x30, 4)), // `hip-amdgcn-amd-amdhsa-`: the header says gfx908
    ]);
    let wheel = platform_wheel(dir.path(), "oldcupy", vec![("cupy/cuda/_cub.so", host_with_fatbin("_cub", old))]);
    let report = show_report(dir.path(), &wheel, &[]);
    let code = gpu_of(&report, "cupy/cuda/_cub.so");
    assert_eq!(code.targets, ["gfx1010", "gfx906", "gfx908"]);
    assert_eq!(code.objects, 3);
    assert!(code.notes.join("\n").contains("names no target: gfx908 read from its code object"), "{code:?}");
    // --expect-gpu-target now sees what the wheel holds.
    let out = wheelfix(dir.path(), &["show", "--expect-gpu-target", "gfx908", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = wheelfix(dir.path(), &["show", "--expect-gpu-target", "gfx942", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn code_objects_embedded_in_data_without_a_bundle_are_found_and_fakes_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let objects: Vec<Vec<u8>> = (0..5).map(|i| amdgpu_object(if i < 4 { GFX942 } else { GFX950 }, 5)).collect();
    let host = host_with_embedded("_k", &objects, 1000);
    let wheel = platform_wheel(dir.path(), "rawco", vec![("p/_k.so", host.clone())]);
    let report = show_report(dir.path(), &wheel, &[]);
    let code = gpu_of(&report, "p/_k.so");
    assert_eq!(code.container, Container::EmbeddedCodeObject);
    assert_eq!(code.objects, 5);
    assert_eq!(code.targets, ["gfx942", "gfx950"]);
    assert_eq!(code.code_object_versions, [5]);
    assert!(code.notes.join("\n").contains("1000 ELF magics"), "{code:?}");
    assert_eq!(report.gpu_targets, ["gfx942", "gfx950"]);
    let text = support::stdout(&wheelfix(dir.path(), &["show", wheel.to_str().unwrap()]));
    assert!(text.contains("p/_k.so  embedded-code-object (5 code objects): gfx942 gfx950"), "{text}");
    // Streamed with a small budget, the same answer.
    let big = platform_wheel(
        dir.path(),
        "rawbig",
        vec![("p/_k.so", {
            let mut many = objects.clone();
            many.extend(std::iter::repeat_n(amdgpu_object(GFX942, 5), 3000));
            host_with_embedded("_k", &many, 10)
        })],
    );
    let streamed = show_report(dir.path(), &big, &["--memory", "2M"]);
    let whole = show_report(dir.path(), &big, &["--memory", "1G"]);
    assert_eq!(streamed.gpu, whole.gpu);
    assert_eq!(gpu_of(&streamed, "p/_k.so").objects, 3005);
    // Code objects inside a bundle are the bundle's, not counted twice.
    let fat = platform_wheel(
        dir.path(),
        "fatonly",
        vec![("p/_k.so", host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942)], 6)))],
    );
    let report = show_report(dir.path(), &fat, &[]);
    assert_eq!(report.gpu.len(), 1, "{:?}", report.gpu);
}

#[test]
fn aotriton_archives_give_their_targets() {
    let dir = tempfile::tempdir().unwrap();
    let archive = aks2(&[
        ("attn_fwd-Sig-F__^bf16@16-Gpu-MI300X", amdgpu_object(GFX942, 5)),
        ("attn_fwd-Sig-F__^fp16@16-Gpu-MI300X", amdgpu_object(GFX942, 5)),
        ("attn_fwd-Sig-F__^fp32@16-Gpu-MI300X", Vec::new()),
    ]);
    let wheel = WheelSpec::new("torchish", "1.0", "cp312-cp312-linux_x86_64")
        .file("torch/lib/aotriton.images/amd-gfx942/flash/attn_fwd/FONLY__^bf16.aks2", archive.clone())
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    let code = gpu_of(&report, "torch/lib/aotriton.images/amd-gfx942/flash/attn_fwd/FONLY__^bf16.aks2");
    assert_eq!(code.container, Container::AotritonArchive);
    assert_eq!(code.targets, ["gfx942"]);
    assert_eq!(code.objects, 2);
    assert!(code.notes.join("\n").contains("3 kernel(s) (1 did not compile)"), "{code:?}");
    // An independent reading of the fixture: Python's lzma decodes the stream after the header.
    let check = std::process::Command::new("python3")
        .args(["-c", "import lzma,sys; d=open(sys.argv[1],'rb').read(); print(len(lzma.decompress(d[16:])))"])
        .arg({
            let p = dir.path().join("a.aks2");
            std::fs::write(&p, &archive).unwrap();
            p
        })
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let decoded: usize = String::from_utf8_lossy(&check.stdout).trim().parse().unwrap();
    assert_eq!(decoded as u32, u32::from_le_bytes(archive[4..8].try_into().unwrap()));
}

#[test]
fn aotriton_lies_and_xz_bombs_give_notes() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that claims a billion kernels.
    let mut lying = aks2(&[("k", amdgpu_object(GFX942, 5))]);
    lying[8..12].copy_from_slice(&1_000_000_000u32.to_le_bytes());
    // A stream that expands to 200 MB of zeros after a small directory: decoding stops at the bound.
    let mut directory = Vec::new();
    for v in [0u32, 0, 150 << 20, 64, 2] {
        directory.extend(v.to_le_bytes());
    }
    directory.extend(b"k\0");
    let mut bomb = b"AKS2".to_vec();
    for v in [200u32 << 20, 1, directory.len() as u32] {
        bomb.extend(v.to_le_bytes());
    }
    bomb.extend(xz(&[directory, vec![0u8; 200 << 20]].concat()));
    assert!(bomb.len() < 1 << 20, "a bomb: {} bytes", bomb.len());
    let mut cut = aks2(&[("k", amdgpu_object(GFX942, 5))]);
    cut.truncate(40);
    let wheel = WheelSpec::new("lies", "1.0", "py3-none-any")
        .file("a/lying.aks2", lying)
        .file("a/bomb.aks2", bomb)
        .file("a/cut.aks2", cut)
        .write(dir.path());
    let start = std::time::Instant::now();
    let report = show_report(dir.path(), &wheel, &[]);
    eprintln!("took {:?}", start.elapsed());
    assert!(gpu_of(&report, "a/lying.aks2").notes.join("\n").contains("the header lies"));
    let bomb = gpu_of(&report, "a/bomb.aks2");
    assert!(bomb.notes.join("\n").contains("not read (past the decoding bound)"), "{bomb:?}");
    assert!(gpu_of(&report, "a/cut.aks2").notes.join("\n").contains("cannot decode"));
}

#[test]
fn windows_binaries_with_hip_fat_sections_give_targets_across_a_release() {
    let dir = tempfile::tempdir().unwrap();
    let dll =
        pe_dll(&[(".text", vec![0xc3; 64]), (".hip_fat", bundle_for(&[("gfx942", GFX942), ("gfx1201", GFX1201)], 6))]);
    let cuda = pe_dll(&[(".nv_fatb", nv_fatbin(&[80, 90]))]);
    let wheel = WheelSpec::new("winrocm", "1.0", "cp312-cp312-win_amd64")
        .file("winrocm/_k.pyd", dll)
        .file("winrocm/kernels.dll", cuda)
        .file("winrocm/plain.dll", pe_dll(&[(".text", vec![0xc3; 16])]))
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    let code = gpu_of(&report, "winrocm/_k.pyd");
    assert_eq!(code.container, Container::PeHipFatbin);
    assert_eq!(code.targets, ["gfx1201", "gfx942"]);
    assert_eq!(gpu_of(&report, "winrocm/kernels.dll").targets, ["sm_80", "sm_90"]);
    assert_eq!(report.gpu.len(), 2, "plain.dll has none");
    assert_eq!(report.binaries.pe, 3);
    let out = wheelfix(dir.path(), &["show", "--expect-gpu-target", "gfx950", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("none for gfx950"), "{}", stderr(&out));
    // Streamed (a budget smaller than the DLL), the same answer.
    let streamed = show_report(dir.path(), &wheel, &["--memory", "1K"]);
    assert_eq!(streamed.gpu, report.gpu);
}

/// A DLL as TheRock's splitter leaves it: `.hip_fat` emptied, `HIPK` wrappers in `.hipFatB`,
/// the marker in `.kpackrf` (raw data padded to the file alignment with zeros).
fn therock_split_dll(marker: Vec<u8>, magics: [&[u8; 4]; 2]) -> Vec<u8> {
    let mut wrappers = Vec::new();
    for (i, magic) in (0..2u64).zip(magics) {
        wrappers.extend(magic);
        wrappers.extend(1u32.to_le_bytes());
        wrappers.extend(0x1_8000_0000u64.to_le_bytes());
        wrappers.extend(i.to_le_bytes());
    }
    pe_dll(&[(".text", vec![0xc3; 64]), (".hip_fat", Vec::new()), (".hipFatB", wrappers), (".kpackrf", marker)])
}

#[test]
fn windows_kpack_split_binaries_give_their_marker_and_check_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let marker = mp::map(&[
        ("kpack_search_paths", mp::array(&[mp::str("../.kpack/blas_lib_@GFXARCH@.kpack")])),
        ("kernel_name", mp::str("bin/rocsparse.dll")),
    ]);
    let set = d.join("set");
    std::fs::create_dir(&set).unwrap();
    let host = WheelSpec::new("winrocm", "1.0+rocm7.1.0", "cp312-cp312-win_amd64")
        .file("winrocm/bin/rocsparse.dll", therock_split_dll(marker.clone(), [b"HIPK"; 2]))
        .write(&set);
    let report = show_report(d, &host, &[]);
    let code = gpu_of(&report, "winrocm/bin/rocsparse.dll");
    assert_eq!(code.container, Container::KpackSplit, "{code:?}");
    let notes = code.notes.join("\n");
    assert!(notes.contains("kernel name: bin/rocsparse.dll"), "{notes}");
    assert!(notes.contains("kpack search paths: ../.kpack/blas_lib_@GFXARCH@.kpack"), "{notes}");
    assert!(!notes.contains("cannot use"), "{notes}");
    // Streamed (a budget smaller than the DLL), the same answer.
    assert_eq!(show_report(d, &host, &["--memory", "1K"]).gpu, report.gpu);

    // `check` follows the marker: alone, the host finds no archive; beside the device wheel
    // whose archive its search path names (`winrocm/.kpack/blas_lib_gfx1201.kpack`), all is well.
    let check = |set: &Path| {
        let out = wheelfix(d, &["check", "--json", set.to_str().unwrap()]);
        let kinds: Vec<String> = check_document(&out)
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error || f.kind.name().starts_with("kpack-"))
            .map(|f| format!("{}: {}", f.kind, f.message))
            .collect();
        (out.status.code(), kinds)
    };
    let (code, kinds) = check(&set);
    assert_eq!(code, Some(1), "{kinds:?}");
    assert!(
        kinds.len() == 1 && kinds[0].starts_with("kpack-unresolved") && kinds[0].contains("bin/rocsparse.dll"),
        "{kinds:?}"
    );
    WheelSpec::new("winrocm_device_gfx1201", "1.0+rocm7.1.0", "cp312-cp312-win_amd64")
        .file(
            "winrocm/.kpack/blas_lib_gfx1201.kpack",
            kpack_archive_of(
                "blas_lib",
                &[
                    ("bin/rocsparse.dll#0", "gfx1201", amdgpu_object(GFX1201, 5)),
                    ("bin/rocsparse.dll#1", "gfx1201", amdgpu_object(GFX1201, 5)),
                ],
            ),
        )
        .write(&set);
    assert_eq!(check(&set), (Some(0), Vec::new()));

    // A marker the runtime cannot read, a wrapper left HIPF, or a marker section cut off the
    // end of the file (the last section) is named.
    let mut cut = therock_split_dll(marker.clone(), [b"HIPK"; 2]);
    let at = cut.windows(marker.len()).position(|w| w == marker.as_slice()).expect("the marker is in the DLL");
    cut.truncate(at + 4);
    for (dll, why) in [
        (therock_split_dll(b"\xc1junk".to_vec(), [b"HIPK"; 2]), "its .kpackrf marker: not MessagePack"),
        (therock_split_dll(marker, [b"HIPK", b"FPIH"]), "1 of its 2 HIP wrappers are not HIPK"),
        (cut, "its .kpackrf section lies past the end of the file"),
    ] {
        let bad = d.join("bad");
        let _ = std::fs::remove_dir_all(&bad);
        std::fs::create_dir(&bad).unwrap();
        WheelSpec::new("winrocm", "1.0+rocm7.1.0", "cp312-cp312-win_amd64")
            .file("winrocm/bin/rocsparse.dll", dll)
            .write(&bad);
        let (code, kinds) = check(&bad);
        assert_eq!(code, Some(1), "{kinds:?}");
        assert!(kinds.iter().any(|k| k.starts_with("kpack-marker-unusable") && k.contains(why)), "{why}: {kinds:?}");
    }
}

#[test]
fn device_code_files_are_recognised_by_content_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = WheelSpec::new("byname", "1.0", "py3-none-any")
        .file("k/blob", ccob(&bundle_for(&[("gfx942", GFX942)], 6), 3, true))
        .file("k/kernels.hsaco", bundle_for(&[("gfx950", GFX950)], 6))
        .file("k/noext", amdgpu_object(GFX90A, 5))
        .file("k/archive.bin", aks2(&[("k", amdgpu_object(GFX1201, 5))]))
        .file("k/fake.co", b"not device code at all".to_vec())
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.gpu_targets, ["gfx90a", "gfx942", "gfx950", "gfx1201"]);
    assert_eq!(gpu_of(&report, "k/blob").container, Container::CompressedOffloadBundle);
    assert_eq!(gpu_of(&report, "k/kernels.hsaco").container, Container::OffloadBundle);
    assert_eq!(gpu_of(&report, "k/archive.bin").container, Container::AotritonArchive);
    assert_eq!(report.gpu.len(), 4, "fake.co is no device code");
}

#[test]
fn offload_bundles_in_data_sections_are_bundles_not_embedded_code_objects() {
    let dir = tempfile::tempdir().unwrap();
    let bundles: Vec<Vec<u8>> =
        (0..3).map(|_| bundle_for(&[("gfx90a", 0x3f), ("gfx942", GFX942), ("gfx950", GFX950)], 4)).collect();
    let host = host_with_data_bundles("_gen", &bundles, amdgpu_object(GFX942, 5));
    let wheel = platform_wheel(dir.path(), "genk", vec![("p/_gen.so", host.clone())]);
    let report = show_report(dir.path(), &wheel, &[]);
    let of = |container: Container| {
        report.gpu.iter().find(|g| g.container == container).unwrap_or_else(|| panic!("{report:?}"))
    };
    let bundled = of(Container::BundleInData);
    assert_eq!(bundled.objects, 9, "{bundled:?}");
    assert_eq!(bundled.targets, ["gfx90a", "gfx942", "gfx950"]);
    assert!(bundled.notes.join("\n").contains("3 in `.rodata`"), "{bundled:?}");
    // The string naming the magic is no bundle, and no problem: nothing unreadable.
    assert!(!bundled.notes.join("\n").contains("entry"), "{bundled:?}");
    // The code object outside the bundles is embedded; those inside are the bundles'.
    assert_eq!(of(Container::EmbeddedCodeObject).objects, 1);
    assert_eq!(bundled.target_bytes["gfx942"].objects, 3);
    // Streamed within a small budget, the same answer.
    let big = platform_wheel(
        dir.path(),
        "genbig",
        vec![("p/_gen.so", {
            let mut host = host;
            host.extend(vec![0u8; 3 << 20]);
            host
        })],
    );
    let streamed = show_report(dir.path(), &big, &["--memory", "2M"]);
    let whole = show_report(dir.path(), &big, &["--memory", "1G"]);
    assert_eq!(streamed.gpu, whole.gpu);
    assert_eq!(streamed.gpu, report.gpu);
}
