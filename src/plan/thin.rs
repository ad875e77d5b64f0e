//! `thin`'s plan: which members lose device code, from the analysis alone. Every host ELF file
//! whose `.hip_fatbin` holds code objects for other targets, and every standalone bundle file,
//! is rewritten in its bundles' ranges ([`ThinChange`], applied by the writer with
//! [`crate::gpu::rewrite`]); `--prune-files` drops standalone code objects for other
//! targets; other forms of device code are left as they are and listed. The wheel stays the
//! same distribution: its name, version and tags do not change.

use std::collections::BTreeMap;

use super::{Content, NewMember, Plan};
use crate::analysis::Analysis;
use crate::gpu::targets::Keep;
use crate::gpu::{Container, Count, GpuCode, TargetId};
use crate::wheel::Wheel;

/// One member to rewrite: the bundles in `ranges` (file offsets, `[start, end)`) are edited as
/// `edit` says. `expected` is what the analysis saw there; the writer checks the bundles it
/// rewrites say the same.
#[derive(Debug, Clone)]
pub struct ThinChange {
    pub member: String,
    pub ranges: Vec<(u64, u64)>,
    pub edit: BundleEdit,
    pub expected: FileCut,
    /// The member inflated by the analysis, when it kept a copy; else the writer inflates it.
    pub copy: Option<std::sync::Arc<crate::analysis::BundledCopy>>,
    /// Other rewrites read the same copy (`variants`: one per processor): it is only read, and
    /// this rewrite writes an overlay of its own.
    pub copy_shared: bool,
    /// Take the freed pages of these ranges out of the file ([`crate::elf::layout`]): the
    /// `.hip_fatbin` pieces, never bundles in other data, whose symbols span their space.
    pub compact: Vec<(u64, u64)>,
}

/// What a rewrite does to a member's bundles.
#[derive(Debug, Clone)]
pub enum BundleEdit {
    /// `thin`: each bundle keeps only the code objects this keeps.
    Thin(Keep),
    /// `split`: every code object leaves the file for kpack archives ([`super::kpack`]), a
    /// marker in each bundle's place.
    Split(std::sync::Arc<super::kpack::SplitTo>),
}

impl ThinChange {
    /// Where the member's code objects go when it is split; `None` when it is thinned.
    pub fn split(&self) -> Option<&std::sync::Arc<super::kpack::SplitTo>> {
        match &self.edit {
            BundleEdit::Split(to) => Some(to),
            BundleEdit::Thin(_) => None,
        }
    }
}

/// How `thin` rewrites.
#[derive(Debug, Clone, Copy)]
pub struct ThinOptions {
    /// Remove standalone code-object files that keep nothing.
    pub prune_files: bool,
    /// Take the freed pages of host binaries out of their files.
    pub compact: bool,
    pub compression_level: u32,
    /// Several plans are written from the analysis's copies (`variants`), which must stay as
    /// they were inflated.
    pub shared_copies: bool,
}

/// What thinning does to one file's code objects, by target ID (a kernel database file's: the
/// target or the family directory its path names, `gfx11xx`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileCut {
    pub file: String,
    pub container: Option<Container>,
    pub kept: BTreeMap<TargetId, Count>,
    pub dropped: BTreeMap<TargetId, Count>,
}

/// The plan of one wheel, and what it will do.
#[derive(Debug, Clone)]
pub struct ThinPlan {
    pub plan: Plan,
    /// Files whose bundles are rewritten (or, with nothing to drop, kept as they are).
    pub cut: Vec<FileCut>,
    /// Standalone code-object files removed (`--prune-files`).
    pub pruned: Vec<FileCut>,
    /// Device code in other forms, left as it is.
    pub left: Vec<GpuCode>,
    /// Requested targets no code object of the wheel runs on, or that a binary with offload
    /// bundles would keep nothing for.
    pub missing: Vec<TargetId>,
    /// Those binaries, and the targets each lacks.
    pub uncovered: Vec<crate::gpu::targets::Uncovered>,
    /// Files whose bundles cannot be read, and why: the wheel is not written.
    pub unreadable: Vec<(String, String)>,
}

