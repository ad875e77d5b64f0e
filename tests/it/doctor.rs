//! `wheelfix doctor` on environments installed with pip from real wheels (a fat HIP library, its
//! thin and split forms, a split set missing its device wheel, a damaged archive, a symlinked
//! library, mixed ROCm ABIs, kernel databases for another GPU only) and on fake `/sys` trees:
//! each verdict checked, each suggested command run as printed, and `doctor` clean after it.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::ElfSpec;
use support::gpugen::{GFX90A, GFX942, bundle_for, section};
use support::python::{run, system_python, validate};
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix, wheelfix_env};
use wheelfix::report::ShowReport;
use wheelfix::report::doctor::DoctorDocument;

/// A HIP extension with one wrapped bundle: gfx942 (either mode) and gfx90a with XNACK on only;
/// it needs the HIP runtime of ROCm `rocm_major`.
fn hip_extension(rocm_major: u32) -> Vec<u8> {
    // e_flags: the processor, XNACK any (0x100) or on (0x300), SRAMECC any (0x400).
    let fatbin = bundle_for(&[("gfx942", GFX942 | 0x500), ("gfx90a:xnack+", GFX90A | 0x700)], 5);
    let wrapper = [0x4849_5046u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
    let wrapper = [wrapper, vec![0u8; 16]].concat();
    ElfSpec {
        sections: vec![section(".hip_fatbin", 1, fatbin), section(".hipFatBinSegment", 1, wrapper)],
        ..ElfSpec::extension("_k")
    }
    .needs(&format!("libamdhip64.so.{rocm_major}"))
    .build()
}

fn fat_wheel(dir: &Path) -> PathBuf {
    WheelSpec::new("demo_gpu", "1.0", "py3-none-linux_x86_64")
        .file("demo_gpu/__init__.py", "")
        .file("demo_gpu/_k.so", hip_extension(7))
        .write(dir)
}

/// A virtual environment with pip, its site-packages.
fn new_venv(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let venv = dir.join(name);
    run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
    let lib = venv.join("lib");
    let python = std::fs::read_dir(&lib).unwrap().next().unwrap().unwrap().file_name();
    let site = lib.join(python).join("site-packages");
    assert!(site.is_dir(), "{}", site.display());
    (venv, site)
}

fn pip_install(venv: &Path, wheels: &Path, requirement: &str) {
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--find-links"])
        .arg(wheels)
        .arg(requirement));
}

/// A fake `/sys`: KFD nodes `(gfx_target_version, capability)` (0: a CPU node), and the
/// driver's `noretry` when given.
fn sysfs(dir: &Path, name: &str, nodes: &[(u32, u64)], noretry: Option<i32>) -> PathBuf {
    let root = dir.join(name);
    for (n, (version, capability)) in nodes.iter().enumerate() {
        let node = root.join(format!("class/kfd/kfd/topology/nodes/{n}"));
        std::fs::create_dir_all(&node).unwrap();
        let text =
            format!("cpu_cores_count 0\nsimd_count 304\ngfx_target_version {version}\ncapability {capability}\n");
        std::fs::write(node.join("properties"), text).unwrap();
    }
    if let Some(noretry) = noretry {
        let p = root.join("module/amdgpu/parameters");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("noretry"), format!("{noretry}\n")).unwrap();
    }
    root
}

/// The stub HIP runtimes of ROCm 6 and 7, in one directory for `LD_LIBRARY_PATH`.
fn hip_runtimes(dir: &Path) -> PathBuf {
    let lib = dir.join("rocm-lib");
    std::fs::create_dir_all(&lib).unwrap();
    for major in [6, 7] {
        let name = format!("libamdhip64.so.{major}");
        support::python::cc_shared(&lib, "int hipInit(unsigned f) { return (int)f; }\n", &name, &[]);
    }
    lib
}

struct Doctor {
    code: i32,
    text: String,
    json: DoctorDocument,
}

