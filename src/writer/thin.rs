//! Making a thinned member ([`ThinChange`]): the member inflated into an unlinked file of this
//! run, its bundles rewritten there by position ([`crate::elf::gpu::rewrite`]), then deflated
//! from it in blocks on every core. Memory stays a few blocks however large the member is.

use std::io::BufWriter;
use std::path::Path;

use super::WriteError;
use crate::analysis::BundledCopy;
use crate::elf::gpu::rewrite::Ranges;
use crate::elf::gpu::{Count, rewrite};
use crate::plan::thin::ThinChange;
use crate::wheel::Wheel;
use crate::wheel::zip::Spilled;

/// Thin one member; its new content, deflated at `level` into a file in `dir`.
pub fn thin_member(wheel: &Wheel, change: &ThinChange, level: u32, dir: &Path) -> Result<Spilled, WriteError> {
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
) -> Result<Spilled, WriteError> {
    let fail = |message: String| WriteError::Thin { file: change.member.clone(), message };
    let member = wheel.archive.member(&change.member).ok_or_else(|| fail("not a member of the wheel".into()))?;
    let inflated;
    let (file, holes): (&std::fs::File, Ranges) = match copy {
        Some(copy) => (&copy.file, copy.holes.clone()),
        None => {
            let file = tempfile::tempfile_in(dir).map_err(|e| fail(format!("cannot make a temporary file: {e}")))?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            let mut stream = wheel.archive.zip.stream(member).map_err(|e| fail(e.to_string()))?;
            std::io::copy(&mut stream, &mut out).map_err(|e| fail(e.to_string()))?;
            inflated = out.into_inner().map_err(|e| fail(e.error().to_string()))?;
            (&inflated, Ranges::default())
        }
    };
    let len = file.metadata().map_err(|e| fail(e.to_string()))?.len();
    if len != member.size {
        return Err(fail(format!("its inflated copy holds {len} bytes, the archive says {}", member.size)));
    }
    let mut zeroed = rewrite::ZeroedFile::with_holes(file, holes);
    let mut cut = crate::plan::thin::FileCut {
        file: change.member.clone(),
        container: change.expected.container,
        ..Default::default()
    };
    for &(start, end) in &change.ranges {
        if start > end || end > len {
            return Err(fail(format!("the bundles' range {start}..{end} lies past the end of its {len} bytes")));
        }
        let thinned = thin_bundles(&mut zeroed, start, end, &change.keep).map_err(|e| fail(e.to_string()))?;
        Count::sum_into(&mut cut.kept, thinned.kept);
        Count::sum_into(&mut cut.dropped, thinned.dropped);
    }
    // The analysis planned from the same bytes; a difference means one of the two readers is
    // wrong, and the report would not be true.
    if cut != change.expected {
        return Err(fail(format!(
            "its bundles read differently when rewritten (kept {:?}, dropped {:?}) than when analysed (kept {:?}, dropped {:?}); nothing was written",
            cut.kept, cut.dropped, change.expected.kept, change.expected.dropped
        )));
    }
    let spill = |level| {
        Spilled::from_reader(len, level, dir, |buf, at| zeroed.read_at(buf, at))
            .map_err(|source| WriteError::Spill { file: change.member.clone(), source })
    };
    let spilled = spill(level)?;
    // Published members are often deflated harder than zlib's default, and compressed bundles
    // leave deflate little to save: a member that comes out larger than it was is deflated
    // again at the best level, so that the wheel shrinks by the dropped code.
    if spilled.compressed_size > member.compressed_size && level < 9 {
        let best = spill(9)?;
        if best.compressed_size < spilled.compressed_size {
            return Ok(best);
        }
    }
    Ok(spilled)
}

/// Thin the bundles of [start, end): apart and in parallel when their places are known from
/// their headers (each bundle is its own bytes: a compressed one is decoded and encoded again,
/// and a file may hold dozens), else in one walk.
fn thin_bundles(
    zeroed: &mut rewrite::ZeroedFile<'_>,
    start: u64,
    end: u64,
    keep: &crate::elf::gpu::targets::Keep,
) -> Result<rewrite::Thinned, rewrite::RewriteError> {
    let Some(spans) = rewrite::bundle_spans(&*zeroed, start, end)? else {
        return rewrite::thin_range(zeroed, start, end, keep);
    };
    let parts = crate::parallel::try_map(&spans, |&(from, to)| {
        let mut part = zeroed.part(from, to);
        rewrite::thin_range(&mut part, from, to, keep).map(|thinned| (thinned, part))
    })?;
    let mut total = rewrite::Thinned::default();
    for (thinned, part) in parts {
        total.add(thinned);
        zeroed.absorb(part);
    }
    Ok(total)
}
