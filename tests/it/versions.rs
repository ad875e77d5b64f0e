//! `--rocm-version` / `--local-version`: versions, directory names, METADATA, RECORD and exact
//! pins rewritten consistently across a batch, then installed together with pip.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::ElfSpec;
use support::python::{run, system_python};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};

fn compiled(name: &str, version: &str, requires: &[&str]) -> WheelSpec {
    let module = format!("_{name}");
    let mut spec = WheelSpec::new(name, version, "py3-none-linux_x86_64")
        .file(&format!("{name}/__init__.py"), format!("VERSION = '{version}'\n"))
        .file(&format!("{name}/{module}.so"), ElfSpec::extension(&module).build());
    spec.metadata = requires.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    spec
}

fn pure(name: &str, version: &str, requires: &[&str]) -> WheelSpec {
    let mut spec = WheelSpec::new(name, version, "py3-none-any").file(&format!("{name}/__init__.py"), "");
    spec.metadata = requires.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    spec
}

/// The release batch of the seeds, in miniature.
fn batch(dir: &Path) -> Vec<PathBuf> {
    let mut triton = compiled("triton", "3.9.0+gitaad2a60d", &[]);
    // A `.data` directory and a signature: both must follow / go.
    triton = triton.file("triton-3.9.0+gitaad2a60d.data/scripts/triton-tool", "#!python\nprint('tool')\n");
    let mut wheels = vec![
        compiled("torch", "2.15.0a0+git31a77fc", &["triton==3.9.0+gitaad2a60d", "filelock; python_version < \"3\""]),
        triton,
        compiled("nixl_rocm", "1.5.2", &[]),
        pure("nixl", "1.5.2", &["nixl-rocm==1.5.2; platform_system == \"Linux\""]),
        pure("triton_kernels", "1.0.0", &[]),
        compiled("vllm", "0.33.0+rocm101", &["torch==2.15.0a0+git31a77fc", "triton==3.8.0"]),
    ]
    .into_iter()
    .map(|w| w.write(dir))
    .collect::<Vec<_>>();
    // A RECORD.jws signature on torch: it no longer verifies after the rewrite.
    let torch = &wheels[0];
    let spec =
        compiled("torch", "2.15.0a0+git31a77fc", &["triton==3.9.0+gitaad2a60d", "filelock; python_version < \"3\""]);
    let mut members = spec.members();
    members.push(("torch-2.15.0a0+git31a77fc.dist-info/RECORD.jws".into(), b"{}".to_vec()));
    support::wheelgen::write_zip(torch, &members);
    wheels.sort();
    wheels
}

fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    out.sort();
    out
}

fn read_member(wheel: &Path, suffix: &str) -> String {
    let script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nprint(*[n for n in z.namelist()], sep='\\n', file=sys.stderr)\nname = [n for n in z.namelist() if n.endswith(sys.argv[2])][0]\nsys.stdout.write(z.read(name).decode())";
    run(Command::new(system_python()).args(["-c", script]).arg(wheel).arg(suffix))
}

fn args<'a>(base: &[&'a str], wheels: &'a [PathBuf]) -> Vec<&'a str> {
    let mut all = base.to_vec();
    all.extend(wheels.iter().map(|w| w.to_str().unwrap()));
    all
}

