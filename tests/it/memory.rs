//! Memory stays within the budget whatever the members' sizes: a wheel whose library is far
//! larger than `--memory` is shown, verified, retagged and repaired with a peak RSS (as the
//! kernel counts it for the child, like `/usr/bin/time`) near the process's own footprint plus
//! the budget, where inflating that library whole would take its whole size. The answers are
//! the same as with a budget that reads it whole. `thin` rewrites a library far larger than the
//! budget within it too.

use crate::support;

use support::elfgen::ElfSpec;
use support::wheelgen::WheelSpec;
use support::{run_measured, stderr, stdout};

const MIB: u64 = 1 << 20;

/// `n` bytes of a repeated pattern (code objects of a fixture that builds quickly).
fn pattern(n: usize) -> Vec<u8> {
    (0..1021u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).cycle().take(n).collect()
}

#[test]
fn a_library_larger_than_the_budget_is_read_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = WheelSpec::new("small", "1.0", "cp312-cp312-linux_x86_64")
        .file("small/_s.cpython-312-x86_64-linux-gnu.so", ElfSpec::extension("_s").build())
        .write(d);
    let big_lib = ElfSpec { padding: 320 << 20, ..ElfSpec::extension("_big") }
        .needs_version("memcpy", "libc.so.6", "GLIBC_2.14")
        .build();
    let big = WheelSpec::new("big", "1.0", "cp312-cp312-linux_x86_64")
        .file("big/_big.cpython-312-x86_64-linux-gnu.so", big_lib)
        .write(d);
    let (small, big) = (small.to_str().unwrap(), big.to_str().unwrap());

    let (out, footprint) = run_measured(d, &["show", "--verify", small]);
    assert!(out.status.success(), "{}", stderr(&out));
    let budget = 48 * MIB;
    for args in [
        vec!["show", "--memory", "48M", big],
        vec!["show", "--verify", "--memory", "48M", big],
        vec!["retag", "-q", "--memory", "48M", "-w", "out", big],
    ] {
        let (out, peak) = run_measured(d, &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        // Whole, the library alone would take 320 MiB.
        let bound = footprint + budget + 24 * MIB;
        assert!(peak < bound, "{args:?}: peak RSS {} MiB, over {} MiB", peak / MIB, bound / MIB);
    }
    // The same facts as when the library is read whole.
    let (streamed, _) = run_measured(d, &["show", "--json", "--verify", "--memory", "48M", big]);
    let (whole, _) = run_measured(d, &["show", "--json", "--verify", "--memory", "4G", big]);
    assert_eq!(stdout(&streamed), stdout(&whole));
    let report = &support::show_reports(&streamed)[0];
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_17_x86_64"), "{report:?}");
    assert!(report.hashes_checked);
}

