//! Files read and written by position, a bounded piece at a time: what `thin` rewrites bundles
//! through. [`ZeroedFile`] is a member being copied whose dropped payloads are holes of zeros
//! (never read, never written twice); [`Ranges`] are those holes. A copy that several rewrites
//! share (`variants`: one per processor) is never written: each rewrite writes to an overlay file
//! of its own ([`ZeroedFile::over`]).

use std::io;

/// Bytes moved or searched at a time.
pub(crate) const CHUNK: usize = 1 << 20;

/// Rewritten content equal to the original's: [from, to) of the new file holds the original's
/// bytes from `original` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub from: u64,
    pub to: u64,
    pub original: u64,
}

/// A file read and written by position.
pub trait Positional {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Where in [from, to) the first byte lies that the file does not hold (`to` if none).
    fn held_until(&self, _from: u64, to: u64) -> u64 {
        to
    }

    /// Set [from, to) to zero.
    fn zero_range(&mut self, from: u64, to: u64) -> io::Result<()> {
        write_zeros(self, from, to)
    }

    /// Copy `size` bytes from `from` to `to` (`to <= from`: a forward copy, a chunk at a time,
    /// never overwrites what it has not read), with `buf` as its buffer.
    fn copy_within(&mut self, from: u64, to: u64, size: u64, buf: &mut [u8]) -> io::Result<()> {
        copy_forward(self, from, to, size, buf)
    }
}

