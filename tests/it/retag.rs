//! `wheelfix retag`: true tags written, checked by independent readers (Python's zipfile and
//! pip), deterministic bytes, atomic in-place replacement.

use crate::support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::ElfSpec;
use support::python::{cc_extension, pip_install_and_run, python_tag, run, system_python};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};
use wheelfix::report::outcome::RetagEntry;

/// Verify a wheel with Python's zipfile: every RECORD row's hash and size, every member listed.
/// Returns the WHEEL file's text.
fn python_verify(wheel: &Path) -> String {
    let script = r#"
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
names = [n for n in z.namelist() if not n.endswith('/')]
record = [n for n in names if n.endswith('.dist-info/RECORD')]
assert len(record) == 1, record
rows = list(csv.reader(io.StringIO(z.read(record[0]).decode())))
listed = {r[0] for r in rows}
for n in names:
    assert n in listed or n.endswith(('RECORD.jws', 'RECORD.p7s')), f'{n} not in RECORD'
for path, h, size in rows:
    if not h:
        continue
    data = z.read(path)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    assert h == 'sha256=' + digest, f'hash of {path}'
    assert int(size) == len(data), f'size of {path}'
print(z.read([n for n in names if n.endswith('.dist-info/WHEEL')][0]).decode(), end='')
"#;
    run(Command::new(system_python()).args(["-c", script]).arg(wheel))
}

fn ext_wheel(name: &str, tag: &str, spec: ElfSpec) -> WheelSpec {
    WheelSpec::new(name, "1.0", tag)
        .file(&format!("{name}/_core.so"), spec.build())
        .file(&format!("{name}/__init__.py"), "")
}

fn retag(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["retag"];
    all.extend_from_slice(args);
    wheelfix(dir, &all)
}

fn only_wheel(dir: &Path) -> PathBuf {
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels.pop().unwrap()
}

