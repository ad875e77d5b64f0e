//! `thin` on real HIP fat binaries built here with Debian's clang (`clang++-19` or newer, with
//! `lld` and `clang-offload-bundler`; the test setup installs them, and a test that cannot find
//! them fails). What is kept is checked by readers that are not wheelfix's: clang's own bundler
//! lists and unbundles every rewritten bundle, and a stub HIP runtime loaded with the thinned
//! library registers exactly the kept code objects.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::gpugen::{amdgpu_object, bundle_for, ccob, ccob_raw, host_with_fatbin};
use support::hip::{
    STUB, assert_same_memory_outside_fatbin, bundle_spaces, bundler_list, bundler_unbundle, bundles, fatbin_pieces,
    load_with_stub, toolchain,
};
use support::python::{assert_true_record, pip_install_and_run, run};
use support::wheelgen::WheelSpec;
use support::{read_member, stderr, stdout, wheelfix};
use wheelfix::gpu::Container;
use wheelfix::report::thin::ThinOutcome;

const KERNEL: &str = r#"
#define __global__ __attribute__((global))
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **args, unsigned long shm, hipStream_t s);
__global__ void KERNEL_NAME(int *x) { x[0] += VALUE; }
extern "C" int HOST_NAME(void) { return VALUE; }
"#;

/// One translation unit: its offload arches and clang flags.
struct Unit {
    name: &'static str,
    arches: &'static [&'static str],
    flags: &'static [&'static str],
}

/// Three bundles in one `.hip_fatbin`: a plain one with both XNACK variants of gfx90a, a plain
/// one of code object v6 with a generic target, and a compressed one.
const UNITS: &[Unit] = &[
    Unit { name: "plain", arches: &["gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx1100"], flags: &[] },
    Unit { name: "generic", arches: &["gfx11-generic", "gfx942"], flags: &["-mcode-object-version=6"] },
    Unit { name: "compressed", arches: &["gfx942", "gfx1100", "gfx90a"], flags: &["--offload-compress"] },
];

/// `libk.so`: the units linked into one library whose `host_value()` returns 42.
fn fat_library(dir: &Path) -> PathBuf {
    let (clang, _) = toolchain();
    let src = dir.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let mut objects = Vec::new();
    for (i, unit) in UNITS.iter().enumerate() {
        let object = dir.join(format!("{}.o", unit.name));
        let host = if i == 0 { "host_value".to_string() } else { format!("host_{}", unit.name) };
        let mut cmd = Command::new(&clang);
        cmd.args(["-x", "hip", "-nogpulib", "-nogpuinc", "-fPIC", "-O1", "-c", "-Wno-unused-command-line-argument"])
            .arg(format!("-DKERNEL_NAME=kernel_{}", unit.name))
            .arg(format!("-DHOST_NAME={host}"))
            .arg(format!("-DVALUE={}", 42 + i))
            .args(unit.arches.iter().map(|a| format!("--offload-arch={a}")))
            .args(unit.flags)
            .arg(&src)
            .arg("-o")
            .arg(&object);
        run(&mut cmd);
        objects.push(object);
    }
    let lib = dir.join("libk.so");
    run(Command::new(&clang).arg("-shared").args(&objects).arg("-o").arg(&lib));
    lib
}

fn fat_wheel(dir: &Path) -> PathBuf {
    let lib = std::fs::read(fat_library(dir)).unwrap();
    WheelSpec::new("fatpkg", "1.0", "py3-none-linux_x86_64")
        .file("fatpkg/__init__.py", "")
        .file("fatpkg/libk.so", lib)
        .file("fatpkg/kernels/k_gfx90a.co", amdgpu_object(0x3f, 5))
        .write(&dir.join("in"))
}

