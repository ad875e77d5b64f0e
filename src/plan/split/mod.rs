//! `split`'s plan: one fat wheel becomes a host wheel and one device wheel per GPU target group,
//! in kpack's layout (`../shared/reference/gpu-code-formats.md` §4.1). In every host binary
//! whose `.hip_fatbin` holds offload bundles, each bundle's space becomes a kpack marker (the
//! MessagePack map `{kernel_name, kpack_search_paths}`) and each wrapper a `HIPK` wrapper with
//! its index ([`crate::gpu::rewrite::split_host`]); the code objects go, per group, into
//! an archive the marker's search path names: `<dir>/.kpack/<file>_<group>.kpack` beside the
//! binary. The host's METADATA gains one extra per group (`device-<group>`) and `device-all`,
//! each requiring its device wheel at the exact version.
//!
//! The host wheel is written by the same writer as `thin`'s ([`ThinChange`] with
//! [`SplitTo`]); the archives are written as each binary is, and gathered into device wheels
//! afterwards.
//!
//! The device wheels (their names, extras and requirements) are planned in [`devices`].

use std::collections::BTreeMap;
use std::sync::Arc;

mod devices;

pub use super::kpack::{ArchivePer, Group, SplitTo};
use super::thin::{FileCut, ThinChange};
use super::{Content, NewMember, Plan};
use crate::analysis::{Analysis, databases};
use crate::gpu::TargetId;
use crate::gpu::{Container, GpuCode};
use crate::wheel::Wheel;
pub use devices::{
    DEFAULT_DEVICE_NAME, DeviceNaming, DeviceWheelPlan, FamilyWheel, GroupBy, check_device_name,
    check_device_requirement, device_extras, device_filename, device_requirements, device_wheels, family_wheel_name,
    grouped, require_devices, shared_device_wheel, with_device_extras,
};

/// What a binary's headers say of where its wrappers point ([`WrapperPointers`]): its
/// `.hip_fatbin` pieces' addresses and its RELA sections, on a 64-bit little-endian machine
/// whose RELATIVE relocation wheelfix knows.
fn wrapper_pointers(facts: &crate::elf::ElfFacts, wrappers_addr: u64) -> crate::gpu::rewrite::WrapperPointers {
    const SHT_RELA: u32 = 4;
    let relative_type = match facts.machine {
        _ if !facts.is_64 || !facts.little_endian => None,
        62 => Some(8),     // R_X86_64_RELATIVE
        183 => Some(1027), // R_AARCH64_RELATIVE
        21 => Some(22),    // R_PPC64_RELATIVE
        243 => Some(3),    // R_RISCV_RELATIVE
        _ => None,
    };
    crate::gpu::rewrite::WrapperPointers {
        wrappers_addr,
        piece_addrs: facts.sections_named(".hip_fatbin").map(|s| s.addr).collect(),
        rela: facts.sections.iter().filter(|s| s.kind == SHT_RELA).map(|s| (s.offset, s.size)).collect(),
        relative_type,
    }
}

/// The plan of one wheel's split.
#[derive(Debug)]
pub struct SplitPlan {
    /// The host wheel's plan.
    pub plan: Plan,
    /// Each binary whose device code moves out.
    pub binaries: Vec<Arc<SplitTo>>,
    /// What each of them loses, by target id.
    pub cut: Vec<FileCut>,
    /// Device code in other forms, left in the host wheel.
    pub left: Vec<GpuCode>,
    /// Files whose bundles cannot be read or moved, and why: the wheel is not written.
    pub unreadable: Vec<(String, String)>,
    /// The groups some binary or database file has code for, in the order people read them.
    pub groups: Vec<String>,
    /// Kernel database files leaving the host: each to its group's device wheel (at the same
    /// path), or to none (a target no group takes).
    pub databases: Vec<DatabaseMove>,
    /// Device wheels of a family directory's files (`amd-gfx11xx/`) that no one group's wheel
    /// takes whole: the wheels of the family's processors require it.
    pub families: Vec<FamilyWheel>,
    /// Binaries that have no code at all for some of the groups (as the fat wheel had none):
    /// installed with those extras, they cannot load their kernels there.
    pub uncovered: Vec<crate::gpu::targets::Uncovered>,
    /// The device wheels to write, each group's then each family directory's.
    pub devices: Vec<DeviceWheelPlan>,
}

