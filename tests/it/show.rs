//! `wheelfix show` on wheels built here from generated ELF files.

use crate::support;

use support::elfgen::{ElfSpec, Import};
use support::wheelgen::WheelSpec;
use support::{show_report, show_reports, stderr, stdout, tag_texts, wheelfix};

fn ext(module: &str) -> ElfSpec {
    ElfSpec::extension(module)
}

#[test]
fn symbol_versions_set_the_tag_and_name_the_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let so = ext("fast").needs_version("memfd_create", "libc.so.6", "GLIBC_2.27").build();
    let wheel = WheelSpec::new("fast", "1.0", "cp312-cp312-linux_x86_64")
        .file("fast.cpython-312-x86_64-linux-gnu.so", so)
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.symbol_tag.as_deref(), Some("manylinux_2_27_x86_64"));
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_27_x86_64"));
    assert!(!report.pure);
    let c = &report.constraints[0];
    assert_eq!(c.file, "fast.cpython-312-x86_64-linux-gnu.so");
    assert_eq!(c.library, "libc.so.6");
    assert_eq!(c.version, "GLIBC_2.27");
    assert_eq!(c.symbols[0], "memfd_create");
    assert_eq!(report.external_libs["libc.so.6"].disposition, "whitelisted");
    assert_eq!(tag_texts(&report.retag_tags), ["manylinux_2_27_x86_64"]);
}

#[test]
fn a_version_no_policy_knows_falls_back_to_linux_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let so = ext("torchish").needs_version("__libc_new_thing", "libc.so.6", "GLIBC_2.43").build();
    let wheel = WheelSpec::new("torchish", "2.15.0a0+git31a77fc", "cp312-cp312-manylinux_2_28_x86_64")
        .file("torchish.cpython-312-x86_64-linux-gnu.so", so)
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.symbol_tag.as_deref(), Some("linux_x86_64"));
    assert_eq!(report.platform_tag.as_deref(), Some("linux_x86_64"));
    assert_eq!(report.constraints[0].version, "GLIBC_2.43");
    assert_eq!(report.claims[0].tag.to_string(), "manylinux_2_28_x86_64");
    assert!(!report.claims[0].honoured);
    let reason = report.claims[0].reason.as_deref().unwrap();
    assert!(reason.contains("GLIBC_2.43") && reason.contains("__libc_new_thing"), "{reason}");
    assert_eq!(report.next_policy.as_ref().unwrap().tag, "manylinux_2_41_x86_64");
}

#[test]
fn unknown_prefixes_are_ignored_and_gaps_in_sets_count() {
    let dir = tempfile::tempdir().unwrap();
    // OPENSSL_3.0.0 is not a policy prefix: ignored. GLIBC_2.37 is not in any x86_64 set.
    let so = ext("m")
        .needs_version("SSL_new", "libssl.so.3", "OPENSSL_3.0.0")
        .needs_version("f", "libc.so.6", "GLIBC_2.37")
        .build();
    let wheel = WheelSpec::new("m", "1", "cp312-cp312-linux_x86_64").file("m.so", so).write(dir.path());
    let report = show_report(dir.path(), &wheel, &["--ldpaths", "/nonexistent"]);
    assert_eq!(report.symbol_tag.as_deref(), Some("linux_x86_64"), "x86_64 sets have no GLIBC_2.37");
    assert_eq!(report.external_libs["libssl.so.3"].disposition, "not-found");
}

#[test]
fn rocm_libraries_are_excluded_and_never_block_a_tag() {
    let dir = tempfile::tempdir().unwrap();
    let so = ext("hipmod").needs("libamdhip64.so.7").needs("librocblas.so.5").build();
    let wheel = WheelSpec::new("hipmod", "1", "cp312-cp312-linux_x86_64").file("hipmod.so", so).write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
    assert_eq!(report.external_libs["libamdhip64.so.7"].disposition, "excluded");
    assert_eq!(report.external_libs["librocblas.so.5"].disposition, "excluded");

    let report = show_report(dir.path(), &wheel, &["--no-rocm-exclude"]);
    assert_eq!(report.platform_tag.as_deref(), Some("linux_x86_64"));
    assert_eq!(report.repaired_tag.as_deref(), Some("manylinux_2_5_x86_64"));
    assert_eq!(report.external_libs["libamdhip64.so.7"].disposition, "not-found");
}

#[test]
fn user_excludes_match_sonames() {
    let dir = tempfile::tempdir().unwrap();
    let so = ext("cu").needs("libvendorgpu.so.1").build();
    let wheel = WheelSpec::new("cu", "1", "cp312-cp312-linux_x86_64").file("cu.so", so).write(dir.path());
    assert_eq!(show_report(dir.path(), &wheel, &[]).platform_tag.as_deref(), Some("linux_x86_64"));
    let report = show_report(dir.path(), &wheel, &["--exclude", "libvendorgpu.so.*"]);
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
    assert!(report.external_libs["libvendorgpu.so.1"].reason.contains("libvendorgpu.so.*"));
}

