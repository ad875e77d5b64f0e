//! Trust, third round: nothing a wheel, an sdist, a manifest, a page's data or a server says can
//! delete a file, escape a directory, run in a page or hang wheelfix. Every hostile input is
//! built here; each test names the defect it holds fixed.

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::gpugen::{GFX942, GFX950, bundle_for, host_with_fatbin};
use support::http::Server;
use support::python::{assert_true_record, system_python};
use support::sets::{gpu_wheel, py3_wheel};
use support::wheelgen::WheelSpec;
use support::{run_measured, stderr, stdout, wheelfix, wheelfix_env};

fn demo_wheel(dir: &Path) -> PathBuf {
    py3_wheel("demo", "1.0", &[]).write(dir)
}

/// An sdist holding `<top>/PKG-INFO` with `pkg_info`, named `file_name`; `gzip_members`
/// streams, each holding part of the tar (Python's tarfile reads them as one).
fn sdist(dir: &Path, file_name: &str, top: &str, pkg_info: &str, gzip_members: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(pkg_info.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, format!("{top}/PKG-INFO"), pkg_info.as_bytes()).unwrap();
    let bytes = tar.into_inner().unwrap();
    let mut out = Vec::new();
    let chunk = bytes.len().div_ceil(gzip_members);
    for part in bytes.chunks(chunk) {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(part).unwrap();
        out.extend(gz.finish().unwrap());
    }
    let path = dir.join(file_name);
    std::fs::write(&path, out).unwrap();
    path
}

