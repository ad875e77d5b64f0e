//! The loadability lint on real files: a shared object built with `cc`, then one of its
//! segments moved off its alignment as a careless rewriter would. The loader refuses it
//! (`ctypes.CDLL`), and `show` and `check` name the file and the rule; the untouched file passes
//! all three.

mod support;

use std::path::Path;
use std::process::Command;

use support::python::cc_shared;
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};

/// The file with its executable PT_LOAD's offset moved 16 bytes: its offset and address then
/// differ modulo the alignment (an ELF64 little-endian file, as `cc` writes here).
fn misaligned(elf: &[u8]) -> Vec<u8> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    let mut out = elf.to_vec();
    let header = (0..count)
        .map(|i| phoff + i * size)
        .find(|&h| {
            let kind = u32::from_le_bytes(elf[h..h + 4].try_into().unwrap());
            let flags = u32::from_le_bytes(elf[h + 4..h + 8].try_into().unwrap());
            kind == 1 && flags & 1 != 0
        })
        .expect("an executable PT_LOAD");
    let offset = u64::from_le_bytes(elf[header + 8..header + 16].try_into().unwrap());
    out[header + 8..header + 16].copy_from_slice(&(offset + 16).to_le_bytes());
    out
}

/// Whether the dynamic loader maps the file (Python's ctypes: `dlopen`).
fn loads(path: &Path) -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1]).answer()"])
        .arg(path)
        .output()
        .unwrap();
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

#[test]
fn a_misaligned_segment_is_named_by_show_and_check_as_the_loader_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = cc_shared(d, "int answer(void) { return 42; }\n", "libgood.so", &[]);
    let bytes = std::fs::read(&good).unwrap();
    let bad = d.join("libbad.so");
    std::fs::write(&bad, misaligned(&bytes)).unwrap();
    // The loader first: the rule is the loader's, not ours.
    loads(&good).expect("the untouched library loads");
    let refused = loads(&bad).expect_err("the loader refuses the moved segment");
    assert!(refused.contains("not properly aligned") || refused.contains("OSError"), "{refused}");

    for (name, data, broken) in [("good", &bytes, false), ("bad", &std::fs::read(&bad).unwrap(), true)] {
        std::fs::create_dir_all(d.join(name)).unwrap();
        let wheel = WheelSpec::new(&format!("lib{name}"), "1.0", "py3-none-linux_x86_64")
            .file(&format!("lib{name}/_native.so"), data.clone())
            .write(&d.join(name));
        let out = wheelfix(d, &["show", wheel.to_str().unwrap()]);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(text.contains("not loadable (load-misaligned)"), broken, "{text}");
        if broken {
            assert!(text.contains(&format!("lib{name}/_native.so")), "the file is named: {text}");
        }
        let out = wheelfix(d, &["check", "--json", d.join(name).to_str().unwrap()]);
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let kinds: Vec<&str> =
            report["findings"].as_array().unwrap().iter().filter_map(|f| f["kind"].as_str()).collect();
        assert_eq!(kinds.contains(&"not-loadable"), broken, "{report}");
        if broken {
            assert_eq!(out.status.code(), Some(1));
            let finding = report["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "not-loadable").unwrap();
            let message = finding["message"].as_str().unwrap();
            assert!(message.contains("_native.so") && message.contains("load-misaligned"), "{message}");
        }
    }
}

/// Every file `repair` patches is linted before it is written: a result that breaks a rule its
/// input kept is refused, naming the rule; a rule the input already broke is not the patch's.
#[test]
fn a_patch_that_would_break_a_rule_is_refused() {
    use wheelfix::elf::patch::verify_loadable;
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(cc_shared(dir.path(), "int answer(void) { return 42; }\n", "libgood.so", &[])).unwrap();
    let bad = misaligned(&good);
    verify_loadable(&good, &good).expect("an untouched file");
    let refused = verify_loadable(&good, &bad).expect_err("a moved segment").to_string();
    assert!(refused.contains("load-misaligned"), "{refused}");
    verify_loadable(&bad, &bad).expect("a rule the input already broke");
}
