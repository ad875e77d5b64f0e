//! Stale RECORDs, as real published wheels have them: reported by `show`, corrected by the
//! writing commands (a true RECORD, a note), refused only with `--strict-record`; `check`
//! names them. Each variant is made here: a member edited after RECORD, a row dropped, a row
//! for a file that is gone, a duplicate row, a wrong size, md5 hashes, no hashes at all.

use crate::support;

use std::path::{Path, PathBuf};

use base64::Engine;
use sha2::Digest;
use support::elfgen::ElfSpec;
use support::python::assert_true_record;
use support::wheelgen::{WheelSpec, write_zip};
use support::{show_report, stderr, stdout, wheelfix};
use wheelfix::report::ShowReport;
use wheelfix::report::outcome::RetagEntry;

fn spec(name: &str) -> WheelSpec {
    WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64")
        .file(&format!("{name}/_core.so"), ElfSpec::extension("_core").build())
        .file(&format!("{name}/__init__.py"), "x = 1\n")
}

/// Write `spec`'s members with RECORD replaced by `edit(record text)`.
fn with_record(dir: &Path, spec: &WheelSpec, edit: impl Fn(&str) -> String) -> PathBuf {
    let mut members = spec.members();
    let record = members.last_mut().unwrap();
    record.1 = edit(std::str::from_utf8(&record.1).unwrap()).into_bytes();
    let path = dir.join(spec.file_name());
    write_zip(&path, &members);
    path
}

fn problems(report: &ShowReport) -> Vec<(String, String)> {
    report.record.iter().map(|f| (f.problem.as_str().to_string(), f.file.clone())).collect()
}

/// Findings as (problem, file).
type Expected = Vec<(&'static str, String)>;

/// Every variant: (wheel, the findings `show` gives, the findings `show --verify` adds).
fn variants(dir: &Path) -> Vec<(PathBuf, Expected, Expected)> {
    let mut out = Vec::new();
    // A member edited after RECORD was written (same size): only hashing finds it.
    let s = spec("edited");
    let mut members = s.members();
    let at = members.iter().position(|(n, _)| n == "edited/__init__.py").unwrap();
    members[at].1 = b"x = 2\n".to_vec();
    let path = dir.join(s.file_name());
    write_zip(&path, &members);
    out.push((path, vec![], vec![("hash", "edited/__init__.py".into())]));
    // A member RECORD does not list.
    let mut s = spec("dropped");
    s.unrecorded.push("dropped/__init__.py".into());
    out.push((s.write(dir), vec![("not-in-record", "dropped/__init__.py".into())], vec![]));
    // A row for a file that is gone.
    let s = spec("ghost");
    let path = with_record(dir, &s, |r| format!("ghost/gone.py,sha256=AAAA,3\n{r}"));
    out.push((path, vec![("not-in-archive", "ghost/gone.py".into())], vec![]));
    // A duplicate row that disagrees with the first.
    let s = spec("dup");
    let path = with_record(dir, &s, |r| format!("{r}dup/__init__.py,sha256=AAAA,6\n"));
    out.push((path, vec![("duplicate-row", "dup/__init__.py".into())], vec![]));
    // A wrong size.
    let s = spec("sized");
    let path = with_record(dir, &s, |r| {
        r.lines()
            .map(|l| if l.starts_with("sized/__init__.py,") { l.replace(",6", ",7") } else { l.to_string() })
            .map(|l| l + "\n")
            .collect()
    });
    out.push((path, vec![("size", "sized/__init__.py".into())], vec![]));
    // md5 hashes.
    let s = spec("md5");
    let path = with_record(dir, &s, |r| {
        let mut text = String::new();
        for line in r.lines() {
            let fields: Vec<&str> = line.split(',').collect();
            if fields[1].is_empty() {
                text.push_str(line);
            } else {
                let data = &s.members().into_iter().find(|(n, _)| n == fields[0]).unwrap().1;
                let md5 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(md5_digest(data));
                text.push_str(&format!("{},md5={md5},{}", fields[0], fields[2]));
            }
            text.push('\n');
        }
        text
    });
    let md5_files = ["md5-1.0.dist-info/METADATA", "md5-1.0.dist-info/WHEEL", "md5/__init__.py", "md5/_core.so"];
    out.push((path, md5_files.iter().map(|f| ("unverifiable-hash", f.to_string())).collect(), vec![]));
    // No hashes at all.
    let s = spec("nohash");
    let path = with_record(dir, &s, |r| {
        r.lines().map(|l| format!("{},,\n", l.split(',').next().unwrap())).collect::<String>()
    });
    let files =
        ["nohash-1.0.dist-info/METADATA", "nohash-1.0.dist-info/WHEEL", "nohash/__init__.py", "nohash/_core.so"];
    out.push((path, files.iter().map(|f| ("no-hash", f.to_string())).collect(), vec![]));
    out
}

/// MD5 is not among the crates the tests use; Python computes it.
fn md5_digest(data: &[u8]) -> Vec<u8> {
    let out = std::process::Command::new(support::python::system_python())
        .args(["-c", "import hashlib,sys; sys.stdout.buffer.write(hashlib.md5(sys.stdin.buffer.read()).digest())"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(data)?;
            child.wait_with_output()
        })
        .unwrap();
    out.stdout
}

fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.sort();
    v
}

