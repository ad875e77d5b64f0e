//! Plans: what a writing command changes in one wheel, as edits to one [`Plan`] that the one
//! writer applies ([`crate::writer`]).
//!
//! Every command starts from the same edits ([`retag`]): the true platform tags in the file
//! name and the WHEEL `Tag:` lines ([`tags`]), and, when marking, the new local version with the
//! batch's pins ([`version`]). `repair` then adds its edits ([`repair`]): vendored libraries,
//! patched ELF files, moved scripts. Nothing here touches a file: a plan is made from facts
//! ([`Input`], the analysis, the judgement, the facts of the libraries to vendor).

pub mod edit;
pub mod kpack;
pub mod repair;
pub mod split;
pub mod tags;
pub mod thin;

pub use edit::{Content, ElfChange, ElfSource, NewMember, Plan};

use crate::analysis::Analysis;
use crate::version::{PinRewrite, rewrite_metadata};
use crate::wheel::filename::escape_version;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{DistVersion, Wheel, WheelFilename, WheelInfo};

/// What a plan reads of a wheel: plain values, so that a plan is made without touching a file.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    pub filename: &'a WheelFilename,
    /// Ex) `torch-2.15.0.dist-info`
    pub dist_info: &'a str,
    pub wheel_info: &'a WheelInfo,
    pub metadata_text: &'a str,
    /// Every member's path, in archive order.
    pub members: Vec<&'a str>,
    /// The wheel has host binaries of its platform.
    pub has_binaries: bool,
}

impl<'a> Input<'a> {
    pub fn of(wheel: &'a Wheel, analysis: &Analysis) -> Input<'a> {
        Input {
            filename: &wheel.filename,
            dist_info: &wheel.dist_info,
            wheel_info: &wheel.wheel_info,
            metadata_text: &wheel.metadata_text,
            members: wheel.archive.members().iter().map(|m| &*m.name).collect(),
            has_binaries: !analysis.binaries.is_empty(),
        }
    }

    /// The `.data` directory's prefix. Ex) `torch-2.15.0.data/`
    pub fn data_prefix(&self) -> String {
        format!("{}.data/", crate::wheel::dist_info_stem(self.dist_info))
    }

    /// Where a member lands relative to site-packages ([`crate::wheel::install_path`]).
    pub fn install_path(&self, member: &str) -> Option<String> {
        crate::wheel::install_path(self.dist_info, member)
    }

    /// Whether the input has a member of that path.
    pub fn has_member(&self, path: &str) -> bool {
        self.members.contains(&path)
    }
}

/// What to change in one wheel's name, WHEEL and METADATA.
#[derive(Debug, Clone, Default)]
pub struct Changes<'a> {
    pub platform_tags: &'a [PlatformTag],
    pub new_version: Option<&'a DistVersion>,
    pub pins: &'a [PinRewrite],
    /// The index the release is published in, recorded in METADATA (`--index-url`).
    pub index_url: Option<&'a str>,
}

