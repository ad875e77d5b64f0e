//! Bad input: a one-line error naming the wheel (and member), exit 1, no output, input untouched.

use crate::support;

use std::path::{Path, PathBuf};

use support::elfgen::ElfSpec;
use support::wheelgen::{WheelSpec, write_zip};
use support::{stderr, wheelfix};

/// Run `retag -w out` on `wheel` and check the failure contract; returns stderr.
fn retag_fails(dir: &Path, wheel: &Path) -> String {
    let before = std::fs::read(wheel).unwrap();
    let out = wheelfix(dir, &["retag", "-w", "out", wheel.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let name = wheel.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name), "the error names the wheel: {err}");
    assert_eq!(std::fs::read(wheel).unwrap(), before, "input untouched");
    let leftovers: Vec<PathBuf> =
        std::fs::read_dir(dir.join("out")).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    assert!(leftovers.is_empty(), "no output and no temporary file: {leftovers:?}");
    // show fails the same way.
    let out = wheelfix(dir, &["show", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    err
}

fn good_wheel(dir: &Path, name: &str) -> WheelSpec {
    let _ = dir;
    WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64")
        .file(&format!("{name}.so"), ElfSpec::extension(name).build())
}

/// Write `members` as a zip whose names are then patched byte for byte (`from` → `to`, same
/// length), to make archives the zip writer refuses to produce.
fn patched_zip(path: &Path, members: &[(String, Vec<u8>)], from: &str, to: &str) {
    write_zip(path, members);
    let bytes = std::fs::read(path).unwrap();
    let (from, to) = (from.as_bytes(), to.as_bytes());
    assert_eq!(from.len(), to.len());
    let mut out = bytes.clone();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &bytes[i..i + from.len()] == from {
            out[i..i + to.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn not_a_zip() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = dir.path().join("junk-1.0-py3-none-any.whl");
    std::fs::write(&wheel, b"this is not a zip file at all, just text").unwrap();
    assert!(retag_fails(dir.path(), &wheel).contains("not a zip archive"));
}

#[test]
fn truncated_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = good_wheel(dir.path(), "trunc").write(dir.path());
    let bytes = std::fs::read(&wheel).unwrap();
    std::fs::write(&wheel, &bytes[..bytes.len() / 2]).unwrap();
    retag_fails(dir.path(), &wheel);
}

#[test]
fn names_that_are_not_wheel_names() {
    let dir = tempfile::tempdir().unwrap();
    let built = good_wheel(dir.path(), "named").write(dir.path());
    let zip = dir.path().join("named-1.0.zip");
    std::fs::copy(&built, &zip).unwrap();
    assert!(retag_fails(dir.path(), &zip).contains("does not end in `.whl`"));
    let odd = dir.path().join("named.whl");
    std::fs::copy(&built, &odd).unwrap();
    assert!(retag_fails(dir.path(), &odd).contains("not a valid wheel file name"));
}

#[test]
fn dist_info_problems() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("nodist-1.0-py3-none-any.whl");
    write_zip(&none, &[("nodist/__init__.py".into(), b"".to_vec())]);
    assert!(retag_fails(dir.path(), &none).contains("no `.dist-info`"));

    let mut members = good_wheel(dir.path(), "two").members();
    members.push(("other-2.0.dist-info/METADATA".into(), b"Name: other\n".to_vec()));
    let two = dir.path().join("two-1.0-cp312-cp312-linux_x86_64.whl");
    write_zip(&two, &members);
    assert!(retag_fails(dir.path(), &two).contains("two `.dist-info` directories"));

    for missing in ["WHEEL", "RECORD"] {
        let members: Vec<_> =
            good_wheel(dir.path(), "miss").members().into_iter().filter(|(n, _)| !n.ends_with(missing)).collect();
        let path = dir.path().join("miss-1.0-cp312-cp312-linux_x86_64.whl");
        write_zip(&path, &members);
        let err = retag_fails(dir.path(), &path);
        assert!(err.contains(&format!("missing `miss-1.0.dist-info/{missing}`")), "{err}");
    }
}

#[test]
fn unsafe_and_duplicate_member_names() {
    let dir = tempfile::tempdir().unwrap();
    let spec = good_wheel(dir.path(), "evil").file("zz/x.py", "1").file("evil/y.py", "2");
    let cases = [
        ("zz/x.py", "../x.py", "unsafe path"),
        ("zz/x.py", "/zz/x.p", "unsafe path"),
        ("evil/y.py", "zz/x.py\0\0", ""),
    ];
    for (i, (from, to, expect)) in cases.iter().enumerate() {
        if expect.is_empty() {
            continue;
        }
        let path = dir.path().join(format!("evil-{i}-cp312-cp312-linux_x86_64.whl"));
        patched_zip(&path, &spec.members(), from, to);
        let err = retag_fails(dir.path(), &path);
        assert!(err.contains(expect), "{err}");
    }
    // Two members with one name.
    let spec = good_wheel(dir.path(), "dup").file("dup/a.py", "1").file("dup/b.py", "2");
    let path = dir.path().join("dup-1.0-cp312-cp312-linux_x86_64.whl");
    patched_zip(&path, &spec.members(), "dup/b.py", "dup/a.py");
    let err = retag_fails(dir.path(), &path);
    assert!(err.contains("member `dup/a.py` appears twice"), "{err}");
}

#[test]
fn hostile_elf_headers_fail_the_wheel_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = ElfSpec::extension("h").build();
    let mut huge_sections = good.clone();
    huge_sections[60..62].copy_from_slice(&0xffffu16.to_le_bytes()); // e_shnum
    let mut far_sections = good.clone();
    far_sections[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes()); // e_shoff
    let mut far_program = good.clone();
    far_program[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes()); // e_phoff
    let mut huge_program = good.clone();
    huge_program[56..58].copy_from_slice(&0xffffu16.to_le_bytes()); // e_phnum
    let truncated = good[..good.len() / 2].to_vec();
    let stub = b"\x7fELF\x02\x01\x01".to_vec();
    for (i, bytes) in [huge_sections, far_sections, far_program, huge_program, truncated, stub].into_iter().enumerate()
    {
        let spec = WheelSpec::new(&format!("hostile{i}"), "1.0", "cp312-cp312-linux_x86_64").file("pkg/h.so", bytes);
        let path = spec.write(dir.path());
        eprintln!("case {i}");
        let err = retag_fails(dir.path(), &path);
        assert!(err.contains("member `pkg/h.so`"), "case {i}: {err}");
    }
}

#[test]
fn one_bad_wheel_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_wheel(dir.path(), "fine").write(dir.path());
    let bad = dir.path().join("broken-1.0-py3-none-any.whl");
    std::fs::write(&bad, b"nope").unwrap();
    let out = wheelfix(dir.path(), &["retag", "-w", "out", bad.to_str().unwrap(), good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(dir.path().join("out/fine-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl").exists());
    assert!(stderr(&out).contains("1 of 2 wheels failed"), "{}", stderr(&out));

    let out = wheelfix(dir.path(), &["show", "--json", bad.to_str().unwrap(), good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let reports = support::show_reports(&out);
    assert!(reports[0].error.as_deref().unwrap().contains("broken-1.0-py3-none-any.whl"));
    assert_eq!(reports[1].platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
}

#[test]
fn usage_errors_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(wheelfix(dir.path(), &["show"]).status.code(), Some(2));
    assert_eq!(wheelfix(dir.path(), &["retag", "--bogus", "x.whl"]).status.code(), Some(2));
    assert_eq!(wheelfix(dir.path(), &["retag", "--in-place", "-w", "d", "x.whl"]).status.code(), Some(2));
    let out = wheelfix(dir.path(), &["show", "--exclude", "[", "x.whl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid --exclude pattern `[`"));
    let out = wheelfix(dir.path(), &["show", "--policy-file", "/nonexistent.json", "x.whl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent.json"));
}

#[test]
fn a_missing_input_file_is_a_failed_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let out = wheelfix(dir.path(), &["show", "gone-1.0-py3-none-any.whl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("gone-1.0-py3-none-any.whl: cannot open"), "{}", stderr(&out));
}
