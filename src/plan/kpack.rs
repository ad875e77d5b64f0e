//! Where a host binary's device code goes when `split` moves it out ([`super::split`]): the
//! groups of targets device wheels hold, and per binary its kpack marker, its wrappers, and the
//! archives its rewrite writes. `thin`'s writer path carries it ([`super::thin::ThinChange`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::elf::gpu::targets::Keep;

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
    pub fn of(processor: &str) -> Result<Group, String> {
        let requested = crate::policy::gpus::parse(processor)?;
        Ok(Group { name: requested.processor.clone(), keep: Keep::new(vec![requested]) })
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
    pub pointers: crate::elf::gpu::rewrite::WrapperPointers,
    pub groups: Arc<Vec<Group>>,
    /// Archives are made in this directory.
    pub dir: PathBuf,
    /// Each group's archive member path is this, `_<group>.kpack` appended.
    /// Ex) `pkg/lib/.kpack/libk.so`
    pub archive_stem: String,
    /// `--group`: the archives are shared by the wheel's binaries, named after this kpack group;
    /// this binary's are left unfinished, for its device wheel to merge.
    pub shared: Option<String>,
}

impl SplitTo {
    /// The archive member path for a group. Ex) `pkg/lib/.kpack/libk.so_gfx942.kpack`
    pub fn archive_path(&self, group: &str) -> String {
        format!("{}_{group}.kpack", self.archive_stem)
    }
}

/// A processor's family, as kpack names it in an archive. Ex) `gfx942` → `gfx9`, `gfx1100` →
/// `gfx11`, `gfx9-4-generic` → `gfx9`
pub fn family(processor: &str) -> String {
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
        ];
        for (processor, family) in cases {
            assert_eq!(super::family(processor), family, "{processor}");
        }
    }
}