#[test]
fn libraries_inside_the_wheel_resolve_through_origin_rpath() {
    let dir = tempfile::tempdir().unwrap();
    let lib = ElfSpec { soname: Some("libinner.so.1".into()), ..Default::default() }
        .needs_version("f", "libstdc++.so.6", "GLIBCXX_3.4.21")
        .build();
    let with_rpath = ElfSpec { rpath: Some("$ORIGIN/../pkg.libs".into()), ..ext("a") }.needs("libinner.so.1").build();
    let without = ext("b").needs("libinner.so.1").build();
    let wheel = WheelSpec::new("pkg", "1", "cp312-cp312-linux_x86_64")
        .file("pkg/a.so", with_rpath)
        .file("pkg.libs/libinner.so.1", lib.clone())
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert!(!report.external_libs.contains_key("libinner.so.1"), "{report:?}");
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_24_x86_64"), "the in-wheel library's needs count");

    let wheel = WheelSpec::new("pkg2", "1", "cp312-cp312-linux_x86_64")
        .file("pkg/b.so", without)
        .file("pkg.libs/libinner.so.1", lib)
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    let inner = &report.external_libs["libinner.so.1"];
    assert_eq!(inner.disposition, "not-found");
    assert!(inner.reason.contains("pkg.libs/libinner.so.1"), "{inner:?}");
}

#[test]
fn loaders_rpath_is_inherited_without_runpath() {
    let dir = tempfile::tempdir().unwrap();
    let top = ElfSpec { rpath: Some("$ORIGIN/libs".into()), ..ext("top") }.needs("libmid.so").build();
    let mid = ElfSpec { soname: Some("libmid.so".into()), ..Default::default() }.needs("libleaf.so").build();
    let leaf = ElfSpec { soname: Some("libleaf.so".into()), ..Default::default() }.build();
    let wheel = WheelSpec::new("chain", "1", "cp312-cp312-linux_x86_64")
        .file("chain/top.so", top)
        .file("chain/libs/libmid.so", mid)
        .file("chain/libs/libleaf.so", leaf)
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert!(!report.external_libs.contains_key("libleaf.so"), "{report:?}");
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
}

#[test]
fn blacklisted_symbols_lower_the_tag_but_weak_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ext("z").needs_version("inflate", "libz.so.1", "ZLIB_1.2.0");
    spec.imports.push(Import::plain("zcalloc"));
    let wheel = WheelSpec::new("z", "1", "cp312-cp312-linux_x86_64").file("z.so", spec.build()).write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.symbol_tag.as_deref(), Some("manylinux_2_12_x86_64"));
    assert_eq!(report.platform_tag.as_deref(), Some("linux_x86_64"));
    assert_eq!(report.next_policy.as_ref().unwrap().blacklisted_symbols["libz.so.1"][0], "zcalloc");

    let mut spec = ext("z").needs_version("inflate", "libz.so.1", "ZLIB_1.2.0");
    spec.imports.push(Import::weak("zcalloc"));
    let wheel = WheelSpec::new("zw", "1", "cp312-cp312-linux_x86_64").file("z.so", spec.build()).write(dir.path());
    assert_eq!(show_report(dir.path(), &wheel, &[]).platform_tag.as_deref(), Some("manylinux_2_12_x86_64"));
}

#[test]
fn x86_64_v3_binaries_cannot_be_manylinux() {
    let dir = tempfile::tempdir().unwrap();
    let so = ElfSpec { x86_isa_needed: Some(0b101), ..ext("v3") }.build();
    let wheel = WheelSpec::new("v3", "1", "cp312-cp312-linux_x86_64").file("v3.so", so).write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.symbol_tag.as_deref(), Some("manylinux_2_5_x86_64"));
    assert_eq!(report.platform_tag.as_deref(), Some("linux_x86_64"));
    assert!(report.next_policy.as_ref().unwrap().isa[0].as_str().contains("x86-64-v3"));
    let report = show_report(dir.path(), &wheel, &["--disable-isa-ext-check"]);
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
}

#[test]
fn every_policy_architecture_is_read_from_elf() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (183, true, true, 0, "aarch64", "manylinux_2_17_aarch64"),
        (40, false, true, 0x0500_0400, "armv7l", "manylinux_2_17_armv7l"),
        (21, true, true, 0, "ppc64le", "manylinux_2_17_ppc64le"),
        (21, true, false, 0, "ppc64", "manylinux_2_17_ppc64"),
        (22, true, false, 0, "s390x", "manylinux_2_17_s390x"),
        (243, true, true, 0, "riscv64", "manylinux_2_31_riscv64"),
        (258, true, true, 0, "loongarch64", "manylinux_2_36_loongarch64"),
        (3, false, true, 0, "i686", "manylinux_2_5_i686"),
    ];
    for (machine, is_64, le, flags, arch, expected) in cases {
        let so = ext("a").for_arch(machine, is_64, le, flags);
        let so = ElfSpec { imports: vec![Import::plain("f")], ..so }.build();
        let tag = format!("cp312-cp312-linux_{arch}");
        let wheel = WheelSpec::new(&format!("a_{arch}"), "1", &tag).file("a.so", so).write(dir.path());
        let report = show_report(dir.path(), &wheel, &["--ldpaths", "/nonexistent"]);
        assert_eq!(report.symbol_tag.as_deref(), Some(expected), "{arch}: {report:?}");
    }
}

