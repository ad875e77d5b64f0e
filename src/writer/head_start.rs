//! A head start on writing a large wheel. While the analysis reads it (minutes of CPU on every
//! core for a wheel of GBs), the members that the job cannot change are copied, in archive order,
//! into a temporary output file in the destination directory, and the disk writes begin. The
//! writer takes the file over ([`super::write_wheel`]), keeps the members it would have written
//! the same way (the longest common start of its own order) and goes on from there; the bytes
//! are those it would have written without the head start. Copying a file and writing it to
//! disk are what `retag` adds to `show --verify`, and most of it now happens meanwhile.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::files::FileIdentity;
use crate::output::TempOutput;
use crate::wheel::archive::Archive;
use crate::zip::ZipWriter;

/// Wheels smaller than this are written after their analysis, as before: the head start would
/// cost more than it saves.
pub const HEAD_START_MIN: u64 = 64 << 20;

/// A temporary output file holding copies of a wheel's first members.
pub struct HeadStart {
    pub(super) temp: TempOutput,
    pub(super) zip: ZipWriter,
    /// The input members copied, by index, in the order written.
    pub(super) copied: Vec<usize>,
    /// The input they were copied from, which must be the file the writer reads.
    pub(super) input: FileIdentity,
}

/// Copy the members of the wheel at `input` that `may_change` does not name, in archive order
/// up to the first it names, into a temporary file in `dir`; stop early when `stop` is set.
/// `None` when nothing could be copied (the wheel cannot be opened, or its first member may
/// change): the writer then starts from nothing, and reports any error itself.
pub fn copy_ahead(input: &Path, dir: &Path, may_change: &dyn Fn(&str) -> bool, stop: &AtomicBool) -> Option<HeadStart> {
    let archive = Archive::open(input).ok()?;
    let provisional = dir.join(input.file_name()?);
    let temp = TempOutput::create(&provisional).ok()?;
    let mut zip = ZipWriter::new(temp.file().ok()?);
    let mut copied = Vec::new();
    for (index, member) in archive.members().iter().enumerate() {
        // A directory holding data is written anew (empty), never copied.
        let written_anew = member.is_dir() && member.compressed_size > 0;
        if stop.load(Ordering::Relaxed) || may_change(&member.name) || written_anew {
            break;
        }
        // A failed copy leaves a part of a member behind: start from nothing then.
        zip.copy(&archive.zip, member, &member.name).ok()?;
        copied.push(index);
    }
    crate::debug!("{}: {} member(s) copied ahead of the analysis", input.display(), copied.len());
    (!copied.is_empty()).then_some(HeadStart { temp, zip, copied, input: archive.zip.identity })
}

/// Whether `retag` may change a member: everything in the `.dist-info` directory (WHEEL, RECORD,
/// METADATA, and its name with a new version) and in the `.data` directory (renamed with it).
pub fn retag_may_change(name: &str) -> bool {
    let top = name.split('/').next().unwrap_or(name);
    top.ends_with(".dist-info") || top.ends_with(".data")
}

/// Head starts for the wheels of a batch at least [`HEAD_START_MIN`] large, one after another
/// (in parallel they would only share the disk), into `dir`, until `stop` is set.
pub fn copy_ahead_all(
    paths: &[std::path::PathBuf],
    dir: &Path,
    may_change: &dyn Fn(&str) -> bool,
    stop: &AtomicBool,
) -> Vec<Option<HeadStart>> {
    paths
        .iter()
        .map(|path| {
            let large = std::fs::metadata(path).is_ok_and(|m| m.len() >= HEAD_START_MIN);
            (large && !stop.load(Ordering::Relaxed)).then(|| copy_ahead(path, dir, may_change, stop)).flatten()
        })
        .collect()
}
