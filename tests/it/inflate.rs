//! One large member inflated on several threads (rapidgzip-core's parallel DEFLATE decoder)
//! reads exactly as the one-stream inflater reads it: the same report, every hash verified; a
//! member the parallel decoder refuses but pip installs (bytes after the deflate stream) is read
//! again in one stream; a corrupt one fails naming the member, as it does in one stream.

use crate::support;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use support::rawzip::{self, RawEntry};
use support::{stderr, stdout, wheelfix_env};

/// `n` bytes of a 64-letter alphabet from a fixed generator: deflate keeps about 3/4 of them.
fn filler(n: usize) -> Vec<u8> {
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            alphabet[(x >> 58) as usize]
        })
        .collect()
}

fn record_row(name: &str, data: &[u8]) -> String {
    use base64::Engine;
    let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
    format!("{name},sha256={hash},{}\n", data.len())
}

/// A pure wheel whose `pkg/blob.bin` is 24 MiB, its deflate stream followed by `trailing`.
fn wheel(dir: &Path, name: &str, trailing: &[u8]) -> PathBuf {
    let blob = filler(24 << 20);
    let di = format!("{name}-1.0.dist-info");
    let metadata = format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n").into_bytes();
    let wheel_file = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec();
    let mut record = String::new();
    let mut entries = Vec::new();
    for (path, data) in [
        (format!("{name}/__init__.py"), Vec::new()),
        (format!("{name}/blob.bin"), blob),
        (format!("{di}/METADATA"), metadata),
        (format!("{di}/WHEEL"), wheel_file),
    ] {
        record.push_str(&record_row(&path, &data));
        let mut entry = RawEntry::new(&path, data);
        if path.ends_with("blob.bin") {
            entry.trailing = trailing.to_vec();
        }
        entries.push(entry);
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    entries.push(RawEntry::new(&format!("{di}/RECORD"), record.into_bytes()));
    let path = dir.join(format!("{name}-1.0-py3-none-any.whl"));
    std::fs::write(&path, rawzip::archive(&entries, b"")).unwrap();
    path
}

/// `show --verify --json -v` with parallel inflate from `min` compressed bytes (`off`: never),
/// with a memory budget below the blob's size, so that it streams rather than being read whole.
fn show(d: &Path, wheel: &Path, min: &str) -> std::process::Output {
    let args = ["show", "--verify", "--json", "-v", "--memory", "16M", wheel.to_str().unwrap()];
    wheelfix_env(d, &args, &[("WHEELFIX_PARALLEL_INFLATE_MIN", min), ("RAYON_NUM_THREADS", "2")])
}

#[test]
#[cfg_attr(
    not(feature = "parallel-inflate"),
    ignore = "needs the parallel-inflate cargo feature; scripts/test runs it with --features parallel-inflate"
)]
fn a_member_inflated_on_several_threads_reads_as_in_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let clean = wheel(d, "clean", b"");
    let (one, several) = (show(d, &clean, "off"), show(d, &clean, "1M"));
    assert!(one.status.success() && several.status.success(), "{}{}", stderr(&one), stderr(&several));
    assert_eq!(stdout(&one), stdout(&several));
    assert!(stderr(&several).contains("member `clean/blob.bin`: inflated on up to 2 threads"), "{}", stderr(&several));
    assert!(!stderr(&one).contains("inflated on up to"), "{}", stderr(&one));
    let report: serde_json::Value = serde_json::from_str(&stdout(&several)).unwrap();
    assert!(
        stdout(&several).contains("\"record_findings\": []") || report.to_string().contains("record"),
        "{report:#}"
    );
    assert!(!stdout(&several).contains("hash-mismatch"), "{report:#}");

    // Bytes after the deflate stream: zipfile (and so pip) reads the member; the parallel decoder
    // wants its source consumed exactly and stops, and the one-stream inflater takes over.
    let trailing = wheel(d, "trailing", b"JUNKJUNK");
    let check = std::process::Command::new(support::python::system_python())
        .args(["-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert len(z.read('trailing/blob.bin')) == 24 << 20"])
        .arg(&trailing)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let (one, several) = (show(d, &trailing, "off"), show(d, &trailing, "1M"));
    assert!(one.status.success() && several.status.success(), "{}{}", stderr(&one), stderr(&several));
    assert_eq!(stdout(&one), stdout(&several));
}

