//! The loadability lint on real files: a shared object built with `cc`, then one of its
//! segments moved off its alignment as a careless rewriter would. The loader refuses it
//! (`ctypes.CDLL`), and `show` and `check` name the file and the rule; the untouched file passes
//! all three.

use crate::support;

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
        let report = support::check_document(&out);
        let kinds = report.kinds();
        assert_eq!(kinds.contains(&"not-loadable"), broken, "{report:?}");
        if broken {
            assert_eq!(out.status.code(), Some(1));
            let finding = report.findings.iter().find(|f| f.kind == "not-loadable").unwrap();
            let message = finding.message.as_str();
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

/// `.gnu.version_r` naming a library DT_NEEDED does not (a rewriter that changed one and not
/// the other): glibc aborts with its `dl-version.c` assertion when it loads the file, and
/// `show` names the rule. The fixture: a library that needs a versioned symbol of `libv.so`,
/// its DT_NEEDED entry for `libv.so` pointed at `libc.so.6`'s name instead.
#[test]
fn a_version_need_that_dt_needed_does_not_name_is_caught_as_glibc_aborts() {
    use object::{Object, ObjectSection};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("v.map"), "V_1 { global: versioned; local: *; };\n").unwrap();
    let script = format!("-Wl,--version-script={}", d.join("v.map").display());
    cc_shared(d, "int versioned(void) { return 40; }\n", "libv.so", &["-Wl,-soname,libv.so", &script]);
    let search = format!("-L{}", d.display());
    let user = cc_shared(
        d,
        "#include <unistd.h>\nint versioned(void);\nint answer(void) { return versioned() + 2 + (getpid() < 0); }\n",
        "libuser.so",
        &[&search, "-lv"],
    );
    let good = std::fs::read(&user).unwrap();
    let facts = wheelfix::elf::ElfFacts::parse(&good).unwrap();
    assert!(facts.version_needs.iter().any(|v| v.file == "libv.so"), "{:?}", facts.version_needs);
    // Point the DT_NEEDED entry of libv.so at the dynamic string of libc.so.6.
    let file = object::File::parse(&*good).unwrap();
    let (dyn_at, dyn_len) = file.section_by_name(".dynamic").unwrap().file_range().unwrap();
    let dynstr = file.section_by_name(".dynstr").unwrap().data().unwrap().to_vec();
    let offset_of = |name: &str| {
        dynstr.windows(name.len() + 1).position(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0)
    };
    let (libv, libc) = (offset_of("libv.so").unwrap() as u64, offset_of("libc.so.6").unwrap() as u64);
    let mut bad = good.clone();
    let mut changed = false;
    for entry in (dyn_at..dyn_at + dyn_len).step_by(16) {
        let at = entry as usize;
        let tag = u64::from_le_bytes(bad[at..at + 8].try_into().unwrap());
        let value = u64::from_le_bytes(bad[at + 8..at + 16].try_into().unwrap());
        if tag == 1 && value == libv {
            bad[at + 8..at + 16].copy_from_slice(&libc.to_le_bytes());
            changed = true;
        }
    }
    assert!(changed, "a DT_NEEDED entry for libv.so");
    let broken = d.join("libbroken.so");
    std::fs::write(&broken, &bad).unwrap();
    // The loader: the untouched library loads (libv.so found beside it), the broken one aborts.
    let load = |path: &Path| {
        Command::new("python3")
            .args(["-c", "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).answer())"])
            .arg(path)
            .env("LD_LIBRARY_PATH", d)
            .output()
            .unwrap()
    };
    let out = load(&user);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42", "{}", String::from_utf8_lossy(&out.stderr));
    let out = load(&broken);
    assert!(!out.status.success(), "glibc refuses it");
    assert!(String::from_utf8_lossy(&out.stderr).contains("dl-version.c"), "{}", String::from_utf8_lossy(&out.stderr));
    // The lint, on the same bytes, through show.
    let wheel = WheelSpec::new("vneed", "1.0", "py3-none-linux_x86_64").file("vneed/_native.so", bad).write(d);
    let out = wheelfix(d, &["show", wheel.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("not loadable (version-need-not-needed)") && text.contains("libv.so"), "{text}");
}
