//! The device wheels of a split, planned: how they are named and grouped (`--device-name`,
//! `--group-by`), what each holds and requires, and the extras by which the host brings them
//! (`device-<group>`, `device-all`). The command writes what this plans: nothing here touches
//! a file.

use crate::extra::DeviceExtra;
use crate::plan::{Content, NewMember, Plan};
use crate::wheel::name::PackageName;
use crate::wheel::{Wheel, WheelFilename};

use super::{SettingError, SplitPlan};

/// The device wheels' names by default: TheRock's are `amd-{name}-device-{target}`.
pub const DEFAULT_DEVICE_NAME: &str = "{name}-device-{target}";

/// What one device wheel holds: one processor's code, or a family's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// `gfx1100`
    Target,
    /// `gfx110x`: gfx1100–gfx1103 (the processor name without its last character)
    Subfamily,
    /// `gfx11`: every gfx11 processor (the name without its last two characters)
    Family,
}

impl std::str::FromStr for GroupBy {
    type Err = SettingError;

    /// `target`, `subfamily` or `family`, as `--group-by` and `group-by` write it.
    fn from_str(text: &str) -> Result<GroupBy, SettingError> {
        match text {
            "target" => Ok(GroupBy::Target),
            "subfamily" => Ok(GroupBy::Subfamily),
            "family" => Ok(GroupBy::Family),
            _ => Err(SettingError::GroupBy),
        }
    }
}

impl std::fmt::Display for GroupBy {
    /// As `--group-by` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GroupBy::Target => "target",
            GroupBy::Subfamily => "subfamily",
            GroupBy::Family => "family",
        })
    }
}

impl GroupBy {
    /// The device wheel a processor's code goes to. Ex) (Subfamily, `gfx1151`) → `gfx115x`;
    /// a generic processor is its own group.
    pub fn wheel_of(self, processor: &str) -> String {
        let digits = processor.strip_prefix("gfx").filter(|_| !processor.ends_with("-generic"));
        match (self, digits) {
            (GroupBy::Target, _) | (_, None) => processor.to_string(),
            (GroupBy::Subfamily, Some(d)) => format!("gfx{}x", &d[..d.len().saturating_sub(1)]),
            (GroupBy::Family, Some(_)) => crate::plan::kpack::family(processor),
        }
    }
}

/// A requirement every device wheel gains (`--device-requires-dist`, as TheRock's splitter
/// takes it): PEP 508, by name, `@GFXARCH@` standing for the wheel's processor.
/// Ex) `rocm-sdk-device-@GFXARCH@==7.1.0`; not `x @ https://…`, `a b`
pub fn check_device_requirement(text: &str) -> Result<(), SettingError> {
    use crate::wheel::requirement::{ByNameError, by_name};
    let filled = text.replace(crate::gpu::kpack::GFXARCH, "gfx942");
    match by_name(filled.trim()) {
        Ok(_) => Ok(()),
        Err(ByNameError::NotPep508(why)) => Err(SettingError::NotPep508 { text: text.to_string(), why }),
        Err(ByNameError::Url) => Err(SettingError::UrlRequirement(text.to_string())),
    }
}

/// The requirements a device wheel of `processors` gains from `asked`: each with `@GFXARCH@`
/// filled in with its processor; a wheel of several processors (`--group-by family`) gains
/// only those without `@GFXARCH@`, as TheRock's family wheels do (the per-processor package
/// a requirement names would be one of several). Ex) `rocm-sdk-device-@GFXARCH@==7.1.0` for
/// gfx942 → `rocm-sdk-device-gfx942==7.1.0`
pub fn device_requirements(asked: &[String], processors: &[&str]) -> Vec<String> {
    let gfxarch = crate::gpu::kpack::GFXARCH;
    asked
        .iter()
        .filter_map(|r| match processors {
            [processor] => Some(r.replace(gfxarch, processor)),
            _ => (!r.contains(gfxarch)).then(|| r.clone()),
        })
        .collect()
}