#[test]
fn thinned_bundles_hold_exactly_the_kept_targets_as_clangs_bundler_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = fat_wheel(d);
    let before = read_member(&wheel, "fatpkg/libk.so");
    let old = bundles(&before);
    assert_eq!(old.len(), 3);
    for compact in [false, true] {
        let out_dir = if compact { "out" } else { "out-kept-layout" };
        let mut args = vec!["thin", "--gpu-target", "gfx942", "-w", out_dir, wheel.to_str().unwrap()];
        if !compact {
            args.push("--no-compact");
        }
        let out = wheelfix(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let thinned = d.join(out_dir).join(wheel.file_name().unwrap());
        assert!(thinned.exists(), "the same file name: {}", stdout(&out));
        assert_true_record(&thinned);
        let after = read_member(&thinned, "fatpkg/libk.so");
        if compact {
            assert!(after.len() < before.len(), "the library installs smaller");
        } else {
            assert_eq!(before.len(), after.len(), "the library keeps its size");
        }
        let new = bundles(&after);
        assert_eq!(new.len(), 3, "every bundle stays");
        // Each bundle's whole space (a thinned compressed bundle is shorter than its space):
        // clang's bundler reads it to the end of its section, through what the thinning freed.
        for space in bundle_spaces(&before, &after) {
            let listed = bundler_list(d, &space);
            assert!(listed.contains(&"hipv4-amdgcn-amd-amdhsa--gfx942".to_string()), "{listed:?}");
            assert!(!listed.iter().any(|id| id.contains("gfx90a") || id.contains("gfx11")), "{listed:?}");
        }
        // Nothing of a dropped target remains in the section: no id, in any bundle's bytes.
        for (_, piece) in fatbin_pieces(&after) {
            for dropped in [&b"gfx90a"[..], b"gfx1100", b"gfx11-generic"] {
                assert!(!piece.windows(dropped.len()).any(|w| w == dropped), "{}", String::from_utf8_lossy(dropped));
            }
        }
        for (old, new) in old.iter().zip(&new) {
            let listed = bundler_list(d, new);
            let kept: Vec<&String> = listed.iter().filter(|id| !id.starts_with("host-")).collect();
            assert_eq!(kept, ["hipv4-amdgcn-amd-amdhsa--gfx942"], "{listed:?}");
            assert!(listed.iter().any(|id| id.starts_with("host-")), "the host entry stays: {listed:?}");
            assert!(bundler_list(d, old).len() > listed.len());
            assert_eq!(
                bundler_unbundle(d, new, kept[0]),
                bundler_unbundle(d, old, kept[0]),
                "the kept code object is the original's, byte for byte"
            );
        }
        // Outside .hip_fatbin nothing moved, as the loader maps the file: every address of the
        // original outside the section reads the same bytes (the headers aside).
        assert_same_memory_outside_fatbin(&before, &after);
        assert!(
            std::fs::metadata(&thinned).unwrap().len() < std::fs::metadata(&wheel).unwrap().len(),
            "the download shrinks"
        );

        let report = support::show_report(d, &thinned, &[]);
        assert_eq!(report.gpu_targets, ["gfx90a", "gfx942"], "{report:?}");
        let lib = report.gpu.iter().find(|g| g.file == "fatpkg/libk.so").unwrap().clone();
        assert_eq!(lib.targets, ["gfx942"]);
        assert_eq!(lib.objects, 3);

        // The same input gives the same bytes.
        let again_dir = format!("{out_dir}-again");
        args[4] = &again_dir;
        let again = wheelfix(d, &args);
        assert!(again.status.success(), "{}", stderr(&again));
        assert_eq!(
            std::fs::read(&thinned).unwrap(),
            std::fs::read(d.join(&again_dir).join(wheel.file_name().unwrap())).unwrap()
        );
    }
}

