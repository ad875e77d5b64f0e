//! `thin` (compacting by default) on HIP fat binaries whose code objects span many pages, built
//! here with Debian's clang and linked by both linkers (GNU ld and lld lay a library out
//! differently: `.hip_fatbin` in the first segment or a later one). What the file loses is
//! checked by readers that are not wheelfix's: the loader (a stub HIP runtime registers what the
//! wrappers point at in memory; a program runs), clang's bundler on each bundle's whole space,
//! `readelf` and `eu-elflint`. Every check runs on the untouched file first.

use crate::support;
use wheelfix::gpu::TargetId;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::hip::{
    STUB, assert_same_memory_outside_fatbin, bundle_spaces, bundler_list, elflint, fatbin_pieces, library,
    load_with_stub, objects, readelf_warnings, toolchain,
};
use support::python::{pip_install_and_run, run};
use support::wheelgen::WheelSpec;
use support::{read_member, stderr, wheelfix};

const MAIN: &str = "#include <stdio.h>\nextern \"C\" int host_value(void);\nint main(void) { printf(\"host %d\\n\", host_value()); return 0; }\n";

/// A program of the units that prints `host 42`, linked against the stub runtime in `dir`
/// (found beside it through its RUNPATH).
fn program(dir: &Path, objects: &[PathBuf], linker: &str, pie: bool) -> PathBuf {
    let (clang, _) = toolchain();
    let main = dir.join("main.cc");
    std::fs::write(&main, MAIN).unwrap();
    let exe = dir.join(format!("prog-{linker}-{}", if pie { "pie" } else { "nopie" }));
    run(Command::new(clang)
        .arg(format!("-fuse-ld={linker}"))
        .arg(if pie { "-pie" } else { "-no-pie" })
        .arg(&main)
        .args(objects)
        .arg(format!("-L{}", dir.display()))
        .args(["-lamdhip64", "-Wl,-rpath,$ORIGIN"])
        .arg("-o")
        .arg(&exe));
    exe
}