impl ThinPlan {
    /// Whether the plan changes the wheel.
    pub fn changes(&self) -> bool {
        self.plan.changes_members()
    }
}

/// Plan `thin` for one wheel.
pub fn thin(wheel: &Wheel, analysis: &Analysis, keep: &Keep, options: ThinOptions) -> ThinPlan {
    let ThinOptions { prune_files, compression_level, .. } = options;
    let mut plan = Plan::new(wheel.filename.clone());
    plan.compression_level = compression_level;
    let (mut cut, mut pruned, mut left, mut unreadable) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for code in &analysis.gpu {
        let file_cut = cut_of(code, keep);
        match code.container {
            container if container.holds_bundles() => {
                if let Some(problem) = code.bundle_problems.first() {
                    unreadable.push((code.file.clone(), problem.to_string()));
                    continue;
                }
                let ranges = bundle_ranges(wheel, analysis, code);
                if ranges.is_empty() {
                    left.push(code.clone());
                    continue;
                }
                if !file_cut.dropped.is_empty() {
                    add_change(&mut plan, code, ranges, keep, &file_cut, analysis, options);
                }
                cut.push(file_cut);
            }
            Container::AmdgpuElf if prune_files && code.targets.iter().all(|t| !keep.keeps(t)) => {
                let mut file_cut = file_cut;
                let size = wheel.archive.member(&code.file).map_or(0, |m| m.size);
                for t in &code.targets {
                    file_cut.dropped.entry(t.clone()).or_default().add(size);
                }
                plan.remove.insert(code.file.clone());
                pruned.push(file_cut);
            }
            _ => left.push(code.clone()),
        }
    }
    // Kernel databases for other targets go with their code objects (`--prune-files`).
    for (member, db) in crate::analysis::databases::in_wheel(wheel).into_iter().filter(|_| prune_files) {
        let target = db.target;
        if keep.keeps(&target) || plan.remove.contains(&*member.name) {
            continue;
        }
        let mut file_cut = FileCut { file: member.name.to_string(), container: None, ..FileCut::default() };
        file_cut.dropped.entry(target).or_default().add(member.size);
        plan.remove.insert(member.name.to_string());
        plan.replace.remove(&*member.name);
        cut.retain(|c: &FileCut| c.file != *member.name);
        pruned.push(file_cut);
    }
    // A family directory's files (`amd-gfx11xx/`) go when no processor kept is of the family.
    for member in wheel.archive.members().iter().filter(|m| prune_files && !m.is_dir()) {
        let path = wheel.install_path(&member.name);
        let Some((_, family)) = path.as_deref().and_then(crate::analysis::databases::family_database) else { continue };
        if keep.targets.iter().any(|t| crate::analysis::databases::in_family(t.processor(), &family)) {
            continue;
        }
        let mut file_cut = FileCut { file: member.name.to_string(), container: None, ..FileCut::default() };
        file_cut.dropped.entry(TargetId::from_code(family)).or_default().add(member.size);
        plan.remove.insert(member.name.to_string());
        pruned.push(file_cut);
    }
    let mut uncovered = crate::gpu::targets::uncovered(&analysis.gpu, &keep.targets);
    uncovered.retain(|u| !plan.remove.contains(&u.file));
    let missing = if analysis.gpu.is_empty() { Vec::new() } else { missing_targets(&analysis.gpu, keep, &uncovered) };
    ThinPlan { plan, cut, pruned, left, missing, uncovered, unreadable }
}

/// What a keep does to the code objects of one file, from its counts per target.
fn cut_of(code: &GpuCode, keep: &Keep) -> FileCut {
    let mut cut = FileCut { file: code.file.clone(), container: Some(code.container), ..FileCut::default() };
    for (target, count) in &code.target_bytes {
        let side = if keep.keeps(target) { &mut cut.kept } else { &mut cut.dropped };
        side.insert(target.clone(), *count);
    }
    cut
}