/// `doctor` twice (text and JSON, the JSON validated against its schema), with `env`.
fn doctor(d: &Path, args: &[&str], env: &[(&str, &str)]) -> Doctor {
    let out = wheelfix_env(d, &[&["doctor"], args].concat(), env);
    let json = wheelfix_env(d, &[&["doctor", "--json"], args].concat(), env);
    assert_eq!(out.status.code(), json.status.code(), "{}", stderr(&json));
    validate("doctor.schema.json", &json.stdout);
    Doctor { code: out.status.code().unwrap(), text: stdout(&out), json: support::document(&json, &[]) }
}

impl Doctor {
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for e in &self.json.environments {
            for p in &e.diagnosis.problems {
                out.push((p.kind.to_string(), p.fix.clone().unwrap_or_default()));
            }
        }
        out
    }

    fn kinds(&self) -> Vec<String> {
        self.problems().into_iter().map(|(k, _)| k).collect()
    }

    fn fix(&self, kind: &str) -> String {
        self.problems().into_iter().find(|(k, _)| k == kind).map(|(_, f)| f).unwrap_or_else(|| panic!("{}", self.text))
    }
}

/// Run a fix exactly as printed, in a shell whose `pip` is the environment's, from `wheels` alone.
fn run_fix(fix: &str, venv: &Path, wheels: &Path) {
    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    run(Command::new("sh")
        .args(["-c", fix])
        .env("PATH", path)
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", wheels)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"));
}

