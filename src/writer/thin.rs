//! Making a thinned member ([`ThinChange`]): the member inflated into an unlinked file of this
//! run, its bundles rewritten there by position ([`crate::gpu::rewrite`]), then deflated
//! from it in blocks on every core. Where the content is still the original's (host code, the
//! code objects kept, moved or not), the original's deflate blocks are copied rather than
//! deflated again ([`crate::zip::blocks`]): a fat library costs the deflate of little more
//! than its rewritten bundle tables. Memory stays a few blocks however large the member is.
//!
//! Why one file: one member's thinning from inflate to proof (rewrite, compaction,
//! block reuse, kpack archives for `split`); the steps share the member's unlinked copy and its
//! marks, so they stay together.

use std::io::BufWriter;
use std::path::Path;

use super::WriteError;
use std::collections::BTreeMap;

use crate::analysis::BundledCopy;
use crate::analysis::copy::Captured;
use crate::gpu::compressors::Compressors;
use crate::gpu::kpack::{ArchiveWriter, Object};
use crate::gpu::rewrite::Payload;
use crate::gpu::rewrite::Ranges;
use crate::gpu::{Count, TargetId, rewrite};
use crate::plan::kpack::SplitTo;
use crate::plan::thin::{BundleEdit, ThinChange};
use crate::wheel::Wheel;
use crate::zip::blocks::{self, BlockMarks};
use crate::zip::{Reuse, ReuseMismatch, Spilled};

/// Runs of original blocks shorter than this are deflated anew: each copied run ends with an
/// empty stored block, and breaks the deflate of what lies around it.
const MIN_REUSED_RUN: u64 = 64 << 10;

/// What thinning a member made besides its new content: for `split`, the archives its code
/// went to; why its layout was left as it is, if it was.
#[derive(Default)]
pub struct ThinOutcome {
    /// `split`: the binary's archives by name (`gfx942`, or a target id: [`crate::plan::kpack::ArchivePer::name`]), finished and proven (without `--group`).
    pub archives: BTreeMap<String, super::proof::Proven>,
    /// `split --group`: the binary's archives by name, left unfinished for the device wheels
    /// to merge with the other binaries'.
    pub unfinished: BTreeMap<String, ArchiveWriter>,
    /// Why the freed space stays in the file (its layout could not change), when it does.
    pub layout_note: Option<String>,
}

/// Thin one member; its new content, deflated at `level` into a file in `dir`, and what else
/// that made.
pub fn thin_member(
    wheel: &Wheel,
    change: &ThinChange,
    level: u32,
    dir: &Path,
) -> Result<(Spilled, ThinOutcome), WriteError> {
    if let Some(copy) = &change.copy {
        match thin_from(wheel, change, level, dir, Some(copy)) {
            Ok(spilled) => return Ok(spilled),
            // The copy left out a payload this rewrite needed after all (its bundles read
            // otherwise than the stream saw them): inflate the member afresh, which also gives
            // the true error if there is one.
            Err(e) if !copy.holes.is_empty() => {
                crate::debug!("{}: thinning again from the archive: {e}", change.member);
            }
            Err(e) => return Err(e),
        }
    }
    thin_from(wheel, change, level, dir, None)
}

