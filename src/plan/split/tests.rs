//! The split plan's unit tests, from hand-made facts.

use super::*;

#[test]
fn family_directories_go_to_a_family_wheel_only_when_a_processor_of_it_is_split_out() {
    let moved = |member: &str, target: &str, group: &str| DatabaseMove {
        member: member.into(),
        target: TargetId::from_code(target),
        group: Some(group.into()),
        size: 1,
    };
    let groups: Vec<Group> = ["gfx942", "gfx1100"].iter().map(|p| Group::of(p).unwrap()).collect();
    let mut moves = vec![
        moved("a/amd-gfx11xx/k", "gfx11xx", "gfx11"),
        moved("a/amd-gfx120x/k", "gfx120x", "gfx120x"),
        moved("a/lib_gfx942.co", "gfx942", "gfx942"),
    ];
    let present = vec!["gfx942".to_string(), "gfx1100".to_string()];
    let (families, stay) = family_wheels(&mut moves, &groups, &present);
    assert_eq!(families, [FamilyWheel { name: "gfx11".into(), processors: vec!["gfx1100".into()] }]);
    assert_eq!(stay, ["a/amd-gfx120x/k"], "no gfx12 processor: its files stay in the host");
    assert_eq!(moves.iter().map(|m| m.member.as_str()).collect::<Vec<_>>(), ["a/amd-gfx11xx/k", "a/lib_gfx942.co"]);
    assert_eq!((family_wheel_name("gfx11xx"), family_wheel_name("gfx120x")), ("gfx11".into(), "gfx120x".into()));
}

use crate::analysis::Analysis;
use crate::testing::{analysis, fat_code, hip_host, wheel};

const LIB: &str = "pkg/lib/_k.so";

fn naming(template: &str) -> DeviceNaming {
    DeviceNaming {
        template: template.into(),
        group_by: GroupBy::Target,
        requires_dist: vec!["rocm-sdk-device-@GFXARCH@==7.1".into()],
    }
}

fn fat(facts: crate::elf::ElfFacts) -> (tempfile::TempDir, Wheel, Analysis) {
    let (dir, wheel) = wheel("pkg", &[(LIB, b"\x7fELF")]);
    let mut found = analysis(vec![(LIB, facts)], Vec::new());
    found.gpu.push(fat_code(LIB, &[("gfx942", 0x1000), ("gfx90a:xnack-", 0x2000), ("gfx90a:xnack+", 0x2000)]));
    (dir, wheel, found)
}

fn plan_of(wheel: &Wheel, facts: &Analysis, naming: &DeviceNaming, layout: ArchiveLayout<'_>) -> SplitPlan {
    let groups: Vec<Group> = ["gfx942", "gfx90a"].iter().map(|p| Group::of(p).unwrap()).collect();
    let options = SplitOptions {
        groups: &groups,
        naming,
        compact: true,
        compression_level: 6,
        dir: std::path::Path::new("/stage"),
        layout,
        index_url: None,
    };
    split(wheel, facts, &options)
}

#[test]
fn a_fat_library_moves_all_its_code_out_and_the_plan_names_each_device_wheel() {
    let (_dir, wheel, facts) = fat(hip_host(0x8000));
    let plan = plan_of(&wheel, &facts, &naming(DEFAULT_DEVICE_NAME), ArchiveLayout::default());
    assert_eq!(plan.groups, ["gfx90a", "gfx942"], "in the order people read them");
    let [to] = &plan.binaries[..] else { panic!("{plan:?}") };
    assert_eq!((to.kernel_name.as_str(), to.archive_stem.as_str()), (LIB, "pkg/lib/.kpack/_k.so"));
    let (kernel, search) = crate::gpu::kpack::read_marker(&to.marker).unwrap();
    assert_eq!((kernel.as_str(), search.as_slice()), (LIB, &[".kpack/_k.so_@GFXARCH@.kpack".to_string()][..]));
    assert_eq!(plan.cut[0].kept.len(), 0, "every code object leaves");
    assert_eq!(plan.cut[0].dropped.len(), 3);
    let names: Vec<(&str, String, String)> =
        plan.devices.iter().map(|d| (d.project.as_str(), d.extra.to_string(), d.filename.to_string())).collect();
    assert_eq!(
        names,
        [
            ("pkg-device-gfx90a", "device-gfx90a".into(), "pkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl".into()),
            ("pkg-device-gfx942", "device-gfx942".into(), "pkg_device_gfx942-1.0-py3-none-linux_x86_64.whl".into()),
        ]
    );
    assert_eq!(plan.devices[1].requires_dist, ["pkg==1.0", "rocm-sdk-device-gfx942==7.1"]);
    let Some(NewMember { content: Content::Bytes(metadata), .. }) = plan.plan.replace.get("pkg-1.0.dist-info/METADATA")
    else {
        panic!("the host's METADATA gains the extras: {plan:?}")
    };
    let metadata = String::from_utf8_lossy(metadata);
    for line in [
        "Provides-Extra: device-gfx942\nRequires-Dist: pkg-device-gfx942==1.0; extra == \"device-gfx942\"\n",
        "Requires-Dist: pkg-device-gfx90a==1.0; extra == \"device-all\"\n",
    ] {
        assert!(metadata.contains(line), "{line}{metadata}");
    }
    assert_eq!(plan.name_problem(&wheel), None);
}