impl SplitPlan {
    /// Why the outputs of this split of `wheel` cannot be written under their names, if they
    /// cannot: a device project that is the host's own, or a file or archive name longer than a
    /// file system takes (pip could not install it).
    pub fn name_problem(&self, wheel: &Wheel) -> Option<String> {
        use crate::output::NAME_MAX;
        let host = crate::wheel::name::PackageName::new(&wheel.metadata.name);
        if let Some(d) = self.devices.iter().find(|d| crate::wheel::name::PackageName::new(&d.project) == host) {
            return Some(format!(
                "the {} device wheel would be named `{}`, which is the host's own project; choose another --device-name",
                d.group, d.project
            ));
        }
        let files =
            std::iter::once(wheel.filename.to_string()).chain(self.devices.iter().map(|d| d.filename.to_string()));
        for file in files {
            if file.len() > NAME_MAX {
                return Some(format!(
                    "the output file name {file} is {} bytes, more than the {NAME_MAX} a file name may have",
                    file.len()
                ));
            }
        }
        for binary in &self.binaries {
            // Per target ID, an archive may be named after any target ID of the binary's code.
            let targets = self.cut.iter().filter(|c| c.file == binary.member).flat_map(|c| c.dropped.keys());
            let mut names: Vec<String> = self.groups.clone();
            names.extend(targets.flat_map(|t| self.groups.iter().map(|g| binary.archive_per.name(g, t.as_str()))));
            names.sort();
            names.dedup();
            for name in &names {
                let path = binary.archive_path(name);
                let file = path.rsplit('/').next().unwrap_or(&path);
                if file.len() > NAME_MAX {
                    return Some(format!(
                        "the archive name {file} is {} bytes, more than the {NAME_MAX} a file name may have (pip could not install it); --group NAME gives shorter names",
                        file.len()
                    ));
                }
            }
        }
        None
    }
}

/// What a split is asked for: the groups of the device wheels, their naming, and where and
/// how the archives are made.
#[derive(Debug, Clone, Copy)]
pub struct SplitOptions<'a> {
    pub groups: &'a [Group],
    pub naming: &'a DeviceNaming,
    /// Whether the binaries lose the space their bundles held.
    pub compact: bool,
    pub compression_level: u32,
    /// Where the archives are made.
    pub dir: &'a std::path::Path,
    pub layout: ArchiveLayout<'a>,
    /// The index the release is published in (`--index-url`), recorded in every METADATA.
    pub index_url: Option<&'a str>,
}

/// Why a split setting (a flag, or its `[tool.wheelfix]` key) is refused: a usage error, the
/// value named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("target, subfamily or family")]
    GroupBy,
    #[error(transparent)]
    ArchivePer(#[from] super::kpack::UnknownArchivePer),
    #[error("kpack group `{0}`: letters, digits, `.`, `_` and `-` (it names archive files)")]
    KpackGroup(String),
    #[error("overlay root `{0}`: a directory of the wheel's installed tree, as a relative path (`torch`)")]
    OverlayRoot(String),
    #[error("device requirement `{text}` is not a PEP 508 requirement: {why}")]
    NotPep508 { text: String, why: String },
    #[error("device requirement `{0}` names a URL: pip refuses a URL requirement of a wheel from an index")]
    UrlRequirement(String),
    #[error("--device-name `{0}` has no {{target}}: every device wheel would have the same name")]
    NoTarget(String),
    #[error("--device-name `{template}` does not make a project name (`{example}`)")]
    NotProjectName { template: String, example: String },
}

/// A kpack group name names archive files: letters, digits, `.`, `_` and `-` only, not first
/// a `.`.
pub fn check_kpack_group(text: &str) -> Result<(), SettingError> {
    let ok = !text.is_empty()
        && !text.starts_with('.')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(SettingError::KpackGroup(text.to_string())) }
}