/// Thin one member from its kept copy, or else from a copy inflated here.
fn thin_from(
    wheel: &Wheel,
    change: &ThinChange,
    level: u32,
    dir: &Path,
    copy: Option<&BundledCopy>,
) -> Result<(Spilled, ThinOutcome), WriteError> {
    let fail = |problem: MemberProblem| match change.edit {
        BundleEdit::Split(_) => WriteError::Split { file: change.member.clone(), problem },
        BundleEdit::Thin(_) => WriteError::Thin { file: change.member.clone(), problem },
    };
    let member = wheel.archive.member(&change.member).ok_or_else(|| fail(MemberProblem::NotAMember))?;
    let inflated;
    let (file, holes, marks): (&std::fs::File, Ranges, Option<&BlockMarks>) = match copy {
        Some(copy) => (&copy.file, copy.holes.clone(), copy.marks.as_ref()),
        None => {
            inflated = inflate_member(wheel, member, dir).map_err(fail)?;
            (&inflated.0, Ranges::default(), inflated.1.as_ref())
        }
    };
    let len = file.metadata().map_err(|e| fail(MemberProblem::Io(e)))?.len();
    if len != member.size {
        return Err(fail(MemberProblem::InflatedSize { len, size: member.size }));
    }
    if let Some(&(start, end)) = change.ranges.iter().find(|&&(start, end)| start > end || end > len) {
        return Err(fail(MemberProblem::RangePastEnd { start, end, len }));
    }
    let data_offset = wheel.archive.zip.data_offset(member).map_err(|e| fail(MemberProblem::Zip(e)))?;
    let read_original = |buf: &mut [u8], at: u64| {
        wheel.archive.zip.read_at(member, buf, data_offset + at).map_err(std::io::Error::other)
    };
    // A copy other rewrites read is left as it is: this one writes an overlay.
    let overlay = match copy.filter(|_| change.copy_shared) {
        Some(_) => Some(tempfile::tempfile_in(dir).map_err(|e| fail(MemberProblem::TempFile(e)))?),
        None => None,
    };
    let mut zeroed = match &overlay {
        Some(overlay) => rewrite::ZeroedFile::over(file, holes, overlay),
        None => rewrite::ZeroedFile::with_holes(file, holes),
    };
    if let Some(marks) = marks {
        fill_stray_holes(&mut zeroed, &change.ranges, marks, &read_original, member.compressed_size);
    }
    // Freed space is laid out for the layout change when the file is to lose it.
    let laid_out = rewrite::FreedLayout { page: if change.compact.is_empty() { None } else { page_size(&zeroed) } };
    let mut outcome = ThinOutcome::default();
    let rewritten = rewrite_member(&mut zeroed, change, copy, laid_out, &mut outcome).map_err(fail)?;
    if change.split().is_none() && super::proof::damage_hook_set() {
        damage_first_kept(&mut zeroed, &change.ranges).map_err(|e| fail(MemberProblem::TestHook(e)))?;
    }
    let compacted = match laid_out.page {
        Some(_) => compacted(&mut zeroed, len, &rewritten.freed, change, rewritten.marker).unwrap_or_else(|note| {
            outcome.layout_note = note;
            None
        }),
        None => None,
    };
    let thinned =
        ThinnedFile { zeroed: &zeroed, compacted: compacted.as_ref(), len: compacted.as_ref().map_or(len, |c| c.len) };
    if change.split().is_none() {
        prove_member(&thinned, &rewritten, len).map_err(fail)?;
    }
    let mut same: Vec<blocks::SameAs> = zeroed
        .same_as_original()
        .iter()
        .map(|o| blocks::SameAs { from: o.from, to: o.to, original: o.original })
        .collect();
    if let Some(compacted) = &compacted {
        same = moved_with(&same, compacted);
    }
    let reuse = marks.map(|marks| Reuse {
        runs: blocks::reusable_runs(marks, &same, MIN_REUSED_RUN),
        marks,
        read_original: &read_original,
    });
    let spill = |level| deflate_member(&thinned, level, dir, reuse.as_ref(), &change.member);
    let mut spilled = spill(level)?;
    // Published members are often deflated harder than zlib's default, and compressed bundles
    // leave deflate little to save: a member that comes out larger than it was is deflated
    // again at the best level, so that the wheel shrinks by the dropped code.
    if spilled.compressed_size > member.compressed_size && level < 9 {
        let best = spill(9)?;
        if best.compressed_size < spilled.compressed_size {
            spilled = best;
        }
    }
    if let Some(proving) = rewritten.proving {
        outcome.archives = proving.wait().map_err(|e| fail(MemberProblem::Rewrite(e.into())))?;
    }
    Ok((spilled, outcome))
}

/// A member inflated into a temporary file in `dir`, with the deflate block marks its stream
/// gave.
fn inflate_member(
    wheel: &Wheel,
    member: &crate::wheel::Member,
    dir: &Path,
) -> Result<(std::fs::File, Option<BlockMarks>), MemberProblem> {
    let file = tempfile::tempfile_in(dir).map_err(MemberProblem::TempFile)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut stream = wheel.archive.zip.stream_marking(member).map_err(MemberProblem::Zip)?;
    std::io::copy(&mut stream, &mut out).map_err(MemberProblem::Io)?;
    let file = out.into_inner().map_err(|e| MemberProblem::Io(e.into_error()))?;
    Ok((file, stream.take_marks()))
}

/// What the rewrite found in a member's bundles against what the analysis found.
#[derive(Debug)]
pub struct Disagreement {
    kept: BTreeMap<TargetId, Count>,
    dropped: BTreeMap<TargetId, Count>,
    expected_kept: BTreeMap<TargetId, Count>,
    expected_dropped: BTreeMap<TargetId, Count>,
}

