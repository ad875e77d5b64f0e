//! The release installs what its page promises: device code for the architecture of each
//! index, or a finding. Every wheel is built here.

mod support;

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
}
