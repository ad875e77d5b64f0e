//! `check` examines a set as `show` examines a wheel: `--disable-isa-ext-check`,
//! `--strict-record` and `--with-wheels` mean the same to both.

use crate::support;

use support::elfgen::ElfSpec;
use support::wheelgen::WheelSpec;
use support::{stdout, wheelfix};

fn kinds(out: &std::process::Output) -> Vec<String> {
    support::check_document(out).findings.into_iter().map(|f| f.kind.to_string()).collect()
}

#[test]
fn disable_isa_ext_check_judges_the_tag_without_the_isa() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // x86-64-v3 code (GNU_PROPERTY_X86_ISA_1_V3) in a wheel that claims manylinux_2_17.
    let so = ElfSpec { x86_isa_needed: Some(0b100), ..ElfSpec::extension("_v3") }.build();
    let tag = "cp312-cp312-manylinux_2_17_x86_64";
    let mut spec = WheelSpec::new("vthree", "1.0+rocm7.1.0", tag).file("vthree/_v3.so", so);
    spec.wheel_tags = Some(vec![tag.into()]);
    spec.write(&d.join("set"));
    let out = wheelfix(d, &["check", "--json", "set"]);
    assert!(kinds(&out).contains(&"tag-not-met".to_string()), "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(1));
    let out = wheelfix(d, &["check", "--json", "--disable-isa-ext-check", "set"]);
    assert!(!kinds(&out).contains(&"tag-not-met".to_string()), "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn strict_record_makes_a_stale_record_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut spec = support::sets::py3_wheel("stale", "1.0+rocm7.1.0", &[]);
    spec.bad_hash = vec!["stale/__init__.py".into()];
    spec.write(&d.join("set"));
    let out = wheelfix(d, &["check", "set"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("warning stale-record"), "{}", stdout(&out));
    let out = wheelfix(d, &["check", "--strict-record", "set"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("error stale-record"), "{}", stdout(&out));
}
