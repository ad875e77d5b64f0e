//! Where a host binary's device code goes when `split` moves it out ([`super::split`]): the
//! groups of targets device wheels hold, and per binary its kpack marker, its wrappers, and the
//! archives its rewrite writes. `thin`'s writer path carries it ([`super::thin::ThinChange`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::gpu::targets::{Keep, processor_of};

/// A group of targets one device wheel holds: the code objects `keep` keeps. Ex) `gfx942`
/// (its feature variants, and the generic targets that cover it)
#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub keep: Keep,
}

impl Group {
    /// The group of one processor (`gfx942`, or a generic one no other group covers), its name
    /// normalised as every GPU looks for it (`GFX942 ` → `gfx942`).
    pub fn of(processor: &str) -> Result<Group, crate::policy::gpus::GpuTargetError> {
        let requested = crate::policy::gpus::parse(processor)?;
        Ok(Group { name: requested.processor().to_string(), keep: Keep::new(vec![requested]) })
    }
}

/// Where one host binary's device code goes: its archives, marker and wrappers. The writer
/// returns the archives it made ([`crate::writer::thin::ThinOutcome`]).
#[derive(Debug)]
pub struct SplitTo {
    /// The binary's member path. Ex) `pkg/lib/libk.so`
    pub member: String,
    /// The TOC key's stem: the binary's install path. Ex) `pkg/lib/libk.so`
    pub kernel_name: String,
    /// The marker each bundle's space starts with.
    pub marker: Vec<u8>,
    /// The `.hipFatBinSegment` section's file range.
    pub wrappers: (u64, u64),
    /// Where the file says its wrappers point.
    pub pointers: crate::gpu::rewrite::WrapperPointers,
    pub groups: Arc<Vec<Group>>,
    /// Archives are made in this directory.
    pub dir: PathBuf,
    /// Each group's archive member path is this, `_<group>.kpack` appended.
    /// Ex) `pkg/lib/.kpack/libk.so`
    pub archive_stem: String,
    /// `--group`: the archives are shared by the wheel's binaries, named after this kpack group;
    /// this binary's are left unfinished, for its device wheel to merge.
    pub shared: Option<String>,
    /// Whether a group's code objects share one archive or have one per target id.
    pub archive_per: ArchivePer,
}

impl SplitTo {
    /// The archive member path of an archive name ([`ArchivePer::name`]).
    /// Ex) `pkg/lib/.kpack/libk.so_gfx942.kpack`, `pkg/.kpack/pkg_gfx90a:xnack+.kpack`
    pub fn archive_path(&self, name: &str) -> String {
        format!("{}_{name}.kpack", self.archive_stem)
    }
}

/// How a group's code objects are divided among archives. The runtime finds either: for an
/// agent it expands `@GFXARCH@` to the agent's full target id, then to each subset of its
/// features, then to the bare processor, and opens every archive that exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ArchivePer {
    /// One archive per processor, holding every target id that runs on it
    /// (`libk.so_gfx90a.kpack` with `gfx90a:xnack+` and `gfx90a:xnack-`): wheelfix's default.
    #[default]
    Processor,
    /// One archive per target id, as TheRock's splitter writes them (`torch_gfx90a:xnack+.kpack`,
    /// `torch_gfx90a:xnack-.kpack`); a generic processor's code goes to the archive named after
    /// the processor it is put in for (its own name would be one file in several device wheels).
    TargetId,
}

impl ArchivePer {
    /// The archive name (the part `@GFXARCH@` stands for) of a code object of target id
    /// `target` in `group`'s archives. Ex) (TargetId, `gfx90a`, `gfx90a:xnack+`) →
    /// `gfx90a:xnack+`; (TargetId, `gfx942`, `gfx9-4-generic`) → `gfx942`; (Processor, …) → the group
    pub fn name(self, group: &str, target: &str) -> String {
        match self {
            ArchivePer::TargetId if processor_of(target) == group => target.to_string(),
            _ => group.to_string(),
        }
    }