/// Run with a bound on its time: a hang fails the test instead of stopping the suite.
fn run_within(cwd: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("wheelfix {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_upload_manifest_never_removes_what_it_does_not_own() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = demo_wheel(&d.join("in"));
    let gone = py3_wheel("gone", "1.0", &[]).write(&d.join("in"));
    let args = ["index", "--base-url", "https://h.example/dl/", "--upload-dir", "up", "-o", "site", "in"];
    assert!(wheelfix(d, &args).status.success());
    std::fs::write(d.join("victim.txt"), "keep me").unwrap();
    std::fs::write(d.join("up/changed.txt"), "new bytes").unwrap();
    std::fs::write(d.join("up/linked-away"), "x").unwrap();
    let manifest_path = d.join("up/.wheelfix-upload.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let site = std::fs::canonicalize(d.join("site")).unwrap().display().to_string();
    let entry = |sha: &str| serde_json::json!({"sha256": sha, "sites": [site]});
    let files = manifest["files"].as_object_mut().unwrap();
    let input_name = input.file_name().unwrap().to_str().unwrap();
    for hostile in [
        "../victim.txt".to_string(),
        d.join("victim.txt").display().to_string(),
        format!("../in/{input_name}"),
        ".wheelfix-upload.json".to_string(),
        ".".to_string(),
    ] {
        files.insert(hostile, entry("0".repeat(64).as_str()));
    }
    // A plain name whose bytes changed since: not ours any more.
    files.insert("changed.txt".into(), entry(&"1".repeat(64)));
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    // The next run no longer indexes `gone`: its files (placed by the first run, unchanged) go.
    std::fs::remove_file(&gone).unwrap();
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(std::fs::read_to_string(d.join("victim.txt")).unwrap(), "keep me");
    assert!(input.is_file() && manifest_path.is_file());
    assert_eq!(std::fs::read_to_string(d.join("up/changed.txt")).unwrap(), "new bytes");
    assert!(err.contains("not a plain file name"), "{err}");
    assert!(err.contains("left changed.txt"), "{err}");
    assert!(!d.join("up/gone-1.0-py3-none-any.whl").exists(), "{err}");
    assert!(d.join(format!("up/{input_name}")).is_file());
}

#[test]
fn an_output_that_is_a_symlink_is_published_through_never_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("in"));
    assert!(wheelfix(d, &["index", "-o", "releases/v1", "in"]).status.success());
    std::os::unix::fs::symlink("releases/v1", d.join("current")).unwrap();
    py3_wheel("second", "2.0", &[]).write(&d.join("in"));
    let out = wheelfix(d, &["index", "-o", "current", "in"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(d.join("current")).unwrap().file_type().is_symlink());
    assert!(d.join("releases/v1/demo/index.html").is_file());
    assert!(d.join("releases/v1/second/index.html").is_file(), "the new site is where the link points");
    // The same for `site`, whose output links to an earlier output.
    assert!(wheelfix(d, &["site", "-o", "pub/a", "releases/v1"]).status.success());
    std::os::unix::fs::symlink("a", d.join("pub/live")).unwrap();
    let out = wheelfix(d, &["site", "-o", "pub/live", "releases/v1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(d.join("pub/a/index.html").is_file() && d.join("pub/a/v1/second/index.html").is_file());
    for parent in [d.join("releases"), d.to_path_buf(), d.join("pub")] {
        let left: Vec<_> = std::fs::read_dir(&parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".wheelfix-"))
            .collect();
        assert!(left.is_empty(), "{left:?} left in {}", parent.display());
    }
}

#[test]
fn hostile_project_names_are_skipped_with_their_reason_and_the_rest_published() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    demo_wheel(&set);
    let outside = d.join("outside");
    let pkg = |name: &str| format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n");
    let hostile = [
        outside.display().to_string(),
        "<img src=x onerror=alert(1)>".to_string(),
        "x; touch pwned #".to_string(),
        "a".repeat(300),
        "nul\0name".to_string(),
        "%2e%2e/%2e%2e/admin".to_string(),
        "evil?x=1".to_string(),
    ];
    for (i, name) in hostile.iter().enumerate() {
        sdist(&set, &format!("h{i}-1.0.tar.gz"), &format!("h{i}-1.0"), &pkg(name), 1);
    }
    let out = wheelfix(d, &["index", "-o", "site", "set"]);
    assert_eq!(out.status.code(), Some(1), "skipped files fail the run: {}", stderr(&out));
    let err = stderr(&out);
    // A PEP 508 name of any length is valid: the 300-byte one is left out because no sdist
    // file name can hold it (`<name>-<version>.tar.gz` is longer than a file name may be).
    assert_eq!(err.matches("is not a valid project name").count(), hostile.len() - 1, "{err}");
    assert!(err.contains("h3-1.0.tar.gz: left out of the index: the sdist's file name is not"), "{err}");
    assert!(!outside.exists(), "nothing is written outside -o");
    assert!(!d.join("pwned").exists());
    assert!(d.join("site/demo/index.html").is_file());
    let root = std::fs::read_to_string(d.join("site/index.html")).unwrap();
    assert!(!root.contains("<img") && !root.contains("h0"), "{root}");
}

#[test]
fn an_sdist_of_several_gzip_members_is_read_and_a_misnamed_one_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let info = "Metadata-Version: 2.1\nName: multi\nVersion: 1.0\n";
    sdist(&d.join("set"), "multi-1.0.tar.gz", "multi-1.0", info, 3);
    sdist(&d.join("set"), "multi-2.0\".tar.gz", "multi-2.0", info, 1);
    let out = wheelfix(d, &["index", "-o", "site", "set"]);
    let page = std::fs::read_to_string(d.join("site/multi/index.html")).unwrap();
    assert!(page.contains("multi-1.0.tar.gz#sha256="), "{page}");
    assert!(!page.contains("2.0"), "{page}");
    assert!(stderr(&out).contains("not `<name>-<version>.tar.gz`"), "{}", stderr(&out));
}