/// An overlay root is a directory of the installed tree: a relative path of names, none `..`.
pub fn check_overlay_root(text: &str) -> Result<(), SettingError> {
    let trimmed = text.trim_end_matches('/');
    let ok = !trimmed.is_empty()
        && !trimmed.starts_with('/')
        && !trimmed.contains('\\')
        && trimmed.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
    if ok { Ok(()) } else { Err(SettingError::OverlayRoot(text.to_string())) }
}

/// The name TheRock's splitter gives a project's kpack group: the project's name in lower case,
/// `-` as `_`. Ex) `Amd-Torch` → `amd_torch`
pub fn therock_group(project: &str) -> String {
    project.to_lowercase().replace('-', "_")
}

/// Archives the binaries of a wheel share, one per processor, `<group>_<processor>.kpack` in
/// `.kpack/` of `root` (TheRock's overlay root: the binaries' kernel names and the archives'
/// keys are their paths below it), else of the binaries' common directory (kernel names are
/// install paths).
#[derive(Debug, Clone, Copy)]
pub struct SharedArchives<'a> {
    pub group: &'a str,
    pub root: Option<&'a str>,
}

/// A kernel database file that leaves the host wheel.
#[derive(Debug, Clone)]
pub struct DatabaseMove {
    pub member: String,
    pub target: TargetId,
    /// The group whose device wheel takes it.
    pub group: Option<String>,
    pub size: u64,
}

/// The groups of `--all-targets`: every processor the wheel's offload bundles have code for,
/// and each generic processor whose covered processors none of those is. Ex) gfx90a:xnack+,
/// gfx942, gfx9-4-generic → gfx90a, gfx942
pub fn all_groups(wheel: &Wheel, analysis: &Analysis) -> Vec<Group> {
    let databases = crate::analysis::databases::in_wheel(wheel);
    let targets: Vec<&TargetId> = analysis
        .gpu
        .iter()
        .filter(|c| c.container == Container::HipFatbin)
        .flat_map(|c| c.target_bytes.keys())
        .chain(databases.iter().map(|(_, db)| &db.target))
        .collect();
    let mut names: Vec<&str> = targets.iter().filter(|t| !t.is_generic()).map(|t| t.processor()).collect();
    names.sort();
    names.dedup();
    let mut groups: Vec<Group> = names.iter().filter_map(|n| Group::of(n).ok()).collect();
    for generic in targets.iter().filter(|t| t.is_generic()).map(|t| t.without_features()) {
        if !groups.iter().any(|g| g.keep.keeps(&generic)) && !groups.iter().any(|g| g.name == generic.as_str()) {
            groups.extend(Group::of(generic.as_str()).ok());
        }
    }
    groups
}

/// Where a split's archives go and how code objects are divided among them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ArchiveLayout<'a> {
    /// The wheel's binaries share one archive per name ([`SharedArchives`]); `None`: each
    /// binary has its own beside it.
    pub shared: Option<SharedArchives<'a>>,
    pub per: ArchivePer,
}