#[test]
fn generic_targets_and_target_features_are_kept_as_the_runtime_would_load_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = fat_wheel(d);
    let cases: &[(&str, &[&str])] = &[
        // gfx1101 has no code object of its own: the generic one covers it.
        ("gfx1101", &["hipv4-amdgcn-amd-amdhsa--gfx11-generic"]),
        ("gfx90a:xnack-", &["hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"]),
    ];
    for (target, expected) in cases {
        let out_dir = format!("out-{}", target.replace(':', "_"));
        let out = wheelfix(d, &["thin", "--json", "--gpu-target", target, "-w", &out_dir, wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{target}: {}", stderr(&out));
        let thinned = d.join(&out_dir).join(wheel.file_name().unwrap());
        let mut kept: Vec<String> = bundles(&read_member(&thinned, "fatpkg/libk.so"))
            .iter()
            .flat_map(|b| bundler_list(d, b))
            .filter(|id| !id.starts_with("host-"))
            .collect();
        kept.sort();
        kept.dedup();
        assert_eq!(kept, *expected, "{target}");
        let thinned: Vec<ThinOutcome> = support::entries(&out, &["version", "kept", "dropped"]);
        assert!(thinned[0].totals().1.contains_key("gfx942"), "{thinned:?}");
    }
}

#[test]
fn a_hip_runtime_registers_exactly_the_kept_code_objects_and_the_host_code_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stub = support::python::cc_shared(d, STUB, "libamdhip64.so", &["-ldl"]);
    let wheel = fat_wheel(d);
    let original = d.join("original.so");
    std::fs::write(&original, read_member(&wheel, "fatpkg/libk.so")).unwrap();
    let (all, value) = load_with_stub(d, &stub, &original);
    assert_eq!(value, "42");
    let targets = |lines: &[String]| -> Vec<String> {
        lines.iter().map(|l| l.split(' ').next().unwrap().rsplit("--").next().unwrap().to_string()).collect()
    };
    // The untouched library first: the stub sees every code object, so the test can fail.
    assert_eq!(all.len(), 9, "{all:?}");
    assert!(targets(&all).contains(&"gfx1100".to_string()));

    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let thinned_wheel = d.join("out").join(wheel.file_name().unwrap());
    let thinned = d.join("thinned.so");
    std::fs::write(&thinned, read_member(&thinned_wheel, "fatpkg/libk.so")).unwrap();
    let (kept, value) = load_with_stub(d, &stub, &thinned);
    assert_eq!(value, "42", "the host code still runs");
    assert_eq!(targets(&kept), ["gfx942", "gfx942", "gfx942"], "{kept:?}");
    let expected: Vec<String> =
        all.iter().filter(|l| l.starts_with("hipv4-amdgcn-amd-amdhsa--gfx942 ")).cloned().collect();
    assert_eq!(kept, expected, "the registered code objects are the original's bytes");

    // pip installs the thinned wheel, and its library loads from there.
    let code = format!(
        "import ctypes, os, fatpkg\nctypes.CDLL({stub:?}, mode=ctypes.RTLD_GLOBAL)\nlib = ctypes.CDLL(os.path.join(os.path.dirname(fatpkg.__file__), 'libk.so'))\nprint(lib.host_value())",
        stub = stub.to_str().unwrap()
    );
    let printed = pip_install_and_run(d, &thinned_wheel, &code);
    assert_eq!(printed.trim(), "42");
}

#[test]
fn missing_targets_fail_unless_allowed_and_files_are_pruned_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = host_with_fatbin("m", bundle_for(&[("gfx90a", 0x3f), ("gfx942", 0x4c)], 5));
    let wheel = WheelSpec::new("mpkg", "1.0", "cp312-cp312-linux_x86_64")
        .file("mpkg/m.so", lib)
        .file("mpkg/k_gfx90a.co", amdgpu_object(0x3f, 5))
        .file("mpkg/k_gfx942.co", amdgpu_object(0x4c, 5))
        .write(&d.join("in"));
    let w = wheel.to_str().unwrap();
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx950", "-w", "out", w]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing for gfx950") && stderr(&out).contains(w), "{}", stderr(&out));
    assert!(!d.join("out").join(wheel.file_name().unwrap()).exists(), "nothing written");

    let out = wheelfix(d, &["thin", "--gpu-target", "gfx950", "--allow-missing", "-w", "allowed", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("nothing runs on gfx950"), "{}", stdout(&out));

    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "--prune-files", "--json", "-w", "pruned", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pruned = d.join("pruned").join(wheel.file_name().unwrap());
    assert_true_record(&pruned);
    let names: Vec<String> = zip::ZipArchive::new(std::fs::File::open(&pruned).unwrap())
        .unwrap()
        .file_names()
        .map(|n| n.unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"mpkg/k_gfx942.co".to_string()) && !names.contains(&"mpkg/k_gfx90a.co".to_string()),
        "{names:?}"
    );
    let thinned: Vec<ThinOutcome> = support::entries(&out, &["version", "kept", "dropped"]);
    assert_eq!(thinned[0].pruned[0].file, "mpkg/k_gfx90a.co", "{thinned:?}");

    // Without --prune-files, standalone files stay and are listed.
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "kept", w]);
    assert!(stdout(&out).contains("mpkg/k_gfx90a.co: left as it is"), "{}", stdout(&out));
}

