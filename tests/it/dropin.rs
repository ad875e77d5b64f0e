//! wheelfix in auditwheel's place: its environment variables, `--only-plat` alone, `-v`,
//! `lddtree`, `--strip` on the wheel's own files, and the PEP 770 SBOM, each checked against
//! the real tools (auditwheel from PyPI, CycloneDX's schema through cyclonedx-python-lib).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::{ElfSpec, Import};
use support::python::{auditwheel, cc_extension, cc_shared, pip_install_and_run, python_tag, run, tools_venv};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix, wheelfix_env};

/// A wheel whose one extension needs only GLIBC_2.17: every policy from manylinux_2_17 on fits.
fn glibc217_wheel(dir: &Path) -> PathBuf {
    let spec = ElfSpec { needed: vec!["libc.so.6".into()], ..ElfSpec::extension("g") }.needs_version(
        "f",
        "libc.so.6",
        "GLIBC_2.17",
    );
    let spec = ElfSpec { imports: [spec.imports.clone(), vec![Import::plain("PyLong_FromLong")]].concat(), ..spec };
    WheelSpec::new("g", "1.0", "cp312-cp312-linux_x86_64").file("g.so", spec.build()).write(dir)
}

fn wheels_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(".whl")).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn auditwheel_plat_and_its_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = glibc217_wheel(&d.join("in"));
    let wheel = wheel.to_str().unwrap();
    // The manylinux images set AUDITWHEEL_PLAT; `--only-plat` then writes that tag alone.
    let out = wheelfix_env(
        d,
        &["repair", "--only-plat", "-w", "env", wheel],
        &[("AUDITWHEEL_PLAT", "manylinux_2_17_x86_64")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(wheels_in(&d.join("env")), ["g-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"]);
    // The flag wins over the environment.
    let out = wheelfix_env(
        d,
        &["repair", "--plat", "manylinux_2_28_x86_64", "--only-plat", "-w", "flag", wheel],
        &[("AUDITWHEEL_PLAT", "manylinux_2_17_x86_64")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(wheels_in(&d.join("flag")), ["g-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"]);
    // The environment wins over [tool.wheelfix].
    std::fs::write(d.join("pyproject.toml"), "[tool.wheelfix]\nplat = 'manylinux_2_28_x86_64'\n").unwrap();
    let out = wheelfix_env(
        d,
        &["repair", "--only-plat", "-w", "over-config", wheel],
        &[("AUDITWHEEL_PLAT", "manylinux_2_17_x86_64")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(wheels_in(&d.join("over-config")), ["g-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"]);
    let config = wheelfix_env(
        d,
        &["show", "--config"],
        &[("AUDITWHEEL_PLAT", "manylinux_2_17_x86_64"), ("AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "1")],
    );
    let text = stdout(&config);
    assert!(text.contains("\"manylinux_2_17_x86_64\"") && text.contains("(environment AUDITWHEEL_PLAT)"), "{text}");
    assert!(text.contains("(environment AUDITWHEEL_ZIP_COMPRESSION_LEVEL)"), "{text}");
    std::fs::remove_file(d.join("pyproject.toml")).unwrap();
    // Bad values are refused with the variable's name, before anything is written.
    for (name, value) in [("AUDITWHEEL_PLAT", "manylinux_9_99_x86_64"), ("AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "11")] {
        let out = wheelfix_env(d, &["repair", "-w", "bad", wheel], &[(name, value)]);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {}", stderr(&out));
        assert!(stderr(&out).contains(name) && stderr(&out).contains(value), "{}", stderr(&out));
        assert!(!d.join("bad").exists());
    }
    // AUDITWHEEL_PLAT is repair's; retag and show are not changed by it.
    let out = wheelfix_env(d, &["retag", "-w", "retagged", wheel], &[("AUDITWHEEL_PLAT", "manylinux_2_28_x86_64")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let retagged = wheels_in(&d.join("retagged"));
    assert!(!retagged[0].contains("manylinux_2_28"), "{retagged:?}");
}

#[test]
fn only_plat_without_plat_means_auto() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = glibc217_wheel(&d.join("in"));
    for command in ["repair", "retag"] {
        let out = wheelfix(d, &[command, "--only-plat", "-w", command, wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        assert_eq!(
            wheels_in(&d.join(command)),
            ["g-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"],
            "{command}"
        );
    }
}

/// libinner.so.1 (built here, outside every system path) ← the extension `demo`; and the
/// extension `sslx`, which needs the system's libssl.so.3 (owned by an OS package).
fn libraries(d: &Path) -> (PathBuf, PathBuf) {
    let deps = d.join("deps");
    std::fs::create_dir_all(&deps).unwrap();
    cc_shared(&deps, "int inner(int x) { return x + 1; }\n", "libinner.so.1", &["-Wl,-soname,libinner.so.1"]);
    (deps.clone(), deps.join("libinner.so.1"))
}

fn demo_wheel(d: &Path, deps: &Path, with_ssl: bool) -> PathBuf {
    let build = d.join("build");
    std::fs::create_dir_all(&build).unwrap();
    let lflag = format!("-L{}", deps.display());
    let mut args = vec!["-g", lflag.as_str(), "-l:libinner.so.1"];
    let mut code = "int inner(int);\n#define ANSWER inner(41)\n".to_string();
    if with_ssl {
        args.push("-l:libssl.so.3");
        code = "int inner(int);\nint OPENSSL_init_ssl(unsigned long long, const void *);\n#define ANSWER (inner(40) + OPENSSL_init_ssl(0, 0))\n".into();
    }
    let (so, file) = cc_extension(&build, "demo", &code, &args);
    let py = python_tag();
    WheelSpec::new("demo", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file(&format!("demo/{file}"), std::fs::read(so).unwrap())
        .file("demo/__init__.py", "from .demo import answer\n")
        .write(&d.join("in"))
}

fn members(wheel: &Path) -> Vec<String> {
    let out = run(Command::new("python3")
        .args(["-c", "import sys,zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"])
        .arg(wheel));
    out.lines().map(str::to_string).collect()
}

fn read_member(wheel: &Path, name: &str) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", "import sys,zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))"])
        .arg(wheel)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn only_wheel(dir: &Path) -> PathBuf {
    let names = wheels_in(dir);
    assert_eq!(names.len(), 1, "{names:?}");
    dir.join(&names[0])
}

#[test]
fn library_path_and_compression_level_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, false);
    let deps = deps.to_str().unwrap();
    // Found through AUDITWHEEL_LD_LIBRARY_PATH, even with --ldpaths naming only system dirs.
    let out = wheelfix_env(
        d,
        &["repair", "--ldpaths", "/lib:/usr/lib:/lib/x86_64-linux-gnu", "-w", "out", wheel.to_str().unwrap()],
        &[("AUDITWHEEL_LD_LIBRARY_PATH", deps), ("AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "0")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    let methods = run(Command::new("python3")
        .args(["-c", "import sys,zipfile\nfor i in zipfile.ZipFile(sys.argv[1]).infolist():\n    print(i.filename, i.compress_type)"])
        .arg(&repaired));
    let vendored =
        methods.lines().find(|l| l.starts_with("demo.libs/libinner-")).unwrap_or_else(|| panic!("{methods}"));
    assert!(vendored.ends_with(" 0"), "level 0 stores the new members: {vendored}");
    let printed = pip_install_and_run(d, &repaired, "import demo; print(demo.answer())");
    assert_eq!(printed.trim(), "42");
}

#[test]
fn verbose_shows_the_search_and_the_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, false);
    let out = wheelfix(d, &["-v", "show", "--ldpaths", deps.to_str().unwrap(), wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stderr(&out);
    assert!(log.contains("libinner.so.1 (needed by demo/demo"), "{log}");
    assert!(log.contains(&format!("found {}/libinner.so.1; searched {}", deps.display(), deps.display())), "{log}");
    assert!(log.contains("symbol versions allow manylinux_"), "{log}");
    let quiet = wheelfix(d, &["show", "--ldpaths", deps.to_str().unwrap(), wheel.to_str().unwrap()]);
    assert!(!stderr(&quiet).contains("debug:"), "{}", stderr(&quiet));
}

#[test]
fn lddtree_of_a_file_and_of_a_wheel_member() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, false);
    let ext = std::fs::read_dir(d.join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .unwrap();
    let out = wheelfix_env(
        d,
        &["lddtree", "--json", ext.to_str().unwrap()],
        &[("AUDITWHEEL_LD_LIBRARY_PATH", deps.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let tree: wheelfix::report::release::LddtreeDocument = support::document(&out, &[]);
    let inner = &tree.trees[0].libs["libinner.so.1"];
    assert_eq!(inner.found_in.as_deref(), deps.to_str(), "{tree:#?}");
    assert_eq!(inner.source.as_deref(), Some("AUDITWHEEL_LD_LIBRARY_PATH"));
    assert_eq!(tree.trees[0].needed[0], "libinner.so.1");
    // Not found: exit 1, and the text says so.
    let out = wheelfix(d, &["lddtree", ext.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("libinner.so.1 => not found"), "{}", stdout(&out));

    // After repair, the member finds its copy inside the wheel through its RPATH.
    let out = wheelfix(d, &["repair", "--ldpaths", deps.to_str().unwrap(), "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    let member = members(&repaired).into_iter().find(|m| m.starts_with("demo/demo") && m.ends_with(".so")).unwrap();
    let out = wheelfix(d, &["lddtree", repaired.to_str().unwrap(), &member]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("=> wheel:demo.libs/libinner-") && text.contains(&format!("(RPATH of {member})")), "{text}");
    let out = wheelfix(d, &["lddtree", repaired.to_str().unwrap(), "demo/nothing.so"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("demo/nothing.so"), "{}", stderr(&out));
}

fn has_symtab(elf: &[u8]) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.so");
    std::fs::write(&path, elf).unwrap();
    let out = run(Command::new("readelf").args(["-S", "-W"]).arg(&path));
    out.contains(" .symtab ")
}

#[test]
fn strip_strips_the_wheels_own_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, false);
    let member = members(&wheel).into_iter().find(|m| m.ends_with(".so")).unwrap();
    assert!(has_symtab(&read_member(&wheel, &member)), "the fixture has symbols");
    let out =
        wheelfix(d, &["repair", "--strip", "--ldpaths", deps.to_str().unwrap(), "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    assert!(!has_symtab(&read_member(&repaired, &member)), "the wheel's own extension is stripped");
    let vendored = members(&repaired).into_iter().find(|m| m.starts_with("demo.libs/")).unwrap();
    assert!(!has_symtab(&read_member(&repaired, &vendored)));
    support::python::assert_true_record(&repaired);
    std::fs::remove_dir_all(&deps).unwrap();
    let printed = pip_install_and_run(d, &repaired, "import demo; print(demo.answer())");
    assert_eq!(printed.trim(), "42");
}

/// Validate a CycloneDX document against the 1.4 JSON schema (cyclonedx-python-lib's copy).
fn validate_cyclonedx(text: &str) {
    let code = "import sys\nfrom cyclonedx.schema import SchemaVersion\nfrom cyclonedx.validation.json import JsonStrictValidator\nerr = JsonStrictValidator(SchemaVersion.V1_4).validate_str(sys.stdin.read())\nif err: sys.exit(str(err))";
    let mut child = Command::new(tools_venv().join("bin/python"))
        .args(["-c", code])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "not CycloneDX 1.4: {}\n{text}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_sbom_names_every_vendored_library_as_auditwheel_does() {
    assert!(
        !run(Command::new("sh").args(["-c", "command -v dpkg rpm apk || true"])).trim().is_empty(),
        "the test needs dpkg, rpm or apk to attribute libraries to packages"
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, true);
    let ldpaths = format!("{}:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib:/usr/lib", deps.display());
    let out = wheelfix(d, &["repair", "--ldpaths", &ldpaths, "-w", "ours", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ours = only_wheel(&d.join("ours"));
    let sbom_path = "demo-1.0.dist-info/sboms/wheelfix.cdx.json";
    let text = String::from_utf8(read_member(&ours, sbom_path)).unwrap();
    validate_cyclonedx(&text);
    support::python::assert_true_record(&ours);
    let sbom: serde_json::Value = serde_json::from_str(&text).unwrap();

    // Every vendored file is a component with its sha256 and its path in the wheel.
    let vendored: Vec<String> = members(&ours).into_iter().filter(|m| m.starts_with("demo.libs/")).collect();
    assert_eq!(vendored.len(), 3, "libinner, libssl, libcrypto: {vendored:?}");
    let components = sbom["components"].as_array().unwrap();
    for member in &vendored {
        let c = components
            .iter()
            .find(|c| c["properties"].as_array().is_some_and(|p| p.iter().any(|p| p["value"] == member.as_str())))
            .unwrap_or_else(|| panic!("{member} is not in the SBOM: {sbom:#}"));
        let bytes = read_member(&ours, member);
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(c["hashes"][0], serde_json::json!({"alg": "SHA-256", "content": hex}), "{member}");
    }
    let unowned = components.iter().find(|c| c["name"] == "libinner.so.1").expect("an unowned file is named by soname");
    assert_eq!(unowned["type"], "file");

    // Field by field against auditwheel's on the same wheel.
    let theirs_dir = d.join("theirs");
    let status = auditwheel(&[
        "repair".as_ref(),
        "--ldpaths".as_ref(),
        ldpaths.as_ref(),
        "-w".as_ref(),
        theirs_dir.as_ref(),
        wheel.as_ref(),
    ]);
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let theirs = only_wheel(&d.join("theirs"));
    let theirs: serde_json::Value =
        serde_json::from_slice(&read_member(&theirs, "demo-1.0.dist-info/sboms/auditwheel.cdx.json")).unwrap();
    for key in ["bomFormat", "specVersion", "version"] {
        assert_eq!(sbom[key], theirs[key], "{key}");
    }
    for key in ["type", "bom-ref", "name", "version", "purl"] {
        assert_eq!(
            sbom["metadata"]["component"][key], theirs["metadata"]["component"][key],
            "metadata.component.{key}"
        );
    }
    let owned: Vec<&serde_json::Value> = components.iter().filter(|c| c.get("purl").is_some()).collect();
    let their_components = theirs["components"].as_array().unwrap();
    assert_eq!(owned.len(), their_components.len(), "the wheel and each owned library:\n{sbom:#}\n{theirs:#}");
    for (a, b) in owned.iter().zip(their_components) {
        for key in ["type", "bom-ref", "name", "version", "purl"] {
            assert_eq!(a[key], b[key], "component {key}:\n{a:#}\n{b:#}");
        }
        assert!(b["purl"].as_str().unwrap().starts_with("pkg:"), "{b}");
    }
    let refs = |v: &serde_json::Value| -> Vec<String> {
        v["dependencies"][0]["dependsOn"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect()
    };
    let ours_refs = refs(&sbom);
    for r in refs(&theirs) {
        assert!(ours_refs.contains(&r), "{r} depended on");
    }

    // Deterministic: the same repair gives the same bytes.
    let out = wheelfix(d, &["repair", "--ldpaths", &ldpaths, "-w", "again", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(only_wheel(&d.join("again"))).unwrap(), std::fs::read(&ours).unwrap());
}

#[test]
fn patcher_choices_as_auditwheel_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (deps, _) = libraries(d);
    let wheel = demo_wheel(d, &deps, false);
    let (wheel, deps) = (wheel.to_str().unwrap(), deps.to_str().unwrap());
    let out = wheelfix(d, &["repair", "--patcher", "lief-patchelf", "--ldpaths", deps, "-w", "lief", wheel]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wheelfix_env(d, &["repair", "--ldpaths", deps, "-w", "none", wheel], &[("AUDITWHEEL_PATCHER", "none")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the 'none' patcher can't patch"), "{}", stderr(&out));
    assert!(wheels_in(&d.join("none")).is_empty(), "nothing is written");
    let out = wheelfix_env(d, &["repair", "-w", "bad", wheel], &[("AUDITWHEEL_PATCHER", "sed")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("AUDITWHEEL_PATCHER"), "{}", stderr(&out));
}

#[test]
fn rocm_version_help_says_which_wheels_it_marks() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["show", "retag", "repair"] {
        let help = stdout(&wheelfix(dir.path(), &[command, "--help"]));
        let text = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(!text.contains("every wheel with ROCm code"), "{command}: {text}");
        assert!(text.contains("every wheel with compiled code") && text.contains("--mark-pure"), "{command}: {text}");
    }
}