#[test]
fn a_batch_is_marked_consistently_and_installs_together() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = batch(dir.path());
    let out = wheelfix(dir.path(), &args(&["retag", "--rocm-version", "10.1.0", "-w", "out"], &wheels));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        names(&dir.path().join("out")),
        [
            "nixl-1.5.2+rocm10.1.0-py3-none-any.whl",
            "nixl_rocm-1.5.2+rocm10.1.0-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
            "torch-2.15.0a0+git31a77fc.rocm10.1.0-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
            "triton-3.9.0+gitaad2a60d.rocm10.1.0-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
            "triton_kernels-1.0.0-py3-none-any.whl",
            "vllm-0.33.0+rocm101-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
        ],
        "{text}"
    );
    assert!(text.contains("pin: triton==3.9.0+gitaad2a60d -> triton==3.9.0+gitaad2a60d.rocm10.1.0"), "{text}");
    assert!(text.contains("upstream's own rocm marker"), "{text}");
    assert!(text.contains("warning: `triton==3.8.0`: pin ==3.8.0 does not match"), "{text}");

    let out_dir = dir.path().join("out");
    let torch =
        out_dir.join("torch-2.15.0a0+git31a77fc.rocm10.1.0-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
    let metadata = read_member(&torch, ".dist-info/METADATA");
    assert!(metadata.contains("Version: 2.15.0a0+git31a77fc.rocm10.1.0\n"));
    assert!(metadata.contains("Requires-Dist: triton==3.9.0+gitaad2a60d.rocm10.1.0\n"));
    assert!(metadata.contains("Requires-Dist: filelock; python_version < \"3\"\n"));
    assert!(metadata.ends_with("A test wheel made by wheelfix's tests.\n"), "the description is kept");
    let vllm = out_dir.join("vllm-0.33.0+rocm101-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl");
    assert!(
        read_member(&vllm, ".dist-info/METADATA").contains("Requires-Dist: torch==2.15.0a0+git31a77fc.rocm10.1.0\n")
    );
    let nixl = out_dir.join("nixl-1.5.2+rocm10.1.0-py3-none-any.whl");
    assert!(
        read_member(&nixl, ".dist-info/METADATA")
            .contains("Requires-Dist: nixl-rocm==1.5.2+rocm10.1.0; platform_system == \"Linux\"\n")
    );

    // Every output verifies with an independent reader: dist-info and .data renamed, RECORD
    // matching, the signature gone.
    let check = r#"
import base64, csv, hashlib, io, sys, zipfile
for path in sys.argv[1:]:
    z = zipfile.ZipFile(path)
    names = [n for n in z.namelist() if not n.endswith('/')]
    record = [n for n in names if n.endswith('.dist-info/RECORD')]
    assert len(record) == 1, (path, record)
    stem = record[0].split('/')[0][:-len('.dist-info')]
    version = path.split('/')[-1].split('-')[1]
    assert stem.endswith('-' + version), (stem, version)
    for n in names:
        top = n.split('/')[0]
        if top.endswith(('.dist-info', '.data')):
            assert top.startswith(stem + '.'), (path, n)
        assert not n.endswith('RECORD.jws'), n
    rows = list(csv.reader(io.StringIO(z.read(record[0]).decode())))
    assert {r[0] for r in rows} == set(names), (path, {r[0] for r in rows} ^ set(names))
    for p, h, size in rows:
        if h:
            digest = base64.urlsafe_b64encode(hashlib.sha256(z.read(p)).digest()).rstrip(b'=').decode()
            assert h == 'sha256=' + digest and int(size) == len(z.read(p)), p
print('ok')
"#;
    let outputs: Vec<PathBuf> = names(&out_dir).iter().map(|n| out_dir.join(n)).collect();
    let printed = run(Command::new(system_python()).arg("-c").arg(check).args(&outputs));
    assert_eq!(printed.trim(), "ok");

    // pip resolves the rewritten pins from the batch alone.
    let site = dir.path().join("site");
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links"])
        .arg(&out_dir)
        .arg("--target")
        .arg(&site)
        .args(["vllm", "nixl", "--no-deps"]));
    let report = run(Command::new(system_python())
        .args(["-m", "pip", "install", "--dry-run", "--disable-pip-version-check", "--no-index", "--find-links"])
        .arg(&out_dir)
        .arg("--ignore-installed")
        .arg("--report")
        .arg("-")
        .arg("-q")
        .args(["nixl", "torch"]));
    for pinned in ["1.5.2+rocm10.1.0", "2.15.0a0+git31a77fc.rocm10.1.0", "3.9.0+gitaad2a60d.rocm10.1.0"] {
        assert!(report.contains(&format!("\"version\": \"{pinned}\"")), "{pinned}: {report}");
    }
    assert!(site.join("vllm").exists() && site.join("nixl").exists());
}