/// Chromium's DOM of `url` after its scripts had time to run.
fn rendered(url: &str) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom", url])
        .output()
        .expect("headless Chromium (`apt-get install chromium`; scripts/test installs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn no_rendered_field_runs_as_script_and_commands_are_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    let script = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">";
    // Markup in every field a page shows: a requirement (its check finding), an extra, a
    // title, an sdist's name (skipped), a Requires-Python.
    let mut spec = py3_wheel("victim", "1.0", &[&format!("missing==1; extra == \"{script}\"")]);
    spec.metadata.push(format!("Requires-Python: >=3.8,{script}"));
    spec.metadata.push(format!("Provides-Extra: {script}"));
    spec.write(&set);
    sdist(&set, "h-1.0.tar.gz", "h-1.0", &format!("Name: {script}\nVersion: 1.0\n"), 1);
    let title = format!("{script}'; touch pwned #");
    let out = wheelfix(d, &["index", "--title", &title, "-o", "site/gfx942", "set"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = wheelfix(d, &["site", "--title", &title, "-o", "public", "site/gfx942"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for page in ["index.html", "gfx942/release.html", "gfx942/index.html", "gfx942/victim/index.html"] {
        let path = d.join("public").join(page);
        let dom = rendered(&format!("file://{}", path.display()));
        assert!(!dom.contains("data-pwned=\"1\""), "{page} ran a script: {dom}");
        let html = std::fs::read_to_string(&path).unwrap();
        assert!(!html.contains("<img"), "{page} holds markup from its inputs");
    }
    // The copyable commands split into exactly the words they show, as a shell reads them.
    let html = std::fs::read_to_string(d.join("public/gfx942/release.html")).unwrap();
    let pip = html.split("id=\"pip\">").nth(1).unwrap().split("</code>").next().unwrap();
    let words = support::python::run(Command::new(system_python()).args([
        "-c",
        "import html,shlex,sys,json;print(json.dumps(shlex.split(html.unescape(sys.argv[1]))))",
        pip,
    ]));
    let words: Vec<String> = serde_json::from_str(&words).unwrap();
    assert_eq!(words[..2], ["pip".to_string(), "install".to_string()]);
    assert!(words.iter().all(|w| !w.contains(';')), "{words:?}");
    // A URL with a quote or a newline, or one of another scheme, is a usage error.
    for url in ["https://h/x'; touch pwned #", "https://h/x\nrm -rf ~", "javascript:alert(1)", "ftp://h/"] {
        let out = wheelfix(d, &["index", "--site-url", url, "-o", "other", "set"]);
        assert_eq!(out.status.code(), Some(2), "{url:?}: {}", stderr(&out));
    }
    assert!(!d.join("pwned").exists());
}

#[test]
fn a_release_json_link_of_another_scheme_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    assert!(wheelfix(d, &["index", "-o", "gfx942", "set"]).status.success());
    let path = d.join("gfx942/release.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut page: serde_json::Value = serde_json::from_str(&text).unwrap();
    page["files"][0]["href"] = "javascript:alert(1)".into();
    std::fs::write(&path, serde_json::to_vec(&page).unwrap()).unwrap();
    let out = wheelfix(d, &["site", "-o", "public", "gfx942"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("javascript:alert(1)"), "{}", stderr(&out));
    assert!(!d.join("public").exists());
}

#[test]
fn site_publishes_only_what_lies_inside_each_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    assert!(wheelfix(d, &["index", "-o", "gfx942", "set"]).status.success());
    std::fs::write(d.join("secret"), "private").unwrap();
    std::os::unix::fs::symlink(d.join("secret"), d.join("gfx942/leak")).unwrap();
    std::os::unix::fs::symlink(".", d.join("gfx942/loop")).unwrap();
    std::os::unix::fs::symlink(d.join("set"), d.join("gfx942/demo/outside")).unwrap();
    let out = run_within(d, &["site", "-o", "public", "gfx942"], &[], Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    for name in ["leak", "loop", "demo/outside"] {
        assert!(!d.join("public/gfx942").join(name).exists(), "{name} was published");
        assert!(err.contains(&format!("gfx942/{name}: a symbolic link")), "{err}");
    }
    assert!(d.join("public/gfx942/demo/index.html").is_file());
}

#[test]
fn site_reads_release_json_only_from_a_regular_file_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    assert!(wheelfix(d, &["index", "-o", "fifo/gfx942", "set"]).status.success());
    let json = d.join("fifo/gfx942/release.json");
    std::fs::remove_file(&json).unwrap();
    assert!(Command::new("mkfifo").arg(&json).status().unwrap().success());
    let out = run_within(d, &["site", "-o", "p1", "fifo/gfx942"], &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FIFO"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&json).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &json).unwrap();
    let (out, peak) = run_measured(d, &["site", "-o", "p2", "fifo/gfx942"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(peak < 100 << 20, "peak RSS {peak}");
}

#[test]
fn resolve_values_are_requirements_never_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("reqs.txt"), "demo\n").unwrap();
    for value in [
        "--resolve=--report=clobbered.json",
        "--resolve=--index-url=http://127.0.0.1:9/",
        "--resolve=-rreqs.txt",
        "--resolve=demo\n--index-url=http://127.0.0.1:9/",
    ] {
        let out = wheelfix(d, &["check", value, "--index-url", "https://h.example/simple/"]);
        assert_eq!(out.status.code(), Some(2), "{value:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("PEP 508"), "{}", stderr(&out));
    }
    assert!(!d.join("clobbered.json").exists());
}

/// A set served from a `file://` index, resolved with the real pip; a `pip/` package in the
/// directory wheelfix runs in never runs.
#[test]
fn resolve_runs_pip_isolated_on_a_file_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    assert!(wheelfix(d, &["index", "--no-page", "-o", "site", "set"]).status.success());
    std::fs::create_dir(d.join("pip")).unwrap();
    let marker = d.join("planted-pip-ran");
    std::fs::write(d.join("pip/__init__.py"), "").unwrap();
    std::fs::write(d.join("pip/__main__.py"), format!("open({:?}, 'w').write('ran')\n", marker.display().to_string()))
        .unwrap();
    let url = format!("file://{}/", d.join("site").display());
    let out = wheelfix(d, &["check", "--resolve", "demo", "--index-url", &url, "--extra-index-url", &url]);
    assert!(!marker.exists(), "the planted pip ran");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("demo"), "{}", stdout(&out));
}

/// A fake `python3` first on PATH: `-m pip --version` answers, `install` does what `body` says.
fn fake_python(dir: &Path, body: &str) -> String {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *--version*) echo 'pip 99.0 from /x (python 3.11)'; exit 0;; esac\n{body}\n"
    );
    let path = bin.join("python3");
    support::write_executable(&path, script.as_bytes());
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
fn a_hanging_or_flooding_resolver_is_stopped_and_its_output_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = ["check", "--resolve", "demo", "--index-url", "https://h.example/simple/", "--timeout", "1"];
    let path = fake_python(d, "sleep 600");
    let out = run_within(d, &args, &[("PATH", &path)], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stopped after 20 s"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 600 MB on stderr: kept as a bounded tail.
    let path = fake_python(
        d,
        "head -c 600000000 /dev/zero | tr '\\0' x >&2; echo 'ERROR: No matching distribution found for demo (the end)' >&2; exit 1",
    );
    let measure = format!(
        "import os,resource,subprocess,sys\nenv=dict(os.environ,PATH={path:?})\nr=subprocess.run(sys.argv[1:],env=env,capture_output=True)\nsys.stdout.write(r.stdout.decode())\nsys.stderr.write('%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\nsys.exit(r.returncode)\n"
    );
    let out = Command::new(system_python())
        .arg("-c")
        .arg(measure)
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .args(args)
        .current_dir(d)
        .output()
        .unwrap();
    let peak_kb: u64 = String::from_utf8_lossy(&out.stderr).trim().parse().unwrap();
    assert!(stdout(&out).contains("No matching distribution found for demo (the end)"), "{}", stdout(&out));
    assert!(peak_kb < 100 << 10, "peak RSS {peak_kb} kB");
}

#[test]
fn out_of_range_settings_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = demo_wheel(d);
    let out =
        wheelfix(d, &["check", "--timeout", "18446744073709551615", "--upstream", "https://h.example/simple", "."]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = wheelfix_env(d, &["show", wheel.to_str().unwrap()], &[("RAYON_NUM_THREADS", "5000")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("RAYON_NUM_THREADS"), "{}", stderr(&out));
    let out = wheelfix_env(d, &["show", wheel.to_str().unwrap()], &[("RAYON_NUM_THREADS", "3")]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_pyproject_that_does_not_parse_is_an_error_not_a_parents_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("pyproject.toml"), "[tool.wheelfix]\nplat = 'manylinux_2_28_x86_64'\n").unwrap();
    let sub = d.join("project");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("pyproject.toml"), "[tool.wheelfix\nplat = \n").unwrap();
    let wheel = demo_wheel(&sub);
    let out = wheelfix(&sub, &["show", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&sub.join("pyproject.toml").display().to_string()), "{}", stderr(&out));
}

/// The `.hip_fatbin` section header of an ELF64 file, given a size past the end of the file.
fn break_fatbin_header(elf: &mut [u8]) {
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(elf, 0x28), u16_at(elf, 0x3A), u16_at(elf, 0x3C), u16_at(elf, 0x3E));
    let strtab = u64_at(elf, shoff + shstrndx * shentsize + 0x18);
    for i in 0..shnum {
        let header = shoff + i * shentsize;
        let name_at = strtab + u32::from_le_bytes(elf[header..header + 4].try_into().unwrap()) as usize;
        if elf[name_at..].starts_with(b".hip_fatbin\0") {
            elf[header + 0x20..header + 0x28].copy_from_slice(&(1u64 << 40).to_le_bytes());
            return;
        }
    }
    panic!("no .hip_fatbin section");
}

#[test]
fn a_fatbin_section_header_past_the_file_is_said_and_its_bundles_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut library = host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6));
    break_fatbin_header(&mut library);
    let wheel = WheelSpec::new("kern", "1.0", "cp312-cp312-manylinux_2_17_x86_64")
        .file("kern/__init__.py", "")
        .file("kern/_k.so", library)
        .write(d);
    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx942", wheel.to_str().unwrap()]);
    let text = stdout(&out) + &stderr(&out);
    assert!(text.contains("runs past the end of the file"), "{text}");
    assert!(text.contains("gfx950"), "{text}");
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "thin must not rewrite what it cannot place: {}", stdout(&out));
    assert!(!d.join("out").join(wheel.file_name().unwrap()).exists());
}