pub(crate) fn write_zeros<F: Positional + ?Sized>(file: &mut F, from: u64, to: u64) -> io::Result<()> {
    let zeros = vec![0u8; CHUNK.min(to.saturating_sub(from) as usize)];
    let mut at = from;
    while at < to {
        let n = (zeros.len() as u64).min(to - at) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// A file whose zeroed ranges are remembered rather than written: the freed bytes of a
/// rewritten bundle are most of a fat library, and writing them only for a reader to read them
/// back costs two passes over them. Reads see the zeros; [`ZeroedFile::read_at`] gives them.
///
/// The file may also have holes: ranges it does not hold (a copy that skipped the payloads
/// thinning drops, wheelfix's `analysis::copy`). A hole is fine once it is written or zeroed;
/// reading one before is an error ([`NotCopied`]), never zeros in the member's place.
///
/// With an overlay, the file is only read: what the rewrite writes goes to the overlay at the
/// same offsets, and reads take the overlay's bytes where it was written.
pub struct ZeroedFile<'a> {
    pub file: &'a std::fs::File,
    /// Where writes go instead of `file`, and what was written there.
    overlay: Option<(&'a std::fs::File, Ranges)>,
    /// What reads as zeros, not from the file.
    zeros: Ranges,
    /// Where the content is still the original's, moved or not (the writer reuses the
    /// original's deflate blocks there).
    origins: Origins,
    /// What the file does not hold and nothing has written yet.
    holes: Ranges,
    /// The range a part (of [`ZeroedFile::part`]) rewrites.
    span: Option<(u64, u64)>,
}

/// A read of bytes that a copy did not hold.
#[derive(Debug, thiserror::Error)]
#[error("the inflated copy does not hold bytes {0}..{1}")]
pub struct NotCopied(pub u64, pub u64);

impl<'a> ZeroedFile<'a> {
    pub fn new(file: &'a std::fs::File) -> ZeroedFile<'a> {
        ZeroedFile::with_holes(file, Ranges::default())
    }

    pub fn with_holes(file: &'a std::fs::File, holes: Ranges) -> ZeroedFile<'a> {
        ZeroedFile { file, overlay: None, zeros: Ranges::default(), origins: Origins::identity(), holes, span: None }
    }

    /// A view of `file` that never writes it: writes go to `overlay` (an empty file of this
    /// rewrite), so that other rewrites can read `file` at the same time.
    pub fn over(file: &'a std::fs::File, holes: Ranges, overlay: &'a std::fs::File) -> ZeroedFile<'a> {
        ZeroedFile { overlay: Some((overlay, Ranges::default())), ..ZeroedFile::with_holes(file, holes) }
    }

    /// A view of the same file for thinning [from, to) apart from the rest.
    pub fn part(&self, from: u64, to: u64) -> ZeroedFile<'a> {
        let holes = Ranges(self.holes.within(from, to));
        let origins = Origins(self.origins.within(from, to));
        let overlay = self.overlay.as_ref().map(|(file, written)| (*file, Ranges(written.within(from, to))));
        ZeroedFile { file: self.file, overlay, zeros: Ranges::default(), origins, holes, span: Some((from, to)) }
    }

    /// The parts of holes that lie outside every one of `ranges`.
    pub fn holes_outside(&self, ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut outside = self.holes.clone();
        for &(from, to) in ranges {
            outside.remove(from, to);
        }
        outside.0
    }

    /// Whether the file holds [from, to) (no hole there).
    pub fn holds(&self, from: u64, to: u64) -> bool {
        self.holes.within(from, to).is_empty()
    }

    /// Write the original's bytes into a hole: it is no longer one, and the content there is
    /// still the original's.
    pub fn fill_hole(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_file(bytes, at)?;
        self.holes.remove(at, at + bytes.len() as u64);
        Ok(())
    }

    /// Write to the overlay if there is one, else to the file.
    fn write_file(&mut self, bytes: &[u8], at: u64) -> io::Result<()> {
        match &mut self.overlay {
            Some((overlay, written)) => {
                std::os::unix::fs::FileExt::write_all_at(*overlay, bytes, at)?;
                written.add(at, at + bytes.len() as u64);
                Ok(())
            }
            None => std::os::unix::fs::FileExt::write_all_at(self.file, bytes, at),
        }
    }

    /// Where the content is the original's: the pieces, in order.
    pub fn same_as_original(&self) -> &[Origin] {
        &self.origins.0
    }

    /// Take over the zeroed ranges and holes of a part that thinned other bytes of the file.
    pub fn absorb(&mut self, other: ZeroedFile<'_>) {
        for &(from, to) in &other.zeros.0 {
            self.zeros.add(from, to);
        }
        if let Some((from, to)) = other.span {
            self.holes.remove(from, to);
            self.origins.forget(from, to);
            self.origins.put(other.origins.0);
            if let (Some((_, mine)), Some((_, theirs))) = (&mut self.overlay, &other.overlay) {
                mine.remove(from, to);
                for &(f, t) in &theirs.0 {
                    mine.add(f, t);
                }
            }
        }
        for &(from, to) in &other.holes.0 {
            self.holes.add(from, to);
        }
    }

    /// Read `buf.len()` bytes at `offset`, the zeroed ranges as zeros.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        if let Some(&(from, to)) = self.holes.within(offset, end).first() {
            return Err(io::Error::other(NotCopied(from, to)));
        }
        // Only the bytes between zeroed ranges are read, each from where it was last written.
        let mut at = offset;
        for (from, to) in self.zeros.within(offset, end).into_iter().chain([(end, end)]) {
            if from > at {
                self.read_written(&mut buf[(at - offset) as usize..(from - offset) as usize], at)?;
            }
            if to > from {
                buf[(from - offset) as usize..(to - offset) as usize].fill(0);
            }
            at = at.max(to);
        }
        Ok(())
    }

    /// Read bytes no zeroed range covers: the overlay's where it was written, else the file's.
    fn read_written(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let read = std::os::unix::fs::FileExt::read_exact_at;
        let Some((overlay, written)) = &self.overlay else { return read(self.file, buf, offset) };
        let end = offset + buf.len() as u64;
        let mut at = offset;
        for (from, to) in written.within(offset, end).into_iter().chain([(end, end)]) {
            if from > at {
                read(self.file, &mut buf[(at - offset) as usize..(from - offset) as usize], at)?;
            }
            if to > from {
                read(overlay, &mut buf[(from - offset) as usize..(to - offset) as usize], from)?;
            }
            at = at.max(to);
        }
        Ok(())
    }
}

impl Positional for ZeroedFile<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_at(buf, offset)
    }
    fn held_until(&self, from: u64, to: u64) -> u64 {
        self.holes.within(from, to).first().map_or(to, |&(f, _)| f)
    }
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        // What is written over a zeroed range is no longer zero, nor a hole, nor the original.
        self.holes.remove(offset, end);
        self.zeros.remove(offset, end);
        self.origins.forget(offset, end);
        self.write_file(buf, offset)
    }
    fn zero_range(&mut self, from: u64, to: u64) -> io::Result<()> {
        self.holes.remove(from, to);
        self.zeros.add(from, to);
        self.origins.forget(from, to);
        if let Some((_, written)) = &mut self.overlay {
            written.remove(from, to);
        }
        Ok(())
    }
    fn copy_within(&mut self, from: u64, to: u64, size: u64, buf: &mut [u8]) -> io::Result<()> {
        // The destination holds what the source held: the original's bytes where it did.
        let moved: Vec<Origin> = self
            .origins
            .within(from, from + size)
            .into_iter()
            .map(|p| Origin { from: p.from - from + to, to: p.to - from + to, original: p.original })
            .collect();
        copy_forward(self, from, to, size, buf)?;
        self.origins.forget(to, to + size);
        self.origins.put(moved);
        Ok(())
    }
}