/// Rewrite the bundles of `ranges` in `code`'s file. A host binary with bundles both in
/// `.hip_fatbin` and in its data is one change of all of them, expecting both cuts.
fn add_change(
    plan: &mut Plan,
    code: &GpuCode,
    ranges: Vec<(u64, u64)>,
    keep: &Keep,
    file_cut: &FileCut,
    analysis: &Analysis,
    options: ThinOptions,
) {
    let compact = options.compact;
    if let Some(NewMember { content: Content::Thin(change), .. }) = plan.replace.get_mut(&code.file) {
        if compact && code.container == Container::HipFatbin {
            change.compact.extend(ranges.iter().copied());
        }
        change.ranges.extend(ranges);
        change.ranges.sort_unstable();
        Count::sum_into(&mut change.expected.kept, file_cut.kept.clone());
        Count::sum_into(&mut change.expected.dropped, file_cut.dropped.clone());
        return;
    }
    let compact_ranges = if compact && code.container == Container::HipFatbin { ranges.clone() } else { Vec::new() };
    let change = ThinChange {
        member: code.file.clone(),
        ranges,
        edit: BundleEdit::Thin(keep.clone()),
        expected: file_cut.clone(),
        copy: analysis.bundled_copies.get(&code.file).cloned(),
        copy_shared: options.shared_copies,
        compact: compact_ranges,
    };
    plan.replace.insert(code.file.clone(), NewMember { content: Content::Thin(Box::new(change)), mode: None });
}

/// The byte ranges of a member that hold its bundles: the `.hip_fatbin` section of a host
/// binary, each bundle in its data, the whole of a bundle file.
fn bundle_ranges(wheel: &Wheel, analysis: &Analysis, code: &GpuCode) -> Vec<(u64, u64)> {
    match code.container {
        Container::HipFatbin => {
            let member = analysis.elf.iter().find(|m| m.path == code.file);
            // Every piece of a compacted file's section.
            let Some(member) = member else { return Vec::new() };
            let pieces = member.facts.sections_named(".hip_fatbin").filter(|s| s.has_file_bytes());
            pieces.filter_map(|s| Some((s.offset, s.offset.checked_add(s.size)?))).collect()
        }
        // Bundles rewritten where they lie: in an ELF binary's data, in a PE binary's `.hip_fat`
        // (whose layout, sections and relocations stay as they are).
        Container::BundleInData | Container::PeHipFatbin => code.bundle_spans.clone(),
        _ => wheel.archive.member(&code.file).map(|m| (0, m.size)).into_iter().collect(),
    }
}