/// A device-name template makes project names: `{target}` in it, nothing pip would refuse.
pub fn check_device_name(template: &str) -> Result<(), SettingError> {
    if !template.contains("{target}") {
        return Err(SettingError::NoTarget(template.to_string()));
    }
    let example = template.replace("{name}", "pkg").replace("{target}", "gfx942");
    if crate::wheel::name::PackageName::parse(&example).is_err() {
        return Err(SettingError::NotProjectName { template: template.to_string(), example });
    }
    Ok(())
}

/// The device wheel of a family directory's kernel database files (`amd-gfx11xx/`, `gfx120x/`)
/// where the split writes a wheel per processor: TheRock's packaging chain, in which each
/// processor's device wheel requires the wheel of its family's shared files, as the host's
/// extra for the processor does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyWheel {
    /// Its group name. Ex) `gfx11` (of `gfx11xx`), `gfx120x`
    pub name: String,
    /// The split's processors of the family, whose wheels require it. Ex) `gfx1100`, `gfx1151`
    pub processors: Vec<String>,
}

/// The group name of a family directory's device wheel: a family (`gfx11xx` → `gfx11`, as
/// `--group-by family` names it) or a sub-family as it is spelled (`gfx120x`, as `--group-by
/// subfamily` names it).
pub fn family_wheel_name(family: &str) -> String {
    if family.ends_with("xx") { crate::plan::kpack::family(family) } else { family.to_string() }
}

/// Processors (a group each) joined into the groups `by` makes, in the order they came: one
/// variant or device wheel per processor, sub-family or family.
pub fn grouped(processors: Vec<super::Group>, by: GroupBy) -> Vec<super::Group> {
    let mut groups: Vec<super::Group> = Vec::new();
    for g in processors {
        let name = by.wheel_of(&g.name);
        match groups.iter_mut().find(|x| x.name == name) {
            Some(x) => x.keep.targets.extend(g.keep.targets),
            None => groups.push(super::Group { name, keep: g.keep }),
        }
    }
    groups
}

/// How a split names its device wheels (`split`'s settings, resolved): the wheel group a
/// processor's code goes to, and a group's project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNaming {
    /// `{name}` is the host's project, `{target}` the group. Ex) `{name}-device-{target}`
    pub template: String,
    pub group_by: GroupBy,
    /// Requirements every device wheel gains (`--device-requires-dist`), `@GFXARCH@` its
    /// processor.
    pub requires_dist: Vec<String>,
}

impl DeviceNaming {
    /// The wheel group a processor's code goes to. Ex) `gfx1100` → `gfx110x` by sub-family
    pub fn wheel_of(&self, processor: &str) -> String {
        self.group_by.wheel_of(processor)
    }

    /// The project of a group's device wheel. Ex) (`torch`, `gfx942`) → `torch-device-gfx942`
    pub fn project(&self, host: &str, group: &str) -> String {
        self.template.replace("{name}", host).replace("{target}", group)
    }
}

/// One device wheel of a split, as planned: all but its archives, which the host's rewrite
/// makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceWheelPlan {
    /// Its wheel group. Ex) `gfx942`; `gfx110x` by sub-family; a family directory's `gfx11`
    pub group: String,
    /// Its project. Ex) `torch-device-gfx942`
    pub project: String,
    /// The host's version and tags under its project.
    pub filename: WheelFilename,
    /// The processors whose code objects it holds; none for a family directory's wheel.
    pub processors: Vec<String>,
    /// A family directory's wheel: the split's processors whose wheels require it.
    pub family_of: Vec<String>,
    /// The extra that brings it: its group's, or `device-all` for a family directory's wheel
    /// (whose processors' extras bring it too).
    pub extra: DeviceExtra,
    /// The host at its exact version, `--device-requires-dist`'s, then its family's wheel.
    pub requires_dist: Vec<String>,
    /// The index the release is published in (`--index-url`), recorded in its METADATA.
    pub index_url: Option<String>,
}