/// Where a rewritten file still holds the original's bytes: disjoint pieces in order, the whole
/// file at first; a write or zeroing forgets its range, a move carries its source's pieces.
#[derive(Debug, Clone)]
struct Origins(Vec<Origin>);

impl Origins {
    fn identity() -> Origins {
        Origins(vec![Origin { from: 0, to: u64::MAX, original: 0 }])
    }

    fn forget(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let start = self.0.partition_point(|p| p.to <= from);
        let end = self.0.partition_point(|p| p.from < to);
        if start >= end {
            return;
        }
        let (first, last) = (self.0[start], self.0[end - 1]);
        let mut rest = Vec::with_capacity(2);
        if first.from < from {
            rest.push(Origin { from: first.from, to: from, original: first.original });
        }
        if last.to > to {
            rest.push(Origin { from: to, to: last.to, original: last.original + (to - last.from) });
        }
        self.0.splice(start..end, rest);
    }

    /// The pieces within [from, to), clipped to it.
    fn within(&self, from: u64, to: u64) -> Vec<Origin> {
        let start = self.0.partition_point(|p| p.to <= from);
        self.0[start..]
            .iter()
            .take_while(|p| p.from < to)
            .map(|p| {
                let (f, t) = (p.from.max(from), p.to.min(to));
                Origin { from: f, to: t, original: p.original + (f - p.from) }
            })
            .filter(|p| p.from < p.to)
            .collect()
    }

    /// Insert `pieces` (in order, within a range forgotten before).
    fn put(&mut self, pieces: Vec<Origin>) {
        let Some(first) = pieces.first() else { return };
        let at = self.0.partition_point(|p| p.from < first.from);
        self.0.splice(at..at, pieces);
    }
}

/// Disjoint [start, end) ranges of a file, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    /// Add [from, to), merged with what it touches.
    pub fn add(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let (mut from, mut to) = (from, to);
        let first = self.0.partition_point(|&(_, t)| t < from);
        let mut last = first;
        while last < self.0.len() && self.0[last].0 <= to {
            from = from.min(self.0[last].0);
            to = to.max(self.0[last].1);
            last += 1;
        }
        self.0.splice(first..last, [(from, to)]);
    }

    /// Take [from, to) out.
    pub fn remove(&mut self, from: u64, to: u64) {
        if from >= to || self.0.is_empty() {
            return;
        }
        let first = self.0.partition_point(|&(_, t)| t <= from);
        let mut last = first;
        let mut left = Vec::new();
        while last < self.0.len() && self.0[last].0 < to {
            let (f, t) = self.0[last];
            if f < from {
                left.push((f, from));
            }
            if t > to {
                left.push((to, t));
            }
            last += 1;
        }
        self.0.splice(first..last, left);
    }

    /// Whether `at` lies in a range.
    pub fn covers(&self, at: u64) -> bool {
        let i = self.0.partition_point(|&(_, t)| t <= at);
        self.0.get(i).is_some_and(|&(f, _)| f <= at)
    }

    /// The ranges' parts within [from, to), in order.
    pub fn within(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let first = self.0.partition_point(|&(_, t)| t <= from);
        self.0[first..]
            .iter()
            .take_while(|&&(f, _)| f < to)
            .map(|&(f, t)| (f.max(from), t.min(to)))
            .filter(|(f, t)| f < t)
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes in the ranges.
    pub fn bytes(&self) -> u64 {
        self.0.iter().map(|(f, t)| t - f).sum()
    }
}

/// A file held in memory; it cannot grow.
impl Positional for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        let bytes = start.checked_add(buf.len()).and_then(|end| self.get(start..end));
        buf.copy_from_slice(bytes.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?);
        Ok(())
    }
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        let end = start + buf.len();
        if end > self.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        self[start..end].copy_from_slice(buf);
        Ok(())
    }
}

