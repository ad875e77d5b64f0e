//! The release installs what its page promises: device code for the architecture of each
//! index, or a finding. Every wheel is built here.

use crate::support;

use support::gpugen::{GFX90A, GFX942, GFX950, bundle_for, host_with_fatbin};
use support::sets::gpu_wheel;
use support::wheelgen::WheelSpec;
use support::{stderr, stdout, wheelfix};

#[test]
fn an_emptied_fat_binary_is_caught_by_show_check_and_metapackage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = gpu_wheel("kern", "1.0+rocm7.1.0", &[("gfx942", GFX942)], &[]).write(d);
    let out =
        wheelfix(d, &["thin", "--allow-missing", "--gpu-target", "gfx950", "-w", "gfx950", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let thinned = d.join("gfx950").join(wheel.file_name().unwrap());
    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx950", thinned.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("kern/_kern.so: none for gfx950 (it holds no device code at all"),
        "{}",
        stderr(&out)
    );
    let out = wheelfix(d, &["check", "gfx950"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("no-code-for-architecture"), "{}", stdout(&out));
    let meta = ["metapackage", "--name", "rocm-kern", "--rocm-version", "7.1.0", "--gpu-target", "gfx950", "-o", "m"];
    let out = wheelfix(d, &[&meta[..], &[thinned.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("none for gfx950 in kern/_kern.so"), "{}", stderr(&out));
    // The untouched build passes the same checks for what it does carry.
    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx942", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_runtimes_built_in_kernels_never_count_as_the_packages_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runtime = host_with_fatbin("_r", bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950), ("gfx90a", GFX90A)], 5));
    let mut spec = WheelSpec::new("plugin", "4.0", "cp312-cp312-manylinux_2_17_x86_64")
        .file("plugin/__init__.py", "")
        .file("plugin/_plugin.so", host_with_fatbin("_plugin", bundle_for(&[("gfx90a", GFX90A)], 5)))
        .file("plugin.libs/libhsa-runtime64.so.1", runtime);
    spec.wheel_tags = Some(vec!["cp312-cp312-manylinux_2_17_x86_64".into()]);
    let wheel = spec.write(d);
    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx942", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("plugin/_plugin.so: none for gfx942 (it holds gfx90a)"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("libhsa-runtime64.so.1: none"), "{}", stderr(&out));
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("none for it in plugin/_plugin.so"), "{}", stderr(&out));
    assert!(!d.join("out").join(wheel.file_name().unwrap()).exists());
    // What the plugin has passes.
    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx90a", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // One rule everywhere: show's targets and sizes, the index's page and release.json claim
    // the plugin's gfx90a only; show still lists the runtime's file and says why it is apart.
    let report = support::show_report(d, &wheel, &[]);
    assert_eq!(report.gpu_targets, ["gfx90a"], "{report:#?}");
    let text = stdout(&wheelfix(d, &["show", wheel.to_str().unwrap()]));
    assert!(text.contains("GPU code: gfx90a ("), "{text}");
    assert!(text.contains("device code in bundles, uncompressed: gfx90a "), "{text}");
    assert!(
        text.contains("libhsa-runtime64.so.1") && text.contains("not counted as the wheel's device code"),
        "{text}"
    );
    std::fs::create_dir_all(d.join("set")).unwrap();
    std::fs::copy(&wheel, d.join("set").join(wheel.file_name().unwrap())).unwrap();
    let out = wheelfix(d, &["index", "-o", "site", "set"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = support::release_page(&d.join("site/release.json"));
    let claimed: Vec<&str> = page.files[0].gpu.iter().map(|(target, _)| target.as_str()).collect();
    assert_eq!(claimed, ["gfx90a"], "{page:#?}");
    let html = support::html_text(&std::fs::read_to_string(d.join("site/release.html")).unwrap());
    assert!(!html.contains("gfx942") && !html.contains("MI300"), "{html}");
    // The landing page across indexes too.
    let out = wheelfix(d, &["site", "-o", "public", "site"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let landing = support::html_text(&std::fs::read_to_string(d.join("public/index.html")).unwrap());
    assert!(landing.contains("GPU targets: gfx90a (AMD "), "{landing}");
    assert!(!landing.contains("gfx942") && !landing.contains("gfx950") && !landing.contains("MI300"), "{landing}");
}

#[test]
fn a_distribution_that_requires_itself_is_an_error_unless_it_gathers_its_extras() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut looping = support::sets::py3_wheel("rocm", "7.1.0", &["rocm==7.1.0"]);
    looping.metadata.push("Provides-Extra: device-all".into());
    looping.write(&d.join("bad"));
    let mut gathering = support::sets::py3_wheel(
        "rocm",
        "7.1.0",
        &["rocm-device-gfx942==7.1.0; extra == \"device-gfx942\"", "rocm[device-gfx942]; extra == \"device-all\""],
    );
    gathering.metadata.extend(["Provides-Extra: device-gfx942".into(), "Provides-Extra: device-all".into()]);
    gathering.write(&d.join("good"));
    support::sets::py3_wheel("rocm_device_gfx942", "7.1.0", &[]).write(&d.join("good"));
    let out = wheelfix(d, &["check", "bad"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("self-requirement"), "{}", stdout(&out));
    let out = wheelfix(d, &["check", "good"]);
    assert!(!stdout(&out).contains("self-requirement"), "{}", stdout(&out));
}

#[test]
fn a_wheelfix_metapackage_is_never_relabelled_and_a_rerun_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = gpu_wheel("kern", "1.0", &[("gfx942", GFX942)], &[]).write(&d.join("dist"));
    let retag = |dir: &str| {
        let mut args = vec!["retag".to_string(), "--in-place".into(), "--rocm-version".into(), "7.1.0".into()];
        args.extend(support::files_with_bytes(&d.join(dir)).into_iter().map(|(name, _)| format!("{dir}/{name}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = wheelfix(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    retag("dist");
    assert!(!wheel.exists(), "relabelled in place under its new name");
    let marked: Vec<String> =
        std::fs::read_dir(d.join("dist")).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    let mut args =
        vec!["metapackage", "--name", "rocm-kern", "--rocm-version", "7.1.0", "--gpu-target", "gfx942", "-o", "dist"];
    args.extend(marked.iter().map(String::as_str));
    assert!(wheelfix(d, &args).status.success());
    let before = support::files_with_bytes(&d.join("dist"));
    retag("dist");
    assert_eq!(
        support::files_with_bytes(&d.join("dist")),
        before,
        "a rerun changes nothing: the metapackage keeps its version"
    );
}

#[test]
fn index_and_site_fail_on_check_publish_nothing_for_a_set_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    support::sets::py3_wheel("rocm", "7.1.0", &["rocm==7.1.0"]).write(&d.join("set"));
    let out = wheelfix(d, &["index", "--fail-on-check", "-o", "site", "set"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("self-requirement") && stderr(&out).contains("nothing was published"),
        "{}",
        stderr(&out)
    );
    assert!(!d.join("site").exists());
    assert!(wheelfix(d, &["index", "-o", "gfx942", "set"]).status.success());
    let out = wheelfix(d, &["site", "--fail-on-check", "-o", "public", "gfx942"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!d.join("public").exists());
}

#[test]
fn a_static_executable_keeps_the_musllinux_tags_nothing_disproves() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let exe = support::elfgen::ElfSpec { e_type: 2, needed: vec![], imports: vec![], ..Default::default() }.build();
    let tags = "manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64";
    let mut spec = WheelSpec::new("task_bin", "3.52.0", &format!("py3-none-{tags}"))
        .file("task_bin-3.52.0.data/scripts/task", exe);
    // The WHEEL file says it the way some build tools do: one compressed Tag line.
    spec.wheel_tags = Some(vec![format!("py3-none-{tags}")]);
    let wheel = spec.write(d);
    let out = wheelfix(d, &["retag", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<String> = std::fs::read_dir(d.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written.len(), 1);
    assert!(written[0].contains("musllinux_1_1_x86_64"), "{written:?}");
}

/// A wheel whose extension links the given ROCm libraries.
fn rocm_linking(project: &str, version: &str, needed: &[&str]) -> WheelSpec {
    let mut elf = support::elfgen::ElfSpec::extension("_ext");
    for n in needed {
        elf = elf.needs(n);
    }
    let tag = "cp312-cp312-linux_x86_64";
    let mut spec = WheelSpec::new(project, version, tag).file(&format!("{project}/_ext.so"), elf.build());
    spec.wheel_tags = Some(vec![tag.into()]);
    spec
}

#[test]
fn one_rocm_abi_per_set_and_the_one_its_label_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rocm7 = ["libamdhip64.so.7", "librocblas.so.5"];
    rocm_linking("cupy", "14.0+rocm7.1.0", &rocm7).write(&d.join("good"));
    rocm_linking("torch", "2.9+rocm7.1.0", &["libamdhip64.so.7"]).write(&d.join("good"));
    // One backend per ROCm in one wheel (as bitsandbytes ships): it serves the set's ROCm.
    let rocm6 = support::elfgen::ElfSpec::extension("_rocm6").needs("libamdhip64.so.6").needs("libhipblas.so.2");
    rocm_linking("backends", "0.50+rocm7.1.0", &["libamdhip64.so.7", "libhipblas.so.3"])
        .file("backends/_rocm6.so", rocm6.build())
        .write(&d.join("good"));
    let out = wheelfix(d, &["check", "good"]);
    assert!(!stdout(&out).contains("rocm-abi"), "{}", stdout(&out));

    // jax built for ROCm 6, relabelled for the ROCm 7.1 set.
    std::fs::create_dir_all(d.join("mixed")).unwrap();
    for f in std::fs::read_dir(d.join("good")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, d.join("mixed").join(f.file_name().unwrap())).unwrap();
    }
    rocm_linking("jax_rocm_plugin", "0.6+rocm7.1.0", &["libamdhip64.so.6", "librocblas.so.4"]).write(&d.join("mixed"));
    let out = wheelfix(d, &["check", "mixed"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("rocm-abi-mixed") && text.contains("the set mixes ROCm ABIs"), "{text}");
    assert!(text.contains("ROCm 6.x: jax_rocm_plugin-0.6+rocm7.1.0"), "{text}");
    assert!(
        text.contains("rocm-abi-label")
            && text.contains("is labelled for ROCm 7.1.0 but links libamdhip64.so.6, librocblas.so.4 (ROCm 6.x)"),
        "{text}"
    );
    // Per architecture index: a ROCm 6 build alone in an index of its own is no mix.
    rocm_linking("cupy", "14.0+rocm7.1.0", &rocm7).write(&d.join("split/gfx942"));
    rocm_linking("jax_rocm_plugin", "0.6+rocm6.4.0", &["libamdhip64.so.6"]).write(&d.join("split/gfx90a"));
    let out = wheelfix(d, &["check", "--json", "split"]);
    let json = support::check_document(&out);
    let kinds = json.kinds();
    assert!(!kinds.iter().any(|k| k.starts_with("rocm-abi")), "{kinds:?}");
    let out = wheelfix(d, &["check", "--json", "mixed"]);
    let json = support::check_document(&out);
    let kinds = json.kinds();
    assert!(kinds.contains(&"rocm-abi-mixed") && kinds.contains(&"rocm-abi-label"), "{kinds:?}");
    // The same project's wheel for another Python: one mistake, one finding naming both files.
    let mut other = rocm_linking("jax_rocm_plugin", "0.6+rocm7.1.0", &["libamdhip64.so.6", "librocblas.so.4"]);
    other.python = "cp313".into();
    other.abi = "cp313".into();
    other.wheel_tags = Some(vec!["cp313-cp313-linux_x86_64".into()]);
    other.write(&d.join("mixed"));
    let out = wheelfix(d, &["check", "--json", "mixed"]);
    let json = support::check_document(&out);
    let labels: Vec<_> = json.findings.iter().filter(|f| f.kind == "rocm-abi-label").collect();
    assert_eq!(labels.len(), 1, "{labels:#?}");
    assert_eq!(labels[0].files.len(), 2, "{labels:#?}");
    assert!(labels[0].message.starts_with("jax-rocm-plugin 0.6+rocm7.1.0 (2 files, "), "{labels:#?}");
}

#[test]
fn a_kpack_reference_the_set_does_not_resolve_is_named_by_show_and_check() {
    use support::gpugen::{kpack_archive, kpack_split_host};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The host wheel: `p/lib/_k.so` looks for `../.kpack/foo_lib_@GFXARCH@.kpack`.
    let tag = "cp312-cp312-linux_x86_64";
    let mut host = WheelSpec::new("dfttest", "11.1.0+rocm7.1.0", tag).file("p/lib/_k.so", kpack_split_host("_k"));
    host.wheel_tags = Some(vec![tag.into()]);
    let device = |arch: &str| {
        WheelSpec::new(&format!("dfttest_device_{arch}"), "11.1.0+rocm7.1.0", "py3-none-any")
            .file(&format!("p/.kpack/foo_lib_{arch}.kpack"), kpack_archive(&[arch]))
    };
    let wheel = host.write(&d.join("gfx942"));
    host.write(&d.join("gfx950"));
    device("gfx942").write(&d.join("gfx942"));

    let out = wheelfix(d, &["show", "--expect-gpu-target", "gfx950", wheel.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(
        text.contains("kpack: p/lib/_k.so needs for gfx950: p/.kpack/foo_lib_gfx950.kpack (not in this wheel"),
        "{text}"
    );
    let json = support::show_report(d, &wheel, &["--expect-gpu-target", "gfx942"]);
    assert_eq!(json.kpack_archives[0].paths[0], "p/.kpack/foo_lib_gfx942.kpack", "{json:?}");

    let out = wheelfix(d, &["check", "gfx942", "gfx950"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("kpack-unresolved"), "{text}");
    assert!(
        text.contains("find no device code for gfx950") && text.contains("site-packages/p/.kpack/foo_lib_gfx950.kpack"),
        "{text}"
    );
    assert_eq!(text.matches("find no device code for").count(), 1, "gfx942 has its archive in its index: {text}");
    // With the gfx950 device wheel, the set resolves.
    device("gfx950").write(&d.join("gfx950"));
    let out = wheelfix(d, &["check", "gfx942", "gfx950"]);
    assert!(!stdout(&out).contains("kpack-unresolved"), "{}", stdout(&out));
    // An archive for another processor under the right name does not count.
    let dir2 = tempfile::tempdir().unwrap();
    host.write(&dir2.path().join("gfx950"));
    WheelSpec::new("dfttest_device_gfx950", "11.1.0+rocm7.1.0", "py3-none-any")
        .file("p/.kpack/foo_lib_gfx950.kpack", kpack_archive(&["gfx942"]))
        .write(&dir2.path().join("gfx950"));
    let out = wheelfix(dir2.path(), &["check", "gfx950"]);
    assert!(stdout(&out).contains("kpack-unresolved"), "{}", stdout(&out));
}

#[test]
fn an_extra_only_one_platforms_files_satisfy_needs_a_platform_marker() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |marker: &str, out: &str| {
        let mut selector = support::sets::py3_wheel(
            "rocm",
            "7.1.0+rocm7.1.0",
            &[&format!("rocm-sdk-device-gfx942==7.1.0+rocm7.1.0; extra == \"device-all\"{marker}")],
        );
        selector.metadata.push("Provides-Extra: device-all".into());
        selector.write(&d.join(out));
        gpu_wheel("rocm_sdk_device_gfx942", "7.1.0+rocm7.1.0", &[("gfx942", GFX942)], &[]).write(&d.join(out));
        let mut win = WheelSpec::new("rocm_sdk_core", "7.1.0+rocm7.1.0", "py3-none-win_amd64").file("core/x.dll", "");
        win.wheel_tags = Some(vec!["py3-none-win_amd64".into()]);
        win.write(&d.join(out));
    };
    write("", "unmarked");
    write(" and sys_platform == \"linux\"", "marked");
    let out = wheelfix(d, &["check", "unmarked"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("extra `device-all` requires rocm-sdk-device-gfx942, which the set has only for linux, with no platform marker: on win the extra cannot resolve"),
        "{}",
        stdout(&out)
    );
    let out = wheelfix(d, &["check", "marked"]);
    assert!(!stdout(&out).contains("unmarked-platform-extra"), "{}", stdout(&out));
}

#[test]
fn a_gpu_named_as_a_target_gets_its_processor_in_one_wording_and_exit_2_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheel = gpu_wheel("kern", "1.0", &[("gfx942", GFX942)], &[]).write(d);
    let w = wheel.to_str().unwrap();
    let said = "`mi300` is not an AMDGPU processor LLVM knows (e.g. gfx942, gfx90a, gfx1100): AMD Instinct MI300X, Instinct MI300A are gfx942, the name to give";
    for args in [
        vec!["thin", "--gpu-target", "mi300", "-w", "out", w],
        vec!["split", "--gpu-target", "mi300", "-w", "out", w],
        vec!["metapackage", "--name", "rocm-kern", "--rocm-version", "7.1.0", "--gpu-target", "mi300", "-o", "out", w],
        vec!["show", "--expect-gpu-target", "mi300", w],
    ] {
        let out = wheelfix(d, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
        assert!(!d.join("out").exists(), "{args:?} wrote nothing");
    }
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx-942", "-w", "out", w]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean gfx942?"), "{}", stderr(&out));
}

#[test]
fn therock_per_target_id_archives_resolve_and_a_missing_mode_is_named() {
    use support::gpugen::{kpack_archive, kpack_split_host};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // TheRock's layout: one archive per target id, `foo_lib_gfx90a:xnack+.kpack` and `…-`.
    let tag = "cp312-cp312-linux_x86_64";
    let mut host = WheelSpec::new("hktest", "1.0", tag).file("p/lib/_k.so", kpack_split_host("_k"));
    host.wheel_tags = Some(vec![tag.into()]);
    host.write(&d.join("both"));
    let device = |modes: &[&str]| {
        let mut spec = WheelSpec::new("hktest_device_gfx90a", "1.0", "py3-none-any");
        for mode in modes {
            let id = format!("gfx90a:xnack{mode}");
            spec = spec.file(&format!("p/.kpack/foo_lib_{id}.kpack"), kpack_archive(&[id.as_str()]));
        }
        spec
    };
    device(&["+", "-"]).write(&d.join("both"));
    let out = wheelfix(d, &["check", "both"]);
    let text = stdout(&out);
    assert!(!text.contains("kpack-unresolved") && !text.contains("kpack-mode-unserved"), "{text}");
    // XNACK on only: a gfx90a in the driver's default mode finds nothing.
    host.write(&d.join("plus"));
    device(&["+"]).write(&d.join("plus"));
    let out = wheelfix(d, &["check", "plus"]);
    let text = stdout(&out);
    assert!(!text.contains("kpack-unresolved"), "{text}");
    assert!(text.contains("kpack-mode-unserved"), "{text}");
    assert!(
        text.contains(
            "its gfx90a archives are for xnack+ only (gfx90a:xnack+): a gfx90a with XNACK off finds no archive"
        ),
        "{text}"
    );
}