#[test]
fn thin_corrects_a_stale_record_even_with_nothing_to_drop_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut spec = gpu_wheel("kern", "1.0", &[("gfx942", GFX942)], &[]);
    spec.bad_hash.push("kern/__init__.py".into());
    let wheel = spec.write(d);
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("its RECORD disagreed with the archive"), "{}", stderr(&out));
    assert!(stdout(&out).contains("RECORD corrected"), "{}", stdout(&out));
    assert_true_record(&d.join("out").join(wheel.file_name().unwrap()));
}

#[test]
fn a_record_that_starts_with_a_byte_order_mark_is_not_true() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = py3_wheel("bom", "1.0", &[]);
    let mut members = spec.members();
    let record = members.iter_mut().find(|(n, _)| n.ends_with("/RECORD")).unwrap();
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(&record.1);
    record.1 = with_bom;
    let path = d.join(spec.file_name());
    support::wheelgen::write_zip(&path, &members);
    let out = wheelfix(d, &["retag", "-w", "out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("its RECORD disagreed"), "{}", stderr(&out));
    let fixed = d.join("out").join(spec.file_name());
    assert_true_record(&fixed);
}

/// An upstream index on 127.0.0.1 that answers only with basic authentication, and serves
/// `pages` (path → (content type, body)).
const AUTH_SERVER: &str = r#"import base64, http.server, json, sys
port, pages = int(sys.argv[1]), json.load(open(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"user:s3cret").decode():
            self.send_response(401); self.end_headers(); return
        page = pages.get(self.path)
        if page is None:
            self.send_response(404); self.end_headers(); return
        body = page[1].encode("latin-1") if "8859" in page[0] else page[1].encode()
        self.send_response(200); self.send_header("Content-Type", page[0]); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

fn auth_server(dir: &Path, pages: serde_json::Value) -> (std::process::Child, u16) {
    std::fs::write(dir.join("server.py"), AUTH_SERVER).unwrap();
    std::fs::write(dir.join("pages.json"), pages.to_string()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(system_python())
        .arg(dir.join("server.py"))
        .arg(port.to_string())
        .arg(dir.join("pages.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

#[test]
fn upstream_credentials_are_sent_and_never_printed_and_odd_pages_read_as_pip_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    py3_wheel("cafe", "1.0", &[]).write(&d.join("set"));
    py3_wheel("future", "1.0", &[]).write(&d.join("set"));
    let pages = serde_json::json!({
        "/simple/demo/": ["application/vnd.pypi.simple.v1+json", r#"{"meta":{"api-version":"1.1"},"name":"demo","files":[{"filename":"demo-9.0-py3-none-any.whl","url":"demo-9.0-py3-none-any.whl","hashes":{}}]}"#],
        "/simple/cafe/": ["text/html; charset=ISO-8859-1", "<html><body><a href=\"cafe-9.0-py3-none-any.whl\">cafe-9.0-py3-none-any.whl</a> caf\u{e9}</body></html>"],
        "/simple/future/": ["application/vnd.pypi.simple.v1+json", r#"{"meta":{"api-version":"2.0"},"name":"future","files":[]}"#],
    });
    let (mut server, port) = auth_server(d, pages);
    let url = format!("http://user:s3cret@127.0.0.1:{port}/simple/");
    let out = wheelfix(d, &["check", "--json", "--upstream", &url, "set"]);
    let _ = server.kill();
    let text = stdout(&out) + &stderr(&out);
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("user:****@127.0.0.1"), "{text}");
    assert!(text.contains("demo-9.0") || text.contains("9.0"), "the authenticated page was read: {text}");
    assert!(text.contains("cafe"), "{text}");
    assert!(
        !text.contains("cafe/ is unreachable")
            && !text.contains("cannot read http://user:****@127.0.0.1:{port}/simple/cafe/"),
        "{text}"
    );
    assert!(text.contains("api-version 2.0"), "{text}");
}

#[test]
fn a_huge_upstream_page_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    demo_wheel(&d.join("set"));
    let root = d.join("upstream");
    std::fs::create_dir_all(root.join("demo")).unwrap();
    // 200 MB of a PEP 691 page in a key the answer does not need.
    let mut page = std::fs::File::create(root.join("demo/index.json")).unwrap();
    page.write_all(br#"{"meta":{"api-version":"1.1"},"name":"demo","padding":""#).unwrap();
    let block = vec![b'x'; 1 << 20];
    for _ in 0..200 {
        page.write_all(&block).unwrap();
    }
    page.write_all(br#"","files":[{"filename":"demo-9.0-py3-none-any.whl","url":"x.whl","hashes":{}}]}"#).unwrap();
    drop(page);
    let server = Server::start_pep691(&root);
    let (out, peak) = run_measured(d, &["check", "--upstream", &server.url(""), "set"]);
    assert!(stdout(&out).contains("9.0"), "{}{}", stdout(&out), stderr(&out));
    assert!(peak < 120 << 20, "peak RSS {} MB for a 200 MB page", peak >> 20);
}

#[test]
fn a_resolver_that_cannot_run_is_its_error_not_the_releases() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [
        "check",
        "--resolve",
        "demo",
        "--index-url",
        "https://h.example/simple/",
        "--platform",
        "manylinux_2_28_x86_64",
    ];
    let path = fake_python(
        d,
        "echo 'ERROR: Can not use --python-version/--platform/--abi/--implementation unless installing via --target' >&2; exit 1",
    );
    let out = run_within(d, &args, &[("PATH", &path)], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("pip 99.0 could not run the resolution (this says nothing of the release)"), "{said}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("resolve-failed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // No resolution at all is the release's: a finding.
    let path = fake_python(d, "echo 'ERROR: No matching distribution found for demo' >&2; exit 1");
    let out = run_within(d, &args, &[("PATH", &path)], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("resolve-failed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A pip too old for --report is named, with what to do.
    let bin = d.join("oldbin");
    std::fs::create_dir_all(&bin).unwrap();
    support::write_executable(&bin.join("python3"), b"#!/bin/sh\necho 'pip 21.3.1 from /x (python 3.9)'\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = run_within(d, &args, &[("PATH", &path)], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is pip 21.3.1; --resolve needs pip 22.2 or newer"), "{said}");
}