#[test]
fn repair_holds_one_patched_library_at_a_time_when_the_budget_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An external library the wheel's copies all need, to be vendored.
    let ext_dir = d.join("ext");
    std::fs::create_dir_all(&ext_dir).unwrap();
    let ext = ElfSpec { soname: Some("libwfext.so".into()), ..ElfSpec::default() }.build();
    std::fs::write(ext_dir.join("libwfext.so"), ext).unwrap();
    let copies = 4;
    let lib_size = 120 << 20;
    let mut spec = WheelSpec::new("patchme", "1.0", "cp312-cp312-linux_x86_64");
    for i in 0..copies {
        let module = format!("_l{i}");
        let lib = ElfSpec { padding: lib_size, ..ElfSpec::extension(&module) }.needs("libwfext.so").build();
        spec = spec.file(&format!("patchme/{module}.cpython-312-x86_64-linux-gnu.so"), lib);
    }
    let wheel = spec.write(d);
    let ldpaths = ext_dir.to_str().unwrap();
    let (out, peak) = run_measured(
        d,
        &["repair", "-q", "--memory", "32M", "--ldpaths", ldpaths, "-w", "out", wheel.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // Four patched copies held together would be 4 × 2 × 120 MiB; one at a time is 2 × 120 MiB.
    let bound = 2 * lib_size as u64 + 32 * MIB + 64 * MIB;
    assert!(peak < bound, "peak RSS {} MiB, over {} MiB", peak / MIB, bound / MIB);
    let written: Vec<_> = std::fs::read_dir(d.join("out")).unwrap().collect();
    assert_eq!(written.len(), 1, "one wheel and no leftovers: {written:?}");
    let report = support::show_report(d, &written[0].as_ref().unwrap().path(), &["--verify", "--ldpaths", ldpaths]);
    assert!(report.hashes_checked, "{report:?}");
    // The copies and the vendored library, all patched and all in the wheel.
    assert_eq!(report.binaries.elf, copies + 1, "{report:?}");
    let needed_by = report.external_libs["libc.so.6"].needed_by.join(" ");
    assert!(needed_by.contains("patchme.libs/libwfext-"), "{report:?}");
}

#[test]
fn thin_rewrites_a_library_larger_than_the_budget_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = WheelSpec::new("small", "1.0", "cp312-cp312-linux_x86_64")
        .file("small/_s.cpython-312-x86_64-linux-gnu.so", ElfSpec::extension("_s").build())
        .write(d);
    // 20 bundles of two 4 MiB code objects each: 160 MiB of device code in one library (a
    // repeated pattern, so that building the fixture stays quick).
    let mut fatbin = Vec::new();
    for _ in 0..20 {
        let b = support::gpugen::bundle(&[("gfx90a", pattern(4 << 20)), ("gfx942", pattern(4 << 20))]);
        fatbin.extend_from_slice(&b);
        fatbin.resize(fatbin.len().next_multiple_of(4096), 0);
    }
    let big = WheelSpec::new("fat", "1.0", "cp312-cp312-linux_x86_64")
        .file("fat/_fat.cpython-312-x86_64-linux-gnu.so", support::gpugen::host_with_fatbin("_fat", fatbin))
        .write(d);
    let (small, big) = (small.to_str().unwrap(), big.to_str().unwrap());
    let (out, footprint) = run_measured(d, &["show", "--verify", small]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (out, peak) = run_measured(d, &["thin", "--memory", "48M", "--gpu-target", "gfx942", "-w", "out", big]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bound = footprint + 48 * MIB + 24 * MIB;
    assert!(peak < bound, "thin: peak RSS {} MiB, over {} MiB", peak / MIB, bound / MIB);
    let thinned = d.join("out").join(std::path::Path::new(big).file_name().unwrap());
    let report = support::show_report(d, &thinned, &[]);
    assert_eq!(report.gpu_targets, ["gfx942"], "{report:?}");
    support::python::assert_true_record(&thinned);
}

#[test]
fn split_moves_a_600_mib_code_object_out_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = WheelSpec::new("small", "1.0", "cp312-cp312-linux_x86_64")
        .file("small/_s.cpython-312-x86_64-linux-gnu.so", ElfSpec::extension("_s").build())
        .write(d);
    // One bundle: a 600 MiB code object for gfx942 and a small one for gfx90a (a repeated
    // pattern, so that building the fixture stays quick).
    let fatbin = support::gpugen::bundle(&[("gfx942", pattern(600 << 20)), ("gfx90a", pattern(1 << 20))]);
    let big = WheelSpec::new("fat", "1.0", "cp312-cp312-linux_x86_64")
        .file("fat/_fat.cpython-312-x86_64-linux-gnu.so", support::gpugen::host_with_wrapped_fatbin("_fat", fatbin, 1))
        .write(d);
    let (small, big) = (small.to_str().unwrap(), big.to_str().unwrap());
    let (out, footprint) = run_measured(d, &["show", "--verify", small]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The object streams past into its archive (a kept copy), or is read again and compressed
    // as it is read (no room for a copy): neither holds it whole.
    for (out_dir, room) in [("out", "16G"), ("out-no-room", "0")] {
        let args = ["split", "--memory", "256M", "--all-targets", "-w", out_dir, big];
        let (out, peak) = support::run_measured_env(d, &args, &[("WHEELFIX_COPY_ROOM", room)]);
        assert!(out.status.success(), "{}", stderr(&out));
        let bound = footprint + 96 * MIB;
        assert!(peak < bound, "split ({out_dir}): peak RSS {} MiB, over {} MiB", peak / MIB, bound / MIB);
        let written = std::fs::read_dir(d.join(out_dir)).unwrap().count();
        assert_eq!(written, 3, "the host and two device wheels: {}", stdout(&out));
    }
}
