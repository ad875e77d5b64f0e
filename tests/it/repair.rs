//! `wheelfix repair` on real libraries built with `cc`: the repaired wheel installs with pip and
//! imports after the original libraries are gone; auditwheel (from PyPI) vendors the same set
//! under the same names and gives the same tag.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::python::{auditwheel, cc_extension, cc_shared, pip_install_and_run, python_tag, run};
use support::wheelgen::WheelSpec;
use support::{read_member, stderr, stdout, wheelfix};

const INNER: &str =
    "#include <math.h>\nint inner(int x) { volatile double e = 2.0; return (int)pow((double)x, e) + 7; }\n";
const OUTER: &str = "int inner(int);\nint outer(int x) { return inner(x) * 2; }\n";
const HIP: &str = "int hipInit(int x) { return x; }\n";

/// libinner.so.1 ← libouter.so.1 (each in its own directory outside every system path) ← the
/// extension `demo` (and a ROCm-named library, excluded). Returns (wheel, dependency dirs).
fn fixture(d: &Path, with_hip: bool) -> (PathBuf, String) {
    let inner_dir = d.join("deps/inner");
    let outer_dir = d.join("deps/outer");
    std::fs::create_dir_all(&inner_dir).unwrap();
    std::fs::create_dir_all(&outer_dir).unwrap();
    cc_shared(&inner_dir, INNER, "libinner.so.1", &["-Wl,-soname,libinner.so.1", "-Wl,--no-as-needed", "-lm"]);
    let inner_flag = format!("-L{}", inner_dir.display());
    cc_shared(&outer_dir, OUTER, "libouter.so.1", &["-Wl,-soname,libouter.so.1", &inner_flag, "-l:libinner.so.1"]);
    let outer_flag = format!("-L{}", outer_dir.display());
    let mut args: Vec<String> = vec![outer_flag, "-l:libouter.so.1".into()];
    let mut code = "int outer(int);\n#define ANSWER outer(3) + 10\n".to_string();
    if with_hip {
        let hip_dir = d.join("deps/hip");
        std::fs::create_dir_all(&hip_dir).unwrap();
        cc_shared(&hip_dir, HIP, "libamdhip64.so.7", &["-Wl,-soname,libamdhip64.so.7"]);
        args.push(format!("-L{}", hip_dir.display()));
        args.push("-l:libamdhip64.so.7".into());
        code = "int outer(int);\nint hipInit(int);\n#define ANSWER outer(3) + hipInit(10)\n".into();
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ext_dir = d.join("build");
    std::fs::create_dir_all(&ext_dir).unwrap();
    let (so, file) = cc_extension(&ext_dir, "demo", &code, &args);
    let py = python_tag();
    let wheel = WheelSpec::new("demo", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file(&format!("demo/{file}"), std::fs::read(so).unwrap())
        .file("demo/__init__.py", "from .demo import answer\n")
        .write(d);
    let mut dirs = format!("{}:{}", inner_dir.display(), outer_dir.display());
    if with_hip {
        dirs.push_str(&format!(":{}", d.join("deps/hip").display()));
    }
    (wheel, dirs)
}

fn members(wheel: &Path) -> Vec<String> {
    let out = run(Command::new("python3")
        .args(["-c", "import sys,zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"])
        .arg(wheel));
    out.lines().map(str::to_string).collect()
}

fn only_wheel(dir: &Path) -> PathBuf {
    let mut w: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    w.pop().unwrap()
}

#[test]
fn repaired_wheel_installs_and_imports_without_the_original_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (wheel, dirs) = fixture(d, false);
    let out = wheelfix(d, &["repair", "--ldpaths", &dirs, "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    let name = repaired.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.contains("manylinux"), "{name}");
    let libs: Vec<String> = members(&repaired).into_iter().filter(|m| m.starts_with("demo.libs/")).collect();
    assert_eq!(libs.len(), 2, "{libs:?}");
    assert!(libs.iter().any(|l| l.starts_with("demo.libs/libinner-") && l.ends_with(".so.1")));
    assert!(stdout(&out).contains("vendored libouter.so.1"), "{}", stdout(&out));

    std::fs::remove_dir_all(d.join("deps")).unwrap();
    std::fs::remove_dir_all(d.join("build")).unwrap();
    let printed = pip_install_and_run(d, &repaired, "import demo; print(demo.answer())");
    assert_eq!(printed.trim(), "42", "outer(3) = (9 + 7) * 2 = 32, + 10");

    // Repairing the result again vendors nothing new and gives the same bytes.
    let out = wheelfix(d, &["repair", "-w", "again", repaired.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(only_wheel(&d.join("again"))).unwrap(), std::fs::read(&repaired).unwrap());
}

#[test]
fn the_same_libraries_and_tag_as_auditwheel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (wheel, dirs) = fixture(d, false);
    let out = wheelfix(d, &["repair", "--ldpaths", &dirs, "-w", "ours", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let theirs_dir = d.join("theirs");
    let status = auditwheel(&[
        "repair".as_ref(),
        "--ldpaths".as_ref(),
        dirs.as_ref(),
        "-w".as_ref(),
        theirs_dir.as_ref(),
        wheel.as_ref(),
    ]);
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let ours = only_wheel(&d.join("ours"));
    let theirs = only_wheel(&d.join("theirs"));
    assert_eq!(ours.file_name(), theirs.file_name(), "same tags");
    let libs = |w: &Path| -> Vec<String> {
        members(w).into_iter().filter(|m| m.contains(".libs/") && !m.ends_with('/')).collect()
    };
    let (mut a, mut b) = (libs(&ours), libs(&theirs));
    a.sort();
    b.sort();
    assert_eq!(a, b, "same vendored files, same names");
}

#[test]
fn rocm_libraries_stay_external() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (wheel, dirs) = fixture(d, true);
    let out = wheelfix(d, &["repair", "--json", "--ldpaths", &dirs, "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Vec<wheelfix::report::outcome::RetagEntry> = support::entries(&out, &[]);
    let vendored: Vec<&str> = result[0].grafts.iter().map(|g| g.soname.as_str()).collect();
    assert_eq!(vendored, ["libinner.so.1", "libouter.so.1"]);
    let tags = support::tag_texts(&result[0].tags);
    assert!(tags.iter().all(|t| t.starts_with("manylinux")), "{tags:?}");
    assert!(!members(&only_wheel(&d.join("out"))).iter().any(|m| m.contains("libamdhip64")));
}

#[test]
fn a_library_that_cannot_be_found_is_an_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (wheel, _) = fixture(d, false);
    let out =
        wheelfix(d, &["repair", "--ldpaths", "/nonexistent/a:/nonexistent/b", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("libouter.so.1, needed by demo/demo"), "{err}");
    assert!(err.contains("searched /nonexistent/a, /nonexistent/b"), "{err}");
    let written: Vec<_> = std::fs::read_dir(d.join("out")).map(|r| r.collect::<Vec<_>>()).unwrap_or_default();
    assert!(written.is_empty(), "{written:?}");
}

#[test]
fn executables_in_scripts_move_behind_a_shim_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, dirs) = fixture(d, false);
    // An executable installed as a script, needing libouter.so.1.
    let src = d.join("tool.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint outer(int);\nint main(void) { printf(\"%d\\n\", outer(3)); return 0; }\n",
    )
    .unwrap();
    let tool = d.join("demo-tool");
    run(Command::new("cc")
        .arg("-o")
        .arg(&tool)
        .arg(&src)
        .arg(format!("-L{}", d.join("deps/outer").display()))
        .arg("-l:libouter.so.1")
        .arg(format!("-Wl,-rpath-link,{}", d.join("deps/inner").display())));
    let py = python_tag();
    let wheel = WheelSpec::new("demo", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file("demo/__init__.py", "")
        .file("demo-1.0.data/scripts/demo-tool", std::fs::read(&tool).unwrap())
        .write(&d.join("in"));
    let out = wheelfix(d, &["repair", "--ldpaths", &dirs, "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    let names = members(&repaired);
    assert!(names.contains(&"demo.scripts/demo-tool".to_string()), "{names:?}");
    assert!(names.contains(&"demo-1.0.data/scripts/demo-tool".to_string()), "the shim takes its place: {names:?}");

    std::fs::remove_dir_all(d.join("deps")).unwrap();
    let venv = d.join("venv");
    run(Command::new(support::python::system_python()).args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(&repaired));
    let printed = run(&mut Command::new(venv.join("bin/demo-tool")));
    assert_eq!(printed.trim(), "32");
}

#[test]
fn auditwheel_flags_no_update_tags_and_allow_pure_python_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (wheel, dirs) = fixture(d, false);
    let args = [
        "repair",
        "--no-update-tags",
        "--allow-pure-python-wheel",
        "--ldpaths",
        &dirs,
        "-w",
        "out",
        wheel.to_str().unwrap(),
    ];
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    assert_eq!(repaired.file_name(), wheel.file_name(), "the tags stay");
    assert_eq!(members(&repaired).iter().filter(|m| m.starts_with("demo.libs/")).count(), 2);
    let pure = WheelSpec::new("purely", "1.0", "py3-none-any").file("purely/__init__.py", "").write(&d.join("pure"));
    assert!(wheelfix(d, &["show", "--allow-pure-python-wheel", pure.to_str().unwrap()]).status.success());
}

/// Libraries linked with lld, as ROCm's toolchain links them: their dynamic section has no spare
/// entry (one DT_NULL), so the RPATH that points the extension at its vendored libraries needs
/// a larger one. Repair moves the dynamic section (and what it needs room for) into a segment of
/// its own; the wheel installs and imports, and the patched file passes the loadability lint.
#[test]
fn libraries_linked_with_lld_get_room_for_their_rpath() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lld = ["-fuse-ld=lld", "-B/usr/lib/llvm-19/bin"];
    let inner_dir = d.join("deps/inner");
    let outer_dir = d.join("deps/outer");
    std::fs::create_dir_all(&inner_dir).unwrap();
    std::fs::create_dir_all(&outer_dir).unwrap();
    let inner_flag = format!("-L{}", inner_dir.display());
    let outer_flag = format!("-L{}", outer_dir.display());
    cc_shared(&inner_dir, INNER, "libinner.so.1", &[&["-Wl,-soname,libinner.so.1", "-lm"][..], &lld].concat());
    let outer_args = [&["-Wl,-soname,libouter.so.1", inner_flag.as_str(), "-l:libinner.so.1"][..], &lld].concat();
    let outer = cc_shared(&outer_dir, OUTER, "libouter.so.1", &outer_args);
    assert_eq!(dynamic_nulls(&std::fs::read(&outer).unwrap()), 1, "lld leaves no spare entry");
    let ext_dir = d.join("build");
    std::fs::create_dir_all(&ext_dir).unwrap();
    let code = "int outer(int);\n#define ANSWER outer(3) + 10\n";
    let (so, file) =
        cc_extension(&ext_dir, "demo", code, &[&[outer_flag.as_str(), "-l:libouter.so.1"][..], &lld].concat());
    assert_eq!(dynamic_nulls(&std::fs::read(&so).unwrap()), 1, "lld leaves no spare entry");
    let py = python_tag();
    let wheel = WheelSpec::new("demo", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file(&format!("demo/{file}"), std::fs::read(&so).unwrap())
        .file("demo/__init__.py", "from .demo import answer\n")
        .write(d);
    let dirs = format!("{}:{}", inner_dir.display(), outer_dir.display());
    let out = wheelfix(d, &["repair", "--ldpaths", &dirs, "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = only_wheel(&d.join("out"));
    let out = wheelfix(d, &["check", "--json", d.join("out").to_str().unwrap()]);
    assert!(!stdout(&out).contains("not-loadable"), "{}", stdout(&out));
    // elfutils' lint says nothing of the patched file that it did not say of the original.
    let original = so.clone();
    let patched = d.join("patched.so");
    std::fs::write(&patched, read_member(&repaired, &format!("demo/{file}"))).unwrap();
    let elflint = |path: &Path| {
        let out = Command::new("eu-elflint").arg("--gnu-ld").arg(path).output().expect("eu-elflint (elfutils)");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect::<Vec<String>>()
    };
    let before = elflint(&original);
    let new: Vec<String> = elflint(&patched).into_iter().filter(|l| !before.contains(l)).collect();
    assert!(new.is_empty(), "eu-elflint on the patched file: {new:?}");
    std::fs::remove_dir_all(d.join("deps")).unwrap();
    std::fs::remove_dir_all(d.join("build")).unwrap();
    let printed = pip_install_and_run(d, &repaired, "import demo; print(demo.answer())");
    assert_eq!(printed.trim(), "42");
}

/// The DT_NULL entries of a 64-bit little-endian file's `.dynamic` section (its whole size).
fn dynamic_nulls(elf: &[u8]) -> usize {
    use object::{Object, ObjectSection};
    let file = object::File::parse(elf).unwrap();
    let dynamic = file.section_by_name(".dynamic").unwrap().data().unwrap();
    dynamic.chunks_exact(16).filter(|e| e[..8] == [0; 8]).count()
}