#[test]
fn retag_writes_the_true_tag_with_alias_and_a_valid_record() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ElfSpec::extension("_core").needs_version("f", "libc.so.6", "GLIBC_2.17");
    let wheel = ext_wheel("pkg", "cp312-cp312-linux_x86_64", spec).write(dir.path());
    let out = retag(dir.path(), &["-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = dir.path().join("out/pkg-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl");
    assert!(stdout(&out).contains(written.file_name().unwrap().to_str().unwrap()));
    let wheel_file = python_verify(&written);
    assert!(
        wheel_file.contains("Tag: cp312-cp312-manylinux2014_x86_64\nTag: cp312-cp312-manylinux_2_17_x86_64\n"),
        "{wheel_file}"
    );
    assert!(!wheel_file.contains("linux_x86_64\n") || wheel_file.contains("manylinux"), "linux tag removed");
    assert!(!wheel_file.contains("Tag: cp312-cp312-linux_x86_64"));
}

#[test]
fn honoured_claims_are_kept_and_dishonest_ones_dropped() {
    let dir = tempfile::tempdir().unwrap();
    // Built for manylinux_2_28, meets manylinux_2_27: keeps both (as auditwheel does).
    let spec = ElfSpec::extension("_core").needs_version("f", "libc.so.6", "GLIBC_2.27");
    let wheel = ext_wheel("keep", "cp312-cp312-manylinux_2_28_x86_64", spec).write(dir.path());
    assert!(retag(dir.path(), &["-w", "a", wheel.to_str().unwrap()]).status.success());
    assert_eq!(
        only_wheel(&dir.path().join("a")).file_name().unwrap(),
        "keep-1.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    );
    // Claims manylinux2014 but needs GLIBCXX_3.4.21 (cupy-rocm's case): the claim is dropped.
    let spec = ElfSpec::extension("_core").needs_version("g", "libstdc++.so.6", "GLIBCXX_3.4.21");
    let mut w = ext_wheel("liar", "cp312-cp312-manylinux2014_x86_64", spec);
    w.wheel_tags = Some(vec!["cp312-cp312-linux_x86_64".into()]);
    let wheel = w.write(dir.path());
    assert!(retag(dir.path(), &["-w", "b", wheel.to_str().unwrap()]).status.success());
    let written = only_wheel(&dir.path().join("b"));
    assert_eq!(written.file_name().unwrap(), "liar-1.0-cp312-cp312-manylinux_2_24_x86_64.whl");
    let wheel_file = python_verify(&written);
    assert!(
        wheel_file.contains("Tag: cp312-cp312-manylinux_2_24_x86_64\n") && !wheel_file.contains("linux_x86_64\nTag")
    );
}

#[test]
fn plat_requests_and_only_plat() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ElfSpec::extension("_core").needs_version("f", "libc.so.6", "GLIBC_2.17");
    let wheel = ext_wheel("req", "cp312-cp312-linux_x86_64", spec).write(dir.path());
    let w = wheel.to_str().unwrap();
    assert!(retag(dir.path(), &["-w", "a", "--plat", "manylinux_2_28_x86_64", w]).status.success());
    assert_eq!(
        only_wheel(&dir.path().join("a")).file_name().unwrap(),
        "req-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"
    );
    assert!(retag(dir.path(), &["-w", "b", "--plat", "manylinux_2_28_x86_64", "--only-plat", w]).status.success());
    assert_eq!(only_wheel(&dir.path().join("b")).file_name().unwrap(), "req-1.0-cp312-cp312-manylinux_2_28_x86_64.whl");

    let out = retag(dir.path(), &["-w", "c", "--plat", "manylinux2010_x86_64", w]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("does not meet manylinux2010_x86_64: `req/_core.so` needs GLIBC_2.17"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("c").exists() || std::fs::read_dir(dir.path().join("c")).unwrap().next().is_none());

    let out = retag(dir.path(), &["-w", "d", "--plat", "manylinux_2_17_aarch64", w]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not a tag of the x86_64 manylinux policies"), "{}", stderr(&out));
}

#[test]
fn retag_is_deterministic_and_honours_source_date_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = ext_wheel("det", "cp312-cp312-linux_x86_64", ElfSpec::extension("_core")).write(dir.path());
    let w = wheel.to_str().unwrap();
    assert!(retag(dir.path(), &["-w", "a", w]).status.success());
    assert!(retag(dir.path(), &["-w", "b", w]).status.success());
    let (a, b) = (only_wheel(&dir.path().join("a")), only_wheel(&dir.path().join("b")));
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "same input, same bytes");

    let run_with_epoch = |out: &str, epoch: &str| {
        let status = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
            .args(["retag", "-w", out, w])
            .current_dir(dir.path())
            .env("SOURCE_DATE_EPOCH", epoch)
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::read(only_wheel(&dir.path().join(out))).unwrap()
    };
    let c = run_with_epoch("c", "1700000000");
    let d = run_with_epoch("d", "1700000000");
    assert_eq!(c, d);
    assert_ne!(c, std::fs::read(&a).unwrap(), "SOURCE_DATE_EPOCH sets the time of rewritten members");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(c)).unwrap();
    let member = zip.by_name("det-1.0.dist-info/WHEEL").unwrap();
    let t = member.last_modified().unwrap();
    assert_eq!((t.year(), t.month(), t.day()), (2023, 11, 14));

    // Retagging the output again changes nothing.
    assert!(retag(dir.path(), &["-w", "e", a.to_str().unwrap()]).status.success());
    assert_eq!(std::fs::read(only_wheel(&dir.path().join("e"))).unwrap(), std::fs::read(&a).unwrap());
}

#[test]
fn unchanged_members_are_copied_as_compressed_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
    let wheel = ext_wheel("raw", "cp312-cp312-linux_x86_64", ElfSpec::extension("_core"))
        .file("raw/data.bin", big)
        .write(dir.path());
    assert!(retag(dir.path(), &["-w", "out", wheel.to_str().unwrap()]).status.success());
    let raw_bytes = |path: &Path, name: &str| {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
        let mut file = zip.by_name_raw(name.as_bytes()).unwrap();
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).unwrap();
        buf
    };
    let out = only_wheel(&dir.path().join("out"));
    for name in ["raw/data.bin", "raw/_core.so", "raw-1.0.dist-info/METADATA"] {
        assert_eq!(raw_bytes(&wheel, name), raw_bytes(&out, name), "{name}");
    }
}

