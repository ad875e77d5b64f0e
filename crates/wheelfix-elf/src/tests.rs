//! The facts parser and the in-process patcher on files the fixture builder writes: what is
//! written is what is read, and what a patch asks for is what the patched file says, the rest
//! as it was. (The integration tests run patched libraries compiled with `cc` and compare with
//! patchelf; these hold the crate's own promises without a compiler.)

use std::collections::BTreeSet;

use crate::ElfFacts;
use crate::fixtures::{ElfSpec, Import};
use crate::patch::{ElfEdit, InProcessPatcher, PatchError, Patcher, RpathEdit};

/// A library needing versioned symbols of two libraries and one plain library, with a SONAME,
/// an RPATH and a Python module's init function.
fn library() -> ElfSpec {
    ElfSpec {
        soname: Some("libdemo.so.1".into()),
        rpath: Some("$ORIGIN/../lib:/opt/x".into()),
        ..ElfSpec::extension("demo")
    }
    .needs_version("memfd_create", "libc.so.6", "GLIBC_2.27")
    .needs_version("pow", "libm.so.6", "GLIBC_2.29")
    .needs("libfoo.so.1")
}

/// The versions each library is needed at, as sets.
fn version_needs(facts: &ElfFacts) -> Vec<(String, BTreeSet<String>)> {
    let mut needs: Vec<(String, BTreeSet<String>)> =
        facts.version_needs.iter().map(|v| (v.file.clone(), v.versions.iter().cloned().collect())).collect();
    needs.sort();
    needs
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_facts_are_what_the_file_says() {
    let facts = ElfFacts::parse(&library().build()).unwrap();
    assert!(facts.is_64 && facts.little_endian, "{facts:?}");
    assert_eq!(facts.machine, 62);
    assert_eq!(facts.soname.as_deref(), Some("libdemo.so.1"));
    assert_eq!(facts.needed, ["libc.so.6", "libm.so.6", "libfoo.so.1"]);
    assert_eq!(facts.rpath, ["$ORIGIN/../lib", "/opt/x"]);
    assert!(facts.runpath.is_empty());
    assert_eq!(
        version_needs(&facts),
        [
            ("libc.so.6".to_string(), set(&["GLIBC_2.2.5", "GLIBC_2.27"])),
            ("libm.so.6".to_string(), set(&["GLIBC_2.29"]))
        ]
    );
    assert_eq!(facts.init_functions, ["PyInit_demo"]);
    // A RUNPATH is its own entry, never taken for an RPATH.
    let runpath = ElfSpec { runpath: Some("$ORIGIN".into()), ..ElfSpec::default() };
    let facts = ElfFacts::parse(&runpath.build()).unwrap();
    assert_eq!((facts.rpath.len(), facts.runpath.as_slice()), (0, &["$ORIGIN".to_string()][..]));
}

#[test]
fn every_class_and_byte_order_reads_alike() {
    // 32-bit big-endian MIPS, 32-bit little-endian i386, 64-bit big-endian s390x.
    for (machine, is_64, little_endian) in [(8u16, false, false), (3, false, true), (22, true, false)] {
        let spec = ElfSpec {
            imports: vec![Import::versioned("malloc", "libc.so.6", "GLIBC_2.0"), Import::plain("free")],
            ..ElfSpec::extension("m").for_arch(machine, is_64, little_endian, 0)
        };
        let facts = ElfFacts::parse(&spec.build()).unwrap();
        assert_eq!((facts.machine, facts.is_64, facts.little_endian), (machine, is_64, little_endian));
        assert_eq!(facts.needed, ["libc.so.6"], "machine {machine}");
        assert_eq!(version_needs(&facts), [("libc.so.6".to_string(), set(&["GLIBC_2.0"]))], "machine {machine}");
        assert_eq!(facts.init_functions, ["PyInit_m"], "machine {machine}");
    }
}

#[test]
fn a_file_that_is_not_elf_or_is_cut_short_is_an_error_not_a_panic() {
    assert!(ElfFacts::parse(b"MZ not an ELF file").is_err());
    let whole = library().build();
    for len in [4, 16, 63, 64, 200, whole.len() / 2] {
        // Whatever the cut, an answer: facts (the cut missed what is read) or an error.
        let _ = ElfFacts::parse(&whole[..len]);
    }
    assert!(ElfFacts::parse(&whole[..16]).is_err());
}

#[test]
fn a_patch_says_what_was_asked_and_keeps_the_rest() {
    let before = library().build();
    let edit = ElfEdit {
        soname: Some("libdemo-0a1b2c3d.so.1".into()),
        replace_needed: [("libm.so.6".to_string(), "libm-0123abcd.so.6".to_string())].into(),
        remove_needed: ["libfoo.so.1".to_string()].into(),
        rpath: RpathEdit::Set("$ORIGIN/../demo.libs".into()),
    };
    let patched = InProcessPatcher.patch(&before, &edit).unwrap();
    let (old, new) = (ElfFacts::parse(&before).unwrap(), ElfFacts::parse(&patched).unwrap());
    assert_eq!(new.soname.as_deref(), Some("libdemo-0a1b2c3d.so.1"));
    assert_eq!(new.needed, ["libc.so.6", "libm-0123abcd.so.6"]);
    assert_eq!(new.rpath, ["$ORIGIN/../demo.libs"]);
    // The version needs follow the renamed library: a need naming a library that is not loaded
    // makes glibc refuse the file.
    assert_eq!(
        version_needs(&new),
        [
            ("libc.so.6".to_string(), set(&["GLIBC_2.2.5", "GLIBC_2.27"])),
            ("libm-0123abcd.so.6".to_string(), set(&["GLIBC_2.29"]))
        ]
    );
    assert_eq!((new.machine, new.is_64, &new.init_functions), (old.machine, old.is_64, &old.init_functions));
    // Removing the RPATH leaves no search path; an empty edit asks for nothing.
    let removed =
        InProcessPatcher.patch(&patched, &ElfEdit { rpath: RpathEdit::Remove, ..Default::default() }).unwrap();
    let removed = ElfFacts::parse(&removed).unwrap();
    assert!(removed.rpath.is_empty() && removed.runpath.is_empty(), "{removed:?}");
    assert_eq!(removed.needed, new.needed);
    assert!(ElfEdit::default().is_empty() && !edit.is_empty());
}

#[test]
fn a_patch_of_what_is_not_elf_is_refused() {
    let edit = ElfEdit { soname: Some("x.so".into()), ..Default::default() };
    assert!(matches!(InProcessPatcher.patch(b"not an ELF file at all", &edit), Err(PatchError::Read(_))));
}