/// The WHEEL `Tag:` lines for `platform_tags`: every `{python}-{abi}` pair the WHEEL file (or,
/// failing that, the file name) names, times every platform tag in the given order.
pub fn wheel_tag_lines(input: &Input<'_>, platform_tags: &[PlatformTag]) -> Vec<String> {
    let mut pairs: Vec<String> = Vec::new();
    for tag in input.wheel_info.wheel_tags() {
        let pair = tag.python_abi();
        if !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    if pairs.is_empty() {
        pairs = input.filename.python_abi_pairs();
    }
    pairs.iter().flat_map(|pair| platform_tags.iter().map(move |plat| format!("{pair}-{plat}"))).collect()
}

/// The plan of a retag: the file name's tags and version, the `.dist-info` and `.data` renames
/// a new version makes, WHEEL's `Tag:` lines (and `Root-Is-Purelib: false` for a platform wheel
/// that claims to be purelib), METADATA's `Version:` and pins. An empty plan (same name, no
/// member edits) when the wheel already is what the changes describe.
pub fn retag(input: &Input<'_>, changes: &Changes<'_>) -> Plan {
    let mut plan = Plan::new(input.filename.with_platform_tags(changes.platform_tags.to_vec()));

    // A new version renames the `.dist-info` and `.data` directories.
    if let Some(version) = changes.new_version {
        plan.filename = plan.filename.with_version(version);
        let old_stem = crate::wheel::dist_info_stem(input.dist_info);
        let name = old_stem.rsplit_once('-').map_or("", |(n, _)| n);
        let new_stem = format!("{name}-{}", escape_version(&version.text));
        for member in &input.members {
            for suffix in [".dist-info/", ".data/"] {
                if let Some(rest) = member.strip_prefix(&format!("{old_stem}{suffix}")) {
                    plan.renames.insert(member.to_string(), format!("{new_stem}{suffix}{rest}"));
                }
            }
        }
    }
    let dist_info = plan.output_dist_info(input.dist_info);

    let wheel_info = input.wheel_info;
    let mut lines = wheel_tag_lines(input, changes.platform_tags);
    // The same `Tag:` lines in another order are not a change.
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v.dedup();
        v
    };
    if sorted(&lines) == sorted(&wheel_info.tags) {
        lines = wheel_info.tags.clone();
    }
    let platform_specific = changes.platform_tags.iter().any(|t| !t.is_any()) && input.has_binaries;
    let purelib = (platform_specific && wheel_info.root_is_purelib == Some(true)).then_some(false);
    let wheel_text = if lines == wheel_info.tags && purelib.is_none() {
        wheel_info.text.clone()
    } else {
        wheel_info.with_tags(&lines, purelib)
    };
    if wheel_text != wheel_info.text {
        plan.replace.insert(format!("{dist_info}/WHEEL"), NewMember::new(wheel_text.into_bytes(), None));
    }
    let mut metadata =
        rewrite_metadata(input.metadata_text, changes.new_version.map(|v| v.text.as_str()), changes.pins);
    if let Some(url) = changes.index_url {
        metadata = crate::wheel::metadata::with_index_url(&metadata, url);
    }
    if metadata != input.metadata_text {
        plan.replace.insert(format!("{dist_info}/METADATA"), NewMember::new(metadata.into_bytes(), None));
    }
    plan
}