/// Why a member's bundles could not be thinned or split; nothing is written.
#[derive(Debug, thiserror::Error)]
pub enum MemberProblem {
    #[error("not a member of the wheel")]
    NotAMember,
    #[error("{0}")]
    Io(std::io::Error),
    #[error("{0}")]
    Zip(crate::zip::ZipError),
    #[error("cannot make a temporary file: {0}")]
    TempFile(std::io::Error),
    #[error("its inflated copy holds {len} bytes, the archive says {size}")]
    InflatedSize { len: u64, size: u64 },
    #[error("the bundles' range {start}..{end} lies past the end of its {len} bytes")]
    RangePastEnd { start: u64, end: u64, len: u64 },
    #[error("{0}")]
    Rewrite(rewrite::RewriteError),
    #[error(
        "its bundles read differently when rewritten (kept {:?}, dropped {:?}) than when analysed (kept {:?}, dropped {:?}); nothing was written",
        .0.kept, .0.dropped, .0.expected_kept, .0.expected_dropped
    )]
    ReadDifferently(Box<Disagreement>),
    #[error("the thinned file does not hold the code it keeps: {}; nothing was written", .0.join("; "))]
    NotProven(Vec<String>),
    #[error("the test hook failed: {0}")]
    TestHook(std::io::Error),
}

/// What rewriting a member's bundles left to do after: the spans it freed, and for a thin, the
/// code objects the file must still hold and where the proof looks for them.
#[derive(Default)]
struct Rewritten {
    freed: Vec<rewrite::Freed>,
    /// What the thinned file must hold, read from the original before each bundle is rewritten.
    kept_before: Vec<(String, Object)>,
    /// The original's bundle spans.
    proof_spans: Vec<(u64, u64)>,
    /// A split host's first marker (offset, length), which the compacted file names
    /// `.rocm_kpack_ref`.
    marker: Option<(u64, u64)>,
    /// A split binary's archives, proven while the host is written; waited for once it is.
    proving: Option<super::proof::ProvingArchives>,
}

/// Rewrite the member's bundles: thin them in place, or (`split`) move their code out into
/// archives, which go to `outcome`. What was kept and dropped is checked against the analysis.
fn rewrite_member(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    change: &ThinChange,
    copy: Option<&BundledCopy>,
    laid_out: rewrite::FreedLayout,
    outcome: &mut ThinOutcome,
) -> Result<Rewritten, MemberProblem> {
    let mut cut = crate::plan::thin::FileCut {
        file: change.member.clone(),
        container: change.expected.container,
        ..Default::default()
    };
    let mut done = Rewritten::default();
    match &change.edit {
        BundleEdit::Split(to) => {
            let captured = copy.and_then(|c| c.captured.lock().ok().and_then(|mut c| c.take()));
            let (moved, archives) = split_out(zeroed, change, to, captured).map_err(MemberProblem::Rewrite)?;
            done.marker = moved.first_marker.map(|from| (from, to.marker.len() as u64));
            Count::sum_into(&mut cut.dropped, moved.moved);
            done.freed.extend(moved.freed);
            match archives {
                SplitArchives::Proving(proving) => done.proving = Some(proving),
                SplitArchives::Unfinished(writers) => outcome.unfinished = writers,
            }
        }
        BundleEdit::Thin(keep) => {
            for &(start, end) in &change.ranges {
                let (thinned, kept, spans) =
                    thin_bundles(zeroed, start, end, keep, laid_out).map_err(MemberProblem::Rewrite)?;
                Count::sum_into(&mut cut.kept, thinned.kept);
                Count::sum_into(&mut cut.dropped, thinned.dropped);
                done.freed.extend(thinned.freed);
                done.kept_before.extend(kept);
                done.proof_spans.extend(spans);
            }
        }
    }
    // The analysis planned from the same bytes; a difference means one of the two readers is
    // wrong, and the report would not be true.
    if cut != change.expected {
        return Err(MemberProblem::ReadDifferently(Box::new(Disagreement {
            kept: cut.kept,
            dropped: cut.dropped,
            expected_kept: change.expected.kept.clone(),
            expected_dropped: change.expected.dropped.clone(),
        })));
    }
    Ok(done)
}

/// The rewritten member as it is to be stored: the rewritten copy, less the pages the
/// compaction leaves out.
struct ThinnedFile<'a> {
    zeroed: &'a rewrite::ZeroedFile<'a>,
    compacted: Option<&'a crate::elf::layout::Compacted>,
    len: u64,
}

impl ThinnedFile<'_> {
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        let rewritten = |buf: &mut [u8], at: u64| self.zeroed.read_at(buf, at);
        match self.compacted {
            Some(c) => c.read_at(&rewritten, buf, at),
            None => rewritten(buf, at),
        }
    }
}