/// The device wheels of a split of `wheel` whose device wheels hold `processors` (in the order
/// people read them) and the family directories' `families`: one per wheel group, in the
/// processors' order, then one per family.
pub fn device_wheels(
    wheel: &Wheel,
    processors: &[String],
    families: &[FamilyWheel],
    naming: &DeviceNaming,
    index_url: Option<&str>,
) -> Vec<DeviceWheelPlan> {
    let host = &wheel.metadata.name;
    let version = &wheel.filename.version.text;
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for processor in processors {
        let group = naming.wheel_of(processor);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, members)) => members.push(processor.clone()),
            None => groups.push((group, vec![processor.clone()])),
        }
    }
    let mut wheels = Vec::new();
    for (group, members) in groups {
        let members_str: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut requires_dist = vec![format!("{host}=={version}")];
        requires_dist.extend(device_requirements(&naming.requires_dist, &members_str));
        // A processor's wheel requires its family's (TheRock's packaging chain).
        for family in families.iter().filter(|f| f.processors.iter().any(|p| members.contains(p))) {
            requires_dist.push(format!("{}=={version}", naming.project(host, &family.name)));
        }
        let project = naming.project(host, &group);
        wheels.push(DeviceWheelPlan {
            filename: device_filename(&wheel.filename, &project),
            extra: DeviceExtra::of(&group),
            group,
            project,
            processors: members,
            family_of: Vec::new(),
            requires_dist,
            index_url: index_url.map(str::to_string),
        });
    }
    for family in families {
        let project = naming.project(host, &family.name);
        let mut requires_dist = vec![format!("{host}=={version}")];
        requires_dist.extend(device_requirements(&naming.requires_dist, &[]));
        wheels.push(DeviceWheelPlan {
            filename: device_filename(&wheel.filename, &project),
            group: family.name.clone(),
            project,
            processors: Vec::new(),
            family_of: family.processors.clone(),
            extra: DeviceExtra::All,
            requires_dist,
            index_url: index_url.map(str::to_string),
        });
    }
    wheels
}

/// The file name of the device wheel of project `project`: the host's version and tags.
pub fn device_filename(host: &WheelFilename, project: &str) -> WheelFilename {
    WheelFilename {
        distribution: project.replace(['-', '.'], "_"),
        name: PackageName::new(project),
        build: None,
        variant: None,
        ..host.clone()
    }
}

/// The host's extras: one per processor (`device-gfx1100`), and one per device wheel that holds
/// several (`device-gfx110x`), each naming the device project of its wheel group; an extra of a
/// processor of a family wheel (or of a group of them) names that wheel too.
pub fn device_extras(
    host: &str,
    processors: &[String],
    families: &[FamilyWheel],
    naming: &DeviceNaming,
) -> Vec<(DeviceExtra, String)> {
    let project = |group: &str| naming.project(host, group);
    let mut extras: Vec<(DeviceExtra, String)> =
        processors.iter().map(|p| (DeviceExtra::of(p), project(&naming.wheel_of(p)))).collect();
    for p in processors {
        let group = DeviceExtra::of(&naming.wheel_of(p));
        if !extras.iter().any(|(extra, _)| *extra == group) {
            let name = project(group.target().unwrap_or_default());
            extras.push((group, name));
        }
    }
    for family in families {
        let family_project = project(&family.name);
        for p in &family.processors {
            for extra in [DeviceExtra::of(p), DeviceExtra::of(&naming.wheel_of(p))] {
                if !extras.iter().any(|(e, pr)| *e == extra && *pr == family_project) {
                    extras.push((extra, family_project.clone()));
                }
            }
        }
    }
    extras
}

