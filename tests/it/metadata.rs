//! METADATA is read once, into typed values: a missing Name or Version is an error naming the
//! wheel; a file name that disagrees with METADATA is reported by `show` (pip refuses such a
//! wheel, so the writing commands do too).

use crate::support;

use support::elfgen::ElfSpec;
use support::wheelgen::{WheelSpec, write_zip};
use support::{show_report, stderr, wheelfix};

#[test]
fn a_file_name_that_disagrees_with_metadata_is_an_installer_problem() {
    let dir = tempfile::tempdir().unwrap();
    let spec = WheelSpec::new("named", "1.0", "cp312-cp312-linux_x86_64")
        .file("named/_core.so", ElfSpec::extension("_core").build());
    let mut members = spec.members();
    let at = members.iter().position(|(n, _)| n.ends_with("METADATA")).unwrap();
    members[at].1 = b"Metadata-Version: 2.1\nName: other\nVersion: 2.0\n".to_vec();
    // RECORD still describes the original METADATA: a stale RECORD too, and still analysed.
    let path = dir.path().join(spec.file_name());
    write_zip(&path, &members);
    let report = show_report(dir.path(), &path, &[]);
    let problems = &report.installer_problems;
    assert!(
        problems.iter().any(|p| p.contains("inconsistent name") && p.contains("\"named\"") && p.contains("\"other\"")),
        "{report:#?}"
    );
    assert!(problems.iter().any(|p| p.contains("inconsistent version")), "{report:#?}");
    assert_eq!(report.platform_tag.as_deref(), Some("manylinux_2_5_x86_64"));
    let out = wheelfix(dir.path(), &["retag", "-w", "out", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("pip refuses to install it: inconsistent name"), "{}", stderr(&out));
    assert!(!dir.path().join("out").exists() || std::fs::read_dir(dir.path().join("out")).unwrap().next().is_none());
}

#[test]
fn metadata_without_name_or_version_is_an_error_naming_the_wheel() {
    let dir = tempfile::tempdir().unwrap();
    for (case, text, expect) in [
        ("noname", "Metadata-Version: 2.1\nVersion: 1.0\n", "has no `Name` field"),
        ("nover", "Metadata-Version: 2.1\nName: nover\n", "has no `Version` field"),
        ("badver", "Metadata-Version: 2.1\nName: badver\nVersion: one point oh\n", "not a valid PEP 440 version"),
    ] {
        let spec = WheelSpec::new(case, "1.0", "py3-none-any").file(&format!("{case}/__init__.py"), "");
        let mut members = spec.members();
        let at = members.iter().position(|(n, _)| n.ends_with("METADATA")).unwrap();
        members[at].1 = text.as_bytes().to_vec();
        let path = dir.path().join(spec.file_name());
        write_zip(&path, &members);
        let out = wheelfix(dir.path(), &["show", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{case}");
        let err = stderr(&out);
        assert!(err.contains(&spec.file_name()) && err.contains("METADATA") && err.contains(expect), "{case}: {err}");
    }
}
