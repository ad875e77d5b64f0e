//! Files read and written by position, a bounded piece at a time: what `thin` rewrites bundles
//! through. [`ZeroedFile`] is a member being copied whose dropped payloads are holes of zeros
//! (never read, never written twice); [`Ranges`] are those holes.

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
pub struct ZeroedFile<'a> {
    pub file: &'a std::fs::File,
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
        ZeroedFile { file, zeros: Ranges::default(), origins: Origins::identity(), holes, span: None }
    }

    /// A view of the same file for thinning [from, to) apart from the rest.
    pub fn part(&self, from: u64, to: u64) -> ZeroedFile<'a> {
        let holes = Ranges(self.holes.within(from, to));
        let origins = Origins(self.origins.within(from, to));
        ZeroedFile { file: self.file, zeros: Ranges::default(), origins, holes, span: Some((from, to)) }
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
        std::os::unix::fs::FileExt::write_all_at(self.file, bytes, at)?;
        self.holes.remove(at, at + bytes.len() as u64);
        Ok(())
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
        // Only the bytes between zeroed ranges are read.
        let mut at = offset;
        for (from, to) in self.zeros.within(offset, end).into_iter().chain([(end, end)]) {
            if from > at {
                let part = &mut buf[(at - offset) as usize..(from - offset) as usize];
                std::os::unix::fs::FileExt::read_exact_at(self.file, part, at)?;
            }
            if to > from {
                buf[(from - offset) as usize..(to - offset) as usize].fill(0);
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
        std::os::unix::fs::FileExt::write_all_at(self.file, buf, offset)
    }
    fn zero_range(&mut self, from: u64, to: u64) -> io::Result<()> {
        self.holes.remove(from, to);
        self.zeros.add(from, to);
        self.origins.forget(from, to);
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