/// Prove that the thinned file holds every code object it keeps, where its bundles now lie.
fn prove_member(thinned: &ThinnedFile<'_>, rewritten: &Rewritten, original_len: u64) -> Result<(), MemberProblem> {
    let ranges: Vec<(u64, u64)> = match thinned.compacted {
        Some(c) => rewritten.proof_spans.iter().filter_map(|&r| moved_range(c, r)).collect(),
        None => rewritten.proof_spans.clone(),
    };
    debug_assert!(ranges.iter().all(|&(_, to)| to <= original_len));
    let read = |buf: &mut [u8], at: u64| thinned.read_at(buf, at);
    super::proof::prove_thinned(&rewritten.kept_before, &read, &ranges).map_err(MemberProblem::NotProven)
}

/// Deflate the thinned member at `level` into a file in `dir`, copying the original's deflate
/// blocks where `reuse` says the content is still theirs.
fn deflate_member(
    thinned: &ThinnedFile<'_>,
    level: u32,
    dir: &Path,
    reuse: Option<&Reuse<'_>>,
    member: &str,
) -> Result<Spilled, WriteError> {
    let len = thinned.len;
    if let Some(reuse) = reuse {
        let reused: u64 = reuse.runs.iter().map(|r| r.to - r.from).sum();
        crate::debug!("{member}: {reused} of {len} bytes keep their original deflate blocks");
    }
    let read = |buf: &mut [u8], at: u64| thinned.read_at(buf, at);
    match Spilled::from_reader(len, level, dir, reuse, read) {
        // Never expected: the content is checked against the original's where its blocks
        // are copied, and on a difference the member is deflated whole instead.
        Err(e) if e.get_ref().is_some_and(|inner| inner.is::<ReuseMismatch>()) => {
            crate::debug!("{member}: {e}; deflating it anew");
            Spilled::from_reader(len, level, dir, None, read)
        }
        spilled => spilled,
    }
    .map_err(|source| WriteError::Spill { file: member.to_string(), source })
}