#[test]
fn in_place_replaces_the_input_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = ext_wheel("inplace", "cp312-cp312-linux_x86_64", ElfSpec::extension("_core")).write(dir.path());
    let out = retag(dir.path(), &["--in-place", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!wheel.exists(), "the old name is gone");
    let new = dir.path().join("inplace-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
    python_verify(&new);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary files: {leftovers:?}");
    // Already true: nothing to do, the file is left as it is.
    let before = std::fs::read(&new).unwrap();
    let out = retag(dir.path(), &["--in-place", new.to_str().unwrap()]);
    assert!(stdout(&out).contains("tags already true"));
    assert_eq!(std::fs::read(&new).unwrap(), before);
}

#[test]
fn refuses_to_overwrite_the_input_without_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = ext_wheel("same", "cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64", ElfSpec::extension("_core"))
        .write(dir.path());
    let before = std::fs::read(&wheel).unwrap();
    let out = retag(dir.path(), &["-w", ".", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("use --in-place"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&wheel).unwrap(), before);
}

#[test]
fn platform_wheel_marked_purelib_is_corrected() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ext_wheel("pl", "py3-none-manylinux_2_27_x86_64", ElfSpec::extension("_core"));
    spec.purelib = true;
    let wheel = spec.write(dir.path());
    assert!(retag(dir.path(), &["-w", "out", wheel.to_str().unwrap()]).status.success());
    let text = python_verify(&only_wheel(&dir.path().join("out")));
    assert!(text.contains("Root-Is-Purelib: false"), "{text}");
}