#[test]
fn the_proof_of_a_thinned_file_catches_a_damaged_kept_code_object_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A plain bundle (the hook flips a byte of its kept code object) and, apart, a compressed
    // one (the hook flips a byte in the middle of its stream), each in a wheel of its own.
    let fat = fat_wheel(d);
    let compressed = host_with_fatbin("m", ccob(&bundle_for(&[("gfx90a", 0x3f), ("gfx942", 0x4c)], 5), 3, true));
    let compressed =
        WheelSpec::new("cpkg", "1.0", "cp312-cp312-linux_x86_64").file("cpkg/m.so", compressed).write(&d.join("in"));
    for (wheel, member) in [(&fat, "fatpkg/libk.so"), (&compressed, "cpkg/m.so")] {
        let w = wheel.to_str().unwrap();
        let clean = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "clean", w]);
        assert!(clean.status.success(), "the same wheel undamaged passes its proof: {}", stderr(&clean));
        for compact in [true, false] {
            let mut args = vec!["thin", "--gpu-target", "gfx942", "-w", "damaged", w];
            if !compact {
                args.push("--no-compact");
            }
            let out = support::wheelfix_env(d, &args, &[("WHEELFIX_TEST_DAMAGE_OUTPUT", "1")]);
            assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
            let err = stderr(&out);
            assert!(err.contains(w) && err.contains(member), "names the wheel and the member: {err}");
            assert!(err.contains("does not hold the code it keeps") && err.contains("gfx942"), "{err}");
            assert!(!d.join("damaged").join(wheel.file_name().unwrap()).exists(), "nothing written: {err}");
        }
    }
}

#[test]
fn a_fat_library_without_section_headers_is_listed_and_refused_not_copied_fat() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut lib = std::fs::read(fat_library(d)).unwrap();
    // No section header table (e_shoff, e_shnum, e_shstrndx): it still loads.
    lib[0x28..0x30].fill(0);
    lib[0x3c..0x40].fill(0);
    let wheel = WheelSpec::new("nosh", "1.0", "py3-none-linux_x86_64")
        .file("nosh/__init__.py", "")
        .file("nosh/libk.so", lib)
        .write(&d.join("in"));
    let w = wheel.to_str().unwrap();
    let report = support::show_report(d, &wheel, &[]);
    let lib = report.gpu.iter().find(|g| g.file == "nosh/libk.so").expect("listed").clone();
    assert!(lib.targets.iter().any(|t| t == "gfx942"), "{lib:?}");
    assert!(lib.notes.join("\n").contains("no section header table"), "{lib:?}");
    for command in ["thin", "split"] {
        let out = wheelfix(d, &[command, "--gpu-target", "gfx942", "-w", command, w]);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("no section header table") && stderr(&out).contains("nosh/libk.so"),
            "{}",
            stderr(&out)
        );
        assert!(!d.join(command).join(wheel.file_name().unwrap()).exists(), "{command}: nothing written");
    }
}