#[test]
fn a_wheel_without_host_binaries_is_pure_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = WheelSpec::new("purepkg", "1", "py3-none-any").file("purepkg/__init__.py", "x = 1\n").write(dir.path());
    let out = wheelfix(dir.path(), &["show", "--json", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = show_reports(&out);
    assert!(report[0].pure);
    assert_eq!(tag_texts(&report[0].retag_tags), ["any"]);
}

#[test]
fn foreign_architecture_files_are_skipped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let x86 = ext("a").build();
    let arm = ext("b").for_arch(183, true, true, 0).build();
    let wheel =
        WheelSpec::new("mixed", "1", "cp312-cp312-linux_x86_64").file("a.so", x86).file("b.so", arm).write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.host_binaries, 1);
    assert_eq!(report.notes[0].file, "b.so");
    assert!(report.notes[0].message.as_str().contains("aarch64"));
}

#[test]
fn text_output_explains_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let so = ext("cub")
        .needs_version("_ZNSt6thread6_StateD2Ev", "libstdc++.so.6", "GLIBCXX_3.4.22")
        .needs("libamdhip64.so.7")
        .build();
    let wheel = WheelSpec::new("cupyish", "14.2.0", "cp312-cp312-manylinux2014_x86_64")
        .file("cupyish/cuda/cub.so", so)
        .write(dir.path());
    let out = wheelfix(dir.path(), &["show", wheel.file_name().unwrap().to_str().unwrap()]);
    assert!(out.status.success());
    insta::assert_snapshot!(stdout(&out));
}

#[test]
fn json_output_of_the_demo_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl");
    // --ldpaths to a directory that does not exist: no machine-specific paths in the snapshot.
    let out = wheelfix(dir.path(), &["show", "--json", "--ldpaths", "/nonexistent", demo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!(stdout(&out));
}

#[test]
fn android_wheels_use_the_android_policy_and_keep_their_tag() {
    let dir = tempfile::tempdir().unwrap();
    let so = ElfSpec {
        needed: vec!["libc.so".into(), "libpython3.13.so".into()],
        imports: vec![Import::plain("malloc")],
        ..ext("spam")
    }
    .for_arch(183, true, true, 0)
    .build();
    let wheel =
        WheelSpec::new("spam", "0.1.0", "cp313-cp313-android_24_arm64_v8a").file("spam.so", so).write(dir.path());
    let report = show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.symbol_tag.as_deref(), Some("android_24_arm64_v8a"));
    assert_eq!(
        report.platform_tag.as_deref(),
        Some("android_24_arm64_v8a"),
        "libc.so is whitelisted, libpython is provided: {report:?}"
    );
    let with_cxx = ElfSpec {
        needed: vec!["libc.so".into(), "libc++_shared.so".into()],
        imports: vec![Import::plain("malloc")],
        ..ext("spam")
    }
    .for_arch(183, true, true, 0)
    .build();
    let wheel = WheelSpec::new("spam2", "0.1.0", "cp313-cp313-android_26_arm64_v8a")
        .file("spam.so", with_cxx)
        .write(dir.path());
    let report = show_report(dir.path(), &wheel, &["--ldpaths", "/nonexistent"]);
    assert_eq!(report.symbol_tag.as_deref(), Some("android_26_arm64_v8a"));
    assert_eq!(
        report.platform_tag.as_deref(),
        Some("linux_aarch64"),
        "as auditwheel says: libc++_shared.so is external"
    );
    assert_eq!(tag_texts(&report.retag_tags), ["android_26_arm64_v8a"], "never retagged to linux");
    let out = wheelfix(dir.path(), &["repair", "--ldpaths", "/nonexistent", "-w", "out", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Android wheels is not supported"), "{}", stderr(&out));
}

#[test]
fn from_linux_the_next_step_named_is_the_tag_its_symbols_meet() {
    let dir = tempfile::tempdir().unwrap();
    let so = ElfSpec::extension("needy")
        .needs_version("memcpy", "libc.so.6", "GLIBC_2.14")
        .needs("libnowhere-to-be-found.so.3")
        .build();
    let wheel = WheelSpec::new("needy", "1", "cp312-cp312-linux_x86_64").file("needy.so", so).write(dir.path());
    let report = &show_report(dir.path(), &wheel, &[]);
    assert_eq!(report.platform_tag.as_deref(), Some("linux_x86_64"), "{report:#?}");
    assert_eq!(Some(&report.next_policy.as_ref().unwrap().tag), report.symbol_tag.as_ref(), "{report:#?}");
    assert!(
        report
            .next_policy
            .as_ref()
            .unwrap()
            .libs_to_eliminate
            .iter()
            .any(|l| l.contains("libnowhere-to-be-found.so.3")),
        "{report:#?}"
    );
    let text = stdout(&wheelfix(dir.path(), &["show", wheel.to_str().unwrap()]));
    assert!(text.contains("What blocks manylinux_2_17_x86_64, the tag its symbol versions meet:"), "{text}");
}