/// The requested targets that no code object of the wheel (in any container) runs on, and
/// those some binary with offload bundles would keep nothing for (judged per binary: a GPU
/// runtime's built-in kernels elsewhere in the wheel do not run the package's code).
fn missing_targets(gpu: &[GpuCode], keep: &Keep, uncovered: &[crate::gpu::targets::Uncovered]) -> Vec<TargetId> {
    keep.targets
        .iter()
        .filter(|requested| {
            let alone = Keep::new(vec![(*requested).clone()]);
            !gpu.iter().flat_map(|g| &g.targets).any(|t| alone.runs(t))
                || uncovered.iter().any(|u| u.targets.contains(requested))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{analysis, fat_code, hip_host, wheel};

    const LIB: &str = "pkg/_k.so";

    fn keep(targets: &[&str]) -> Keep {
        Keep::new(targets.iter().map(|t| TargetId::parse(t).unwrap()).collect())
    }

    fn options(prune_files: bool) -> ThinOptions {
        ThinOptions { prune_files, compact: true, compression_level: 6, shared_copies: false }
    }

    /// A wheel whose one library holds gfx942 and gfx90a code in `.hip_fatbin`, and `extra`
    /// members besides.
    fn fat(extra: &[(&str, &[u8])]) -> (tempfile::TempDir, Wheel, Analysis) {
        let mut members: Vec<(&str, &[u8])> = vec![(LIB, b"\x7fELF")];
        members.extend_from_slice(extra);
        let (dir, wheel) = wheel("pkg", &members);
        let mut facts = analysis(vec![(LIB, hip_host(0x4000))], Vec::new());
        facts.gpu.push(fat_code(LIB, &[("gfx942:sramecc+:xnack-", 0x1000), ("gfx90a", 0x2000)]));
        (dir, wheel, facts)
    }

    #[test]
    fn a_fat_library_is_rewritten_to_keep_what_the_keep_keeps() {
        let (_dir, wheel, facts) = fat(&[]);
        let plan = thin(&wheel, &facts, &keep(&["gfx942"]), options(false));
        let [cut] = &plan.cut[..] else { panic!("{plan:?}") };
        assert_eq!(cut.kept.keys().map(TargetId::as_str).collect::<Vec<_>>(), ["gfx942:sramecc+:xnack-"]);
        assert_eq!(cut.dropped.keys().map(TargetId::as_str).collect::<Vec<_>>(), ["gfx90a"]);
        let Some(NewMember { content: Content::Thin(change), .. }) = plan.plan.replace.get(LIB) else {
            panic!("the library is rewritten: {plan:?}")
        };
        // The whole `.hip_fatbin` is rewritten, and compacted; what the writer must find there
        // is what the analysis saw.
        assert_eq!(
            (change.ranges.as_slice(), change.compact.as_slice()),
            (&[(0x1000, 0x5000)][..], &[(0x1000, 0x5000)][..])
        );
        assert_eq!(change.expected, *cut);
        assert!(matches!(&change.edit, BundleEdit::Thin(k) if *k == keep(&["gfx942"])));
        assert!(plan.missing.is_empty() && plan.uncovered.is_empty() && plan.changes());
    }

    #[test]
    fn nothing_to_drop_leaves_the_library_and_a_target_without_code_is_missing() {
        let (_dir, wheel, facts) = fat(&[]);
        let both = thin(&wheel, &facts, &keep(&["gfx942", "gfx90a"]), options(false));
        assert!(both.plan.replace.is_empty() && !both.changes(), "{both:?}");
        assert_eq!(both.cut.len(), 1, "the library is still reported, with nothing dropped");
        let without = thin(&wheel, &facts, &keep(&["gfx950"]), options(false));
        assert_eq!(without.missing, [TargetId::parse("gfx950").unwrap()]);
        assert_eq!(without.uncovered[0].file, LIB);
    }

    #[test]
    fn prune_files_removes_code_objects_and_kernel_databases_of_other_targets() {
        let (_dir, wheel, facts) = fat(&[
            ("pkg/rocblas/library/TensileLibrary_gfx90a.dat", b"db"),
            ("pkg/rocblas/library/TensileLibrary_gfx942.dat", b"db"),
        ]);
        let kept = thin(&wheel, &facts, &keep(&["gfx942"]), options(false));
        assert!(kept.plan.remove.is_empty(), "without --prune-files nothing is removed: {kept:?}");
        let pruned = thin(&wheel, &facts, &keep(&["gfx942"]), options(true));
        assert_eq!(
            pruned.plan.remove.iter().map(String::as_str).collect::<Vec<_>>(),
            ["pkg/rocblas/library/TensileLibrary_gfx90a.dat"]
        );
        assert_eq!(pruned.pruned[0].dropped.keys().map(TargetId::as_str).collect::<Vec<_>>(), ["gfx90a"]);
    }

    #[test]
    fn unreadable_bundles_and_other_containers_are_not_rewritten() {
        let (_dir, wheel, mut facts) = fat(&[]);
        facts.gpu[0].bundle_problems.push("a compressed bundle that does not decode".into());
        let plan = thin(&wheel, &facts, &keep(&["gfx942"]), options(false));
        assert_eq!(plan.unreadable, [(LIB.to_string(), "a compressed bundle that does not decode".to_string())]);
        assert!(plan.plan.replace.is_empty());
        let (_dir, wheel, mut facts) = fat(&[]);
        facts.gpu[0].container = Container::AotritonArchive;
        let plan = thin(&wheel, &facts, &keep(&["gfx942"]), options(false));
        assert_eq!(plan.left.len(), 1, "an AOTriton archive is left as it is");
    }
}
