//! The rules' unit tests, over distributions made by hand.

use super::kpack::unserved_mode;
use super::*;
use crate::check::Finding;
use crate::check::facts::{Dist, TagFacts, WheelFacts};
use crate::gpu::TargetId;
use crate::wheel::metadata::CoreMetadata;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A distribution of a set: its file under `dir/`, its METADATA, and what its wheel holds.
fn dist(path: &str, metadata: &str, wheel: Option<WheelFacts>) -> Dist {
    let metadata = CoreMetadata::parse(metadata).unwrap();
    let file_name = path.rsplit('/').next().unwrap().to_string();
    Dist {
        path: PathBuf::from(path),
        file_name,
        project: metadata.package.as_str().to_string(),
        version: metadata.version.text.clone(),
        metadata,
        platform: Some("linux_x86_64".into()),
        pure: false,
        installer_problems: Vec::new(),
        wheel,
        size: 1,
    }
}

fn wheel() -> WheelFacts {
    WheelFacts {
        filename_tags: Vec::new(),
        python_abi_pairs: Vec::new(),
        tag_lines: Vec::new(),
        root_is_purelib: Some(false),
        gpu_targets: Vec::new(),
        bundled: Vec::new(),
        record_findings: Default::default(),
        cross: Vec::new(),
        install_paths: Default::default(),
        metadata_only: false,
        tag: TagFacts { tag: "linux_x86_64".into(), basis: "claimed", measured: None, note: String::new() },
        device_bytes: BTreeMap::new(),
        rocm_sonames: Vec::new(),
        kpack_refs: Vec::new(),
        kpack_archives: BTreeMap::new(),
        kpack_kernels: Vec::new(),
        kpack_tocs: BTreeMap::new(),
        kpack_damage: Vec::new(),
        kpack_marker_problems: Vec::new(),
        not_loadable: Vec::new(),
        variant: None,
    }
}

/// A split host of `pkg` 1.0 whose binary `pkg/lib/k.so` has `wrappers` wrappers and looks
/// for `pkg/.kpack/pkg_@GFXARCH@.kpack`; extra `device-gfx90a` requires `pkg-device-gfx90a`.
fn host(wrappers: usize) -> Dist {
    let mut w = wheel();
    w.kpack_refs = vec![("pkg/lib/k.so".into(), vec!["../.kpack/pkg_@GFXARCH@.kpack".into()])];
    w.kpack_kernels = vec![("pkg/lib/k.so".into(), "lib/k.so".into(), wrappers)];
    let metadata = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nProvides-Extra: device-gfx90a\nRequires-Dist: pkg-device-gfx90a==1.0; extra == \"device-gfx90a\"\n";
    dist("set/pkg-1.0-py3-none-linux_x86_64.whl", metadata, Some(w))
}

