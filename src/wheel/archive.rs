//! The zip archive of a wheel: its central directory checked once (safe names, no duplicates,
//! possible sizes), members found by name, and read by positional reads (see [`super::zip`]).

use std::path::Path;

pub use crate::zip::ZipError as ArchiveError;
use crate::zip::{Entry, ZipReader};

/// One member of the archive, by its position in the central directory.
pub type Member = Entry;

/// An opened wheel archive.
pub struct Archive {
    pub zip: ZipReader,
    /// Member indices sorted by name, for lookups by name.
    by_name: Vec<u32>,
}

impl Archive {
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let zip = ZipReader::open(path)?;
        for entry in &zip.entries {
            if !is_safe_member_path(&entry.name) {
                return Err(ArchiveError::UnsafePath(entry.name.to_string()));
            }
            ZipReader::check_sizes(entry)?;
        }
        let mut by_name: Vec<u32> = (0..zip.entries.len() as u32).collect();
        by_name.sort_by(|&a, &b| zip.entries[a as usize].name.cmp(&zip.entries[b as usize].name));
        if let Some(pair) =
            by_name.windows(2).find(|w| zip.entries[w[0] as usize].name == zip.entries[w[1] as usize].name)
        {
            return Err(ArchiveError::Duplicate(zip.entries[pair[0] as usize].name.to_string()));
        }
        Ok(Archive { zip, by_name })
    }

    pub fn path(&self) -> &Path {
        &self.zip.path
    }

    /// Every member, in central-directory order.
    pub fn members(&self) -> &[Member] {
        &self.zip.entries
    }

    /// What pip writes to disk: the sum of the members' sizes.
    pub fn installed_size(&self) -> u64 {
        self.zip.entries.iter().filter(|e| !e.is_dir()).map(|e| e.size).sum()
    }

    /// The archive's own size: what is downloaded.
    pub fn download_size(&self) -> u64 {
        self.zip.file().metadata().map_or(0, |m| m.len())
    }

    pub fn member(&self, name: &str) -> Option<&Member> {
        let entries = &self.zip.entries;
        self.by_name
            .binary_search_by(|&i| (*entries[i as usize].name).cmp(name))
            .ok()
            .map(|at| &entries[self.by_name[at] as usize])
    }

    /// The member's whole content, inflated, its CRC-32 checked.
    pub fn read(&self, member: &Member) -> Result<crate::zip::Buffer, ArchiveError> {
        self.zip.read(member)
    }

    /// Up to `n` bytes from the start of the member.
    pub fn peek(&self, member: &Member, n: usize) -> Result<Vec<u8>, ArchiveError> {
        self.zip.peek(member, n)
    }
}

/// A member path is safe when it is relative and never leaves the archive root.
pub fn is_safe_member_path(name: &str) -> bool {
    let drive_letter = name.len() >= 2 && name.as_bytes()[1] == b':';
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.contains(['\\', '\0'])
        || drive_letter
        || name.split('/').any(|part| part == "..");
    !bad
}