    /// The `gfx_arch_family` an archive's header names: the processor's family (`gfx9`) for an
    /// archive per processor, the archive's own name for one per target id (as TheRock writes
    /// it: `gfx90a:xnack+`).
    pub fn family(self, name: &str) -> String {
        match self {
            ArchivePer::Processor => family(name),
            ArchivePer::TargetId => name.to_string(),
        }
    }
}

/// An `--archive-per` value that is none of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("processor or target-id")]
pub struct UnknownArchivePer;

impl std::str::FromStr for ArchivePer {
    type Err = UnknownArchivePer;

    /// `processor` or `target-id`, as `--archive-per` and `archive-per` write it.
    fn from_str(text: &str) -> Result<ArchivePer, Self::Err> {
        match text {
            "processor" => Ok(ArchivePer::Processor),
            "target-id" => Ok(ArchivePer::TargetId),
            _ => Err(UnknownArchivePer),
        }
    }
}

impl std::fmt::Display for ArchivePer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ArchivePer::Processor => "processor",
            ArchivePer::TargetId => "target-id",
        })
    }
}

/// A processor's family (or a target id's), as kpack names it in an archive. Ex) `gfx942` →
/// `gfx9`, `gfx1100` → `gfx11`, `gfx9-4-generic` → `gfx9`, `gfx90a:xnack+` → `gfx9`
pub fn family(processor: &str) -> String {
    let processor = processor_of(processor);
    let digits = processor.strip_prefix("gfx").unwrap_or(processor);
    let digits = digits.split('-').next().unwrap_or(digits);
    // The family is the number without its last two characters (stepping, minor).
    let keep = if processor.contains("-generic") { digits.len() } else { digits.len().saturating_sub(2) };
    format!("gfx{}", &digits[..keep])
}

#[cfg(test)]
mod tests {
    #[test]
    fn families_of_processors() {
        let cases = [
            ("gfx942", "gfx9"),
            ("gfx90a", "gfx9"),
            ("gfx1100", "gfx11"),
            ("gfx1201", "gfx12"),
            ("gfx9-4-generic", "gfx9"),
            ("gfx90a:xnack+", "gfx9"),
        ];
        for (processor, family) in cases {
            assert_eq!(super::family(processor), family, "{processor}");
        }
    }

    #[test]
    fn archive_names_per_processor_and_per_target_id() {
        use super::ArchivePer::{Processor, TargetId};
        let cases = [
            (Processor, "gfx90a", "gfx90a:xnack+", "gfx90a"),
            (Processor, "gfx942", "gfx9-4-generic", "gfx942"),
            (TargetId, "gfx90a", "gfx90a:xnack+", "gfx90a:xnack+"),
            (TargetId, "gfx90a", "gfx90a:sramecc-:xnack-", "gfx90a:sramecc-:xnack-"),
            (TargetId, "gfx942", "gfx942", "gfx942"),
            // A generic processor's code in a processor's group: that processor's archive.
            (TargetId, "gfx942", "gfx9-4-generic", "gfx942"),
            (TargetId, "gfx950", "gfx9-4-generic:xnack-", "gfx950"),
            // A generic processor that is a group of its own names its archives.
            (TargetId, "gfx11-generic", "gfx11-generic", "gfx11-generic"),
        ];
        for (per, group, target, name) in cases {
            assert_eq!(per.name(group, target), name, "{per:?} {group} {target}");
            assert_eq!(super::processor_of(&per.name(group, target)), group);
        }
        assert_eq!(Processor.family("gfx90a"), "gfx9");
        assert_eq!(TargetId.family("gfx90a:xnack+"), "gfx90a:xnack+");
        assert_eq!("target-id".parse::<super::ArchivePer>(), Ok(TargetId));
        assert!("target".parse::<super::ArchivePer>().is_err());
    }
}
