//! Parity with auditwheel (installed from PyPI in the test setup): `symbol_tag` must equal
//! auditwheel's `sym_tag` on the same wheels.
//!
//! Wheels compared: fixtures built here (generated ELF files and real `cc` builds), auditwheel's
//! own test wheels (from its sdist on PyPI, unpacked under `target/`), and every
//! wheel in the directory named by `WHEELFIX_REAL_WHEELS` (opt-in: large downloads stay out of git).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::{ElfSpec, Import};
use support::python::{auditwheel, cc_extension, python_tag, tools_venv};
use support::show_report;
use support::wheelgen::WheelSpec;

/// auditwheel's `sym_tag`, or `None` when it refuses the wheel (not a platform wheel, crash).
fn auditwheel_sym_tag(wheel: &Path) -> Option<String> {
    let out = auditwheel(&["show".as_ref(), "--json".as_ref(), wheel.as_ref()]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    value.get("sym_tag").and_then(|t| t.as_str()).map(str::to_string)
}

/// Compare every wheel; returns (agreements, disagreements as text, wheels auditwheel refused).
fn compare(dir: &Path, wheels: &[PathBuf]) -> (usize, Vec<String>, Vec<String>) {
    let mut agree = 0;
    let mut differ = Vec::new();
    let mut refused = Vec::new();
    for wheel in wheels {
        let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
        let Some(theirs) = auditwheel_sym_tag(wheel) else {
            refused.push(name);
            continue;
        };
        let ours = show_report(dir, wheel, &[]).symbol_tag.unwrap_or_else(|| "(none)".to_string());
        if ours == theirs {
            agree += 1;
        } else {
            differ.push(format!("{name}: wheelfix {ours}, auditwheel {theirs}"));
        }
    }
    (agree, differ, refused)
}

fn fixture_wheels(dir: &Path) -> Vec<PathBuf> {
    let mut wheels = Vec::new();
    let versioned = [
        ("g217", vec![("f", "libc.so.6", "GLIBC_2.17")]),
        ("g228", vec![("f", "libc.so.6", "GLIBC_2.28"), ("g", "libm.so.6", "GLIBC_2.27")]),
        ("g243", vec![("f", "libc.so.6", "GLIBC_2.43")]),
        ("gap", vec![("f", "libc.so.6", "GLIBC_2.37")]),
        ("cxx", vec![("f", "libstdc++.so.6", "GLIBCXX_3.4.21"), ("g", "libstdc++.so.6", "CXXABI_1.3.9")]),
        ("gcc", vec![("f", "libgcc_s.so.1", "GCC_7.0.0")]),
        ("zlib", vec![("f", "libz.so.1", "ZLIB_1.2.9")]),
        ("priv", vec![("f", "libc.so.6", "GLIBC_PRIVATE")]),
        ("ssl", vec![("f", "libssl.so.3", "OPENSSL_3.0.0"), ("g", "libc.so.6", "GLIBC_2.14")]),
    ];
    for (name, needs) in versioned {
        let mut spec = ElfSpec { imports: vec![], needed: vec!["libc.so.6".into()], ..ElfSpec::extension(name) };
        for (sym, lib, ver) in needs {
            spec = spec.needs_version(sym, lib, ver);
        }
        let spec = ElfSpec { imports: [spec.imports.clone(), vec![Import::plain("PyLong_FromLong")]].concat(), ..spec };
        let wheel = WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64").file(&format!("{name}.so"), spec.build());
        wheels.push(wheel.write(dir));
    }
    // Real builds with the machine's compiler.
    let py = python_tag();
    for (name, code) in [
        ("plainc", ""),
        ("usesmath", "#include <math.h>\n#define ANSWER ((long)(pow(2.0, 5.0) + 10))"),
        ("usesrandom", "#include <sys/random.h>\n#define ANSWER ((long)getrandom(NULL, 0, 0) + 42)"),
    ] {
        let (so, file) = cc_extension(dir, name, code, &["-lm"]);
        let wheel =
            WheelSpec::new(name, "1.0", &format!("{py}-{py}-linux_x86_64")).file(&file, std::fs::read(so).unwrap());
        wheels.push(wheel.write(dir));
    }
    wheels
}

fn wheels_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(wheels_in(&path));
        } else if path.extension().is_some_and(|e| e == "whl") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn symbol_tag_agrees_with_auditwheel_on_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = fixture_wheels(dir.path());
    let (agree, differ, refused) = compare(dir.path(), &wheels);
    assert!(differ.is_empty(), "disagreements:\n{}", differ.join("\n"));
    assert!(refused.is_empty(), "auditwheel refused: {refused:?}");
    assert_eq!(agree, wheels.len());
}