/// Copy `size` bytes from `from` to `to` (`to <= from`) a chunk at a time.
pub(crate) fn copy_forward<F: Positional + ?Sized>(
    file: &mut F,
    from: u64,
    to: u64,
    size: u64,
    buf: &mut [u8],
) -> io::Result<()> {
    debug_assert!(to <= from);
    if from == to {
        return Ok(());
    }
    let mut done = 0;
    while done < size {
        let n = (buf.len() as u64).min(size - done) as usize;
        file.read_exact_at(&mut buf[..n], from + done)?;
        file.write_all_at(&buf[..n], to + done)?;
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn read_all(file: &ZeroedFile<'_>, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        file.read_at(&mut buf, 0).unwrap();
        buf
    }

    #[test]
    fn an_overlay_takes_the_writes_and_leaves_the_file_as_it_was() {
        let original: Vec<u8> = (0..64u8).collect();
        let base = file_of(&original);
        let overlay = tempfile::tempfile().unwrap();
        let mut zeroed = ZeroedFile::over(&base, Ranges::default(), &overlay);
        zeroed.write_all_at(b"abcd", 10).unwrap();
        zeroed.zero_range(20, 30).unwrap();
        let mut buf = [0u8; 8];
        zeroed.copy_within(40, 2, 8, &mut buf).unwrap();
        let mut expected = original.clone();
        expected[10..14].copy_from_slice(b"abcd");
        expected[20..30].fill(0);
        <[u8]>::copy_within(&mut expected, 40..48, 2);
        assert_eq!(read_all(&zeroed, 64), expected);
        // The moved bytes are still the original's, from where they came.
        assert!(zeroed.same_as_original().iter().any(|o| o.from == 2 && o.to == 10 && o.original == 40));
        let mut untouched = vec![0u8; 64];
        std::os::unix::fs::FileExt::read_exact_at(&base, &mut untouched, 0).unwrap();
        assert_eq!(untouched, original);
    }

    #[test]
    fn two_overlays_of_one_file_do_not_see_each_others_writes() {
        let original = vec![7u8; 32];
        let base = file_of(&original);
        let (one, two) = (tempfile::tempfile().unwrap(), tempfile::tempfile().unwrap());
        let mut first = ZeroedFile::over(&base, Ranges::default(), &one);
        let mut second = ZeroedFile::over(&base, Ranges::default(), &two);
        first.write_all_at(&[1; 4], 0).unwrap();
        second.write_all_at(&[2; 4], 2).unwrap();
        assert_eq!(&read_all(&first, 8), &[1, 1, 1, 1, 7, 7, 7, 7]);
        assert_eq!(&read_all(&second, 8), &[7, 7, 2, 2, 2, 2, 7, 7]);
        // Zeroing a written range: zeros, not the overlay's bytes; writing again: the new ones.
        first.zero_range(1, 3).unwrap();
        assert_eq!(&read_all(&first, 6), &[1, 0, 0, 1, 7, 7]);
        first.write_all_at(&[9], 2).unwrap();
        assert_eq!(&read_all(&first, 6), &[1, 0, 9, 1, 7, 7]);
    }

    #[test]
    fn parts_written_apart_are_absorbed_with_their_writes() {
        let base = file_of(&[5u8; 40]);
        let overlay = tempfile::tempfile().unwrap();
        let mut whole = ZeroedFile::over(&base, Ranges::default(), &overlay);
        whole.write_all_at(&[1; 2], 0).unwrap();
        let mut left = whole.part(10, 20);
        let mut right = whole.part(20, 30);
        left.write_all_at(&[3; 5], 12).unwrap();
        right.zero_range(25, 30).unwrap();
        whole.absorb(left);
        whole.absorb(right);
        let mut expected = vec![5u8; 40];
        expected[0..2].fill(1);
        expected[12..17].fill(3);
        expected[25..30].fill(0);
        assert_eq!(read_all(&whole, 40), expected);
    }

    #[test]
    fn a_hole_filled_through_an_overlay_reads_back_and_the_file_keeps_it() {
        let base = file_of(&[0u8; 16]);
        let overlay = tempfile::tempfile().unwrap();
        let mut holes = Ranges::default();
        holes.add(4, 8);
        let mut zeroed = ZeroedFile::over(&base, holes, &overlay);
        let mut buf = [0u8; 16];
        assert!(zeroed.read_at(&mut buf, 0).is_err(), "a hole is never read as zeros");
        zeroed.fill_hole(4, &[8; 4]).unwrap();
        assert_eq!(&read_all(&zeroed, 10), &[0, 0, 0, 0, 8, 8, 8, 8, 0, 0]);
        let mut on_disk = [0u8; 4];
        std::os::unix::fs::FileExt::read_exact_at(&base, &mut on_disk, 4).unwrap();
        assert_eq!(on_disk, [0; 4]);
    }
}