/// Plan the split of one wheel as `options` ask.
pub fn split(wheel: &Wheel, analysis: &Analysis, options: &SplitOptions<'_>) -> SplitPlan {
    let SplitOptions { groups, naming, compact, compression_level, dir, layout, index_url } = *options;
    let mut plan = Plan::new(wheel.filename.clone());
    plan.compression_level = compression_level;
    let groups = Arc::new(groups.to_vec());
    let (mut binaries, mut cut, mut left, mut unreadable) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut present: Vec<&Group> = Vec::new();
    // Kernel databases move whole, binaries among them (`libMIOpenCK*_gfx942.so`).
    let mut databases = database_moves(wheel, &groups, naming);
    for db in &databases {
        plan.remove.insert(db.member.clone());
        let group = db.group.as_ref().and_then(|name| groups.iter().find(|g| g.name == *name));
        if let Some(g) = group
            && !present.iter().any(|p| p.name == g.name)
        {
            present.push(g);
        }
    }
    let root = layout.shared.and_then(|s| s.root).map(|r| r.trim_end_matches('/'));
    let places = Places {
        root,
        shared_dir: root.map_or_else(|| common_dir_of_binaries(wheel, analysis, &databases), str::to_string),
        layout,
        dir,
        compact,
    };
    for code in &analysis.gpu {
        if databases.iter().any(|d| d.member == code.file) {
            continue;
        }
        match plan_binary(code, wheel, analysis, &groups, &places) {
            BinarySplit::Left => left.push(code.clone()),
            BinarySplit::Unreadable(why) => unreadable.push((code.file.clone(), why)),
            BinarySplit::Moves { to, change, cut: file_cut } => {
                for g in groups.iter() {
                    if code.target_bytes.keys().any(|t| g.keep.keeps(t)) && !present.iter().any(|p| p.name == g.name) {
                        present.push(g);
                    }
                }
                plan.replace.insert(code.file.clone(), NewMember { content: Content::Thin(change), mode: None });
                binaries.push(to);
                cut.push(file_cut);
            }
        }
    }
    let present: Vec<&str> = present.iter().map(|g| g.name.as_str()).collect();
    let processors: Vec<String> =
        crate::gpu::targets::natural_order(present.iter().copied()).into_iter().map(str::to_string).collect();
    let (families, stay) = family_wheels(&mut databases, &groups, &processors);
    for member in stay {
        plan.remove.remove(&member);
    }
    if !binaries.is_empty() || !databases.is_empty() {
        let extras = device_extras(&wheel.metadata.name, &processors, &families, naming);
        let mut metadata = with_device_extras(&wheel.metadata_text, &extras, &wheel.metadata.version.text);
        if let Some(url) = index_url {
            metadata = crate::wheel::metadata::with_index_url(&metadata, url);
        }
        let path = format!("{}/METADATA", wheel.dist_info);
        plan.replace.insert(path, NewMember { content: Content::Bytes(metadata.into_bytes()), mode: None });
    }
    let requested: Vec<_> = processors.iter().filter_map(|g| TargetId::parse(g).ok()).collect();
    let moved: Vec<GpuCode> = analysis.gpu.iter().filter(|c| cut.iter().any(|f| f.file == c.file)).cloned().collect();
    let uncovered = crate::gpu::targets::uncovered(&moved, &requested);
    let devices = device_wheels(wheel, &processors, &families, naming, index_url);
    SplitPlan { plan, binaries, cut, left, unreadable, groups: processors, databases, families, uncovered, devices }
}

/// Where one wheel's split puts its archives, for each binary's plan.
struct Places<'a> {
    /// The overlay root (`--overlay-root`), without a trailing slash.
    root: Option<&'a str>,
    /// The directory of the shared archives' `.kpack/`: the overlay root, else the directory
    /// every binary to split installs in or below.
    shared_dir: String,
    layout: ArchiveLayout<'a>,
    /// Where the archives are made.
    dir: &'a std::path::Path,
    /// Whether the binaries lose the space their bundles held.
    compact: bool,
}

/// What the split does with one file's device code.
enum BinarySplit {
    /// Left in the host wheel: not in offload bundles, or in a file that installs outside
    /// site-packages.
    Left,
    /// Its bundles cannot be read or moved, for this reason: the wheel is not written.
    Unreadable(String),
    /// Its code objects move out into archives.
    Moves { to: Arc<SplitTo>, change: Box<ThinChange>, cut: FileCut },
}

/// The directory every binary the wheel splits installs in or below (databases aside).
fn common_dir_of_binaries(wheel: &Wheel, analysis: &Analysis, databases: &[DatabaseMove]) -> String {
    analysis
        .gpu
        .iter()
        .filter(|c| c.container == Container::HipFatbin && !c.target_bytes.is_empty())
        .filter(|c| !databases.iter().any(|d| d.member == c.file))
        .filter_map(|c| wheel.install_path(&c.file))
        .map(|path| parent_and_name(&path).0.to_string())
        .reduce(|a, b| common_dir(&a, &b))
        .unwrap_or_default()
}