#[test]
fn marking_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = batch(dir.path());
    assert!(wheelfix(dir.path(), &args(&["retag", "--rocm-version", "10.1.0", "-w", "a"], &wheels)).status.success());
    let once: Vec<PathBuf> = names(&dir.path().join("a")).iter().map(|n| dir.path().join("a").join(n)).collect();
    let out = wheelfix(dir.path(), &args(&["retag", "--rocm-version", "10.1.0", "-w", "b"], &once));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(names(&dir.path().join("a")), names(&dir.path().join("b")));
    for name in names(&dir.path().join("a")) {
        assert_eq!(
            std::fs::read(dir.path().join("a").join(&name)).unwrap(),
            std::fs::read(dir.path().join("b").join(&name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn mark_pure_no_mark_and_the_general_label() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = batch(dir.path());
    let out = wheelfix(
        dir.path(),
        &args(&["retag", "--local-version", "cu128", "--mark-pure", "--no-mark", "Triton", "-w", "out"], &wheels),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let got = names(&dir.path().join("out"));
    assert!(got.contains(&"triton_kernels-1.0.0+cu128-py3-none-any.whl".to_string()), "{got:?}");
    assert!(got.iter().any(|n| n.starts_with("triton-3.9.0+gitaad2a60d-")), "{got:?}");
    assert!(got.iter().any(|n| n.starts_with("vllm-0.33.0+rocm101.cu128-")), "{got:?}");
}

#[test]
fn labels_pep_440_would_rewrite_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = batch(dir.path());
    let out = wheelfix(dir.path(), &args(&["retag", "--local-version", "ROCm_10", "-w", "out"], &wheels));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`ROCm_10` is not in PEP 440 normal form (it would become `rocm.10`)"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn show_reports_decisions_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = batch(dir.path());
    let out = wheelfix(dir.path(), &args(&["show", "--json", "--rocm-version", "10.1.0"], &wheels));
    assert!(out.status.success(), "{}", stderr(&out));
    let entries = support::show_entries(&out);
    let change_of = |name: &str| {
        let entry = entries.iter().find(|e| e.report.wheel.starts_with(name)).unwrap();
        entry.version_change.clone().expect("marking: the version fields")
    };
    let torch = change_of("torch");
    let decision = torch.local_version.as_ref().unwrap();
    assert_eq!(decision.version.text, "2.15.0a0+git31a77fc");
    assert_eq!(decision.new_version.as_ref().unwrap().text, "2.15.0a0+git31a77fc.rocm10.1.0");
    assert_eq!(torch.pins[0].new_requirement.as_deref(), Some("triton==3.9.0+gitaad2a60d.rocm10.1.0"));
    let kernels = change_of("triton_kernels").local_version.unwrap();
    assert_eq!(kernels.new_version, None);
    assert!(kernels.reason.contains("nothing to qualify"));
}

#[test]
fn local_labels_sorting_against_rocm_order_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let published = dir.path().join("published");
    std::fs::create_dir(&published).unwrap();
    compiled("torch", "2.15.0a0+git31a77fc.rocm7.14.0", &[]).write(&published);
    let wheel = compiled("torch", "2.15.0a0+git31a77fc", &[]).write(dir.path());
    let out = wheelfix(
        dir.path(),
        &["retag", "--rocm-version", "10.1.0", "--index-dir", "published", "-w", "out", wheel.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("torch 2.15.0a0+git31a77fc.rocm10.1.0 sorts below 2.15.0a0+git31a77fc.rocm7.14.0"), "{err}");
}