#[test]
fn wheels_without_device_code_are_copied_or_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel =
        WheelSpec::new("plain", "1.0", "py3-none-any").file("plain/__init__.py", "x = 1\n").write(&d.join("in"));
    let w = wheel.to_str().unwrap();
    let before = std::fs::read(&wheel).unwrap();
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(d.join("out").join(wheel.file_name().unwrap())).unwrap(), before, "byte for byte");
    let modified = std::fs::metadata(&wheel).unwrap().modified().unwrap();
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "--in-place", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&wheel).unwrap().modified().unwrap(), modified, "left alone in place");
    let out = wheelfix(d, &["thin", "-w", "x", w]);
    assert_eq!(out.status.code(), Some(2), "no target is a usage error");
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx9999", "-w", "x", w]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn in_place_thinning_replaces_the_input_with_the_thinned_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = host_with_fatbin("m", ccob(&bundle_for(&[("gfx90a", 0x3f), ("gfx942", 0x4c)], 5), 3, true));
    let wheel = WheelSpec::new("ipkg", "1.0", "cp312-cp312-linux_x86_64").file("ipkg/m.so", lib).write(&d.join("in"));
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx90a", "--in-place", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_true_record(&wheel);
    let report = support::show_report(d, &wheel, &[]);
    assert_eq!(report.gpu_targets, ["gfx90a"], "{report:?}");
    let leftovers: Vec<_> = std::fs::read_dir(d.join("in")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[test]
fn lies_and_bombs_fail_their_wheel_and_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = bundle_for(&[("gfx90a", 0x3f), ("gfx942", 0x4c)], 5);
    let mut past_end = good.clone();
    past_end[24..32].copy_from_slice(&1000u64.to_le_bytes());
    let mut sizes_lie = ccob(&good, 3, true);
    let claimed = (good.len() as u64 / 2).to_le_bytes();
    sizes_lie[16..24].copy_from_slice(&claimed);
    let bomb = {
        let mut inner = good.clone();
        inner.resize(256 << 20, 0);
        let payload = zstd::encode_all(&inner[..], 3).unwrap();
        ccob_raw(&payload, 3, 1, 64 << 30, None)
    };
    let cases = [("past_end", past_end), ("sizes_lie", sizes_lie), ("bomb", bomb)];
    let mut wheels = Vec::new();
    for (name, fatbin) in cases {
        let lib = host_with_fatbin("m", fatbin);
        wheels.push(
            WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64")
                .file(&format!("{name}/m.so"), lib)
                .write(&d.join("in")),
        );
    }
    let fine = WheelSpec::new("fine", "1.0", "cp312-cp312-linux_x86_64")
        .file("fine/m.so", host_with_fatbin("m", good))
        .write(&d.join("in"));
    let mut args = vec!["thin", "--gpu-target", "gfx942", "--allow-missing", "-w", "out"];
    args.extend(wheels.iter().map(|w| w.to_str().unwrap()));
    args.push(fine.to_str().unwrap());
    let out = wheelfix(d, &args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for (wheel, name) in wheels.iter().zip(["past_end", "sizes_lie", "bomb"]) {
        let line = err.lines().find(|l| l.contains(wheel.to_str().unwrap())).unwrap_or_else(|| panic!("{name}: {err}"));
        assert!(line.contains(&format!("{name}/m.so")), "names the member: {line}");
        assert!(!d.join("out").join(wheel.file_name().unwrap()).exists(), "{name}: no output");
    }
    assert!(d.join("out").join(fine.file_name().unwrap()).exists(), "one bad wheel does not stop the others");
    let left: Vec<_> = std::fs::read_dir(d.join("out")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no temporary files left: {left:?}");
}

#[test]
fn thinning_copies_the_original_deflate_blocks_of_what_stays() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // What stays of big_fat_library is the host code and one code object a bundle (moved to
    // the front of its bundle), 4.8 MB.
    let library = support::gpugen::big_fat_library();
    let spec = WheelSpec::new("bigfat", "1.0", "py3-none-linux_x86_64").file("bigfat/big.so", library);
    let deflated = spec.write(&d.join("deflated"));
    let stored = spec.write_stored(&d.join("stored"));

    let thin = |wheel: &Path, out: &str| {
        let run = wheelfix(d, &["thin", "-v", "--gpu-target", "gfx942", "-w", out, wheel.to_str().unwrap()]);
        assert!(run.status.success(), "{}", stderr(&run));
        let reused: u64 = stderr(&run)
            .lines()
            .filter_map(|l| l.split("bigfat/big.so: ").nth(1)?.split(" of ").next()?.parse::<u64>().ok())
            .sum();
        (d.join(out).join(wheel.file_name().unwrap()), reused)
    };
    let (from_deflated, reused) = thin(&deflated, "out-deflated");
    let (from_stored, reused_stored) = thin(&stored, "out-stored");
    // Most of what stays keeps the original's blocks; a stored original has none to give.
    assert!(reused > 4_000_000, "reused {reused} bytes");
    assert_eq!(reused_stored, 0);
    // The same content either way, and a wheel that Python's zipfile and pip's RECORD check accept.
    assert!(read_member(&from_deflated, "bigfat/big.so") == read_member(&from_stored, "bigfat/big.so"));
    assert_true_record(&from_deflated);
    let report = support::show_report(d, &from_deflated, &[]);
    assert_eq!(report.gpu_targets, ["gfx942"], "{report:?}");
    // About as small as the original's compression of what stays.
    let size = |w: &Path| std::fs::metadata(w).unwrap().len();
    assert!(size(&from_deflated) < size(&deflated) / 2, "{} of {}", size(&from_deflated), size(&deflated));
    assert!(size(&from_deflated) < size(&from_stored) * 11 / 10);
}

/// The entry ids of every offload bundle in a section of `library` whose table reads (a string
/// naming the magic is skipped), in order.
fn bundle_ids_in(library: &[u8], section: &str) -> Vec<Vec<String>> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(library).unwrap();
    let data = file.section_by_name(section).unwrap().data().unwrap();
    let magic = b"__CLANG_OFFLOAD_BUNDLE__";
    let mut found = Vec::new();
    for at in (0..data.len().saturating_sub(32)).filter(|&i| data[i..].starts_with(magic)) {
        let count = u64::from_le_bytes(data[at + 24..at + 32].try_into().unwrap()) as usize;
        if count == 0 || count > 64 {
            continue;
        }
        let (mut p, mut ids) = (at + 32, Vec::new());
        for _ in 0..count {
            let len = u64::from_le_bytes(data[p + 16..p + 24].try_into().unwrap()) as usize;
            ids.push(String::from_utf8_lossy(&data[p + 24..p + 24 + len]).into_owned());
            p += 24 + len;
        }
        found.push(ids);
    }
    found
}