#[test]
fn a_library_without_wrappers_cannot_be_split() {
    let mut facts = hip_host(0x8000);
    facts.sections.retain(|s| s.name != ".hipFatBinSegment");
    let (_dir, wheel, facts) = fat(facts);
    let plan = plan_of(&wheel, &facts, &naming(DEFAULT_DEVICE_NAME), ArchiveLayout::default());
    assert_eq!(plan.unreadable, [(LIB.to_string(), "offload bundles but no .hipFatBinSegment wrappers".to_string())]);
}

#[test]
fn therocks_layout_keys_code_below_the_overlay_root_and_shares_archives() {
    let (_dir, wheel, facts) = fat(hip_host(0x8000));
    let shared = SharedArchives { group: "pkg", root: Some("pkg") };
    let layout = ArchiveLayout { shared: Some(shared), per: ArchivePer::TargetId };
    let plan = plan_of(&wheel, &facts, &naming("amd-{name}-device-{target}"), layout);
    let to = &plan.binaries[0];
    let (kernel, search) = crate::gpu::kpack::read_marker(&to.marker).unwrap();
    assert_eq!((kernel.as_str(), search.as_slice()), ("lib/_k.so", &["../.kpack/pkg_@GFXARCH@.kpack".to_string()][..]));
    assert_eq!(to.archive_path("gfx90a:xnack+"), "pkg/.kpack/pkg_gfx90a:xnack+.kpack");
    assert_eq!(plan.devices[0].project, "amd-pkg-device-gfx90a");
    // A binary outside the overlay root has no key in TheRock's layout.
    let outside = SharedArchives { group: "pkg", root: Some("other") };
    let plan = plan_of(
        &wheel,
        &facts,
        &naming(DEFAULT_DEVICE_NAME),
        ArchiveLayout { shared: Some(outside), per: ArchivePer::TargetId },
    );
    assert!(plan.unreadable[0].1.contains("outside the overlay root `other`"), "{:?}", plan.unreadable);
}

#[test]
fn names_the_outputs_cannot_have_are_a_problem_of_the_plan() {
    let (_dir, wheel, facts) = fat(hip_host(0x8000));
    let own = plan_of(&wheel, &facts, &naming("{name}{target}x"), ArchiveLayout::default());
    assert_eq!(own.name_problem(&wheel), None);
    let mut plan = plan_of(&wheel, &facts, &naming(DEFAULT_DEVICE_NAME), ArchiveLayout::default());
    plan.devices[0].project = "PKG".into();
    assert!(plan.name_problem(&wheel).is_some_and(|p| p.contains("the host's own project")));
    let long = format!("{}-{{target}}", "n".repeat(260));
    let plan = plan_of(&wheel, &facts, &naming(&long), ArchiveLayout::default());
    assert!(
        plan.name_problem(&wheel).is_some_and(|p| p.contains("more than the 255")),
        "{:?}",
        plan.name_problem(&wheel)
    );
}

#[test]
fn require_devices_makes_the_host_require_every_device_wheel() {
    let (_dir, wheel, facts) = fat(hip_host(0x8000));
    let mut plan = plan_of(&wheel, &facts, &naming(DEFAULT_DEVICE_NAME), ArchiveLayout::default());
    require_devices(&mut plan, &wheel);
    let Some(NewMember { content: Content::Bytes(metadata), .. }) = plan.plan.replace.get("pkg-1.0.dist-info/METADATA")
    else {
        panic!("{plan:?}")
    };
    let metadata = String::from_utf8_lossy(metadata);
    assert!(
        metadata.contains("Requires-Dist: pkg-device-gfx90a==1.0\nRequires-Dist: pkg-device-gfx942==1.0\n"),
        "{metadata}"
    );
}