/// The thinned file without its freed pages, planned and checked ([`crate::elf::layout`]);
/// `Ok(None)` when there is nothing to free, `Err` with the reason for the report when its
/// layout is left as it is.
fn compacted(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    len: u64,
    freed: &[rewrite::Freed],
    change: &ThinChange,
    marker: Option<(u64, u64)>,
) -> Result<Option<crate::elf::layout::Compacted>, Option<String>> {
    // Only the `.hip_fatbin` pieces' freed space: a bundle in `.rodata` (tensorflow-rocm's
    // generated kernels) has a symbol that spans its whole space.
    let inside = |f: &rewrite::Freed| change.compact.iter().any(|&(a, b)| a <= f.from && f.to <= b);
    let mut pieces: Vec<(u64, u64)> = freed.iter().filter(|f| inside(f)).map(|f| (f.from, f.to)).collect();
    pieces.sort_unstable();
    // Spans that touch are one hole: a split host's bundles, freed one after another.
    let mut spans: Vec<(u64, u64)> = Vec::with_capacity(pieces.len());
    for (from, to) in pieces {
        match spans.last_mut() {
            Some(last) if last.1 == from => last.1 = to,
            _ => spans.push((from, to)),
        }
    }
    let planned = {
        let read = |buf: &mut [u8], at: u64| zeroed.read_at(buf, at);
        let named = marker.map(|(from, len)| crate::elf::layout::NamedSpan {
            from,
            len,
            name: crate::gpu::kpack::MARKER_SECTION,
            holder: ".hip_fatbin",
            others: crate::gpu::kpack::MOVED_SECTION,
        });
        crate::elf::layout::compact_naming(&read, len, &spans, named)
    };
    // A zstd bundle's skippable frame now ends where its section piece does.
    let cut_frames = |zeroed: &mut rewrite::ZeroedFile<'_>, c: &crate::elf::layout::Compacted| {
        for f in freed {
            let cut = c.holes.iter().find(|&&(a, b)| a < f.to && b > f.from);
            if let Some(&(hole_from, _)) = cut
                && let Some((at, bytes)) = f.frame_end(hole_from)
            {
                rewrite::Positional::write_all_at(zeroed, &bytes, at)?;
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let planned = planned.and_then(|c| {
        cut_frames(zeroed, &c)?;
        let read = |buf: &mut [u8], at: u64| zeroed.read_at(buf, at);
        c.check(&read).map(|()| c)
    });
    match planned {
        Ok(c) => {
            crate::debug!(
                "{}: {} bytes leave the file ({} segments split, {} freed spans left in it)",
                change.member,
                c.saved(),
                c.splits,
                c.kept_holes
            );
            Ok(Some(c))
        }
        Err(crate::elf::layout::LayoutError::NothingToFree) => Ok(None),
        Err(e) => {
            crate::debug!("{}: {e}", change.member);
            Err(Some(e.to_string()))
        }
    }
}

/// The page an ELF file's layout changes by, from its header; `None` for other files.
fn page_size(file: &rewrite::ZeroedFile<'_>) -> Option<u64> {
    let mut head = [0u8; 20];
    file.read_at(&mut head, 0).ok()?;
    crate::elf::layout::page_size(crate::elf::header::ElfIdent::parse(&head)?.machine)
}

/// The code objects of the ranges that a thin keeps, as (entry id, size and digest), read from
/// the file before it is rewritten.
fn kept_objects<F: rewrite::Positional>(
    zeroed: &F,
    ranges: &[(u64, u64)],
    keep: &crate::gpu::targets::Keep,
) -> Result<Vec<(String, Object)>, rewrite::RewriteError> {
    let stays =
        |e: &crate::gpu::bundle::BundleEntry| crate::gpu::scan::bundle_target(&e.id).is_none_or(|t| keep.keeps(t));
    let mut kept = Vec::new();
    for &(start, end) in ranges {
        rewrite::read_bundles(zeroed, start, end, &stays, &mut |_, entry, payload| match payload {
            Payload::Plain(bytes, _) | Payload::Decoded(bytes) => {
                kept.push((entry.id.clone(), Object::of(&bytes)));
                rewrite::recycle(bytes);
                Ok(())
            }
            Payload::Streamed(reader, _) => {
                kept.push((entry.id.clone(), Object::of_reader(reader)?));
                Ok(())
            }
            Payload::NotHeld(at) => {
                Err(std::io::Error::other(CodeObjectMissing::NotInCopy { id: entry.id.clone(), at }))
            }
        })?;
    }
    Ok(kept)
}

/// Where the original range [from, to) lies in the compacted file: from the first of its
/// bytes the file keeps to the last. `None` when none is kept.
fn moved_range(compacted: &crate::elf::layout::Compacted, (from, to): (u64, u64)) -> Option<(u64, u64)> {
    let mut out: Option<(u64, u64)> = None;
    for (at, end, source) in compacted.copies() {
        let (a, b) = (from.max(source), to.min(source + (end - at)));
        if a < b {
            let (start, stop) = (at + (a - source), at + (b - source));
            out = Some(out.map_or((start, stop), |(s, e)| (s.min(start), e.max(stop))));
        }
    }
    out
}

/// The test hook of the thin proof: flip a byte in the middle of the first code object kept
/// in a plain bundle (else in the middle of the first compressed bundle).
fn damage_first_kept(zeroed: &mut rewrite::ZeroedFile<'_>, ranges: &[(u64, u64)]) -> std::io::Result<()> {
    let Some(&(from, to)) = ranges.first() else { return Ok(()) };
    let read = |buf: &mut [u8], at: u64| zeroed.read_at(buf, at);
    let found = crate::gpu::bundle_read::read_bundles(&read, from, to).map_err(std::io::Error::other)?;
    let at = match found.objects.iter().find_map(|o| Some((o.at?, o.object.size))) {
        Some((at, size)) => at + size / 2,
        None => match found.spans.first() {
            Some(&(start, end)) => start + (end - start) / 2,
            None => return Ok(()),
        },
    };
    let mut byte = [0u8; 1];
    zeroed.read_at(&mut byte, at)?;
    byte[0] ^= 0x5a;
    rewrite::Positional::write_all_at(zeroed, &byte, at)
}

/// The spans equal to the original's, in the compacted file's offsets.
fn moved_with(same: &[blocks::SameAs], compacted: &crate::elf::layout::Compacted) -> Vec<blocks::SameAs> {
    let mut out = Vec::new();
    for (at, end, from) in compacted.copies() {
        let to = from + (end - at);
        for s in same.iter().filter(|s| s.from < to && s.to > from) {
            let (a, b) = (s.from.max(from), s.to.min(to));
            out.push(blocks::SameAs {
                from: at + (a - from),
                to: at + (b - from),
                original: s.original + (a - s.from),
            });
        }
    }
    out
}

/// Fill the holes of a kept copy that lie outside the bundles' ranges, which the rewrite will
/// not touch: payloads of something that read as a bundle table as the member streamed past,
/// elsewhere in the file (tensorflow-rocm's `libtensorflow_cc.so.2` has one). Each is inflated
/// from the original's last block start before it whose window the copy holds, rather than
/// the whole member again. A hole that cannot be filled so is left: reading it fails, and the
/// member is then inflated afresh.
fn fill_stray_holes(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    ranges: &[(u64, u64)],
    marks: &BlockMarks,
    read_original: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    compressed_len: u64,
) {
    for (from, to) in zeroed.holes_outside(ranges) {
        let start = |m: &blocks::Mark| m.content.saturating_sub(blocks::WINDOW);
        let found =
            marks.marks().iter().rev().filter(|m| m.content <= from).find(|m| zeroed.holds(start(m), m.content));
        let Some(mark) = found else { continue };
        let mut window = vec![0u8; (mark.content - start(mark)) as usize];
        let filled = zeroed.read_at(&mut window, start(mark)).and_then(|()| {
            blocks::inflate_from(mark, &window, read_original, compressed_len, to, &mut |at, bytes| {
                let (f, t) = (at.max(from), (at + bytes.len() as u64).min(to));
                if f < t { zeroed.fill_hole(f, &bytes[(f - at) as usize..(t - at) as usize]) } else { Ok(()) }
            })
        });
        match filled {
            Ok(()) => crate::debug!("filled bytes {from}..{to} of the copy from the original's blocks"),
            Err(e) => crate::debug!("cannot fill bytes {from}..{to} of the copy: {e}"),
        }
    }
}

/// What thinning a range did, the code objects it keeps (entry id, description) and the
/// bundles' spans.
type ThinnedRange = (rewrite::Thinned, Vec<(String, Object)>, Vec<(u64, u64)>);

/// Thin the bundles of [start, end): apart and in parallel when their places are known from
/// their headers (each bundle is its own bytes: a compressed one is decoded and encoded again,
/// and a file may hold dozens), else in one walk. Also the code objects it keeps, read from each
/// bundle before its rewrite ([`kept_objects`], for the proof), and the spans the proof reads.
fn thin_bundles(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    start: u64,
    end: u64,
    keep: &crate::gpu::targets::Keep,
    laid_out: rewrite::FreedLayout,
) -> Result<ThinnedRange, rewrite::RewriteError> {
    let Some(spans) = rewrite::bundle_spans(&*zeroed, start, end)? else {
        let kept = kept_objects(&*zeroed, &[(start, end)], keep)?;
        let thinned = rewrite::thin_range_laid_out(zeroed, start, end, keep, laid_out)?;
        return Ok((thinned, kept, vec![(start, end)]));
    };
    let parts = crate::parallel::try_map(&spans, |&(from, to)| {
        let mut part = zeroed.part(from, to);
        let kept = kept_objects(&part, &[(from, to)], keep)?;
        rewrite::thin_range_laid_out(&mut part, from, to, keep, laid_out).map(|thinned| (thinned, kept, part))
    })?;
    let mut total = rewrite::Thinned::default();
    let mut all_kept = Vec::new();
    for (thinned, kept, part) in parts {
        total.add(thinned);
        all_kept.extend(kept);
        zeroed.absorb(part);
    }
    Ok((total, all_kept, spans))
}

/// A code object the writer was to have from the analysis' pass and has not: a bug, named.
#[derive(Debug, thiserror::Error)]
pub enum CodeObjectMissing {
    #[error("the code object `{id}` at {at} is not in the copy")]
    NotInCopy { id: String, at: u64 },
    #[error("the code object for {target} at {at} was neither copied nor taken as it streamed past")]
    NotTaken { target: String, at: u64 },
}

/// The most code object bytes `split` holds while they are compressed: as many as the spare
/// buffers of the reading thread keep ([`rewrite::recycle`]), so that the next objects are
/// read into pages already mapped.
const SPLIT_IN_FLIGHT: usize = 3 * rewrite::WHOLE_OBJECT as usize;

/// A split binary's archives: being finished and proven while the host is written; or, with
/// `--group`, left unfinished.
enum SplitArchives {
    Proving(super::proof::ProvingArchives),
    Unfinished(BTreeMap<String, ArchiveWriter>),
}

/// Move every bundle of the binary out into one kpack archive per group (`split`), each code
/// object into every group whose targets it runs on; the archives are returned, finished (or,
/// shared by the wheel's binaries, unfinished). A second attempt (from a fresh copy) starts the
/// archives afresh.
///
/// The code objects of plain bundles go first into an archive per target id, keyed by their
/// offsets, as the analysis takes them from the stream (`captured`); those it did not take
/// (no copy was kept) are read and compressed here into the same. They are named as their
/// bundles are met, and placed in the groups' archives at the end ([`place_captured`]), in
/// one order whichever way they came: the same bytes out.
fn split_out(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    change: &ThinChange,
    to: &SplitTo,
    captured: Option<Captured>,
) -> Result<(rewrite::SplitHost, SplitArchives), rewrite::RewriteError> {
    let mut out = SplitCollector {
        to,
        captured: captured.unwrap_or_default(),
        writers: BTreeMap::new(),
        names: BTreeMap::new(),
        compressors: Compressors::new(rayon::current_num_threads(), SPLIT_IN_FLIGHT, rewrite::recycle),
    };
    let taken: usize = out.captured.by_target.values().map(|a| a.entries().count()).sum();
    let wants = |target: &str| to.groups.iter().any(|g| g.keep.keeps(target));
    let done = rewrite::split_host(
        zeroed,
        &change.ranges,
        to.wrappers,
        &to.pointers,
        &to.marker,
        &wants,
        &mut |ordinal, entry, payload| {
            let target = crate::gpu::scan::bundle_target(&entry.id).unwrap_or(&entry.id).to_string();
            let key = format!("{}#{ordinal}", to.kernel_name);
            match payload {
                Payload::Plain(bytes, at) => out.add(Some(at), key, target, bytes),
                Payload::Decoded(bytes) => out.add(None, key, target, bytes),
                Payload::Streamed(reader, at) => out.add_streamed(at, key, target, entry.size, reader),
                Payload::NotHeld(at) => out.taken_before(at, key, target, entry.size),
            }
        },
    )?;
    out.flush()?;
    let SplitCollector { mut captured, mut writers, names, .. } = out;
    crate::debug!(
        "{}: {} of {} wrappers found pointing at their bundles; {taken} plain code objects taken as it streamed, {} read from it",
        change.member,
        done.pointers_checked,
        done.bundles,
        captured.by_target.values().map(|a| a.entries().count()).sum::<usize>() - taken,
    );
    place_captured(&mut captured, &names, to, &mut writers)?;
    if to.shared.is_some() {
        return Ok((done, SplitArchives::Unfinished(writers)));
    }
    let archives = writers.into_iter().map(|(name, writer)| (name.clone(), to.archive_per.family(&name), writer));
    let proving = super::proof::ProvingArchives::start(archives.collect(), &to.kernel_name, &change.member)?;
    Ok((done, SplitArchives::Proving(proving)))
}

/// What a code object read here is, while it is compressed: its offset for a plain bundle's,
/// its name, its target id.
type Tag = (Option<u64>, String, String);

/// Where a split binary's code objects go as its bundles are read: plain bundles' into an
/// archive per target id, keyed by offset (`captured`, with those the analysis took from the
/// stream), the others into the archives by name (`writers`: `gfx942`, or a target id, each
/// made with its first code object).
struct SplitCollector<'a> {
    to: &'a SplitTo,
    captured: Captured,
    writers: BTreeMap<String, ArchiveWriter>,
    /// Per target id, each plain object's offset → its name in the archives.
    names: BTreeMap<String, BTreeMap<u64, String>>,
    /// Code objects are compressed on every core while the next are read (a binary's objects
    /// would otherwise be compressed on one), each once however many archives take it, with at
    /// most [`SPLIT_IN_FLIGHT`] bytes of them held, whatever the binary's size; their frames
    /// go to the archives in the order the objects were read.
    compressors: Compressors<Tag>,
}

impl SplitCollector<'_> {
    /// A code object held whole: compressed on a thread of the compressors'.
    fn add(&mut self, at: Option<u64>, key: String, target: String, bytes: Vec<u8>) -> std::io::Result<()> {
        if let Some(at) = at {
            self.names.entry(target.clone()).or_default().insert(at, key.clone());
        }
        let SplitCollector { to, captured, writers, compressors, .. } = self;
        compressors.submit((at, key, target), bytes, &mut |tag, object, frame| {
            place_frame(to, captured, writers, tag, object, frame)
        })
    }

    /// Every code object read so far compressed and in its archives.
    fn flush(&mut self) -> std::io::Result<()> {
        let SplitCollector { to, captured, writers, compressors, .. } = self;
        compressors.flush(&mut |tag, object, frame| place_frame(to, captured, writers, tag, object, frame))
    }

    /// A code object too large to hold: after the objects before it (frames go in order),
    /// compressed as it is read, into its target's captured archive (a plain bundle's) or the
    /// first archive that takes it, and copied, as a frame, into the others'.
    fn add_streamed(
        &mut self,
        at: Option<u64>,
        key: String,
        target: String,
        size: u64,
        reader: &mut dyn std::io::Read,
    ) -> std::io::Result<()> {
        self.flush()?;
        let dir = &self.to.dir;
        if let Some(at) = at {
            self.names.entry(target.clone()).or_default().insert(at, key);
            return self.captured.stream(dir, at, &target, size, reader);
        }
        let takers = archives_taking(self.to, &target);
        let Some((first, others)) = takers.split_first() else { return Ok(()) };
        archive_of(&mut self.writers, first.clone(), dir)?.add_streamed(&key, &target, size, reader)?;
        let mut from = self.writers.remove(first).expect("made above");
        for other in others {
            archive_of(&mut self.writers, other.clone(), dir)?.copy_frame(&mut from, &key, &target, &key)?;
        }
        self.writers.insert(first.clone(), from);
        Ok(())
    }

    /// A plain bundle's code object that the kept copy left out: the analysis took it as the
    /// member streamed past, and it is named here.
    fn taken_before(&mut self, at: u64, key: String, target: String, size: u64) -> std::io::Result<()> {
        let taken = self.captured.by_target.get(&target).and_then(|a| a.original_size(&Captured::key(at), &target));
        if taken != Some(size) {
            return Err(std::io::Error::other(CodeObjectMissing::NotTaken { target, at }));
        }
        self.names.entry(target).or_default().insert(at, key);
        Ok(())
    }
}