/// The gfx90a device wheel: archives (install path → key → target ids), pinning the host
/// back or not.
/// A table of contents: key → target ids.
type Toc<'a> = &'a [(&'a str, &'a [&'a str])];

fn device(archives: &[(&str, Toc<'_>)], pins_back: bool) -> Dist {
    let mut w = wheel();
    for (path, toc) in archives {
        let toc =
            toc.iter().map(|(k, ts)| (k.to_string(), ts.iter().map(|t| TargetId::from_code(*t)).collect())).collect();
        w.kpack_tocs.insert(path.to_string(), toc);
    }
    let pin = if pins_back { "Requires-Dist: pkg==1.0\n" } else { "Requires-Dist: pkg\n" };
    let metadata = format!("Metadata-Version: 2.1\nName: pkg-device-gfx90a\nVersion: 1.0\n{pin}");
    dist("set/pkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl", &metadata, Some(w))
}

fn kinds(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.kind.name()).collect()
}

#[test]
fn a_split_host_resolves_in_per_processor_and_per_target_id_archives() {
    let keys: &[(&str, &[&str])] = &[("lib/k.so#0", &["gfx90a:xnack+", "gfx90a:xnack-"]), ("lib/k.so#1", &["gfx90a"])];
    let per_processor = device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true);
    assert_eq!(kinds(&split_set_findings(&[host(2), per_processor])), Vec::<&str>::new());
    // TheRock's names: an archive per target id, found by the target ids its TOC lists.
    let per_id = device(
        &[
            ("pkg/.kpack/pkg_gfx90a:xnack+.kpack", &[("lib/k.so#0", &["gfx90a:xnack+"])]),
            ("pkg/.kpack/pkg_gfx90a:xnack-.kpack", &[("lib/k.so#0", &["gfx90a:xnack-"])]),
            ("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#1", &["gfx90a"])]),
        ],
        true,
    );
    assert_eq!(kinds(&split_set_findings(&[host(2), per_id])), Vec::<&str>::new());
}

#[test]
fn a_split_host_whose_device_wheel_lacks_its_code_or_pin_is_named() {
    // An archive at another path: unresolved.
    let elsewhere = device(&[("pkg/lib/.kpack/k.so_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], true);
    let found = split_set_findings(&[host(1), elsewhere]);
    assert_eq!(kinds(&found), ["kpack-unresolved"]);
    assert!(found[0].message.contains("site-packages/pkg/.kpack/pkg_gfx90a.kpack"), "{}", found[0].message);
    // A wrapper with no code anywhere in the set: lost; the device wheel does not pin back.
    let short = device(&[("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], false);
    let found = split_set_findings(&[host(2), short]);
    assert_eq!(kinds(&found), ["device-pin-one-way", "kpack-kernel-missing"]);
    assert!(found[1].message.contains("1 of 2 wrappers (lib/k.so#1"), "{}", found[1].message);
    // Code for another processor only under that key: built without gfx90a, a warning.
    let mut other = device(&[("pkg/.kpack/pkg_gfx90a.kpack", &[("lib/k.so#0", &["gfx90a"])])], true);
    let toc = BTreeMap::from([("lib/k.so#1".to_string(), vec![TargetId::from_code("gfx942")])]);
    other.wheel.as_mut().unwrap().kpack_tocs.insert("pkg/.kpack/pkg_gfx942.kpack".into(), toc);
    assert_eq!(kinds(&split_set_findings(&[host(2), other])), ["kpack-kernel-not-built"]);
}

#[test]
fn a_set_of_two_releases_checks_each_host_against_its_own_device_wheels() {
    let keys: &[(&str, &[&str])] = &[("lib/k.so#0", &["gfx90a"])];
    let older_host = {
        let mut h = host(1);
        h.metadata = CoreMetadata::parse(
            "Metadata-Version: 2.1\nName: pkg\nVersion: 0.9\nProvides-Extra: device-gfx90a\nRequires-Dist: pkg-device-gfx90a==0.9; extra == \"device-gfx90a\"\n",
        )
        .unwrap();
        h.version = "0.9".into();
        h
    };
    let older_device = {
        let mut d = device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true);
        d.metadata = CoreMetadata::parse(
            "Metadata-Version: 2.1\nName: pkg-device-gfx90a\nVersion: 0.9\nRequires-Dist: pkg==0.9\n",
        )
        .unwrap();
        d.version = "0.9".into();
        d
    };
    let set = [host(1), device(&[("pkg/.kpack/pkg_gfx90a.kpack", keys)], true), older_host, older_device];
    assert_eq!(kinds(&split_set_findings(&set)), Vec::<&str>::new());
}

#[test]
fn a_mode_served_alone_is_named_with_the_devices_that_miss_it() {
    assert_eq!(unserved_mode("gfx90a", &[]), None);
    assert_eq!(unserved_mode("gfx90a", &["gfx90a".into(), "gfx90a:xnack+".into()]), None);
    assert_eq!(unserved_mode("gfx90a", &["gfx90a:xnack+".into(), "gfx90a:xnack-".into()]), None);
    let only_on = unserved_mode("gfx90a", &["gfx90a:xnack+".into()]).unwrap();
    assert!(only_on.contains("xnack+ only") && only_on.contains("XNACK off"), "{only_on}");
    let only_off = unserved_mode("gfx942", &["gfx942:sramecc-".into()]).unwrap();
    assert!(only_off.contains("sramecc- only") && only_off.contains("SRAMECC on"), "{only_off}");
}

#[test]
fn two_projects_installing_one_file_conflict_once() {
    let mut a = wheel();
    a.install_paths = ["pkg/x.so", "pkg/y.so"].iter().map(|p| p.to_string()).collect();
    let mut b = wheel();
    b.install_paths = a.install_paths.clone();
    let one = dist("set/a-1.0-py3-none-linux_x86_64.whl", "Name: a\nVersion: 1.0\n", Some(a));
    let two = dist("set/b-1.0-py3-none-linux_x86_64.whl", "Name: b\nVersion: 1.0\n", Some(b));
    let found = path_conflict_findings(&[one, two]);
    assert_eq!(kinds(&found), ["path-conflict"]);
    assert!(
        found[0].message.starts_with("a and b install the same files (pkg/x.so and 1 more)"),
        "{}",
        found[0].message
    );
    // Another platform's wheel of b installs elsewhere.
    let mut c = wheel();
    c.install_paths = ["pkg/x.so".to_string()].into_iter().collect();
    let mut other = dist("set/b-1.0-py3-none-win_amd64.whl", "Name: b\nVersion: 1.0\n", Some(c));
    other.platform = Some("win_amd64".into());
    let mut d = wheel();
    d.install_paths = ["pkg/x.so".to_string()].into_iter().collect();
    let one = dist("set/a-1.0-py3-none-linux_x86_64.whl", "Name: a\nVersion: 1.0\n", Some(d));
    assert!(path_conflict_findings(&[one, other]).is_empty());
}

#[test]
fn device_targets_and_architecture_dirs() {
    assert_eq!(architecture_dir(Path::new("site/gfx950/x.whl")).as_deref(), Some("gfx950"));
    assert_eq!(architecture_dir(Path::new("site/linux/x.whl")), None);
}

#[test]
fn a_family_wheel_may_come_with_its_processors_extras_alone() {
    let host = |extras: &str| {
        let text = format!(
            "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nProvides-Extra: device-gfx1100\nRequires-Dist: pkg-device-gfx1100==1.0; extra == \"device-gfx1100\"\n{extras}Provides-Extra: device-all\nRequires-Dist: pkg-device-gfx1100==1.0; extra == \"device-all\"\nRequires-Dist: pkg-device-gfx11==1.0; extra == \"device-all\"\n"
        );
        dist("set/pkg-1.0-py3-none-linux_x86_64.whl", &text, None)
    };
    let device = |target: &str| {
        let text = format!("Metadata-Version: 2.1\nName: pkg-device-{target}\nVersion: 1.0\nRequires-Dist: pkg==1.0\n");
        dist(&format!("set/pkg_device_{target}-1.0-py3-none-linux_x86_64.whl"), &text, None)
    };
    let chained = host("Requires-Dist: pkg-device-gfx11==1.0; extra == \"device-gfx1100\"\n");
    let found = selector_findings(&[chained, device("gfx1100"), device("gfx11")]);
    assert_eq!(kinds(&found), Vec::<&str>::new(), "TheRock's packaging chain");
    // Brought by no processor's extra: only `device-all` installs it.
    let found = selector_findings(&[host(""), device("gfx1100"), device("gfx11")]);
    assert_eq!(kinds(&found), ["missing-extra"]);
    // A processor's wheel is its own extra's, whatever else brings it.
    let stray = host("Requires-Dist: pkg-device-gfx1101==1.0; extra == \"device-gfx1100\"\n");
    let found = selector_findings(&[stray, device("gfx1100"), device("gfx11"), device("gfx1101")]);
    assert!(kinds(&found).contains(&"missing-extra"), "{found:?}");
}

#[test]
fn another_releases_device_wheels_are_not_this_hosts_missing_extras() {
    let host = |version: &str, targets: &[&str]| {
        let mut text = format!("Metadata-Version: 2.1\nName: pkg\nVersion: {version}\n");
        for t in targets {
            text.push_str(&format!(
                "Provides-Extra: device-{t}\nRequires-Dist: pkg-device-{t}=={version}; extra == \"device-{t}\"\n"
            ));
        }
        dist(&format!("set/pkg-{version}-py3-none-linux_x86_64.whl"), &text, None)
    };
    let device = |target: &str, version: &str| {
        let text = format!(
            "Metadata-Version: 2.1\nName: pkg-device-{target}\nVersion: {version}\nRequires-Dist: pkg=={version}\n"
        );
        dist(&format!("set/pkg_device_{target}-{version}-py3-none-linux_x86_64.whl"), &text, None)
    };
    // Release 2.0 added gfx1101: release 1.0's host has no extra for it, and need not.
    let set = [
        host("1.0", &["gfx1100"]),
        device("gfx1100", "1.0"),
        host("2.0", &["gfx1100", "gfx1101"]),
        device("gfx1100", "2.0"),
        device("gfx1101", "2.0"),
    ];
    assert_eq!(kinds(&selector_findings(&set)), Vec::<&str>::new());
    // The same release's device wheel without an extra is named.
    let short = [host("1.0", &["gfx1100"]), device("gfx1100", "1.0"), device("gfx1101", "1.0")];
    assert_eq!(kinds(&selector_findings(&short)), ["missing-extra"]);
}