/// `wheelfix thin --gpu-target gfx942` of a wheel holding `file` at `fatpkg/<name>`, with and
/// without compacting: the member's bytes, (kept layout, compacted), and the compacted wheel.
fn thin_both(dir: &Path, file: &Path, name: &str) -> (Vec<u8>, Vec<u8>, PathBuf) {
    let member = format!("fatpkg/{name}");
    let wheel = WheelSpec::new("fatpkg", "1.0", "py3-none-linux_x86_64")
        .file("fatpkg/__init__.py", "")
        .file(&member, std::fs::read(file).unwrap())
        .write(&dir.join(format!("in-{name}")));
    let mut outs = Vec::new();
    for flag in ["--no-compact", "--compact"] {
        let out_dir = format!("out-{name}{flag}");
        let out = wheelfix(dir, &["thin", flag, "--gpu-target", "gfx942", "-w", &out_dir, wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{name} {flag}: {}", stderr(&out));
        outs.push(dir.join(out_dir).join(wheel.file_name().unwrap()));
    }
    (read_member(&outs[0], &member), read_member(&outs[1], &member), outs[1].clone())
}

/// The whole pages of the space each bundle of a thinned, uncompacted file no longer uses (from
/// its own end to the next bundle or the end of the section; the first 8 bytes are a skippable
/// frame's header in a zstd bundle's): what compacting may take out, and the bundles.
fn free_pages(library: &[u8]) -> (u64, usize) {
    let (mut pages, mut bundles) = (0, 0);
    for (address, piece) in fatbin_pieces(library) {
        let spans = support::hip::bundle_spans(&piece);
        for (i, &(at, len)) in spans.iter().enumerate() {
            let next = spans.get(i + 1).map_or(piece.len(), |s| s.0) as u64;
            let (from, to) = (address + (at + len) as u64 + 8, address + next);
            pages += (to / 4096).saturating_sub(from.div_ceil(4096));
            bundles += 1;
        }
    }
    (pages * 4096, bundles)
}

/// The checks that do not depend on how the file is loaded: clang's bundler reads each kept
/// bundle whole and sees only gfx942; readelf reads it without a warning; eu-elflint says
/// nothing it did not say of the untouched file; the loader maps everything outside the
/// section as it did.
fn assert_reads_as_before(dir: &Path, original: &[u8], thinned: &[u8], what: &str) {
    for space in bundle_spaces(original, thinned) {
        let listed: Vec<String> = bundler_list(dir, &space).into_iter().filter(|id| !id.starts_with("host-")).collect();
        assert_eq!(listed, ["hipv4-amdgcn-amd-amdhsa--gfx942"], "{what}");
    }
    let (old_path, new_path) = (dir.join("original.bin"), dir.join("thinned.bin"));
    std::fs::write(&old_path, original).unwrap();
    std::fs::write(&new_path, thinned).unwrap();
    assert_eq!(readelf_warnings(&old_path), "", "{what}: the untouched file");
    assert_eq!(readelf_warnings(&new_path), "", "{what}");
    let (before, after) = (elflint(&old_path), elflint(&new_path));
    let new: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(new.is_empty(), "{what}: eu-elflint says more than of the untouched file: {new:?}");
    assert_same_memory_outside_fatbin(original, thinned);
}

#[test]
fn compacted_libraries_lose_the_freed_pages_and_load_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stub = support::python::cc_shared(d, STUB, "libamdhip64.so", &["-ldl"]);
    let objects = objects(d);
    for linker in ["bfd", "lld", "bfd-noseparate"] {
        let lib = library(d, &objects, linker);
        let original = std::fs::read(&lib).unwrap();
        let (all, value) = load_with_stub(d, &stub, &lib);
        assert_eq!((all.len(), value.as_str()), (9, "42"), "{linker}: the untouched library");

        let name = format!("libk-{linker}.so");
        let (kept_layout, compacted, wheel) = thin_both(d, &lib, &name);
        assert_eq!(kept_layout.len(), original.len(), "{linker}: --no-compact keeps the size");
        let (freed, bundles) = free_pages(&kept_layout);
        assert!(freed >= 30 * 4096, "{linker}: the test frees pages ({freed})");
        // Every freed page leaves, but the one the larger program header table takes (and one
        // at the end of a zstd bundle's space, kept for its last frame).
        let saved = (original.len() - compacted.len()) as u64;
        assert!(saved + 4096 * (1 + bundles as u64) >= freed, "{linker}: {saved} bytes saved of {freed} freed");

        for (bytes, what) in [(&kept_layout, "kept layout"), (&compacted, "compacted")] {
            let what = format!("{linker}, {what}");
            assert_reads_as_before(d, &original, bytes, &what);
            let path = d.join(format!("{name}-{}", bytes.len()));
            std::fs::write(&path, bytes).unwrap();
            let (kept, value) = load_with_stub(d, &stub, &path);
            assert_eq!(value, "42", "{what}: the host code runs");
            let expected: Vec<String> =
                all.iter().filter(|l| l.starts_with("hipv4-amdgcn-amd-amdhsa--gfx942 ")).cloned().collect();
            assert_eq!(kept, expected, "{what}: the runtime registers the original's gfx942 code objects");
            // GNU strip, as build pipelines run it, writes a file that still loads: it takes a
            // program header table inside a segment's bytes for one at the segment's start.
            let stripped = d.join(format!("{name}-{}-stripped", bytes.len()));
            let out = Command::new("strip").arg("-o").arg(&stripped).arg(&path).output().expect("strip (binutils)");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && said.is_empty(), "{what}: strip says {said}");
            assert_eq!(load_with_stub(d, &stub, &stripped), (expected, "42".to_string()), "{what}, stripped");
        }

        // wheelfix reads its own output: the same code, no loadability finding.
        let report = support::show_report(d, &wheel, &[]);
        let text = serde_json::to_string(&report).unwrap();
        assert!(!text.contains("not loadable"), "{text}");
        let gpu = report.gpu.iter().find(|g| g.file == format!("fatpkg/{name}")).unwrap();
        assert_eq!((gpu.targets.as_slice(), gpu.objects), (&[TargetId::from_code("gfx942")][..], 3));
        if linker == "lld" {
            let code = format!(
                "import ctypes, os, fatpkg\nctypes.CDLL({stub:?}, mode=ctypes.RTLD_GLOBAL)\nlib = ctypes.CDLL(os.path.join(os.path.dirname(fatpkg.__file__), {name:?}))\nprint(lib.host_value())",
                stub = stub.to_str().unwrap()
            );
            assert_eq!(pip_install_and_run(d, &wheel, &code).trim(), "42", "pip installs it and it loads");
        }
    }
}

#[test]
fn compacted_programs_run_and_register_the_kept_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    support::python::cc_shared(d, STUB, "libamdhip64.so", &["-ldl"]);
    let objects = objects(d);
    let log = d.join("stub.log");
    let run_logged = |exe: &Path| {
        let _ = std::fs::remove_file(&log);
        let printed = run(Command::new(exe).env("STUB_LOG", &log));
        let mut lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
        lines.sort();
        (printed, lines)
    };
    for (linker, pie) in [("bfd", true), ("lld", true), ("bfd", false)] {
        let exe = program(d, &objects, linker, pie);
        let what = exe.file_name().unwrap().to_string_lossy().to_string();
        let original = std::fs::read(&exe).unwrap();
        let (printed, all) = run_logged(&exe);
        assert_eq!((printed.trim(), all.len()), ("host 42", 9), "{what}: the untouched program");

        let (_, compacted, _) = thin_both(d, &exe, &what);
        assert!(compacted.len() + 6 * 4096 < original.len(), "{what}: {} of {} bytes", compacted.len(), original.len());
        assert_reads_as_before(d, &original, &compacted, &what);
        let thinned = d.join(format!("{what}-thinned"));
        support::write_executable(&thinned, &compacted);
        let (printed, kept) = run_logged(&thinned);
        assert_eq!(printed.trim(), "host 42", "{what}: the compacted program runs");
        let expected: Vec<String> =
            all.iter().filter(|l| l.starts_with("hipv4-amdgcn-amd-amdhsa--gfx942 ")).cloned().collect();
        assert_eq!(kept, expected, "{what}");
    }
}