/// `--require-devices`, the backwards-compatible host: its METADATA also requires every device
/// wheel at exactly its version with no marker, so that `pip install <host>` installs all the
/// device code the fat wheel held (the extras stay, and name the same wheels).
pub fn require_devices(split: &mut SplitPlan, wheel: &Wheel) {
    let path = format!("{}/METADATA", wheel.dist_info);
    let Some(NewMember { content: Content::Bytes(bytes), .. }) = split.plan.replace.get_mut(&path) else { return };
    let version = &wheel.metadata.version.text;
    let lines: String = split.devices.iter().map(|d| format!("Requires-Dist: {}=={version}\n", d.project)).collect();
    let text = String::from_utf8_lossy(bytes);
    let updated = match text.find("\n\n") {
        Some(i) => format!("{}{lines}{}", &text[..i + 1], &text[i + 1..]),
        None => format!("{}{}{lines}", text, if text.ends_with('\n') || text.is_empty() { "" } else { "\n" }),
    };
    *bytes = updated.into_bytes();
}

/// METADATA with the device extras, each requiring its device wheel at exactly `version`
/// (`extras`: extra → device project; several extras may bring one wheel, a family's), and
/// `device-all` requiring every device wheel once; the new header lines go after the others,
/// before the description. Extras of those names already declared are left out (a host split
/// before).
pub fn with_device_extras(metadata: &str, extras: &[(DeviceExtra, String)], version: &str) -> String {
    let mut lines = String::new();
    let declared = |extra: &str| {
        metadata.lines().take_while(|l| !l.is_empty()).any(|l| {
            l.split_once(':').is_some_and(|(k, v)| k.eq_ignore_ascii_case("Provides-Extra") && v.trim() == extra)
        })
    };
    let mut projects: Vec<&str> = Vec::new();
    let mut names: Vec<&DeviceExtra> = Vec::new();
    for (name, project) in extras {
        if !projects.contains(&project.as_str()) {
            projects.push(project);
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    // An extra may bring several wheels (a processor's and its family's): declared once.
    for name in names {
        let extra = name.to_string();
        if declared(&extra) {
            continue;
        }
        lines.push_str(&format!("Provides-Extra: {extra}\n"));
        for (_, project) in extras.iter().filter(|(n, _)| n == name) {
            lines.push_str(&format!("Requires-Dist: {project}=={version}; extra == \"{extra}\"\n"));
        }
    }
    let all = DeviceExtra::All.to_string();
    if !projects.is_empty() && !declared(&all) {
        lines.push_str(&format!("Provides-Extra: {all}\n"));
        for project in projects {
            lines.push_str(&format!("Requires-Dist: {project}=={version}; extra == \"{all}\"\n"));
        }
    }
    // Headers end at the first empty line; the body after it is the description.
    let (head, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i + 1], &metadata[i + 1..]),
        None if metadata.ends_with('\n') || metadata.is_empty() => (metadata, ""),
        None => return format!("{metadata}\n{lines}"),
    };
    format!("{head}{lines}{body}")
}

