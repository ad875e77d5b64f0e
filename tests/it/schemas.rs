//! Every JSON document wheelfix writes validates against its schema in `schemas/` (checked with
//! Python's `jsonschema`, installed from PyPI by the test setup).

use crate::support;

use std::path::Path;

use support::gpugen::{GFX950, bundle_for, host_with_fatbin, host_with_wrapped_fatbin};
use support::python::validate;
use support::wheelgen::WheelSpec;
use support::{stderr, wheelfix};
use wheelfix::report::variants::{VariantsDocument, VariantsEntry};

#[test]
fn every_json_output_matches_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gpu = WheelSpec::new("torch", "2.15.0a0+git31a77fc", "cp312-cp312-linux_x86_64")
        .file("torch/_C.so", host_with_fatbin("_C", bundle_for(&[("gfx950", GFX950)], 6)))
        .write(&d.join("in"));
    let broken = d.join("in/broken-1.0-py3-none-any.whl");
    std::fs::write(&broken, b"no").unwrap();
    let testdata =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl");
    let (g, b, t) = (gpu.to_str().unwrap(), broken.to_str().unwrap(), testdata.to_str().unwrap());

    let out = wheelfix(d, &["show", "--json", "--rocm-version", "10.1.0", "--expect-gpu-target", "gfx950", g, b, t]);
    validate("show.schema.json", &out.stdout);
    let out = wheelfix(d, &["show", "--json", t]);
    validate("show.schema.json", &out.stdout);
    let out = wheelfix(d, &["retag", "--json", "--rocm-version", "10.1.0", "-w", "marked", g, b]);
    validate("retag.schema.json", &out.stdout);
    let out = wheelfix(d, &["thin", "--json", "--gpu-target", "gfx950", "-w", "thinned", g, b, t]);
    validate("thin.schema.json", &out.stdout);
    let out = wheelfix(d, &["thin", "--json", "--gpu-target", "gfx942", "--allow-missing", "-w", "thinned2", g]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate("thin.schema.json", &out.stdout);
    let out = wheelfix(d, &["repair", "--json", "-w", "repaired", t]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate("retag.schema.json", &out.stdout);
    let marked = std::fs::read_dir(d.join("marked")).unwrap().next().unwrap().unwrap().path();
    let out = wheelfix(
        d,
        &[
            "metapackage",
            "--json",
            "--name",
            "rocm-torch",
            "--rocm-version",
            "10.1.0",
            "--gpu-target",
            "gfx950",
            "-o",
            "meta",
            marked.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    validate("metapackage.schema.json", &out.stdout);
    let out = wheelfix(d, &["index", "--json", "--python", "3.14", "-o", "site", "marked", "meta"]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate("index.schema.json", &out.stdout);
    validate("release.schema.json", &std::fs::read(d.join("site/release.json")).unwrap());
    let out = wheelfix(d, &["site", "--json", "-o", "public", "site"]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate("site.schema.json", &out.stdout);
    let out = wheelfix(d, &["check", "--json", "marked", "meta", "in"]);
    validate("check.schema.json", &out.stdout);
    let wrapped = WheelSpec::new("torch", "2.15.0a0+git31a77fc", "cp312-cp312-linux_x86_64")
        .file("torch/_C.so", host_with_wrapped_fatbin("_C", bundle_for(&[("gfx950", GFX950)], 6), 1))
        .write(&d.join("wrapped"));
    let w = wrapped.to_str().unwrap();
    let out = wheelfix(d, &["split", "--json", "--all-targets", "-w", "split", w, g, b, t]);
    validate("split.schema.json", &out.stdout);
    let out = wheelfix(d, &["variants", "--json", "--all-targets", "--null", "--plain", "-w", "variants", g, b]);
    validate("variants.schema.json", &out.stdout);
    let doc: VariantsDocument = support::document(&out, &[]);
    match &doc.wheels[..] {
        [VariantsEntry::Done { variants, .. }, VariantsEntry::Failed { ok: false, .. }] => {
            assert_eq!(variants.variants[0].label, "gfx950", "{doc:#?}")
        }
        _ => panic!("one wheel made into variants, one failed: {doc:#?}"),
    }
    let device = std::fs::read_dir(d.join("split")).unwrap().map(|e| e.unwrap().path());
    let device: Vec<_> = device.filter(|p| p.to_string_lossy().contains("torch_device_gfx950")).collect();
    assert_eq!(device.len(), 1, "the gfx950 device wheel");
    let out = wheelfix(d, &["selector", "--json", "--name", "rocm-torch", "-o", "sel", device[0].to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    validate("selector.schema.json", &out.stdout);
}

/// The kinds of problem each schema lists are exactly the kinds the command reports, as
/// `policy::problem::Kind` names them: one table, no list drifting from it.
#[test]
fn schemas_list_exactly_the_problem_kinds_each_command_reports() {
    use wheelfix::policy::problem::Kind;
    let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let listed = |file: &str, pointer: &str| -> Vec<String> {
        let text = std::fs::read_to_string(schemas.join(file)).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let list = doc.pointer(pointer).unwrap_or_else(|| panic!("{file} has no {pointer}"));
        list.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    let names = |kinds: &mut dyn Iterator<Item = Kind>| -> Vec<String> { kinds.map(|k| k.to_string()).collect() };
    assert_eq!(
        listed("check.schema.json", "/properties/findings/items/properties/kind/enum"),
        names(&mut Kind::reported_by_check())
    );
    assert_eq!(
        listed("doctor.schema.json", "/$defs/problem/properties/kind/enum"),
        names(&mut Kind::reported_by_doctor())
    );
}