#[test]
fn symbol_tag_agrees_with_auditwheel_on_its_own_test_wheels() {
    let bundled = support::python::auditwheel_test_wheels();
    assert!(wheels_in(&bundled).len() >= 20, "auditwheel's test wheels were not unpacked into {}", bundled.display());
    let dir = tempfile::tempdir().unwrap();
    let wheels = wheels_in(&bundled);
    let (agree, differ, refused) = compare(dir.path(), &wheels);
    eprintln!(
        "auditwheel test wheels: {agree} agree, {} differ, {} refused by auditwheel",
        differ.len(),
        refused.len()
    );
    assert!(differ.is_empty(), "disagreements:\n{}", differ.join("\n"));
    assert!(agree >= 20, "only {agree} comparable wheels");
}

/// Opt-in: `WHEELFIX_REAL_WHEELS=/path/to/wheels cargo test --test it parity::symbol_tag_agrees_with_auditwheel_on_real_wheels -- --ignored`.
/// Fails when the directory holds no wheel, or when auditwheel judges none of them.
#[test]
#[ignore = "needs a directory of downloaded wheels; set WHEELFIX_REAL_WHEELS"]
fn symbol_tag_agrees_with_auditwheel_on_real_wheels() {
    let (_, wheels) = support::opt_in_wheels("WHEELFIX_REAL_WHEELS", "a directory of downloaded wheels");
    let tmp = tempfile::tempdir().unwrap();
    let (agree, differ, refused) = compare(tmp.path(), &wheels);
    eprintln!("real wheels: {agree} agree; auditwheel refused {}: {refused:?}", refused.len());
    assert!(differ.is_empty(), "disagreements:\n{}", differ.join("\n"));
    assert!(agree > 0, "auditwheel judged none of the {} wheels: nothing was compared", wheels.len());
}

/// `auditwheel show --json` on `wheel`: its stdout, when it printed a document.
fn auditwheel_document(wheel: &Path) -> Option<String> {
    let out = auditwheel(&["show".as_ref(), "--json".as_ref(), wheel.as_ref()]);
    let text = String::from_utf8(out.stdout).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok().map(|_| text)
}

/// Every document validates against the `show-schema.json` auditwheel ships.
fn validate_against_auditwheel_schema(documents: &[String]) {
    let schema = tools_venv().join("lib").read_dir().unwrap().next().unwrap().unwrap().path();
    let schema = schema.join("site-packages/auditwheel/show-schema.json");
    assert!(schema.exists(), "{}", schema.display());
    let code = "import json,sys,jsonschema\nschema=json.load(open(sys.argv[1]))\nfor doc in json.load(sys.stdin):\n    jsonschema.validate(doc, schema)\nprint('ok')";
    let mut child = Command::new(tools_venv().join("bin/python"))
        .args(["-c", code])
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let all: Vec<serde_json::Value> = documents.iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(serde_json::to_string(&all).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn json_format_auditwheel_prints_auditwheels_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut wheels = fixture_wheels(dir.path());
    wheels.extend(wheels_in(&support::python::auditwheel_test_wheels()));
    let (mut same, mut errors, mut ours_all) = (0, 0, Vec::new());
    let mut differ = Vec::new();
    for wheel in &wheels {
        let out = support::wheelfix(dir.path(), &["show", "--json-format", "auditwheel", wheel.to_str().unwrap()]);
        let ours = String::from_utf8(out.stdout).unwrap();
        let ours_value: serde_json::Value = serde_json::from_str(&ours).unwrap_or_else(|e| panic!("{ours}: {e}"));
        ours_all.push(ours.clone());
        let Some(theirs) = auditwheel_document(wheel) else { continue };
        let theirs_value: serde_json::Value = serde_json::from_str(&theirs).unwrap();
        if theirs_value.get("error").is_some() {
            // Both refuse (the messages are each tool's own).
            assert!(
                ours_value.get("error").is_some(),
                "{}: auditwheel refuses, wheelfix gives {ours}",
                wheel.display()
            );
            assert_eq!(out.status.code(), Some(1));
            errors += 1;
        } else if ours == theirs {
            same += 1;
        } else {
            differ.push(format!("{}:\n--- auditwheel\n{theirs}\n--- wheelfix\n{ours}", wheel.display()));
        }
    }
    eprintln!("auditwheel's document: {same} byte-identical, {errors} refused by both, of {}", wheels.len());
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert!(same >= 10, "only {same} comparable wheels");
    validate_against_auditwheel_schema(&ours_all);
}