/// Plan the split of one file's device code: every code object leaves the binary for the
/// archives, its marker in their place.
fn plan_binary(
    code: &GpuCode,
    wheel: &Wheel,
    analysis: &Analysis,
    groups: &Arc<Vec<Group>>,
    places: &Places<'_>,
) -> BinarySplit {
    if code.container != Container::HipFatbin || code.target_bytes.is_empty() {
        return BinarySplit::Left;
    }
    if let Some(problem) = code.bundle_problems.first() {
        return BinarySplit::Unreadable(problem.clone());
    }
    let Some(member) = analysis.elf.iter().find(|m| m.path == code.file) else {
        return BinarySplit::Left;
    };
    let facts = &member.facts;
    let Some(wrappers) = facts.section(".hipFatBinSegment").filter(|s| s.has_file_bytes()) else {
        return BinarySplit::Unreadable("offload bundles but no .hipFatBinSegment wrappers".into());
    };
    // The binary's install path keys its code objects; one in `.data/scripts` or
    // `.data/data` installs outside site-packages, where no archive path can follow it.
    let Some(install_path) = wheel.install_path(&code.file) else {
        return BinarySplit::Left;
    };
    let kernel_name = match kernel_name(&install_path, places.root) {
        Ok(name) => name,
        Err(why) => return BinarySplit::Unreadable(why.to_string()),
    };
    let shared = places.layout.shared;
    let (archive_stem, search) = archive_places(&install_path, shared.map(|s| s.group), &places.shared_dir);
    let to = Arc::new(SplitTo {
        member: code.file.clone(),
        marker: crate::gpu::kpack::marker(&kernel_name, &search),
        kernel_name,
        wrappers: (wrappers.offset, wrappers.size),
        pointers: wrapper_pointers(facts, wrappers.addr),
        groups: groups.clone(),
        dir: places.dir.to_path_buf(),
        archive_stem,
        shared: shared.map(|s| s.group.to_string()),
        archive_per: places.layout.per,
    });
    let ranges: Vec<(u64, u64)> = facts
        .sections_named(".hip_fatbin")
        .filter(|s| s.has_file_bytes())
        .filter_map(|s| Some((s.offset, s.offset.checked_add(s.size)?)))
        .collect();
    // Every code object leaves the binary.
    let cut = FileCut {
        file: code.file.clone(),
        container: Some(code.container),
        kept: BTreeMap::new(),
        dropped: code.target_bytes.clone(),
    };
    let change = ThinChange {
        member: code.file.clone(),
        compact: if places.compact { ranges.clone() } else { Vec::new() },
        ranges,
        expected: cut.clone(),
        copy: analysis.bundled_copies.get(&code.file).cloned(),
        copy_shared: false,
        edit: super::thin::BundleEdit::Split(to.clone()),
    };
    BinarySplit::Moves { to, change: Box::new(change), cut }
}

/// The name a binary's code objects are keyed by: its install path, or under an overlay root
/// its path below the root (TheRock's keys); a binary outside the root cannot be keyed so.
fn kernel_name(install_path: &str, root: Option<&str>) -> Result<String, OutsideRoot> {
    let Some(root) = root else { return Ok(install_path.to_string()) };
    match install_path.strip_prefix(&format!("{root}/")) {
        Some(below) => Ok(below.to_string()),
        None => Err(OutsideRoot { install_path: install_path.to_string(), root: root.to_string() }),
    }
}

/// A binary that installs outside the overlay root: TheRock's layout has no key for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "it installs at {install_path}, outside the overlay root `{root}` (--overlay-root): TheRock's layout keys every binary by its path below the root"
)]
struct OutsideRoot {
    install_path: String,
    root: String,
}

/// Where a binary's archives go and how its marker finds them: the archives' member path stem
/// (`_<name>.kpack` appended) and the marker's search paths. Beside the binary (a binary in
/// `.data/platlib/` installs at the root of site-packages, as does the device wheel's archive
/// beside it), or, shared by the kpack group `group`, in `shared_dir`, the directory of every
/// binary the wheel splits (or the overlay root).
fn archive_places(install_path: &str, group: Option<&str>, shared_dir: &str) -> (String, Vec<String>) {
    let (dir_part, file_name) = parent_and_name(install_path);
    // The runtime expands every `@GFXARCH@` of a search path: one in the binary's own name
    // would be expanded too, and no archive would be found. The archive's name spells it
    // otherwise.
    let file_name = &file_name.replace(crate::gpu::kpack::GFXARCH, "_GFXARCH_");
    let (archive_stem, search) = match group {
        None => (in_dir(dir_part, &format!(".kpack/{file_name}")), format!(".kpack/{file_name}")),
        Some(name) => {
            let up = "../".repeat(depth(dir_part) - depth(shared_dir));
            (in_dir(shared_dir, &format!(".kpack/{name}")), format!("{up}.kpack/{name}"))
        }
    };
    (archive_stem, vec![format!("{search}_{}.kpack", crate::gpu::kpack::GFXARCH)])
}