#[test]
fn doctor_judges_fat_and_thin_builds_on_each_gpu_as_the_runtime_would() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let fat = fat_wheel(&d.join("wheels"));
    let (venv, site) = new_venv(d, "fat");
    pip_install(&venv, &d.join("wheels"), "demo_gpu");
    let site_arg = site.to_str().unwrap();

    // Named GPUs: gfx942 runs; gfx1100 has no code; the summary comes first.
    let ok = doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!(ok.code, 0, "{}", ok.text);
    assert!(ok.text.starts_with("ready for gfx942\n"), "{}", ok.text);
    let bad = doctor(d, &["--gpu", "gfx1100", site_arg], &ld);
    assert_eq!((bad.code, bad.kinds()), (1, vec!["no-code-for-gpu".to_string()]), "{}", bad.text);
    assert!(bad.text.starts_with("1 problem\n") && bad.text.contains("demo_gpu/_k.so (demo-gpu==1.0)"), "{}", bad.text);
    // The venv itself and its Python name the same environment.
    for path in [venv.clone(), venv.join("bin/python")] {
        let again = doctor(d, &["--gpu", "gfx942", path.to_str().unwrap()], &ld);
        assert_eq!(again.json.environments[0].diagnosis.site, ok.json.environments[0].diagnosis.site, "{}", again.text);
    }

    // The KFD topology: a gfx90a with XNACK off (the driver's default) has no code (the build
    // has gfx90a:xnack+ only); with HSA_XNACK=1 it runs.
    let mi210 = sysfs(d, "mi210", &[(0, 0), (90010, 0x0400_0000)], Some(1));
    let args = ["--sysfs", mi210.to_str().unwrap(), site_arg];
    let off = doctor(d, &args, &ld);
    assert_eq!(off.kinds(), ["no-code-for-gpu"], "{}", off.text);
    assert!(off.text.contains("gfx90a:sramecc+:xnack-"), "{}", off.text);
    let on = doctor(d, &args, &[ld[0], ("HSA_XNACK", "1")]);
    assert_eq!(on.code, 0, "{}", on.text);
    // HSA_OVERRIDE_GFX_VERSION on that machine: gfx942 code would run, but a native build is
    // installed: a warning, and its fix.
    let over = doctor(d, &args, &[ld[0], ("HSA_XNACK", "1"), ("HSA_OVERRIDE_GFX_VERSION", "9.4.2")]);
    assert_eq!((over.code, over.kinds()), (0, vec!["override-hides-native".to_string()]), "{}", over.text);
    assert!(over.text.starts_with("ready for gfx942 (1 warning)"), "{}", over.text);
    assert_eq!(over.fix("override-hides-native"), "unset HSA_OVERRIDE_GFX_VERSION");
    // Two GPUs, one without code; hiding it makes the environment ready.
    let two = sysfs(d, "two", &[(0, 0), (90402, 0x0400_0000), (110000, 0)], None);
    let args = ["--sysfs", two.to_str().unwrap(), site_arg];
    let both = doctor(d, &args, &ld);
    assert_eq!(both.kinds(), ["no-code-for-gpu"], "{}", both.text);
    assert!(both.text.contains("gfx1100"), "{}", both.text);
    let first = doctor(d, &args, &[ld[0], ("ROCR_VISIBLE_DEVICES", "0")]);
    assert_eq!(first.code, 0, "{}", first.text);
    // A CPU node only: no GPU, a problem.
    let cpu = sysfs(d, "cpu", &[(0, 0)], None);
    let none = doctor(d, &["--sysfs", cpu.to_str().unwrap(), site_arg], &ld);
    assert_eq!((none.code, none.kinds()), (1, vec!["no-gpu".to_string()]), "{}", none.text);

    // The thin build for gfx942: ready for it, and no code for gfx90a.
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "thin", fat.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (thin_venv, thin_site) = new_venv(d, "thinned");
    pip_install(&thin_venv, &d.join("thin"), "demo_gpu");
    let thin_site = thin_site.to_str().unwrap();
    assert_eq!(doctor(d, &["--gpu", "gfx942", thin_site], &ld).code, 0);
    let lost = doctor(d, &["--gpu", "gfx90a:xnack+", thin_site], &ld);
    assert_eq!(lost.kinds(), ["no-code-for-gpu"], "{}", lost.text);

    // Usage errors: a GPU name that is none, a path that is no environment.
    let out = wheelfix(d, &["doctor", "--gpu", "MI300X", site_arg]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("gfx942"), "{}", stderr(&out));
    let out = wheelfix(d, &["doctor", "--gpu", "gfx942", d.join("wheels").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
}

#[test]
fn doctor_follows_a_split_set_to_its_archives_and_its_fixes_make_the_environment_ready() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let fat = fat_wheel(&d.join("fat"));
    let out = wheelfix(d, &["split", "--all-targets", "-w", "wheels", fat.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wheels = d.join("wheels");
    let (venv, site) = new_venv(d, "split");
    let site_arg = site.to_str().unwrap();

    // The host alone: no archive; the fix installs the device wheel through the host's extra.
    pip_install(&venv, &wheels, "demo_gpu");
    let host_only = doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!((host_only.code, host_only.kinds()), (1, vec!["kpack-unresolved".to_string()]), "{}", host_only.text);
    let fix = host_only.fix("kpack-unresolved");
    assert_eq!(fix, "pip install 'demo-gpu[device-gfx942]==1.0'");
    run_fix(&fix, &venv, &wheels);
    let ready = doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!(ready.code, 0, "{}", ready.text);
    assert!(ready.text.contains("archive demo_gpu/.kpack/"), "{}", ready.text);
    // gfx90a with XNACK off: the gfx90a archive is not installed either, and would not serve it.
    let other = doctor(d, &["--gpu", "gfx90a:xnack+", site_arg], &ld);
    assert_eq!(other.fix("kpack-unresolved"), "pip install 'demo-gpu[device-gfx90a]==1.0'", "{}", other.text);

    // A library reached through a symlink finds its archive from its real path.
    let alias_info = site.join("alias-1.0.dist-info");
    std::fs::create_dir_all(site.join("alias")).unwrap();
    std::os::unix::fs::symlink("../demo_gpu/_k.so", site.join("alias/_k.so")).unwrap();
    std::fs::create_dir_all(&alias_info).unwrap();
    std::fs::write(alias_info.join("METADATA"), "Metadata-Version: 2.1\nName: alias\nVersion: 1.0\n").unwrap();
    std::fs::write(alias_info.join("RECORD"), "alias/_k.so,,\nalias-1.0.dist-info/RECORD,,\n").unwrap();
    let linked = doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!(linked.code, 0, "{}", linked.text);
    let served = &linked.json.environments[0].diagnosis.binaries;
    assert_eq!(served.len(), 2, "{}", linked.text);
    assert!(served.iter().all(|b| b.gpus[0].runs), "{}", linked.text);
    std::fs::remove_dir_all(&alias_info).unwrap();
    std::fs::remove_dir_all(site.join("alias")).unwrap();

    // A damaged archive (a frame cut short): named with its distribution; the fix reinstalls it.
    let archive = std::fs::read_dir(site.join("demo_gpu/.kpack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("gfx942.kpack"))
        .unwrap();
    let mut bytes = std::fs::read(&archive).unwrap();
    // The frames follow the 16-byte header: spoil the first frame's zstd magic.
    let at = bytes.windows(4).position(|w| w == [0x28, 0xb5, 0x2f, 0xfd]).expect("a zstd frame");
    bytes[at + 5] ^= 0xff;
    bytes[at..at + 4].copy_from_slice(b"XXXX");
    std::fs::write(&archive, &bytes).unwrap();
    let damaged = doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!(damaged.kinds(), ["kpack-archive-damaged"], "{}", damaged.text);
    let fix = damaged.fix("kpack-archive-damaged");
    assert_eq!(fix, "pip install --force-reinstall --no-deps 'demo-gpu-device-gfx942==1.0'");
    run_fix(&fix, &venv, &wheels);
    assert_eq!(doctor(d, &["--gpu", "gfx942", site_arg], &ld).code, 0);
}

#[test]
fn doctor_finds_mixed_rocm_abis_missing_libraries_and_databases_for_another_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = hip_runtimes(d);
    let wheels = d.join("wheels");
    fat_wheel(&wheels);
    WheelSpec::new("old_rocm", "2.0", "py3-none-linux_x86_64").file("old_rocm/_o.so", hip_extension(6)).write(&wheels);
    WheelSpec::new("tables", "3.0", "py3-none-any")
        .file("rocblas/library/TensileLibrary_gfx90a.co", vec![0u8; 64])
        .file("rocblas/library/TensileLibrary_gfx1100.dat", vec![0u8; 64])
        .write(&wheels);
    let (venv, site) = new_venv(d, "mixed");
    pip_install(&venv, &wheels, "demo_gpu");
    pip_install(&venv, &wheels, "old_rocm");
    pip_install(&venv, &wheels, "tables");
    let site_arg = site.to_str().unwrap();

    let found = doctor(d, &["--gpu", "gfx942", site_arg], &[("LD_LIBRARY_PATH", lib.to_str().unwrap())]);
    let mut kinds = found.kinds();
    kinds.sort();
    assert_eq!(kinds, ["no-database-for-gpu", "rocm-abi-mixed"], "{}", found.text);
    // Both ABIs are named, each with the distributions that need it.
    assert!(found.text.contains("libamdhip64.so.6: old-rocm==2.0; libamdhip64.so.7: demo-gpu==1.0"), "{}", found.text);
    assert!(found.text.contains("tables's rocblas kernel databases are for gfx1100, gfx90a"), "{}", found.text);
    // Without the runtimes on the loader's path: each binary's missing library, said to be ROCm's.
    let bare = doctor(d, &["--gpu", "gfx942", site_arg], &[]);
    let missing = bare.kinds().iter().filter(|k| *k == "library-not-found").count();
    assert_eq!(missing, 2, "{}", bare.text);
    assert!(bare.text.contains("libamdhip64.so.6 (needed by old_rocm/_o.so) nowhere"), "{}", bare.text);
}

/// `show --json` of `path`, validated against its schema: the one report.
fn show_one(d: &Path, args: &[&str]) -> (i32, ShowReport) {
    let out = wheelfix(d, &[&["show", "--json"], args].concat());
    validate("show.schema.json", &out.stdout);
    let mut reports = support::show_reports(&out);
    assert_eq!(reports.len(), 1, "{}", stdout(&out));
    (out.status.code().unwrap(), reports.remove(0))
}

#[test]
fn show_lddtree_and_doctor_read_a_clang_built_library_where_pip_installed_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A real HIP fat library: clang's bundles (plain, compressed, a generic target), lld-linked.
    let library = support::hip::library(d, &support::hip::objects(d), "lld");
    let wheel = WheelSpec::new("clang_gpu", "1.0", "py3-none-linux_x86_64")
        .file("clang_gpu/__init__.py", "")
        .file("clang_gpu/libk.so", std::fs::read(&library).unwrap())
        .write(&d.join("fat"));
    let (venv, site) = new_venv(d, "fat");
    pip_install(&venv, &d.join("fat"), "clang_gpu");
    let installed = site.join("clang_gpu/libk.so");

    // The installed file and its directory meet what the wheel meets, with the same device code.
    let (code, of_wheel) = show_one(d, &[wheel.to_str().unwrap()]);
    assert_eq!(code, 0, "{of_wheel:#?}");
    for path in [&installed, &site.join("clang_gpu")] {
        let (code, report) = show_one(d, &[path.to_str().unwrap()]);
        assert_eq!(code, 0, "{report:#?}");
        assert!(report.installed, "{report:#?}");
        let what = |r: &ShowReport| {
            (r.platform_tag.clone(), r.symbol_tag.clone(), r.gpu_targets.clone(), r.versioned_symbols.clone())
        };
        assert_eq!(what(&report), what(&of_wheel), "{}: {report:#?}", path.display());
        // The same libraries, found in the same places, judged alike (the files are named
        // relative to what was shown).
        let libs = |r: &ShowReport| {
            r.external_libs.iter().map(|(k, v)| (k.clone(), v.disposition.clone(), v.path.clone())).collect::<Vec<_>>()
        };
        assert_eq!(libs(&report), libs(&of_wheel), "{report:#?}");
        assert!(!libs(&report).is_empty(), "{report:#?}");
        let objects = |r: &ShowReport| r.gpu.iter().map(|g| g.objects).collect::<Vec<_>>();
        assert_eq!(objects(&report), objects(&of_wheel), "{report:#?}");
    }
    let text = stdout(&wheelfix(d, &["show", installed.to_str().unwrap()]));
    assert!(text.starts_with(&format!("{} (installed files: 1 ELF)\n", installed.display())), "{text}");
    assert!(!text.contains("retag writes") && !text.contains("download"), "{text}");

    // lddtree of the directory is the tree of each host file in it.
    let of_dir = wheelfix(d, &["lddtree", "--json", site.join("clang_gpu").to_str().unwrap()]);
    let of_file = wheelfix(d, &["lddtree", "--json", installed.to_str().unwrap()]);
    assert_eq!(of_dir.status.code(), of_file.status.code(), "{}", stderr(&of_dir));
    assert_eq!(stdout(&of_dir), stdout(&of_file));

    // doctor: the code serves gfx942, gfx1100 (a native object and the generic one) and gfx90a
    // in either XNACK mode; nothing serves gfx1030.
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let site_arg = site.to_str().unwrap();
    for gpu in ["gfx942", "gfx1100", "gfx1151", "gfx90a:xnack+", "gfx90a:xnack-"] {
        let verdict = doctor(d, &["--gpu", gpu, site_arg], &ld);
        assert_eq!(verdict.code, 0, "{gpu}: {}", verdict.text);
    }
    let none = doctor(d, &["--gpu", "gfx1030", site_arg], &ld);
    assert_eq!(none.kinds(), ["no-code-for-gpu"], "{}", none.text);

    // Split, the host and the gfx942 device wheel installed: show follows the markers to the
    // archives on disk, and a GPU whose archive is not installed is missing.
    let out = wheelfix(d, &["split", "--all-targets", "-w", "split", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (venv, site) = new_venv(d, "split");
    pip_install(&venv, &d.join("split"), "clang_gpu[device-gfx942]");
    let host = site.join("clang_gpu/libk.so");
    let (code, report) = show_one(d, &["--expect-gpu-target", "gfx942", host.to_str().unwrap()]);
    assert_eq!(code, 0, "{report:#?}");
    assert!(report.kpack_archives[0].in_wheel, "{report:#?}");
    let (code, report) = show_one(d, &["--expect-gpu-target", "gfx1100", host.to_str().unwrap()]);
    assert_eq!((code, report.missing_gpu_targets.as_slice()), (1, &["gfx1100".to_string()][..]), "{report:#?}");
    let (_, dir_report) = show_one(d, &[site.join("clang_gpu").to_str().unwrap()]);
    assert_eq!(dir_report.gpu_targets, ["gfx942"], "{dir_report:#?}");
    let site_arg = site.to_str().unwrap();
    assert_eq!(doctor(d, &["--gpu", "gfx942", site_arg], &ld).code, 0);
    let unresolved = doctor(d, &["--gpu", "gfx1100", site_arg], &ld);
    let fix = unresolved.fix("kpack-unresolved");
    assert_eq!(fix, "pip install 'clang-gpu[device-gfx1100]==1.0'", "{}", unresolved.text);
    run_fix(&fix, &venv, &d.join("split"));
    assert_eq!(doctor(d, &["--gpu", "gfx1100", site_arg], &ld).code, 0);
    let (code, _) = show_one(d, &["--expect-gpu-target", "gfx1100", host.to_str().unwrap()]);
    assert_eq!(code, 0);
}

/// Rename, in a wheel, every member `from` → `to` (RECORD's rows too), as another tool would
/// have named it; written with Python's zipfile.
fn rename_member(wheel: &Path, from: &str, to: &str) {
    let script = r#"
import sys, zipfile
path, old, new = sys.argv[1:4]
members = [(i, zipfile.ZipFile(path).read(i.filename)) for i in zipfile.ZipFile(path).infolist()]
with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
    for info, data in members:
        name = info.filename.replace(old, new)
        if name.endswith('.dist-info/RECORD'):
            data = data.replace(old.encode(), new.encode())
        z.writestr(name, data)
"#;
    run(Command::new(system_python()).args(["-c", script]).arg(wheel).args([from, to]));
}

#[test]
fn a_per_target_id_archive_as_therock_names_it_serves_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fat = fat_wheel(&d.join("fat"));
    let out = wheelfix(d, &["split", "--all-targets", "-w", "wheels", fat.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The gfx90a code is `gfx90a:xnack+` only: its archive named for that target id.
    let device = d.join("wheels/demo_gpu_device_gfx90a-1.0-py3-none-linux_x86_64.whl");
    rename_member(&device, "_k.so_gfx90a.kpack", "_k.so_gfx90a:xnack+.kpack");
    let check = wheelfix(d, &["check", "wheels"]);
    let text = stdout(&check);
    assert!(!text.contains("kpack-unresolved") && !text.contains("kpack-kernel-missing"), "{text}");
    // Installed, the runtime finds it for a gfx90a with XNACK on.
    let (venv, site) = new_venv(d, "therock");
    pip_install(&venv, &d.join("wheels"), "demo_gpu[device-gfx90a]");
    assert!(site.join("demo_gpu/.kpack/_k.so_gfx90a:xnack+.kpack").is_file());
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let ready = doctor(d, &["--gpu", "gfx90a:xnack+", site.to_str().unwrap()], &ld);
    assert_eq!(ready.code, 0, "{}", ready.text);
}