/// The plan that makes one device wheel serve every Python version: the same members, named
/// and tagged `py3-none-<platform>` (every platform tag kept). The device code of a processor
/// is the same bytes whichever Python its host was built for; the hosts pin the device wheel by
/// version alone, so one file meets every host's extra.
pub fn shared_device_wheel(wheel: &Wheel) -> Plan {
    let filename = crate::wheel::WheelFilename {
        python_tags: vec!["py3".to_string()],
        abi_tags: vec!["none".to_string()],
        ..wheel.filename.clone()
    };
    let mut plan = Plan::new(filename);
    let lines: Vec<String> = wheel.filename.platform_tags.iter().map(|p| format!("py3-none-{p}")).collect();
    plan.replace.insert(
        format!("{}/WHEEL", wheel.dist_info),
        NewMember::new(wheel.wheel_info.with_tags(&lines, None).into_bytes(), None),
    );
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_wheel_comes_with_its_processors_extras_and_device_all() {
        let families = vec![FamilyWheel { name: "gfx11".into(), processors: vec!["gfx1100".into(), "gfx1151".into()] }];
        let processors: Vec<String> = ["gfx942", "gfx1100", "gfx1151"].iter().map(|p| p.to_string()).collect();
        // A wheel per processor: each gfx11 processor's extra brings its wheel and the family's.
        let naming =
            |group_by| DeviceNaming { template: "{name}-device-{target}".into(), group_by, requires_dist: Vec::new() };
        let out =
            with_device_extras("Name: k\n", &device_extras("k", &processors, &families, &naming(GroupBy::Target)), "1");
        for (extra, wheel) in [("gfx1100", "gfx1100"), ("gfx1100", "gfx11"), ("gfx1151", "gfx11"), ("all", "gfx11")] {
            let line = format!("Requires-Dist: k-device-{wheel}==1; extra == \"device-{extra}\"\n");
            assert!(out.contains(&line), "{line}{out}");
        }
        assert!(!out.contains("k-device-gfx11==1; extra == \"device-gfx942\""), "{out}");
        assert_eq!(out.matches("Provides-Extra: device-gfx1100\n").count(), 1, "{out}");
        assert_eq!(out.matches("k-device-gfx11==1; extra == \"device-all\"").count(), 1, "{out}");
        // A wheel per sub-family: the groups' extras bring the family's wheel too.
        let out = with_device_extras(
            "Name: k\n",
            &device_extras("k", &processors, &families, &naming(GroupBy::Subfamily)),
            "1",
        );
        for extra in ["gfx1100", "gfx110x", "gfx1151", "gfx115x"] {
            let line = format!("Requires-Dist: k-device-gfx11==1; extra == \"device-{extra}\"\n");
            assert!(out.contains(&line), "{line}{out}");
        }
    }

    #[test]
    fn extras_go_after_the_headers_and_before_the_description() {
        let pairs = |gs: &[&str]| -> Vec<(DeviceExtra, String)> {
            gs.iter().map(|g| (DeviceExtra::of(g), format!("k-device-{g}"))).collect()
        };
        let text = "Metadata-Version: 2.1\nName: k\nVersion: 1.0\n\nThe description.\n";
        let out = with_device_extras(text, &pairs(&["gfx942", "gfx950"]), "1.0");
        assert_eq!(
            out,
            "Metadata-Version: 2.1\nName: k\nVersion: 1.0\nProvides-Extra: device-gfx942\nRequires-Dist: k-device-gfx942==1.0; extra == \"device-gfx942\"\nProvides-Extra: device-gfx950\nRequires-Dist: k-device-gfx950==1.0; extra == \"device-gfx950\"\nProvides-Extra: device-all\nRequires-Dist: k-device-gfx942==1.0; extra == \"device-all\"\nRequires-Dist: k-device-gfx950==1.0; extra == \"device-all\"\n\nThe description.\n"
        );
        let again = with_device_extras(&out, &pairs(&["gfx942", "gfx950"]), "1.0");
        assert_eq!(again, out, "a second split declares nothing twice");
        assert!(with_device_extras("Name: k\n", &pairs(&["gfx942"]), "1").ends_with("extra == \"device-all\"\n"));
        // A family's wheel: one per family in device-all, whatever the extras naming it.
        let family = vec![
            (DeviceExtra::of("gfx1100"), "k-device-gfx110x".to_string()),
            (DeviceExtra::of("gfx1101"), "k-device-gfx110x".to_string()),
            (DeviceExtra::of("gfx110x"), "k-device-gfx110x".to_string()),
        ];
        let out = with_device_extras("Name: k\n", &family, "1");
        assert_eq!(out.matches("extra == \"device-all\"").count(), 1, "{out}");
        assert!(out.contains("Requires-Dist: k-device-gfx110x==1; extra == \"device-gfx1101\"\n"), "{out}");
    }
}
