//! Trust: no command loses a file, refuses a wheel pip installs, or misreports what a wheel
//! holds. Inputs are compared byte for byte (and by inode and mtime) after every run; killed,
//! interrupted and failing runs leave nothing behind; outputs get `0666 & ~umask`.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::elfgen::ElfSpec;
use support::python::assert_true_record;
use support::wheelgen::{WheelSpec, write_zip};
use support::{show_report, stderr, stdout, wheelfix};

fn ext_wheel(name: &str, tag: &str) -> WheelSpec {
    WheelSpec::new(name, "1.0", tag)
        .file(&format!("{name}/_core.so"), ElfSpec::extension("_core").build())
        .file(&format!("{name}/__init__.py"), "")
}

/// Bytes, inode and mtime of a file: what must not change for an input.
fn fingerprint(path: &Path) -> (Vec<u8>, u64, i64, i64) {
    let meta = std::fs::metadata(path).unwrap();
    (std::fs::read(path).unwrap(), meta.ino(), meta.mtime(), meta.mtime_nsec())
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn no_part_files(dir: &Path) {
    let parts: Vec<String> = files_in(dir).into_iter().filter(|n| n.contains(".wheelfix-")).collect();
    assert!(parts.is_empty(), "temporary files left in {}: {parts:?}", dir.display());
}

/// Run the binary through `sh` with a umask.
fn with_umask(dir: &Path, umask: &str, args: &[&str]) -> std::process::Output {
    let mut script = format!("umask {umask}; exec \"$0\"");
    for i in 0..args.len() {
        script.push_str(&format!(" \"${}\"", i + 1));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .args(args)
        .current_dir(dir)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn index_never_touches_its_inputs_and_refuses_overlapping_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let house = d.join("wheelhouse");
    let wheels = [
        ext_wheel("alpha", "cp312-cp312-manylinux_2_17_x86_64").write(&house),
        ext_wheel("beta", "cp312-cp312-manylinux_2_17_x86_64").write(&house),
    ];
    let before: Vec<_> = wheels.iter().map(|w| fingerprint(w)).collect();
    let cases: [&[&str]; 4] = [
        &["index", "-o", "wheelhouse", "--base-url", "https://example.org/dl/", "wheelhouse"],
        &["index", "-o", "wheelhouse", "wheelhouse"],
        &["index", "-o", "wheelhouse/site", "wheelhouse"],
        &["index", "-o", ".", "wheelhouse"],
    ];
    for args in cases {
        let out = wheelfix(d, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("index never moves, replaces or deletes its inputs"), "{}", stderr(&out));
        for (w, b) in wheels.iter().zip(&before) {
            assert_eq!(&fingerprint(w), b, "{args:?}: {} changed", w.display());
        }
        assert_eq!(files_in(&house).len(), 2, "{args:?}");
    }
    // A separate site: the inputs stay where and what they are, and a rerun replaces the site.
    for base in [None, Some("https://example.org/dl/")] {
        let mut args = vec!["index", "-o", "site"];
        if let Some(b) = base {
            args.extend(["--base-url", b]);
        }
        args.push("wheelhouse");
        for _ in 0..2 {
            let out = wheelfix(d, &args);
            assert!(out.status.success(), "{}", stderr(&out));
            for (w, b) in wheels.iter().zip(&before) {
                let now = fingerprint(w);
                assert_eq!((&now.0, now.1, now.2, now.3), (&b.0, b.1, b.2, b.3), "{}", w.display());
            }
        }
        no_part_files(d);
    }
    // A directory the command did not write is never replaced.
    std::fs::create_dir_all(d.join("mine")).unwrap();
    std::fs::write(d.join("mine/notes.txt"), "keep me").unwrap();
    let out = wheelfix(d, &["index", "-o", "mine", "wheelhouse"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("was not written by wheelfix"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(d.join("mine/notes.txt")).unwrap(), "keep me");
    no_part_files(d);
}

#[test]
fn outputs_that_collide_fail_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Both are `manylinux_2_5` wheels in truth: their outputs have one name.
    let a = ext_wheel("same", "cp312-cp312-linux_x86_64").write(&d.join("a"));
    let b = ext_wheel("same", "cp312-cp312-manylinux_2_5_x86_64").write(&d.join("b"));
    let (fa, fb) = (fingerprint(&a), fingerprint(&b));
    let out = wheelfix(d, &["retag", "-w", "out", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.matches("2 wheels of this run would be written to").count(), 2, "{err}");
    assert!(err.contains(a.to_str().unwrap()) && err.contains(b.to_str().unwrap()), "{err}");
    assert!(files_in(&d.join("out")).is_empty());
    // In place: both inputs stay.
    std::fs::copy(&b, d.join("a").join(b.file_name().unwrap())).unwrap();
    let b2 = d.join("a").join(b.file_name().unwrap());
    let out = wheelfix(d, &["retag", "--in-place", a.to_str().unwrap(), b2.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(fingerprint(&a), fa);
    assert_eq!(fingerprint(&b2).0, fb.0);
    assert_eq!(files_in(&d.join("a")).len(), 2);
}

#[test]
fn in_place_never_replaces_a_file_that_is_not_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = ext_wheel("victim", "cp312-cp312-linux_x86_64").write(d);
    let other = d.join("victim-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
    std::fs::write(&other, b"a different wheel that happens to have the new name").unwrap();
    let (fi, fo) = (fingerprint(&input), fingerprint(&other));
    let out = wheelfix(d, &["retag", "--in-place", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already exists and is not this wheel's input"), "{}", stderr(&out));
    assert_eq!(fingerprint(&input), fi);
    assert_eq!(fingerprint(&other), fo);
    no_part_files(d);
}

#[test]
fn reruns_into_one_wheelhouse_replace_the_earlier_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = ext_wheel("rerun", "cp312-cp312-linux_x86_64").write(d);
    for _ in 0..2 {
        let out = wheelfix(d, &["retag", "-w", "house", input.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(files_in(&d.join("house")), ["rerun-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl"]);
}

#[test]
fn a_true_wheel_is_left_alone_in_place_and_copied_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Tag order is not a change.
    let input = ext_wheel("calm", "cp312-cp312-manylinux_2_5_x86_64.manylinux1_x86_64").write(d);
    let before = fingerprint(&input);
    std::thread::sleep(Duration::from_millis(20));
    let out = wheelfix(d, &["retag", "--in-place", input.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("already true"), "{}", stdout(&out));
    assert_eq!(fingerprint(&input), before, "same bytes, inode and mtime");
    assert_eq!(files_in(d).len(), 1);
    let out = wheelfix(d, &["retag", "-w", "copy", input.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let copy = d.join("copy").join(input.file_name().unwrap());
    assert_eq!(std::fs::read(&copy).unwrap(), before.0, "copied byte for byte");
}

#[test]
fn outputs_get_0666_minus_umask_and_in_place_keeps_the_input_mode() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = ext_wheel("moded", "cp312-cp312-linux_x86_64").write(d);
    for (umask, expect, dir_mode) in [("022", 0o644, 0o755), ("077", 0o600, 0o700), ("002", 0o664, 0o775)] {
        let out_dir = format!("out{umask}");
        let out = with_umask(d, umask, &["retag", "-w", &out_dir, input.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let written = d.join(&out_dir).join("moded-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
        assert_eq!(mode(&written), expect, "retag, umask {umask}");
        let site = format!("site{umask}");
        let out = with_umask(d, umask, &["index", "-o", &site, &out_dir]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(mode(&d.join(&site).join("index.html")), expect, "index page, umask {umask}");
        assert_eq!(mode(&d.join(&site)), dir_mode, "site dir, umask {umask}");
        assert_eq!(mode(&d.join(&site).join("moded")), dir_mode, "project dir, umask {umask}");
        let meta = format!("{site}/moded/moded-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl.metadata");
        assert_eq!(mode(&d.join(meta)), expect);
    }
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = with_umask(d, "077", &["retag", "--in-place", input.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = d.join("moded-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
    assert_eq!(mode(&written), 0o640, "--in-place keeps the input's mode");
}

/// A wheel of about `mb` MB: one extension and a stored member of incompressible bytes, so that
/// reading and writing take long enough to interrupt.
fn big_wheel(dir: &Path, name: &str, mb: usize) -> PathBuf {
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap();
    let spec = ext_wheel(name, "cp312-cp312-linux_x86_64");
    let path = dir.join(spec.file_name());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = vec![0u8; mb << 20];
    for chunk in data.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    let blob = format!("{name}/blob.bin");
    let mut members = spec.clone().file(&blob, data).members();
    // Stored, so that the test does not spend its time deflating.
    let file = std::fs::File::create(&path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    for (member, bytes) in members.drain(..) {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(bytes.len() > (1 << 31));
        zip.start_file(member.as_str(), options).unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// Start wheelfix, wait `after`, send `signal`; returns its exit status.
fn interrupt(dir: &Path, args: &[&str], after: Duration, signal: i32) -> std::process::ExitStatus {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
    child.wait().unwrap()
}

/// How long a run takes uninterrupted (it is then undone by `undo`), so that signals can be
/// sent at fractions of it: early (reading), late (writing), and in between.
/// The median of three runs: the first one also warms the page cache.
fn duration_of(dir: &Path, args: &[&str], undo: impl Fn()) -> Duration {
    let mut runs: Vec<Duration> = (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            let out = wheelfix(dir, args);
            assert!(out.status.success(), "{}", stderr(&out));
            let took = start.elapsed();
            undo();
            took
        })
        .collect();
    runs.sort();
    runs[1]
}

#[test]
fn killed_runs_lose_nothing_and_reruns_clean_up_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = big_wheel(&d.join("in"), "huge", 160);
    let before = std::fs::read(&input).unwrap();
    let new_name = "huge-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl";
    let restore = || {
        let renamed = d.join("in").join(new_name);
        if renamed.exists() {
            std::fs::remove_file(&renamed).unwrap();
            std::fs::write(&input, &before).unwrap();
        }
    };
    for (args, out_dir) in [
        (vec!["retag", "--in-place", input.to_str().unwrap()], d.join("in")),
        (vec!["repair", "-w", "repaired", input.to_str().unwrap()], d.join("repaired")),
    ] {
        let full = duration_of(d, &args, restore);
        let mut killed = 0;
        for fraction in [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97] {
            let status = interrupt(d, &args, full.mul_f64(fraction), 9);
            if status.success() {
                restore();
                continue;
            }
            if !input.exists() {
                // Killed after `--in-place` had finished its work (the new wheel renamed into place and
                // the old name removed) but before the process exited: the result must be complete.
                assert_true_record(&out_dir.join(new_name));
                restore();
                continue;
            }
            killed += 1;
            assert_eq!(std::fs::read(&input).unwrap(), before, "{args:?} killed at {fraction}: the input is intact");
            // The rerun succeeds and removes what the killed run left.
            let out = wheelfix(d, &args);
            assert!(out.status.success(), "{}", stderr(&out));
            no_part_files(&out_dir);
            assert_true_record(&out_dir.join(new_name));
            restore();
        }
        assert!(killed >= 3, "{args:?}: only {killed} of 11 runs were interrupted");
    }
}

#[test]
fn sigint_and_sigterm_remove_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = big_wheel(&d.join("in"), "intr", 160);
    let before = std::fs::read(&input).unwrap();
    let args = ["retag", "-w", "out", input.to_str().unwrap()];
    let full = duration_of(d, &args, || std::fs::remove_dir_all(d.join("out")).unwrap());
    for (signal, code) in [(2, 130), (15, 143)] {
        let mut interrupted = 0;
        for fraction in [0.2, 0.5, 0.8] {
            let status = interrupt(d, &args, full.mul_f64(fraction), signal);
            if status.success() {
                std::fs::remove_dir_all(d.join("out")).unwrap();
                continue; // faster than the signal on this run
            }
            interrupted += 1;
            assert_eq!(status.code(), Some(code), "signal {signal} at {fraction}");
            no_part_files(&d.join("out"));
            assert_eq!(std::fs::read(&input).unwrap(), before);
        }
        assert!(interrupted >= 2, "signal {signal}: only {interrupted} of 3 runs were interrupted");
    }
}

#[test]
fn an_input_truncated_while_it_is_read_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = big_wheel(&d.join("in"), "shrink", 160);
    let before = std::fs::read(&input).unwrap();
    let args = ["retag", "-w", "out", input.to_str().unwrap()];
    let full = duration_of(d, &args, || std::fs::remove_dir_all(d.join("out")).unwrap());
    // Early: while members are read and hashed; late: while they are copied into the output.
    let mut truncated = 0;
    for fraction in [0.1, 0.3, 0.6, 0.85] {
        std::fs::write(&input, &before).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
            .args(args)
            .current_dir(d)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(full.mul_f64(fraction));
        std::fs::OpenOptions::new().write(true).open(&input).unwrap().set_len(1 << 20).unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            // It had read everything before the truncation (a busy machine's timing).
            std::fs::remove_dir_all(d.join("out")).unwrap();
            continue;
        }
        truncated += 1;
        assert_eq!(out.status.code(), Some(1), "at {fraction}, no SIGBUS, a clean failure: {err}");
        assert!(err.contains("shrink-1.0-cp312-cp312-linux_x86_64.whl"), "the error names the wheel: {err}");
        assert!(!err.contains("panicked"), "{err}");
        no_part_files(&d.join("out"));
    }
    assert!(truncated >= 2, "only {truncated} of 4 runs saw the truncation");
}

#[test]
fn two_in_place_runs_on_one_file_both_succeed_or_the_loser_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for round in 0..4 {
        let input = big_wheel(&d.join(format!("r{round}")), "race", 8);
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_wheelfix"))
                .args(["retag", "--in-place", input.to_str().unwrap()])
                .current_dir(d)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        for out in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
            let err = String::from_utf8_lossy(&out.stderr);
            // The loser either finds its input replaced, or the other run holding it, or (when
            // the winner was done before it started) its input gone.
            assert!(
                out.status.success()
                    || err.contains("was replaced or removed while it was being processed")
                    || err.contains("another wheelfix run is rewriting")
                    || err.contains("cannot open: No such file"),
                "{err}"
            );
        }
        let left = files_in(&d.join(format!("r{round}")));
        assert_eq!(left, ["race-1.0-cp312-cp312-manylinux1_x86_64.manylinux_2_5_x86_64.whl"], "round {round}");
        assert_true_record(&d.join(format!("r{round}")).join(&left[0]));
    }
}

#[test]
fn a_full_disk_is_a_clean_error_without_library_noise() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = big_wheel(&d.join("in"), "full", 4);
    // A file-size limit makes writes fail as a full disk does (SIGXFSZ ignored, so write()
    // returns EFBIG).
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 512; exec \"$0\" retag -w out \"$1\"")
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .arg(&input)
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "one error line and the summary: {err}");
    assert!(
        lines[0].starts_with("wheelfix: error: ") && lines[0].contains("full-1.0-cp312-cp312-linux_x86_64.whl"),
        "{err}"
    );
    assert!(lines[0].contains("File too large") || lines[0].contains("No space"), "{err}");
    no_part_files(&d.join("out"));
}

/// A minimal PE file (`MZ`, the PE signature where `e_lfanew` points) and a 64-bit Mach-O.
fn pe_file() -> Vec<u8> {
    let mut pe = vec![0u8; 0x200];
    pe[..2].copy_from_slice(b"MZ");
    pe[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    pe[0x80..0x84].copy_from_slice(b"PE\0\0");
    pe[0x84..0x86].copy_from_slice(&0x8664u16.to_le_bytes());
    pe
}

fn macho_file() -> Vec<u8> {
    let mut m = vec![0u8; 0x100];
    m[..4].copy_from_slice(&[0xcf, 0xfa, 0xed, 0xfe]);
    m[4..8].copy_from_slice(&0x0100_000cu32.to_le_bytes()); // arm64
    m
}

#[test]
fn windows_and_macos_wheels_are_not_pure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        ("winpkg", "cp312-cp312-win_amd64", "winpkg/_core.pyd", pe_file(), "pe", "Windows wheel"),
        ("macpkg", "cp312-cp312-macosx_11_0_arm64", "macpkg/_core.so", macho_file(), "mach-o", "macOS wheel"),
    ];
    for (name, tag, member, bytes, format, why) in cases {
        let wheel = WheelSpec::new(name, "1.0", tag)
            .file(member, bytes.clone())
            .file(&format!("{name}/helper.dll"), bytes)
            .file(&format!("{name}/__init__.py"), "")
            .write(d);
        let report = show_report(d, &wheel, &[]);
        assert!(!report.pure, "{name}: {report:?}");
        let binaries = match format {
            "pe" => report.binaries.pe,
            _ => report.binaries.mach_o,
        };
        assert_eq!(binaries, 2, "{name}");
        assert!(report.unaudited.as_deref().unwrap().starts_with(why), "{name}: {report:?}");
        let out = wheelfix(d, &["show", wheel.to_str().unwrap()]);
        assert!(stdout(&out).contains(why) && !stdout(&out).contains("pure:"), "{}", stdout(&out));
        let out = wheelfix(d, &["retag", "-w", "out", wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            std::fs::read(d.join("out").join(wheel.file_name().unwrap())).unwrap(),
            std::fs::read(&wheel).unwrap()
        );
    }
}

#[test]
fn repair_refuses_a_wheel_no_policy_accepts_unless_linux_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = ElfSpec::extension("_core").needs_version("f", "libc.so.6", "GLIBC_2.43");
    let wheel =
        WheelSpec::new("newer", "1.0", "cp312-cp312-linux_x86_64").file("newer/_core.so", spec.build()).write(d);
    let out = wheelfix(d, &["repair", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no manylinux or musllinux policy accepts it") && err.contains("GLIBC_2.43"), "{err}");
    assert!(files_in(&d.join("out")).is_empty());
    let out = wheelfix(d, &["repair", "--plat", "linux_x86_64", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files_in(&d.join("out")), ["newer-1.0-cp312-cp312-linux_x86_64.whl"]);
}

/// A musl extension: musl's loader as interpreter, `libc.so` needed.
fn musl_extension() -> Vec<u8> {
    ElfSpec {
        interpreter: Some("/lib/ld-musl-x86_64.so.1".into()),
        needed: vec!["libc.so".into()],
        imports: vec![support::elfgen::Import::plain("malloc")],
        ..ElfSpec::extension("_core")
    }
    .build()
}

#[test]
fn musl_wheels_audited_on_a_glibc_host() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // libc.so is musl's C library, never searched for on this glibc host.
    let wheel = WheelSpec::new("muslpkg", "1.0", "cp312-cp312-linux_x86_64")
        .file("muslpkg/_core.so", musl_extension())
        .write(d);
    let report = show_report(d, &wheel, &[]);
    assert_eq!(report.platform_tag.as_deref(), Some("musllinux_1_2_x86_64"), "{report:?}");
    assert!(!report.external_libs.contains_key("libc.so"), "{report:?}");
    // A musllinux_1_1 claim cannot be disproved by symbol versions: it stays.
    let old = WheelSpec::new("oldmusl", "1.0", "cp312-cp312-musllinux_1_1_x86_64")
        .file("oldmusl/_core.so", musl_extension())
        .write(d);
    let report = show_report(d, &old, &[]);
    assert_eq!(report.platform_tag.as_deref(), Some("musllinux_1_1_x86_64"), "{report:?}");
    assert!(report.claims[0].honoured, "{report:?}");
    let before = fingerprint(&old);
    let out = wheelfix(d, &["retag", "--in-place", old.to_str().unwrap()]);
    assert!(out.status.success() && stdout(&out).contains("already true"), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(fingerprint(&old), before);
}

#[test]
fn a_claim_blocked_by_an_external_library_names_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // libfakenuma.so.1 lives outside the wheel and needs GLIBC_2.33; the wheel itself needs only
    // GLIBC_2.17. The claim fails because the library is external, not because of its versions.
    let libs = d.join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    let lib = ElfSpec { soname: Some("libfakenuma.so.1".into()), ..Default::default() }
        .needs_version("numa_helper", "libc.so.6", "GLIBC_2.33")
        .build();
    std::fs::write(libs.join("libfakenuma.so.1"), lib).unwrap();
    let ext =
        ElfSpec::extension("_core").needs_version("f", "libc.so.6", "GLIBC_2.17").needs("libfakenuma.so.1").build();
    let wheel =
        WheelSpec::new("plugin", "1.0", "cp312-cp312-manylinux_2_27_x86_64").file("plugin/_core.so", ext).write(d);
    let report = show_report(d, &wheel, &["--ldpaths", libs.to_str().unwrap()]);
    let reason = report.claims[0].reason.as_deref().unwrap();
    assert!(reason.contains("external library libfakenuma.so.1"), "{reason}");
    assert!(!reason.contains("GLIBC_2.33"), "{reason}");
}

#[test]
fn an_android_claim_that_is_kept_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let so = ElfSpec {
        needed: vec!["libc.so".into(), "libc++_shared.so".into()],
        imports: vec![support::elfgen::Import::plain("malloc")],
        ..ElfSpec::extension("spam")
    }
    .for_arch(183, true, true, 0)
    .build();
    let wheel = WheelSpec::new("spam", "0.1.0", "cp313-cp313-android_24_arm64_v8a").file("spam.so", so).write(d);
    let report = show_report(d, &wheel, &["--ldpaths", "/nonexistent"]);
    let reason = report.claims[0].reason.as_deref().unwrap();
    assert!(reason.contains("the tag stays"), "{reason}");
    assert_eq!(support::tag_texts(&report.retag_tags), ["android_24_arm64_v8a"]);
}

#[test]
fn check_reports_stale_records_and_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    let mut stale = ext_wheel("stale", "cp312-cp312-manylinux_2_17_x86_64");
    stale.unrecorded.push("stale/__init__.py".into());
    stale.write(&set);
    std::fs::write(set.join("broken-1.0-py3-none-any.whl"), b"not a zip").unwrap();
    let members = ext_wheel("norec", "cp312-cp312-manylinux_2_17_x86_64").members();
    write_zip(&set.join("norec-1.0-cp312-cp312-manylinux_2_17_x86_64.whl"), &members[..members.len() - 1]);
    let out = wheelfix(d, &["check", "--json", "set"]);
    assert_eq!(out.status.code(), Some(1));
    let report = support::check_document(&out);
    let kinds: Vec<(&str, &str)> = report.findings.iter().map(|f| (f.kind.name(), f.message.as_str())).collect();
    assert!(kinds.iter().any(|(k, m)| *k == "stale-record" && m.contains("stale-1.0")), "{kinds:?}");
    assert!(kinds.iter().any(|(k, m)| *k == "unreadable" && m.contains("broken-1.0")), "{kinds:?}");
    assert!(
        kinds.iter().any(|(k, m)| *k == "unreadable" && m.contains("norec-1.0") && m.contains("RECORD")),
        "{kinds:?}"
    );
}

#[test]
fn metapackage_works_on_windows_wheels_and_stale_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    WheelSpec::new("winpkg", "1.0+rocm10.1.0", "cp312-cp312-win_amd64")
        .file("winpkg/_core.pyd", pe_file())
        .write(&d.join("win"));
    let mut stale = ext_wheel("stalepkg", "cp312-cp312-win_amd64");
    stale.version = "2.0+rocm10.1.0".into();
    stale.files[0] = ("stalepkg/_core.pyd".into(), pe_file());
    stale.unrecorded.push("stalepkg/__init__.py".into());
    stale.write(&d.join("win"));
    let meta =
        ["metapackage", "--name", "rocm-win", "--rocm-version", "10.1.0", "--gpu-target", "gfx1201", "-o", "meta"];
    let mut args: Vec<&str> = meta.to_vec();
    let inputs: Vec<String> = files_in(&d.join("win")).iter().map(|f| format!("win/{f}")).collect();
    args.extend(inputs.iter().map(String::as_str));
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = files_in(&d.join("meta"));
    assert_eq!(written.len(), 1);
    assert!(written[0].ends_with("-py3-none-win_amd64.whl"), "{written:?}");
}

#[test]
fn every_command_that_writes_leaves_its_inputs_when_pointed_at_their_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A set as a release engineer has one: a split HIP wheel (host and device wheels), a fat
    // one, and a pure one, all retagged for ROCm.
    let house = d.join("set");
    let fat = support::envs::fat_wheel_at(&d.join("fat"), "1.0");
    let out = wheelfix(d, &["retag", "--rocm-version", "7.1.0", "-w", "retagged", fat.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let retagged = d.join("retagged").join(&files_in(&d.join("retagged"))[0]);
    let out = wheelfix(d, &["split", "--all-targets", "-w", "set", retagged.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other = WheelSpec::new("fat_other", "1.0+rocm7.1.0", "py3-none-manylinux_2_17_x86_64")
        .file("fat_other/_k.so", support::envs::hip_extension(7));
    other.write(&house);
    WheelSpec::new("tools", "1.0+rocm7.1.0", "py3-none-any").file("tools/__init__.py", "").write(&house);
    let inputs: Vec<PathBuf> = files_in(&house).iter().map(|n| house.join(n)).collect();
    let input_args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    let before: Vec<_> = inputs.iter().map(|w| fingerprint(w)).collect();
    // Each command with its exit status: refused (1 for a wheel, 2 for the run) or done
    // beside the inputs (0).
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["retag", "-w", "set"], 1),
        (vec!["retag", "--rocm-version", "7.1.0", "-w", "set"], 1),
        (vec!["repair", "-w", "set"], 1),
        (vec!["thin", "--gpu-target", "gfx942", "-w", "set"], 1),
        (vec!["split", "--all-targets", "-w", "set"], 1),
        (vec!["variants", "--one-index", "--all-targets", "--plain", "--null", "-w", "set"], 1),
        (vec!["selector", "--name", "demo-gpu", "-o", "set"], 2),
        (vec!["selector", "--name", "tools", "-o", "set"], 2),
        (vec!["selector", "--name", "rocm-gpu", "-o", "set"], 0),
        (
            vec![
                "metapackage",
                "--name",
                "demo-gpu-set",
                "--rocm-version",
                "7.1.0",
                "--gpu-target",
                "gfx942",
                "-o",
                "set",
            ],
            0,
        ),
        (vec!["index", "-o", "set"], 2),
    ];
    for (case, code) in cases {
        let args = [&case[..], &input_args[..]].concat();
        let out = wheelfix(d, &args);
        assert_eq!(out.status.code(), Some(code), "{case:?}: {}", stderr(&out));
        for (w, b) in inputs.iter().zip(&before) {
            assert_eq!(
                &fingerprint(w),
                b,
                "{case:?} (exit {:?}): {} changed\n{}",
                out.status.code(),
                w.display(),
                stderr(&out)
            );
        }
        no_part_files(&house);
        // What it wrote beside them it may keep; the next command sees only the inputs.
        for name in files_in(&house) {
            if !inputs.iter().any(|i| i.file_name().unwrap().to_str() == Some(name.as_str())) {
                std::fs::remove_file(house.join(name)).unwrap();
            }
        }
    }
}