#[test]
fn bundles_in_a_data_section_are_thinned_where_they_lie() {
    use support::gpugen::{GFX942, GFX950, host_with_data_bundles};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bundles: Vec<Vec<u8>> =
        (0..3).map(|_| bundle_for(&[("gfx90a", 0x3f), ("gfx942", GFX942), ("gfx950", GFX950)], 4)).collect();
    let host = host_with_data_bundles("_gen", &bundles, amdgpu_object(GFX950, 5));
    let wheel = WheelSpec::new("genk", "1.0", "cp312-cp312-linux_x86_64")
        .file("genk/_gen.so", host.clone())
        .write(&d.join("in"));
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let thinned = d.join("out").join(wheel.file_name().unwrap());
    assert_true_record(&thinned);
    let after = read_member(&thinned, "genk/_gen.so");
    assert_eq!(after.len(), host.len(), "the library keeps its size");
    let before_ids = bundle_ids_in(&host, ".rodata");
    let after_ids = bundle_ids_in(&after, ".rodata");
    assert_eq!(before_ids.len(), 3, "{before_ids:?}");
    assert_eq!(after_ids.len(), 3, "every bundle stays where it was: {after_ids:?}");
    for ids in &after_ids {
        assert_eq!(ids, &["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx942"]);
    }
    let report = support::show_report(d, &thinned, &[]);
    let gpu = report.gpu;
    let bundled = gpu.iter().find(|g| g.container == Container::BundleInData).unwrap();
    assert_eq!(bundled.targets, ["gfx942"]);
    assert_eq!(bundled.objects, 3);
    // The code object outside the bundles is left as it is, and listed.
    let lone = gpu.iter().find(|g| g.container == Container::EmbeddedCodeObject).unwrap();
    assert_eq!(lone.targets, ["gfx950"]);
    assert!(stdout(&out).contains("genk/_gen.so: left as it is (embedded-code-object): gfx950"), "{}", stdout(&out));
}

#[test]
fn bundles_in_hccs_kernel_section_are_listed_and_left_as_they_are() {
    use support::gpugen::{GFX942, GFX950, host_with_bundles_in};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bundles: Vec<Vec<u8>> = (0..2).map(|_| bundle_for(&[("gfx90a", 0x3f), ("gfx942", GFX942)], 2)).collect();
    let host = host_with_bundles_in(".kernel", "_hcc", &bundles, amdgpu_object(GFX950, 2));
    let wheel =
        WheelSpec::new("hcck", "1.0", "cp37-cp37m-linux_x86_64").file("hcck/_hcc.so", host).write(&d.join("in"));
    let report = support::show_report(d, &wheel, &[]);
    let bundled = report.gpu.iter().find(|g| g.container == Container::BundleInData).unwrap();
    assert_eq!(bundled.objects, 4, "{bundled:?}");
    assert!(bundled.notes.join("\n").contains("HCC"), "{bundled:?}");
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hcck/_hcc.so: left as it is (bundle-in-data): gfx90a gfx942"), "{}", stdout(&out));
    let copied = d.join("out").join(wheel.file_name().unwrap());
    assert_eq!(std::fs::read(copied).unwrap(), std::fs::read(&wheel).unwrap(), "copied byte for byte");
}