/// The names of the archives a code object of `target` goes to: one per group that takes it
/// ([`crate::plan::kpack::ArchivePer::name`]), in the groups' order.
fn archives_taking(to: &SplitTo, target: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for group in to.groups.iter().filter(|g| g.keep.keeps(target)) {
        let name = to.archive_per.name(&group.name, target);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The archive of a name, made when it gets its first code object.
fn archive_of<'w>(
    writers: &'w mut BTreeMap<String, ArchiveWriter>,
    name: String,
    dir: &Path,
) -> std::io::Result<&'w mut ArchiveWriter> {
    use std::collections::btree_map::Entry;
    match writers.entry(name) {
        Entry::Occupied(e) => Ok(e.into_mut()),
        Entry::Vacant(e) => Ok(e.insert(ArchiveWriter::new(tempfile::tempfile_in(dir)?)?)),
    }
}

/// Add a compressed code object's frame where it goes: a plain bundle's into its target's
/// captured archive (keyed by its offset), the others into every archive that takes it.
fn place_frame(
    to: &SplitTo,
    captured: &mut Captured,
    writers: &mut BTreeMap<String, ArchiveWriter>,
    (at, key, target): Tag,
    object: Object,
    frame: &[u8],
) -> std::io::Result<()> {
    match at {
        Some(at) => captured.add(&to.dir, at, &target, object, frame),
        None => {
            for name in archives_taking(to, &target) {
                archive_of(writers, name, &to.dir)?.add_frame(&key, &target, object, frame)?;
            }
            Ok(())
        }
    }
}