#[test]
fn pure_wheels_keep_their_tags() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = WheelSpec::new("purely", "1.0", "py3-none-any").file("purely/__init__.py", "").write(dir.path());
    let out = retag(dir.path(), &["-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = only_wheel(&dir.path().join("out"));
    assert_eq!(written.file_name().unwrap(), "purely-1.0-py3-none-any.whl");
    assert_eq!(std::fs::read(&written).unwrap(), std::fs::read(&wheel).unwrap(), "a pure wheel is copied as it is");
    python_verify(&written);
}

#[test]
fn a_retagged_real_extension_installs_with_pip_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let (so, file) = cc_extension(dir.path(), "realmod", "", &[]);
    let py = python_tag();
    let wheel = WheelSpec::new("realmod", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file(&file, std::fs::read(so).unwrap())
        .write(dir.path());
    let out = retag(dir.path(), &["--json", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Vec<RetagEntry> = support::entries(&out, &[]);
    let tag = result[0].platform_tag.clone().unwrap();
    assert!(tag.starts_with("manylinux_2_"), "{tag}");
    let written = only_wheel(&dir.path().join("out"));
    assert!(written.to_str().unwrap().contains(&tag));
    let printed = pip_install_and_run(dir.path(), &written, "import realmod; print(realmod.answer())");
    assert_eq!(printed.trim(), "42");
}

/// A wheel of more than 64 MiB (stored: writing it is quick), a `.data` directory among its
/// members.
fn large_wheel(dir: &Path) -> PathBuf {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let blob: Vec<u8> = (0..(66 << 20) / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    ext_wheel("large", "cp312-cp312-linux_x86_64", ElfSpec::extension("_core"))
        .file("large/blob.bin", blob)
        .file("large-1.0.data/scripts/tool", "#!/bin/sh\n")
        .file("large/after.txt", "after the data directory\n")
        .write_stored(dir)
}

#[test]
fn a_large_wheel_is_written_on_from_the_members_copied_during_its_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = large_wheel(&d.join("in"));
    for extra in [&[][..], &["--rocm-version", "7.1.0"][..]] {
        let (ahead, in_place) = (d.join("ahead"), d.join("in-place"));
        let _ = (std::fs::remove_dir_all(&ahead), std::fs::remove_dir_all(&in_place));
        let mut args = vec!["-v", "-w", ahead.to_str().unwrap(), wheel.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = retag(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        // The members before the `.data` directory were copied while the wheel was analysed.
        assert!(stderr(&out).contains("3 member(s) were copied ahead"), "{}", stderr(&out));
        let written = only_wheel(&ahead);
        python_verify(&written);
        // In place nothing is copied ahead: the same bytes come out.
        std::fs::create_dir_all(&in_place).unwrap();
        let copy = in_place.join(wheel.file_name().unwrap());
        std::fs::copy(&wheel, &copy).unwrap();
        let mut args = vec!["-v", "--in-place", copy.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = retag(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!stderr(&out).contains("copied ahead"), "{}", stderr(&out));
        let rewritten = only_wheel(&in_place);
        assert_eq!(written.file_name(), rewritten.file_name());
        assert!(std::fs::read(&written).unwrap() == std::fs::read(&rewritten).unwrap(), "{extra:?}: other bytes");
        if !extra.is_empty() {
            assert!(written.to_str().unwrap().contains("+rocm7.1.0"), "{}", written.display());
        }
    }
}

#[test]
fn copies_made_ahead_for_a_wheel_that_needs_no_rewrite_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = large_wheel(&d.join("in"));
    // Retagged once, the wheel is true: a second run copies it byte for byte, and the copy made
    // during its analysis goes.
    assert!(retag(d, &["-w", "once", wheel.to_str().unwrap()]).status.success());
    let once = only_wheel(&d.join("once"));
    let out = retag(d, &["-v", "-w", "twice", once.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("copied ahead of the analysis"), "{}", stderr(&out));
    let twice = only_wheel(&d.join("twice"));
    assert!(std::fs::read(&twice).unwrap() == std::fs::read(&once).unwrap());
}

#[test]
fn a_claim_lowered_to_linux_says_which_library_forced_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = ElfSpec::extension("_core").needs("libwheelfix_nowhere.so.3");
    let mut w = ext_wheel("lowered", "cp312-cp312-manylinux_2_28_x86_64", spec);
    w.wheel_tags = Some(vec!["cp312-cp312-manylinux_2_28_x86_64".into()]);
    let wheel = w.write(d);
    let out = retag(d, &["-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(only_wheel(&d.join("out")).to_str().unwrap().ends_with("-linux_x86_64.whl"));
    let said = stderr(&out);
    assert!(
        said.contains("written as linux_x86_64: it claimed manylinux_2_28_x86_64, but it needs the external library libwheelfix_nowhere.so.3"),
        "{said}"
    );
    let json = retag(d, &["--json", "-w", "out2", wheel.to_str().unwrap()]);
    let entry: Vec<RetagEntry> = support::entries(&json, &[]);
    assert!(entry[0].lowered.as_deref().unwrap().starts_with("manylinux_2_28_x86_64, but it needs"), "{entry:?}");
    // The release page calls the lowered tag measured, and says what keeps it from the next.
    let out = wheelfix(d, &["index", "-o", "site", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = support::release_page(&d.join("site/release.json"));
    let file = &page.files[0];
    assert_eq!((file.tag.as_deref(), file.basis.as_deref()), (Some("linux_x86_64"), Some("measured")), "{page:#?}");
    let note = &file.tag_note;
    assert!(note.contains("meet no more compatible tag") && note.contains("libwheelfix_nowhere.so.3"), "{note}");
    // A wheel whose tag stays says nothing of it.
    let kept = ext_wheel("kept", "cp312-cp312-linux_x86_64", ElfSpec::extension("_core")).write(d);
    let out = retag(d, &["-w", "out3", kept.to_str().unwrap()]);
    assert!(!stderr(&out).contains("written as"), "{}", stderr(&out));
}

#[test]
fn a_project_name_of_206_bytes_is_retagged_indexed_and_installed() {
    // PEP 508 sets no length; the limit that exists is the file name's (255 bytes).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let name = format!("long_{}", "n".repeat(201));
    assert_eq!(name.len(), 206);
    let so = ElfSpec::extension("_k").build();
    let wheel = WheelSpec::new(&name, "1.0", "py3-none-linux_x86_64")
        .file(&format!("{name}/__init__.py"), "")
        .file(&format!("{name}/_k.so"), so)
        .write(&d.join("in"));
    let out = wheelfix(d, &["show", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Its true tags make a 262-byte file name: refused for that reason, nothing written.
    let out = wheelfix(d, &["retag", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its file name is 262 bytes, more than the 255 a file name may have"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(d.join("out")).map(|r| r.count()).unwrap_or(0), 0);
    // One tag without an alias (`--plat`, `--only-plat`): 244 bytes, written, verified,
    // indexed, installed.
    let out =
        wheelfix(d, &["retag", "--plat", "manylinux_2_28_x86_64", "--only-plat", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<PathBuf> = std::fs::read_dir(d.join("out")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(written.len(), 1);
    let file_name = written[0].file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(file_name, format!("{name}-1.0-py3-none-manylinux_2_28_x86_64.whl"));
    python_verify(&written[0]);
    let out = wheelfix(d, &["index", "-o", "site", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(d.join("site").join(name.replace('_', "-")).join("index.html").is_file());
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target"])
        .arg(d.join("target"))
        .arg(&written[0]));
    assert!(d.join("target").join(&name).join("_k.so").is_file());
}