#[test]
fn show_reports_every_stale_record_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    for (wheel, plain, verified) in variants(dir.path()) {
        let name = wheel.file_name().unwrap().to_str().unwrap().to_string();
        let report = show_report(dir.path(), &wheel, &[]);
        let expect: Vec<(String, String)> = plain.iter().map(|(p, f)| (p.to_string(), f.clone())).collect();
        assert_eq!(sorted(problems(&report)), sorted(expect.clone()), "{name}");
        assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"), "{name}: the wheel is still analysed");
        let report = show_report(dir.path(), &wheel, &["--verify"]);
        let mut all = expect.clone();
        all.extend(verified.iter().map(|(p, f)| (p.to_string(), f.clone())));
        assert_eq!(sorted(problems(&report)), sorted(all), "{name} --verify");
        let out = wheelfix(dir.path(), &["show", "--verify", wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        if !plain.is_empty() || !verified.is_empty() {
            assert!(stdout(&out).contains("RECORD disagrees with the archive"), "{name}: {}", stdout(&out));
        }
    }
    let (nohash, ..) = variants(dir.path()).pop().unwrap();
    let out = wheelfix(dir.path(), &["show", nohash.to_str().unwrap()]);
    assert!(stdout(&out).contains("RECORD has no hashes: nothing in this wheel could be verified"), "{}", stdout(&out));
}

#[test]
fn retag_and_repair_write_a_true_record_and_say_what_they_corrected() {
    let dir = tempfile::tempdir().unwrap();
    for (wheel, plain, verified) in variants(dir.path()) {
        let name = wheel.file_name().unwrap().to_str().unwrap().to_string();
        let before = std::fs::read(&wheel).unwrap();
        for (command, out_dir) in [("retag", "retagged"), ("repair", "repaired")] {
            let out = wheelfix(dir.path(), &[command, "--json", "-w", out_dir, wheel.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(0), "{command} {name}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("its RECORD disagreed with the archive"),
                "{command} {name}: {}",
                stderr(&out)
            );
            let result: Vec<RetagEntry> = support::entries(&out, &[]);
            let corrected: Vec<&str> = result[0].record_corrected.items().iter().map(|f| f.problem.as_str()).collect();
            let mut expect: Vec<&str> = plain.iter().chain(&verified).map(|(p, _)| *p).collect();
            expect.sort();
            let mut got = corrected.clone();
            got.sort();
            assert_eq!(got, expect, "{command} {name}");
            assert_true_record(&dir.path().join(result[0].output.as_deref().unwrap()));
        }
        // --no-verify still writes a true RECORD for rows that cannot stand.
        let out = wheelfix(dir.path(), &["retag", "--no-verify", "-w", "unverified", wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        if verified.is_empty() {
            let written = std::fs::read_dir(dir.path().join("unverified"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(name.split('-').next().unwrap()))
                .unwrap();
            assert_true_record(&written);
        }
        assert_eq!(std::fs::read(&wheel).unwrap(), before, "{name}: the input is untouched");
    }
}

#[test]
fn strict_record_fails_the_wheel_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (wheel, plain, _) in variants(dir.path()).into_iter().filter(|(_, p, _)| !p.is_empty()) {
        let name = wheel.file_name().unwrap().to_str().unwrap();
        let out = wheelfix(dir.path(), &["retag", "--strict-record", "-w", "strict", wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(stderr(&out).contains("--strict-record"), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(plain[0].0), "{name}: {}", stderr(&out));
        assert!(
            !dir.path().join("strict").exists() || std::fs::read_dir(dir.path().join("strict")).unwrap().count() == 0
        );
        let out = wheelfix(dir.path(), &["show", "--strict-record", wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
    }
    // The configuration key does the same.
    std::fs::write(dir.path().join("pyproject.toml"), "[tool.wheelfix]\nstrict-record = true\n").unwrap();
    let (ghost, ..) = variants(dir.path()).into_iter().nth(2).unwrap();
    let out = wheelfix(dir.path(), &["retag", "-w", "strict", ghost.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn sha384_and_sha512_rows_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("wide");
    let members = s.members();
    let path = with_record(dir.path(), &s, |r| {
        let mut text = String::new();
        for line in r.lines() {
            let fields: Vec<&str> = line.split(',').collect();
            let data = members.iter().find(|(n, _)| n == fields[0]).map(|(_, d)| d);
            match data.filter(|_| !fields[1].is_empty()) {
                Some(data) if fields[0].ends_with(".py") => {
                    let mut digest = sha2::Sha512::digest(data).to_vec();
                    digest[0] ^= 1; // wrong on purpose
                    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
                    text.push_str(&format!("{},sha512={b64},{}", fields[0], fields[2]));
                }
                Some(data) => {
                    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha384::digest(data));
                    text.push_str(&format!("{},sha384={b64},{}", fields[0], fields[2]));
                }
                None => text.push_str(line),
            }
            text.push('\n');
        }
        text
    });
    let report = show_report(dir.path(), &path, &["--verify"]);
    assert_eq!(problems(&report), [("hash".to_string(), "wide/__init__.py".to_string())]);
    assert!(report.hashes_checked);
}

#[test]
fn corruption_is_still_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec("crc");
    let path = s.write(dir.path());
    // Flip a byte of the stored CRC-32 of `crc/__init__.py` in the central directory.
    let mut bytes = std::fs::read(&path).unwrap();
    let name = b"crc/__init__.py";
    let cd = bytes.windows(4).rposition(|w| w == [0x50, 0x4b, 0x05, 0x06]).unwrap();
    let at = (0..cd)
        .rev()
        .find(|&i| bytes[i..].starts_with(&[0x50, 0x4b, 0x01, 0x02]) && bytes[i + 46..].starts_with(name))
        .unwrap();
    bytes[at + 16] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let out = wheelfix(dir.path(), &["show", "--verify", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("member `crc/__init__.py`: CRC-32 mismatch"), "{}", stderr(&out));
    let out = wheelfix(dir.path(), &["retag", "-w", "out", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}