/// The kernel database files that leave the host wheel, each with the group whose device wheel
/// takes it: a processor's files (`TensileLibrary_gfx942.dat`) to the group that keeps that
/// processor's code, or to none; a family directory's files (`gfx11xx/`) to the one device wheel
/// that takes the whole family (`--group-by family`: `gfx11xx` → gfx11; `subfamily`: `gfx120x`
/// → gfx120x), beside a processor of it that the split has, else they stay in the host.
fn database_moves(wheel: &Wheel, groups: &[Group], naming: &DeviceNaming) -> Vec<DatabaseMove> {
    let mut moves = Vec::new();
    for (member, db) in databases::in_wheel(wheel) {
        let group = groups.iter().find(|g| g.keep.keeps(&db.target));
        moves.push(DatabaseMove {
            member: member.name.to_string(),
            target: db.target,
            group: group.map(|g| g.name.clone()),
            size: member.size,
        });
    }
    for member in wheel.archive.members().iter().filter(|m| !m.is_dir()) {
        let Some((_, family)) = wheel.install_path(&member.name).and_then(|p| databases::family_database(&p)) else {
            continue;
        };
        let family_wheel = naming.wheel_of(&family);
        let whole =
            groups.iter().find(|g| databases::in_family(&g.name, &family) && naming.wheel_of(&g.name) == family_wheel);
        let group = match whole {
            Some(g) => g.name.clone(),
            // No one group's wheel takes the family: its own wheel does, if a processor of it is
            // split out (`split` keeps only the processors that have code or files moved).
            None if groups.iter().any(|g| databases::in_family(&g.name, &family)) => family_wheel_name(&family),
            None => continue,
        };
        moves.push(DatabaseMove {
            member: member.name.to_string(),
            target: TargetId::from_code(family),
            group: Some(group),
            size: member.size,
        });
    }
    moves
}

/// The family wheels of a split whose device wheels hold `present` (processors, in the order
/// people read them): one for the files of each family directory ([`database_moves`]) that went
/// to no group's wheel. A family none of whose processors is present keeps its files in the
/// host: they leave `moves`, and are returned.
fn family_wheels(
    moves: &mut Vec<DatabaseMove>,
    groups: &[Group],
    present: &[String],
) -> (Vec<FamilyWheel>, Vec<String>) {
    let (mut families, mut stay) = (Vec::<FamilyWheel>::new(), Vec::new());
    moves.retain(|db| {
        let Some(name) = db.group.as_deref().filter(|g| !groups.iter().any(|x| x.name == *g)) else { return true };
        let processors: Vec<String> =
            present.iter().filter(|p| databases::in_family(p, db.target.as_str())).cloned().collect();
        if processors.is_empty() {
            stay.push(db.member.clone());
            return false;
        }
        match families.iter_mut().find(|f| f.name == name) {
            Some(f) => {
                for p in processors {
                    if !f.processors.contains(&p) {
                        f.processors.push(p);
                    }
                }
            }
            None => families.push(FamilyWheel { name: name.to_string(), processors }),
        }
        true
    });
    (families, stay)
}

/// A path's directory and file name. Ex) `p/lib/k.so` → (`p/lib`, `k.so`); `k.so` → (``, `k.so`)
fn parent_and_name(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// `name` in directory `dir` (`` for the top).
fn in_dir(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// How many directories deep `dir` is. Ex) `` → 0, `p/lib` → 2
fn depth(dir: &str) -> usize {
    if dir.is_empty() { 0 } else { dir.split('/').count() }
}

/// The deepest directory both are in. Ex) (`p/lib`, `p/sub`) → `p`
fn common_dir(a: &str, b: &str) -> String {
    let common: Vec<&str> = a.split('/').zip(b.split('/')).take_while(|(x, y)| x == y).map(|(x, _)| x).collect();
    common.join("/")
}

#[cfg(test)]
mod tests;