#[test]
#[cfg_attr(
    not(feature = "parallel-inflate"),
    ignore = "needs the parallel-inflate cargo feature; scripts/test runs it with --features parallel-inflate"
)]
fn a_corrupt_large_member_fails_naming_it_as_in_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = wheel(d, "broken", b"");
    // Flip bytes in the middle of the blob's deflate stream (its local header is first but one).
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    for b in &mut bytes[at..at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, bytes).unwrap();
    let (one, several) = (show(d, &path, "off"), show(d, &path, "1M"));
    assert_eq!(one.status.code(), Some(1), "{}", stderr(&one));
    assert_eq!(several.status.code(), Some(1), "{}", stderr(&several));
    // The report names the member, and says the same as the one stream does.
    assert_eq!(stdout(&one), stdout(&several));
    assert!(stdout(&several).contains("member `broken/blob.bin`"), "{}", stdout(&several));
    assert!(stderr(&several).contains("inflating in one stream"), "{}", stderr(&several));
}

/// A library whose kpack reference (`.rocm_kpack_ref`) lies past what the first pass can keep
/// (it is learned only from the section headers at the end): a second pass fetches it, and stops
/// there rather than inflating the rest of the file again. The facts are those of reading it
/// whole.
#[test]
fn a_second_pass_stops_after_the_ranges_it_was_for() {
    use support::elfgen::ElfSpec;
    use support::gpugen::section;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut spec = ElfSpec { padding: 24 << 20, ..ElfSpec::extension("_far") };
    spec.sections.push(section(".rocm_kpack_ref", 1, b"_rocm_sdk_devices/gfx942.kpack\0".to_vec()));
    // Filler after the bundles: what the second pass no longer inflates.
    spec.sections.push(section(".wheelfix_tail", 1, filler(16 << 20)));
    let wheel = support::wheelgen::WheelSpec::new("far", "1.0", "cp312-cp312-linux_x86_64")
        .file("far/_far.cpython-312-x86_64-linux-gnu.so", spec.build())
        .write(d);
    let wheel = wheel.to_str().unwrap();
    let env = [("WHEELFIX_PARALLEL_INFLATE_MIN", "off")];
    let streamed = wheelfix_env(d, &["show", "--json", "-v", "--memory", "12M", wheel], &env);
    let whole = wheelfix_env(d, &["show", "--json", "--memory", "4G", wheel], &env);
    assert!(streamed.status.success(), "{}", stderr(&streamed));
    assert!(stderr(&streamed).contains("streamed again (pass 2)"), "{}", stderr(&streamed));
    // It stopped: of the library's bytes, the second pass inflated none of the filler after the
    // kpack reference.
    let log = stderr(&streamed);
    let line = log.lines().find(|l| l.contains("pass 2 inflated")).unwrap_or_else(|| panic!("{log}"));
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [_, inflated, size] = numbers[..] else { panic!("{line}") };
    assert!(inflated + (16 << 20) <= size, "the second pass went on past its ranges: {line}");
    assert_eq!(stdout(&streamed), stdout(&whole));
    assert!(stdout(&whole).contains("kpack"), "{}", stdout(&whole));
    // `retag` reads no device code: the one pass gives the facts it needs (the GPU reader's
    // sections once took three more passes over each fat library, 4x the time and 12x the
    // memory of the benchmark's retag).
    let retag = wheelfix_env(d, &["retag", "-v", "--memory", "12M", "-w", "out", wheel], &env);
    assert!(retag.status.success(), "{}", stderr(&retag));
    assert!(!stderr(&retag).contains("streamed again"), "{}", stderr(&retag));
}
