//! `wheelfix doctor` on environments installed with pip from real wheels (a fat HIP library, its
//! thin and split forms, a split set missing its device wheel, a damaged archive, a symlinked
//! library, mixed ROCm ABIs, kernel databases for another GPU only) and on fake `/sys` trees:
//! each verdict checked, each suggested command run as printed, and `doctor` clean after it.

use crate::support;

use std::path::Path;

use support::envs::{Release, doctor, fat_wheel, hip_extension, hip_runtimes, new_venv, pip_install, sysfs};
use support::python::validate;
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};
use wheelfix::report::ShowReport;

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

    // Split for the index it is served from, the host and the gfx942 device wheel installed
    // from it: show follows the markers to the archives on disk, and a GPU whose archive is not
    // installed is missing.
    let release = Release::serve(d);
    let out =
        wheelfix(d, &["split", "--all-targets", "--index-url", &release.url, "-w", "split", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    release.publish(d, &["split"]);
    let (venv, site) = new_venv(d, "split");
    release.pip_install(d, &venv, "clang_gpu[device-gfx942]");
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
    // On a gfx1100, gfx942's device wheel is the wrong GPU's code: its fix, pasted, installs
    // gfx1100's from the index the release names.
    let unresolved = doctor(d, &["--gpu", "gfx1100", site_arg], &ld);
    assert_eq!(unresolved.kinds(), ["wrong-gpu-installed"], "{}", unresolved.text);
    assert!(
        unresolved.text.contains("you installed gfx942 code (clang-gpu-device-gfx942==1.0)"),
        "{}",
        unresolved.text
    );
    let fix = unresolved.fix("wrong-gpu-installed");
    let python = venv.join("bin/python");
    let expected =
        format!("{} -m pip install --index-url {} 'clang-gpu[device-gfx1100]==1.0'", python.display(), release.url);
    assert_eq!(fix, expected, "{}", unresolved.text);
    support::envs::paste(d, &fix);
    assert_eq!(doctor(d, &["--gpu", "gfx1100", site_arg], &ld).code, 0);
    let (code, _) = show_one(d, &["--expect-gpu-target", "gfx1100", host.to_str().unwrap()]);
    assert_eq!(code, 0);
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
    support::rename_member(&device, "_k.so_gfx90a.kpack", "_k.so_gfx90a:xnack+.kpack");
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