/// Put the captured code objects the binary's bundles named (`names`) into the archives that
/// take them. A target's captured archive becomes an archive's own when that archive takes no
/// other code, no other archive takes the target, and the binary named every object in it
/// (the usual case: one device wheel per processor); else its frames are copied, as they are.
fn place_captured(
    captured: &mut Captured,
    names: &BTreeMap<String, BTreeMap<u64, String>>,
    to: &SplitTo,
    writers: &mut BTreeMap<String, ArchiveWriter>,
) -> std::io::Result<()> {
    // Each archive's targets, in target id order, from the targets the binary named.
    let mut sources: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for target in captured.by_target.keys().filter(|t| names.contains_key(*t)) {
        for archive in archives_taking(to, target) {
            sources.entry(archive).or_default().push(target.clone());
        }
    }
    for (archive, targets) in &sources {
        if let [target] = targets.as_slice()
            && !writers.contains_key(archive)
            && archives_taking(to, target).len() == 1
            && captured.by_target[target].entries().count() == names[target].len()
        {
            let mut taken = captured.by_target.remove(target).expect("listed above");
            taken.rename_keys(&|key| Captured::offset(key).and_then(|at| names[target].get(&at)).cloned())?;
            writers.insert(archive.clone(), taken);
            continue;
        }
        for target in targets {
            let from = captured.by_target.get_mut(target).expect("listed above");
            for (&at, key) in &names[target] {
                archive_of(writers, archive.clone(), &to.dir)?.copy_frame(from, &Captured::key(at), target, key)?;
            }
        }
    }
    let unnamed: usize =
        captured.by_target.iter().map(|(t, a)| a.entries().count() - names.get(t).map_or(0, BTreeMap::len)).sum();
    if unnamed > 0 {
        crate::debug!("{unnamed} code objects taken from the stream lie outside the binary's bundles: left out");
    }
    Ok(())
}