/// Whether applying `plan` writes anything other than the input: a new name, an edited member,
/// or a RECORD to correct.
pub fn changes_anything(plan: &Plan, wheel: &Wheel, analysis: &Analysis) -> bool {
    plan.filename != wheel.filename || plan.changes_members() || !analysis.record_findings.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wheel::platform_tag::join_tags;

    const WHEEL: &str = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: cp312-cp312-linux_x86_64\n\n";
    const METADATA: &str = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nRequires-Dist: dep==2.0\n\nText\n";

    fn input<'a>(filename: &'a WheelFilename, info: &'a WheelInfo) -> Input<'a> {
        Input {
            filename,
            dist_info: "pkg-1.0.dist-info",
            wheel_info: info,
            metadata_text: METADATA,
            members: vec![
                "pkg/_core.so",
                "pkg-1.0.data/scripts/tool",
                "pkg-1.0.dist-info/METADATA",
                "pkg-1.0.dist-info/WHEEL",
            ],
            has_binaries: true,
        }
    }

    #[test]
    fn a_retag_plan_names_the_file_rewrites_wheel_and_fixes_purelib() {
        let filename = WheelFilename::parse("pkg-1.0-cp312-cp312-linux_x86_64.whl").unwrap();
        let info = WheelInfo::parse(WHEEL);
        let tags = vec![PlatformTag::parse("manylinux_2_17_x86_64"), PlatformTag::parse("manylinux2014_x86_64")];
        let plan = retag(&input(&filename, &info), &Changes { platform_tags: &tags, ..Default::default() });
        assert_eq!(join_tags(&plan.filename.platform_tags), "manylinux_2_17_x86_64.manylinux2014_x86_64");
        let wheel = String::from_utf8(plan.replace["pkg-1.0.dist-info/WHEEL"].bytes().unwrap().to_vec()).unwrap();
        assert!(wheel.contains("Root-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_17_x86_64\nTag: cp312-cp312-manylinux2014_x86_64\n"), "{wheel}");
        assert!(plan.renames.is_empty() && plan.add.is_empty());
    }

    #[test]
    fn an_unchanged_wheel_gives_an_empty_plan() {
        let filename = WheelFilename::parse("pkg-1.0-cp312-cp312-linux_x86_64.whl").unwrap();
        let info = WheelInfo::parse("Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n\n");
        let tags = vec![PlatformTag::parse("linux_x86_64")];
        let plan = retag(&input(&filename, &info), &Changes { platform_tags: &tags, ..Default::default() });
        assert_eq!(plan.filename, filename);
        assert!(!plan.changes_members());
    }

    #[test]
    fn a_new_version_renames_dist_info_and_data_and_rewrites_pins() {
        let filename = WheelFilename::parse("pkg-1.0-cp312-cp312-linux_x86_64.whl").unwrap();
        let info = WheelInfo::parse(WHEEL);
        let tags = vec![PlatformTag::parse("linux_x86_64")];
        let pins = vec![crate::version::PinRewrite {
            requirement: "dep==2.0".into(),
            new_requirement: Some("dep==2.0+rocm10.1.0".into()),
            message: String::new(),
        }];
        let version = DistVersion::parse("1.0+rocm10.1.0").unwrap();
        let changes = Changes { platform_tags: &tags, new_version: Some(&version), pins: &pins, index_url: None };
        let plan = retag(&input(&filename, &info), &changes);
        assert_eq!(plan.filename.to_string(), "pkg-1.0+rocm10.1.0-cp312-cp312-linux_x86_64.whl");
        assert_eq!(plan.renames["pkg-1.0.data/scripts/tool"], "pkg-1.0+rocm10.1.0.data/scripts/tool");
        assert_eq!(plan.renames["pkg-1.0.dist-info/WHEEL"], "pkg-1.0+rocm10.1.0.dist-info/WHEEL");
        let metadata =
            String::from_utf8(plan.replace["pkg-1.0+rocm10.1.0.dist-info/METADATA"].bytes().unwrap().to_vec()).unwrap();
        assert_eq!(
            metadata,
            "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0+rocm10.1.0\nRequires-Dist: dep==2.0+rocm10.1.0\n\nText\n"
        );
        assert_eq!(plan.output_dist_info("pkg-1.0.dist-info"), "pkg-1.0+rocm10.1.0.dist-info");
    }

    #[test]
    fn a_marked_batch_plans_its_new_versions_and_exact_pins() {
        use crate::version::{BatchMember, Content as Kind, LocalLabel, MarkOptions, Marking, decide};
        use crate::wheel::requirement::Requirement;
        // Two wheels of one batch, by hand: a compiled `pkg` that pins a compiled `dep`.
        let member = |name: &str, requires: &[&str]| BatchMember {
            name: crate::wheel::name::PackageName::new(name),
            version: DistVersion::parse("1.0").unwrap(),
            content: Kind::Compiled,
            requires_dist: requires.iter().map(|r| Requirement::parse(r)).collect(),
        };
        let marking = Marking {
            options: MarkOptions { label: LocalLabel::rocm("10.1.0").unwrap(), mark_pure: false, no_mark: Vec::new() },
            index_dir: None,
        };
        let batch = [Some(member("pkg", &["dep==1.0"])), Some(member("dep", &[]))];
        let (changes, hazards) = decide(&batch, Some(&marking), &[]);
        assert!(hazards.is_empty());
        let change = changes[0].as_ref().unwrap();
        let filename = WheelFilename::parse("pkg-1.0-cp312-cp312-linux_x86_64.whl").unwrap();
        let info = WheelInfo::parse(WHEEL);
        let metadata = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nRequires-Dist: dep==1.0\n\n";
        let input = Input { metadata_text: metadata, ..input(&filename, &info) };
        let tags = vec![PlatformTag::parse("linux_x86_64")];
        let changes =
            Changes { platform_tags: &tags, new_version: change.new_version(), pins: &change.pins, index_url: None };
        let plan = retag(&input, &changes);
        assert_eq!(plan.filename.to_string(), "pkg-1.0+rocm10.1.0-cp312-cp312-linux_x86_64.whl");
        let metadata =
            String::from_utf8(plan.replace["pkg-1.0+rocm10.1.0.dist-info/METADATA"].bytes().unwrap().to_vec()).unwrap();
        assert!(metadata.contains("Version: 1.0+rocm10.1.0\nRequires-Dist: dep==1.0+rocm10.1.0\n"), "{metadata}");
    }

    #[test]
    fn a_repair_plan_names_each_copy_its_source_and_every_elf_change() {
        use crate::analysis::vendor::VendorSource;
        use crate::elf::patch::RpathEdit;
        use crate::testing::{analysis, elf, external};
        let mut lib = external("libfoo.so.1", Some("/usr/lib/libfoo.so.1"), &[]);
        lib.needs = vec!["libbar.so.2".into()];
        let mut bar = external("libbar.so.2", Some("/usr/lib/libbar.so.2"), &[]);
        bar.direct = false;
        let a = analysis(vec![("pkg/_core.so", elf(&[("libfoo.so.1", "FOO_1")]))], vec![lib, bar]);
        let source = |soname: &str, real: &str, byte: u8| VendorSource {
            soname: soname.into(),
            path: format!("/usr/lib/{soname}"),
            real: real.into(),
            sha256: [byte; 32],
            owner: None,
        };
        let sources = [
            source("libbar.so.2", "/usr/lib/libbar.so.2.0", 0xab),
            source("libfoo.so.1", "/usr/lib/libfoo.so.1.4", 0x0c),
        ];
        let filename = WheelFilename::parse("pkg-1.0-cp312-cp312-linux_x86_64.whl").unwrap();
        let info = WheelInfo::parse(WHEEL);
        let mut plan = Plan::new(filename.clone());
        let settings = repair::RepairSettings { lib_sdir: ".libs".into(), strip: false, compression_level: 6 };
        let grafts = repair::add_to_plan(&mut plan, &input(&filename, &info), &a, &sources, &settings).unwrap();
        let members: Vec<&str> = grafts.iter().map(|g| g.member.as_str()).collect();
        assert_eq!(members, ["pkg.libs/libbar-abababab.so.2.0", "pkg.libs/libfoo-0c0c0c0c.so.1.4"]);
        // The copy of libfoo: read from this machine, renamed, and finding libbar beside it.
        let Content::Elf(copy) = &plan.add["pkg.libs/libfoo-0c0c0c0c.so.1.4"].content else { panic!("an ELF change") };
        assert_eq!(
            copy.source,
            ElfSource::File { path: "/usr/lib/libfoo.so.1".into(), real: "/usr/lib/libfoo.so.1.4".into() }
        );
        assert_eq!(copy.edit.soname.as_deref(), Some("libfoo-0c0c0c0c.so.1.4"));
        assert_eq!(copy.edit.replace_needed["libbar.so.2"], "libbar-abababab.so.2.0");
        assert_eq!(copy.edit.rpath, RpathEdit::Set("$ORIGIN".into()));
        // The wheel's own file: its need renamed, its RPATH to the copies.
        let Content::Elf(own) = &plan.replace["pkg/_core.so"].content else { panic!("an ELF change") };
        assert_eq!(own.source, ElfSource::Member("pkg/_core.so".into()));
        assert_eq!(own.edit.replace_needed["libfoo.so.1"], "libfoo-0c0c0c0c.so.1.4");
        assert_eq!(own.edit.rpath, RpathEdit::Set("$ORIGIN/../pkg.libs".into()));
        // The bill of materials, planned for the writer to render once the copies exist.
        let Content::Sbom(sbom) = &plan.add["pkg-1.0.dist-info/sboms/wheelfix.cdx.json"].content else { panic!() };
        assert_eq!(sbom.vendored.len(), 2);
        let text = sbom.render(&|member| (member == "pkg.libs/libfoo-0c0c0c0c.so.1.4").then_some([1; 32]));
        assert!(text.contains(&crate::wheel::digest::hex(&[1; 32])), "{text}");
    }
}
