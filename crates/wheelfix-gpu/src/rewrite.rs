//! Rewriting offload bundles in place (`thin`): in each bundle of a byte range, only the host
//! entry and the code objects a [`Keep`] keeps stay. Every bundle is rewritten at its own offset
//! (the HIP runtime finds it there through `__hip_fatbin_wrapper`), its kept code objects
//! first and the freed bytes zeroed, so nothing else in the file moves. A compressed bundle
//! is decoded as a stream, rebuilt and encoded again with its method, its header sizes and
//! hash computed as clang's bundler computes them; it never outgrows the bytes it had.
//!
//! Layouts: `../shared/reference/gpu-code-formats.md` §2–4.2. The file is read and written by
//! position, a bounded piece at a time: a bundle of a GB is never held in memory.
//!
//! Why one file: the in-place rewrite of plain
//! and compressed bundles and the readers `split` needs of the same layouts (payload tables, host
//! wrappers) share one bounds-checked view of the bundle format.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use super::scan::bundle_target;
use super::targets::Keep;
use super::{BUNDLE_MAGIC, BundleEntry, CCOB_MAGIC, Count};

/// The most a compressed bundle may decode to: beyond, it is a bomb, not device code.
pub const MAX_CCOB_DECODED: u64 = 16 << 30;
/// The most a compressed bundle may claim to expand (beyond 64 MiB).
const MAX_RATIO: u64 = 2000;

use super::codec::{DecodingReader, StreamDecoder};
use super::positional::CHUNK;
pub use super::positional::{NotCopied, Positional, Ranges, ZeroedFile};

/// What thinning a range did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thinned {
    /// Kept and dropped code objects, by target id.
    pub kept: BTreeMap<crate::TargetId, Count>,
    pub dropped: BTreeMap<crate::TargetId, Count>,
    /// Bundles rewritten (plain, compressed) and left as they were (nothing to drop).
    pub rewritten: usize,
    pub untouched: usize,
    /// Bytes set to zero.
    pub zeroed: u64,
    /// The space each rewritten bundle no longer uses, where a layout change may take its
    /// pages out of the file.
    pub freed: Vec<Freed>,
}

/// Zeros after a rewritten bundle, [from, to) in file offsets, that no reader of the bundle
/// reads by offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    pub from: u64,
    pub to: u64,
    /// A zstd bundle's skippable frame in front of them, by its header's offset: its content
    /// runs to `to`, where another frame (or the next bundle) starts, and must be cut to end at
    /// `from` once the pages in between leave the file ([`Freed::frame_end`]), so that a reader
    /// of the whole section still decodes.
    pub frame: Option<u64>,
}

impl Freed {
    /// The new length field of its frame, ending the frame at `end`: (offset, little-endian bytes).
    pub fn frame_end(&self, end: u64) -> Option<(u64, [u8; 4])> {
        let at = self.frame?;
        let len = u32::try_from(end.checked_sub(at + SKIPPABLE_HEADER)?).ok()?;
        Some((at + 4, len.to_le_bytes()))
    }
}

/// How thinning lays out the space it frees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreedLayout {
    /// The page a layout change removes by: a zstd bundle's freed space is then framed so that
    /// whole pages of zeros lie between its frames ([`Freed`]).
    pub page: Option<u64>,
}

impl Thinned {
    /// Add what thinning other bytes did.
    pub fn add(&mut self, other: Thinned) {
        Count::sum_into(&mut self.kept, other.kept);
        Count::sum_into(&mut self.dropped, other.dropped);
        self.rewritten += other.rewritten;
        self.untouched += other.untouched;
        self.zeroed += other.zeroed;
        self.freed.extend(other.freed);
    }
}

/// Why a range could not be thinned.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("offload bundle at offset {at}: {message}")]
    Bundle { at: u64, message: String },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A compressed bundle whose stream decodes to more than its header says.
#[derive(Debug, thiserror::Error)]
#[error("decodes to more than the {limit} bytes its header claims")]
pub struct DecodedPastClaim {
    pub limit: u64,
}

fn lie(at: u64, message: impl Into<String>) -> RewriteError {
    RewriteError::Bundle { at, message: message.into() }
}

/// Thin every bundle in the file range [start, end): bundles and compressed bundles in order,
/// each consuming its length, as [`super::scan::Hits::blob`] reads them.
pub fn thin_range<F: Positional>(file: &mut F, start: u64, end: u64, keep: &Keep) -> Result<Thinned, RewriteError> {
    thin_range_laid_out(file, start, end, keep, FreedLayout::default())
}

/// [`thin_range`], the freed space laid out for a layout change.
pub fn thin_range_laid_out<F: Positional>(
    file: &mut F,
    start: u64,
    end: u64,
    keep: &Keep,
    freed: FreedLayout,
) -> Result<Thinned, RewriteError> {
    let mut thinned = Thinned::default();
    let mut at = start;
    while let Some((found, compressed)) = next_magic(file, at, end)? {
        let consumed = if compressed {
            thin_ccob(file, found, end, keep, freed, &mut thinned)?
        } else {
            thin_bundle(file, found, end, keep, &mut thinned)?
        };
        at = found + consumed.max(1);
    }
    Ok(thinned)
}

/// Where each bundle of the range [start, end) lies, found from headers alone (a plain
/// bundle's table, a compressed one's total size), so that the bundles can be thinned apart, in
/// parallel. `None` when that cannot be known without decoding (a CCOB v1, whose stream is its
/// only end) or a header does not read: [`thin_range`] then walks the range as it thins.
pub fn bundle_spans<F: Positional>(file: &F, start: u64, end: u64) -> io::Result<Option<Vec<(u64, u64)>>> {
    let mut spans = Vec::new();
    let mut at = start;
    while let Some((found, compressed)) = next_magic(file, at, end)? {
        let len = if compressed {
            match ccob_header_at(file, found, end)? {
                Ok(CcobHeader { total: Some(total), .. }) if total <= end - found && total > 0 => total,
                _ => return Ok(None),
            }
        } else {
            let Ok(entries) = table_at(file, found, end) else { return Ok(None) };
            let table = table_len(&entries);
            let len = entries.iter().filter_map(|e| e.offset.checked_add(e.size)).fold(table, u64::max);
            if len > end - found {
                return Ok(None);
            }
            len
        };
        spans.push((found, found + len));
        at = found + len;
    }
    Ok(Some(spans))
}

/// The offset of the next bundle or compressed bundle magic in [from, end), and whether it is
/// compressed.
fn next_magic<F: Positional>(file: &F, from: u64, end: u64) -> io::Result<Option<(u64, bool)>> {
    let overlap = BUNDLE_MAGIC.len() - 1;
    let mut at = from;
    // The next bundle is mostly a few bytes of alignment away: the first read is small, each
    // next one twice as large, up to CHUNK.
    let mut size = 64 << 10;
    let mut buf = Vec::new();
    while at < end {
        // A search stops short of a hole (the payload of a bundle found before it): what lies
        // past the first magic is never looked at, and a search that must go on reads the
        // hole, which fails.
        let whole = (size as u64).min(end - at) as usize;
        size = (size * 2).min(CHUNK);
        if buf.len() < whole {
            buf.resize(whole, 0);
        }
        let n = match file.held_until(at, at + whole as u64) - at {
            0 => whole,
            held => held as usize,
        };
        file.read_exact_at(&mut buf[..n], at)?;
        let chunk = &buf[..n];
        let plain = memchr::memmem::find(chunk, BUNDLE_MAGIC);
        let ccob = memchr::memmem::find(chunk, CCOB_MAGIC);
        let first = match (plain, ccob) {
            (Some(p), Some(c)) if c < p => Some((c, true)),
            (Some(p), _) => Some((p, false)),
            (None, Some(c)) => Some((c, true)),
            (None, None) => None,
        };
        if let Some((offset, compressed)) = first {
            return Ok(Some((at + offset as u64, compressed)));
        }
        if at + (n as u64) >= end {
            break;
        }
        // Short of a hole, the next read is the hole's.
        at += if n < whole { n } else { n - overlap } as u64;
    }
    Ok(None)
}

/// A bundle's entry table, read from `read` (the bundle's first bytes), bounded
/// ([`super::bundle::read_table`]).
fn read_table(read: &mut dyn FnMut(&mut [u8]) -> io::Result<()>, at: u64) -> Result<Vec<BundleEntry>, RewriteError> {
    super::bundle::read_table(&mut |buf: &mut [u8]| read(buf).is_ok()).map_err(|e| match e {
        super::TableError::Truncated => lie(at, "its entry table runs past the end"),
        super::TableError::Lie(why) => lie(at, why),
    })
}

/// The entry table of the bundle at `at`, read by position within [at, end).
fn table_at<F: Positional>(file: &F, at: u64, end: u64) -> Result<Vec<BundleEntry>, RewriteError> {
    let mut pos = at;
    read_table(
        &mut |buf: &mut [u8]| {
            if pos + buf.len() as u64 > end {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            file.read_exact_at(buf, pos)?;
            pos += buf.len() as u64;
            Ok(())
        },
        at,
    )
}

/// The header of the compressed bundle at `at` (the file's bytes within [at, end)), or why it
/// does not parse.
fn ccob_header_at<F: Positional>(file: &F, at: u64, end: u64) -> io::Result<Result<CcobHeader, CcobError>> {
    let mut prefix = [0u8; 32];
    let available = (end - at).min(32) as usize;
    file.read_exact_at(&mut prefix[..available], at)?;
    Ok(CcobHeader::parse(&prefix[..available]))
}

use super::bundle::{CcobError, table_len};

/// A bundle's new layout: which entries stay, where each goes.
struct Layout {
    /// Kept entries in table order, with their new offsets.
    kept: Vec<BundleEntry>,
    /// (old offset, new offset, size) of every kept payload, by old offset.
    moves: Vec<(u64, u64, u64)>,
    /// The old and new lengths of the bundle.
    old_len: u64,
    new_len: u64,
}

impl Layout {
    fn table(&self) -> Vec<u8> {
        let mut table = Vec::with_capacity(table_len(&self.kept) as usize);
        table.extend_from_slice(BUNDLE_MAGIC);
        table.extend_from_slice(&(self.kept.len() as u64).to_le_bytes());
        for e in &self.kept {
            table.extend_from_slice(&e.offset.to_le_bytes());
            table.extend_from_slice(&e.size.to_le_bytes());
            table.extend_from_slice(&(e.id.len() as u64).to_le_bytes());
            table.extend_from_slice(e.id.as_bytes());
        }
        table
    }
}

/// Whether an entry stays in a thinned bundle: the host entry, and code objects the keep keeps.
fn stays(e: &BundleEntry, keep: &Keep) -> bool {
    e.id.starts_with("host-") || bundle_target(&e.id).is_none_or(|t| keep.keeps(t))
}

/// What the first bytes of a plain bundle say thinning drops.
pub enum Dropped {
    /// The payloads, as [start, end) from the bundle's start.
    Payloads(Vec<(u64, u64)>),
    /// Too few bytes to hold its entry table.
    Short,
    /// Not a table whose payloads lie after it and apart: nothing is known to be dropped.
    NotATable,
}

/// The payloads that thinning with `keep` drops from the plain bundle whose first bytes are
/// `table`.
pub fn dropped_payloads(table: &[u8], keep: &Keep) -> Dropped {
    match payload_entries(table) {
        Tabled::Entries(entries) => Dropped::Payloads(
            entries.iter().filter(|e| !stays(e, keep)).map(|e| (e.offset, e.offset + e.size)).collect(),
        ),
        Tabled::Short => Dropped::Short,
        Tabled::NotATable => Dropped::NotATable,
    }
}

/// What the first bytes of a plain bundle say of its entries.
pub enum Tabled {
    /// The entries that have a payload, in the order of their offsets (from the bundle's
    /// start), each after the table and the one before it.
    Entries(Vec<BundleEntry>),
    /// Too few bytes to hold its entry table.
    Short,
    /// Not a table whose payloads lie after it and apart.
    NotATable,
}

/// The entries with a payload of the plain bundle whose first bytes are `table`.
pub fn payload_entries(table: &[u8]) -> Tabled {
    let mut pos = 0usize;
    let mut short = false;
    let read = read_table(
        &mut |buf: &mut [u8]| match table.get(pos..pos + buf.len()) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                pos += buf.len();
                Ok(())
            }
            None => {
                short = true;
                Err(io::Error::from(io::ErrorKind::UnexpectedEof))
            }
        },
        0,
    );
    let entries = match read {
        Ok(entries) => entries,
        Err(_) if short => return Tabled::Short,
        Err(_) => return Tabled::NotATable,
    };
    let mut previous_end = table_len(&entries);
    let mut payloads: Vec<BundleEntry> = entries.into_iter().filter(|e| e.size > 0).collect();
    payloads.sort_by_key(|e| e.offset);
    for e in &payloads {
        match e.offset.checked_add(e.size) {
            Some(end) if e.offset >= previous_end => previous_end = end,
            _ => return Tabled::NotATable,
        }
    }
    Tabled::Entries(payloads)
}

/// Decide what stays of a bundle of `entries` that has `room` bytes: entries must lie after the
/// table, within the room and apart. Kept payloads are packed in their old order after the
/// new (shorter) table, aligned as the old ones were (HIP aligns code objects to 4096): each
/// lands at or before its old offset, so a forward copy never overwrites what it has not read.
fn layout(
    entries: &[BundleEntry],
    room: u64,
    keep: &Keep,
    at: u64,
    thinned: &mut Thinned,
) -> Result<Layout, RewriteError> {
    let old_table = table_len(entries);
    let mut by_offset: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].size > 0).collect();
    by_offset.sort_by_key(|&i| entries[i].offset);
    let mut old_len = old_table;
    let mut previous_end = old_table;
    for &i in &by_offset {
        let e = &entries[i];
        let end = e.offset.checked_add(e.size).filter(|end| *end <= room);
        let end = end.ok_or_else(|| lie(at, format!("entry `{}` lies past the end of the bundle", e.id)))?;
        if e.offset < previous_end {
            return Err(lie(at, format!("entry `{}` overlaps the table or another entry", e.id)));
        }
        previous_end = end;
        old_len = old_len.max(end);
    }
    if old_table > room {
        return Err(lie(at, "its entry table runs past the end"));
    }
    let stays = |e: &BundleEntry| stays(e, keep);
    let align =
        by_offset.iter().map(|&i| entries[i].offset).fold(4096u64, |a, off| a.min(1 << off.trailing_zeros().min(12)));
    let mut kept: Vec<BundleEntry> = entries.iter().filter(|e| stays(e)).cloned().collect();
    let mut cursor = table_len(&kept);
    let mut moves = Vec::new();
    let mut new_offsets = BTreeMap::new();
    for &i in &by_offset {
        let e = &entries[i];
        if !stays(e) {
            continue;
        }
        let to = cursor.next_multiple_of(align);
        moves.push((e.offset, to, e.size));
        new_offsets.insert(i, to);
        cursor = to + e.size;
    }
    let mut k = 0;
    for (i, e) in entries.iter().enumerate() {
        let target = crate::TargetId::from_code(bundle_target(&e.id).unwrap_or(&e.id));
        if !stays(e) {
            thinned.dropped.entry(target).or_default().add(e.size);
            continue;
        }
        kept[k].offset = if e.size == 0 { cursor.min(e.offset) } else { new_offsets[&i] };
        if !e.id.starts_with("host-") {
            thinned.kept.entry(target).or_default().add(e.size);
        }
        k += 1;
    }
    Ok(Layout { kept, moves, old_len, new_len: cursor })
}

/// Thin the uncompressed bundle at `at` (its room ends at `end`): returns its old length.
fn thin_bundle<F: Positional>(
    file: &mut F,
    at: u64,
    end: u64,
    keep: &Keep,
    thinned: &mut Thinned,
) -> Result<u64, RewriteError> {
    let entries = table_at(file, at, end)?;
    let layout = layout(&entries, end - at, keep, at, thinned)?;
    if layout.kept.len() == entries.len() {
        thinned.untouched += 1;
        return Ok(layout.old_len);
    }
    file.write_all_at(&layout.table(), at)?;
    let mut buf = vec![0u8; MOVE_CHUNK];
    for &(from, to, size) in &layout.moves {
        file.copy_within(at + from, at + to, size, &mut buf)?;
    }
    // Nothing of a dropped entry stays: the old table's tail (the dropped ids), the bytes
    // between the kept payloads' new places (padding that held dropped code), and everything
    // after the last are zeroed.
    let mut placed: Vec<(u64, u64)> = layout.moves.iter().map(|&(_, to, size)| (to, to + size)).collect();
    placed.sort_unstable();
    let mut free_from = table_len(&layout.kept);
    for (start, end) in placed {
        zero(file, at + free_from, at + start, thinned)?;
        free_from = free_from.max(end);
    }
    zero(file, at + free_from, at + layout.old_len, thinned)?;
    if free_from < layout.old_len {
        thinned.freed.push(Freed { from: at + free_from, to: at + layout.old_len, frame: None });
    }
    thinned.rewritten += 1;
    Ok(layout.old_len)
}

/// The bytes a kept code object is moved by at a time: under the allocator's mmap threshold
/// (`wheelfix_base::parallel::fix_allocator_thresholds`), so that a bundle's buffer is not a fresh
/// mapping, faulted in and unmapped (a TLB flush on every core) for each of thousands of bundles.
const MOVE_CHUNK: usize = 128 << 10;

fn zero<F: Positional>(file: &mut F, from: u64, to: u64, thinned: &mut Thinned) -> io::Result<()> {
    if from >= to {
        return Ok(());
    }
    file.zero_range(from, to)?;
    thinned.zeroed += to.saturating_sub(from);
    Ok(())
}

pub use super::bundle::{CcobHeader, bundle_hash};

/// Reads a file range by position, counting what it gave.
struct RangeReader<'a, F: Positional> {
    file: &'a F,
    pos: u64,
    end: u64,
}

impl<F: Positional> Read for RangeReader<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.end - self.pos) as usize;
        self.file.read_exact_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads at most `limit` bytes from a decoder and fails past it (a bomb, or a header that lies
/// about the size).
struct Bounded<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(io::Error::other(DecodedPastClaim { limit: self.limit }));
        }
        Ok(n)
    }
}

/// The rebuilt compressed stream, refused once it would not fit the old bundle's room.
struct Room {
    out: Vec<u8>,
    limit: u64,
}

impl Write for Room {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if (self.out.len() + buf.len()) as u64 > self.limit {
            return Err(io::Error::other(OUTGROWS));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The compressed bundle at `at` (its room ends at `end`): its header, the header's length, the
/// bytes it takes, and its stream decoding, bounded by what the header claims.
type CcobDecoder<'a, F> = Bounded<DecodingReader<io::BufReader<RangeReader<'a, F>>>>;

fn open_ccob<F: Positional>(
    file: &F,
    at: u64,
    end: u64,
) -> Result<(CcobHeader, u64, u64, CcobDecoder<'_, F>), RewriteError> {
    let header = ccob_header_at(file, at, end)?.map_err(|e| lie(at, format!("compressed: {e}")))?;
    let header_len = CcobHeader::len(header.version).expect("parsed") as u64;
    let room = match header.total {
        Some(t) if t < header_len || t > end - at => {
            return Err(lie(at, format!("compressed: claims {t} bytes, but only {} remain", end - at)));
        }
        Some(t) => t,
        None => end - at,
    };
    // Device code compresses a few times over, not a thousand: beyond that it is a bomb.
    let most = MAX_CCOB_DECODED.min((64 << 20u64).max(room.saturating_mul(MAX_RATIO)));
    if header.uncompressed > most {
        return Err(lie(at, format!("compressed: claims to decode to {} bytes from {room}", header.uncompressed)));
    }
    let source = RangeReader { file, pos: at + header_len, end: at + room };
    let stream = match StreamDecoder::for_method(header.method) {
        Some(stream) => stream.map_err(|e| lie(at, e.to_string()))?,
        None => return Err(lie(at, format!("compressed: unknown method {}", header.method))),
    };
    let source = io::BufReader::with_capacity(64 << 10, source);
    let decoder = Bounded { inner: DecodingReader::new(source, stream), read: 0, limit: header.uncompressed };
    Ok((header, header_len, room, decoder))
}

/// Thin the compressed bundle at `at`: returns its old length.
fn thin_ccob<F: Positional>(
    file: &mut F,
    at: u64,
    end: u64,
    keep: &Keep,
    freed: FreedLayout,
    thinned: &mut Thinned,
) -> Result<u64, RewriteError> {
    let (header, header_len, room, mut decoder) = open_ccob(&*file, at, end)?;
    let bad = |e: io::Error| lie(at, format!("compressed: cannot decode: {e}"));
    let entries = read_table(&mut |buf: &mut [u8]| decoder.read_exact(buf), at)?;
    let layout = layout(&entries, header.uncompressed, keep, at, thinned)?;
    if layout.kept.len() == entries.len() {
        thinned.untouched += 1;
        return Ok(room);
    }
    // A zstd bundle leaves room for the skippable frame that fills the rest of its space.
    let limit =
        if header.method == ZSTD { (room - header_len).saturating_sub(SKIPPABLE_HEADER) } else { room - header_len };
    let encoder =
        encoder(header.method, Room { out: Vec::new(), limit }, layout.new_len).map_err(|e| lie(at, e.to_string()))?;
    let mut rebuilt = Rebuilt { encoder, md5: <md5::Md5 as md5::Digest>::new(), written: 0 };
    let outgrows = |e: io::Error| {
        if e.to_string() == OUTGROWS {
            lie(at, "compressed: rebuilt, it would outgrow the bytes it has; nothing was written")
        } else {
            RewriteError::Io(e)
        }
    };
    rebuilt.emit(&layout.table()).map_err(outgrows)?;
    let mut consumed = table_len(&entries);
    let mut buf = vec![0u8; MOVE_CHUNK];
    for &(from, to, size) in &layout.moves {
        skip(&mut decoder, from - consumed, &mut buf).map_err(bad)?;
        rebuilt.zeros(to - rebuilt.written).map_err(outgrows)?;
        let mut left = size;
        while left > 0 {
            let n = (buf.len() as u64).min(left) as usize;
            decoder.read_exact(&mut buf[..n]).map_err(bad)?;
            rebuilt.emit(&buf[..n]).map_err(outgrows)?;
            left -= n as u64;
        }
        consumed = from + size;
    }
    rebuilt.zeros(layout.new_len - rebuilt.written).map_err(outgrows)?;
    // The rest must decode too, to exactly the size the header claims: a stream that lies is
    // refused, and v1's end (its header has no size) is where its stream ends.
    skip(&mut decoder, header.uncompressed - consumed, &mut buf).map_err(bad)?;
    if decoder.read(&mut buf).map_err(bad)? != 0 {
        return Err(lie(at, "compressed: decodes to more than its header claims"));
    }
    let old_end = header.total.unwrap_or_else(|| header_len + decoder.inner.consumed());
    drop(decoder);
    let hash = bundle_hash(rebuilt.md5);
    let compressed = rebuilt.encoder.finish().map_err(outgrows)?.out;
    let new = CcobHeader {
        total: header.total.map(|_| header_len + compressed.len() as u64),
        uncompressed: layout.new_len,
        hash,
        ..header
    };
    file.write_all_at(&new.to_bytes(), at)?;
    file.write_all_at(&compressed, at + header_len)?;
    let stream_end = at + header_len + compressed.len() as u64;
    zero(file, stream_end, at + old_end, thinned)?;
    if header.method == ZSTD {
        thinned.freed.extend(frame_freed_space(file, stream_end, at + old_end, freed.page)?);
    } else if stream_end < at + old_end {
        thinned.freed.push(Freed { from: stream_end, to: at + old_end, frame: None });
    }
    thinned.rewritten += 1;
    Ok(old_end)
}

/// CCOB's method number for zstd.
const ZSTD: u16 = 1;
/// A zstd skippable frame's header: its magic and the length of what follows.
const SKIPPABLE_HEADER: u64 = 8;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;

/// The zeroed space [from, to) after a rebuilt zstd stream, as skippable frames. Laid out for
/// `page`: one frame up to the first page boundary, whole pages of zeros, and one frame from the
/// last boundary to `to`; the first frame's content runs on over the pages until they leave the
/// file ([`Freed`]). Otherwise, frames over all of it.
fn frame_freed_space<F: Positional>(file: &mut F, from: u64, to: u64, page: Option<u64>) -> io::Result<Option<Freed>> {
    let whole_pages = page.and_then(|page| {
        let first = (from + SKIPPABLE_HEADER).next_multiple_of(page);
        let mut last = to / page * page;
        // What follows the pages is a frame or nothing: never a stub shorter than a header.
        if (1..SKIPPABLE_HEADER).contains(&(to - last.min(to))) {
            last = last.saturating_sub(page);
        }
        (first < last && last - from <= u64::from(u32::MAX)).then_some((first, last))
    });
    let Some((first, last)) = whole_pages else {
        let zeros_from = fill_with_skippable_frames(file, from, to)?;
        return Ok((zeros_from < to).then_some(Freed { from: zeros_from, to, frame: None }));
    };
    fill_with_skippable_frames(file, from, last)?;
    fill_with_skippable_frames(file, last, to)?;
    Ok(Some(Freed { from: first, to: last, frame: Some(from) }))
}

/// The zeroed space after a rebuilt zstd stream, turned into skippable frames of zeros: a reader
/// that decodes everything up to the end of the section (clang 19's bundler does, and fails on
/// bare zeros with "Src size is incorrect") reads them as frames that hold nothing.
/// Returns where the last frame's zeros start.
fn fill_with_skippable_frames<F: Positional>(file: &mut F, mut from: u64, to: u64) -> io::Result<u64> {
    let mut zeros_from = from;
    while to - from >= SKIPPABLE_HEADER {
        let gap = to - from - SKIPPABLE_HEADER;
        // A frame holds at most 4 GiB; a longer space is a chain, the last never shorter than a header.
        let len = if gap <= u64::from(u32::MAX) { gap } else { (gap - SKIPPABLE_HEADER).min(u64::from(u32::MAX)) };
        let mut header = SKIPPABLE_MAGIC.to_le_bytes().to_vec();
        header.extend_from_slice(&(len as u32).to_le_bytes());
        file.write_all_at(&header, from)?;
        zeros_from = from + SKIPPABLE_HEADER;
        from += SKIPPABLE_HEADER + len;
    }
    Ok(zeros_from)
}

const OUTGROWS: &str = "the rebuilt bundle outgrows its room";

/// The uncompressed bundle being rebuilt: encoded as it is made, its MD5 taken on the way.
struct Rebuilt {
    encoder: Encoder,
    md5: md5::Md5,
    written: u64,
}

impl Rebuilt {
    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        md5::Digest::update(&mut self.md5, bytes);
        self.written += bytes.len() as u64;
        self.encoder.write_all(bytes)
    }

    fn zeros(&mut self, mut n: u64) -> io::Result<()> {
        let zeros = [0u8; 4096];
        while n > 0 {
            let k = n.min(zeros.len() as u64) as usize;
            self.emit(&zeros[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}

fn skip(decoder: &mut impl Read, mut n: u64, buf: &mut [u8]) -> io::Result<()> {
    while n > 0 {
        let k = (buf.len() as u64).min(n) as usize;
        decoder.read_exact(&mut buf[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// An encoder of the rebuilt stream, with the method the bundle had.
enum Encoder {
    Zlib(Box<flate2::write::ZlibEncoder<Room>>),
    Zstd(Box<zstd::stream::write::Encoder<'static, Room>>),
}

/// zstd level for rebuilt bundles: the level clang used is not recorded in the bundle; a middle
/// one (LLVM's default for zstd is of this order), fast enough for GBs of device code. The
/// rebuilt bundle holds a fraction of the old one's code, so it fits its room.
const ZSTD_LEVEL: i32 = 5;

fn encoder(method: u16, room: Room, size: u64) -> io::Result<Encoder> {
    Ok(match method {
        0 => Encoder::Zlib(Box::new(flate2::write::ZlibEncoder::new(room, flate2::Compression::new(6)))),
        _ => {
            let mut e = zstd::stream::write::Encoder::new(room, ZSTD_LEVEL)?;
            e.set_pledged_src_size(Some(size))?;
            e.include_contentsize(true)?;
            Encoder::Zstd(Box::new(e))
        }
    })
}

impl Encoder {
    fn finish(self) -> io::Result<Room> {
        match self {
            Encoder::Zlib(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

impl Write for Encoder {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Zlib(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Zlib(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{bundle, keep};

    /// Two bundles and two wrappers: the first wrapper's pointer in the file, the second's the
    /// addend of a RELATIVE relocation; swapped, the split is refused naming the wrapper.
    #[test]
    fn wrappers_must_point_at_their_bundles_where_the_file_says() {
        let one = bundle(&["gfx942"]);
        let fatbin_at = 4096u64;
        let second_at = fatbin_at + (one.len() as u64).next_multiple_of(64);
        let (wrappers_at, rela_at) = (0u64, 256u64);
        let (fatbin_addr, wrappers_addr) = (0x10_0000u64, 0x20_0000u64);
        let build = |first: u64, second: u64| {
            let mut data = vec![0u8; second_at as usize + one.len()];
            data[fatbin_at as usize..][..one.len()].copy_from_slice(&one);
            data[second_at as usize..][..one.len()].copy_from_slice(&one);
            for (i, magic_at) in [0usize, 24].into_iter().enumerate() {
                data[magic_at..magic_at + 4].copy_from_slice(&crate::kpack::HIPF);
                data[magic_at + 4] = 1;
                if i == 0 {
                    data[magic_at + 8..magic_at + 16].copy_from_slice(&first.to_le_bytes());
                }
            }
            let mut rela = (wrappers_addr + 24 + 8).to_le_bytes().to_vec();
            rela.extend(8u64.to_le_bytes());
            rela.extend(second.to_le_bytes());
            data[rela_at as usize..][..24].copy_from_slice(&rela);
            data
        };
        let pointers = WrapperPointers {
            wrappers_addr,
            piece_addrs: vec![fatbin_addr],
            rela: vec![(rela_at, 24)],
            relative_type: Some(8),
        };
        let end = second_at + one.len() as u64;
        let bundle_addr = |at: u64| fatbin_addr + at - fatbin_at;
        let split = |data: &mut Vec<u8>| {
            split_host(data, &[(fatbin_at, end)], (wrappers_at, 48), &pointers, b"\x80", &|_| false, &mut |_, _, _| {
                Ok(())
            })
        };
        let mut good = build(bundle_addr(fatbin_at), bundle_addr(second_at));
        let done = split(&mut good).unwrap();
        assert_eq!((done.bundles, done.pointers_checked), (2, 2));
        assert_eq!(&good[..4], b"HIPK");
        let mut swapped = build(bundle_addr(second_at), bundle_addr(fatbin_at));
        let err = split(&mut swapped).unwrap_err().to_string();
        assert!(err.contains("wrapper 0 points at"), "{err}");
        assert_eq!(&swapped[..4], &crate::kpack::HIPF, "nothing written");
    }

    /// Nothing of a dropped target remains anywhere in the bundle's bytes: not its id in the old
    /// table's tail, not its code in the padding between kept objects.
    #[test]
    fn no_byte_of_a_dropped_target_remains() {
        let mut data = bundle(&["gfx90a", "gfx942", "gfx1100", "gfx950"]);
        let len = data.len() as u64;
        let thinned = thin_range(&mut data, 0, len, &keep("gfx942")).unwrap();
        assert_eq!(thinned.rewritten, 1);
        let has = |needle: &[u8]| data.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"gfx942") && !has(b"gfx90a") && !has(b"gfx1100") && !has(b"gfx950"));
        let table = crate::bundle_table(&data).unwrap();
        let code = table.iter().find(|e| e.id.ends_with("gfx942")).unwrap();
        let table_end = table_len(&table) as usize;
        assert!(data[table_end..code.offset as usize].iter().all(|b| *b == 0), "the padding before it");
        assert!(data[(code.offset + code.size) as usize..].iter().all(|b| *b == 0), "everything after it");
        // Its payload was filled with its index (2): only the kept object's bytes are not zero.
        let nonzero = data[table_end..].iter().filter(|b| **b != 0).count() as u64;
        assert_eq!(nonzero, code.size);
    }

    #[test]
    fn a_plain_bundle_keeps_its_target_at_its_offset() {
        let original = bundle(&["gfx90a", "gfx942", "gfx1100"]);
        let mut data = vec![7u8; 100];
        data.extend_from_slice(&original);
        data.extend_from_slice(&[9u8; 50]);
        let len = data.len() as u64;
        let thinned = thin_range(&mut data, 0, len, &keep("gfx942")).unwrap();
        assert_eq!(thinned.rewritten, 1);
        assert_eq!(thinned.kept["gfx942"], Count { objects: 1, bytes: 5000 });
        assert_eq!(thinned.dropped.len(), 2);
        assert_eq!(data.len() as u64, len, "the range keeps its size");
        assert_eq!(&data[..100], &[7u8; 100][..]);
        assert_eq!(&data[data.len() - 50..], &[9u8; 50][..]);
        let table = crate::bundle_table(&data[100..]).unwrap();
        assert_eq!(table.len(), 2);
        assert!(table[1].id.ends_with("gfx942"));
        let at = 100 + table[1].offset as usize;
        assert_eq!(table[1].offset % 4096, 0);
        assert!(data[at..at + 5000].iter().all(|b| *b == 2));
        assert!(data[at + 5000..data.len() - 50].iter().all(|b| *b == 0), "freed bytes are zero");
    }

    #[test]
    fn nothing_to_drop_changes_nothing() {
        let mut data = bundle(&["gfx942", "gfx9-4-generic"]);
        let before = data.clone();
        let len = data.len() as u64;
        let thinned = thin_range(&mut data, 0, len, &keep("gfx950")).unwrap();
        assert_eq!((thinned.rewritten, thinned.untouched), (1, 0));
        let mut again = before.clone();
        let thinned = thin_range(&mut again, 0, len, &keep("gfx942")).unwrap();
        assert_eq!((thinned.rewritten, thinned.untouched), (0, 1));
        assert_eq!(again, before);
    }

    fn compress(bundle: &[u8], version: u16, method: u16) -> Vec<u8> {
        let payload = match method {
            0 => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
                e.write_all(bundle).unwrap();
                e.finish().unwrap()
            }
            _ => zstd::encode_all(bundle, 3).unwrap(),
        };
        let mut md5 = <md5::Md5 as md5::Digest>::new();
        md5::Digest::update(&mut md5, bundle);
        let header_len = CcobHeader::len(version).unwrap() as u64;
        let header = CcobHeader {
            version,
            method,
            total: (version > 1).then_some(header_len + payload.len() as u64),
            uncompressed: bundle.len() as u64,
            hash: bundle_hash(md5),
        };
        let mut out = header.to_bytes();
        out.extend_from_slice(&payload);
        out
    }

    fn decompress(data: &[u8]) -> (CcobHeader, Vec<u8>) {
        let header = CcobHeader::parse(data).unwrap();
        let h = CcobHeader::len(header.version).unwrap();
        let end = header.total.map_or(data.len(), |t| t as usize);
        let decoded = match header.method {
            0 => {
                let mut out = Vec::new();
                flate2::read::ZlibDecoder::new(&data[h..end]).read_to_end(&mut out).unwrap();
                out
            }
            _ => {
                let mut out = Vec::new();
                zstd::stream::read::Decoder::new(&data[h..end]).unwrap().single_frame().read_to_end(&mut out).unwrap();
                out
            }
        };
        (header, decoded)
    }

    #[test]
    fn compressed_bundles_of_every_version_and_method_are_rebuilt() {
        for version in [1, 2, 3] {
            for method in [0, 1] {
                let original = bundle(&["gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx11-generic"]);
                let mut data = compress(&original, version, method);
                data.resize(data.len().next_multiple_of(4096), 0);
                let second = bundle(&["gfx11-generic"]);
                data.extend_from_slice(&compress(&second, version, method));
                let len = data.len() as u64;
                let thinned = thin_range(&mut data, 0, len, &keep("gfx1101")).unwrap();
                assert_eq!(thinned.rewritten, 1, "v{version} m{method}");
                assert_eq!(thinned.untouched, 1, "v{version} m{method}: the second bundle has nothing to drop");
                let (header, decoded) = decompress(&data);
                assert_eq!(header.uncompressed, decoded.len() as u64);
                let mut md5 = <md5::Md5 as md5::Digest>::new();
                md5::Digest::update(&mut md5, &decoded);
                assert_eq!(header.hash, bundle_hash(md5), "v{version} m{method}");
                let table = crate::bundle_table(&decoded).unwrap();
                let ids: Vec<&str> = table.iter().map(|e| e.id.as_str()).collect();
                assert_eq!(ids, ["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx11-generic"]);
                let payload = &decoded[table[1].offset as usize..][..5000];
                assert!(payload.iter().all(|b| *b == 4), "the kept code object's bytes are the original's");
                if method == ZSTD {
                    // Its whole space decodes, as a reader that takes the section to its end
                    // decodes it: the stream, then skippable frames over the freed bytes.
                    let room = compress(&original, version, method).len();
                    let header_len = CcobHeader::len(version).unwrap();
                    let whole = zstd::stream::decode_all(&data[header_len..room]).unwrap();
                    assert_eq!(whole, decoded, "v{version}");
                }
                if version > 1 {
                    let second_at = memchr::memmem::find(&data[4..], CCOB_MAGIC).unwrap() + 4;
                    assert_eq!(decompress(&data[second_at..]).1, second, "the next bundle did not move");
                }
            }
        }
    }

    #[test]
    fn lies_are_errors() {
        let mut data = bundle(&["gfx90a", "gfx942"]);
        data[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let len = data.len() as u64;
        assert!(thin_range(&mut data, 0, len, &keep("gfx942")).unwrap_err().to_string().contains("entries"));

        let mut data = bundle(&["gfx90a", "gfx942"]);
        data.truncate(data.len() - 10);
        let len = data.len() as u64;
        let e = thin_range(&mut data, 0, len, &keep("gfx942")).unwrap_err().to_string();
        assert!(e.contains("past the end"), "{e}");

        // A compressed bundle whose header claims less than its stream decodes to.
        let original = bundle(&["gfx90a", "gfx942"]);
        let mut data = compress(&original, 3, 1);
        data[16..24].copy_from_slice(&100_000u64.to_le_bytes());
        let len = data.len() as u64;
        assert!(thin_range(&mut data, 0, len, &keep("gfx942")).is_err());

        // A zstd bomb: a few KB that decode to GBs of zeros, with a header that says so.
        let bomb = {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
            let mut head = bundle(&["gfx90a", "gfx942"]);
            head.truncate(4096);
            e.write_all(&head).unwrap();
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..64 {
                e.write_all(&zeros).unwrap();
            }
            e.finish().unwrap()
        };
        let header =
            CcobHeader { version: 3, method: 1, total: Some(32 + bomb.len() as u64), uncompressed: 8 << 30, hash: 0 };
        let mut data = header.to_bytes();
        data.extend_from_slice(&bomb);
        let len = data.len() as u64;
        let e = thin_range(&mut data, 0, len, &keep("gfx942")).unwrap_err().to_string();
        assert!(e.contains("claims to decode"), "{e}");
    }

    #[test]
    fn a_zeroed_file_reads_zeros_where_it_was_zeroed_and_data_where_written_since() {
        use std::io::Write;
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 100]).unwrap();
        let mut zeroed = ZeroedFile::new(&file);
        zeroed.zero_range(10, 50).unwrap();
        zeroed.zero_range(60, 70).unwrap();
        zeroed.write_all_at(&[1, 2, 3], 20).unwrap();
        let mut buf = [0xffu8; 100];
        zeroed.read_at(&mut buf, 0).unwrap();
        let mut expected = [7u8; 100];
        expected[10..50].fill(0);
        expected[60..70].fill(0);
        expected[20..23].copy_from_slice(&[1, 2, 3]);
        assert_eq!(buf, expected);
        let mut part = [0xffu8; 15];
        zeroed.read_at(&mut part, 45).unwrap();
        assert_eq!(part, expected[45..60]);
    }

    #[test]
    fn ranges_merge_split_and_clip() {
        let mut holes = Ranges::default();
        holes.add(10, 20);
        holes.add(30, 40);
        holes.add(20, 25);
        assert_eq!(holes.within(0, 100), vec![(10, 25), (30, 40)]);
        holes.add(24, 31);
        assert_eq!(holes.within(0, 100), vec![(10, 40)]);
        holes.remove(15, 18);
        assert_eq!(holes.within(0, 100), vec![(10, 15), (18, 40)]);
        assert_eq!(holes.within(12, 20), vec![(12, 15), (18, 20)]);
        assert!(holes.covers(10) && !holes.covers(15) && holes.covers(39) && !holes.covers(40));
        assert_eq!(holes.bytes(), 27);
        holes.remove(0, 100);
        assert!(holes.is_empty());
    }
}

/// One code object read out of a bundle: its entry (offset and size within the uncompressed
/// bundle) and its bytes.
pub type ObjectSink<'a> = dyn FnMut(&BundleEntry, Payload<'_>) -> io::Result<()> + 'a;

/// A code object of a bundle, given the bundle's ordinal in the range read.
pub type BundleObjectSink<'a> = dyn FnMut(usize, &BundleEntry, Payload<'_>) -> io::Result<()> + 'a;

/// Code objects larger than this reach a sink as a stream ([`Payload::Streamed`]), never whole
/// (defined with the archives that compress them, which this module writes into).
pub use crate::kpack::WHOLE_OBJECT;

/// A code object's bytes as a sink is given them.
pub enum Payload<'r> {
    /// A code object larger than [`WHOLE_OBJECT`]: its bytes, read as the sink reads them
    /// (what it leaves unread is passed over), and the offset of a plain bundle's in the file.
    Streamed(&'r mut dyn Read, Option<u64>),
    /// A plain bundle's code object, and its offset in the file.
    Plain(Vec<u8>, u64),
    /// A code object decoded from a compressed bundle (it has no offset of its own).
    Decoded(Vec<u8>),
    /// A plain bundle's payload at this offset of the file, which the file does not hold: a
    /// kept copy left it out because its bytes were taken as they streamed past.
    NotHeld(u64),
}

thread_local! {
    /// Buffers of code objects read whole, given back once their objects were used
    /// ([`recycle`]): the next objects are read into pages already mapped instead of pages
    /// faulted in afresh (on a wheel whose bundles decode to 1.2 GB, a quarter of split's CPU
    /// time went to those faults).
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most bytes of spare buffers a thread keeps: what one batch of objects held whole holds
/// at most (16 MiB, and one object of up to [`WHOLE_OBJECT`] that fills it).
const SPARE_MAX: usize = 3 * WHOLE_OBJECT as usize;

/// A buffer of `size` bytes for a code object: the smallest spare that holds it, else the
/// largest grown to hold it (its pages stay; only the new ones are faulted in), else a new one.
/// Capacities are rounded up (to whole MiB from 1 MiB), so that a spare holds the objects of
/// nearly its size that follow it: objects differ by a few KB, and a spare that misses by one
/// cost a fresh buffer.
fn object_buffer(size: usize) -> Vec<u8> {
    let mut buf = object_room(size);
    buf.resize(size, 0);
    buf
}

/// An empty buffer with room for a code object of `size` bytes, to be filled by extending it:
/// a spare as [`object_buffer`] chooses it, given back with [`recycle`].
pub fn object_room(size: usize) -> Vec<u8> {
    let spare = SPARE.with_borrow_mut(|spare| {
        let fits = spare.iter().enumerate().filter(|(_, b)| b.capacity() >= size);
        let smallest = fits.min_by_key(|(_, b)| b.capacity()).map(|(i, _)| i);
        let largest = || spare.iter().enumerate().max_by_key(|(_, b)| b.capacity()).map(|(i, _)| i);
        smallest.or_else(largest).map(|i| spare.swap_remove(i))
    });
    let mut buf = spare.unwrap_or_default();
    buf.clear();
    buf.reserve_exact(size.next_multiple_of(if size >= 1 << 20 { 1 << 20 } else { 64 << 10 }));
    buf
}

/// Give back the buffer of a code object [`read_objects`] held whole, once it was used: the
/// thread reads its next objects into it. Beyond [`SPARE_MAX`] the smallest spares go: a large
/// one saves the most faults.
pub fn recycle(mut buf: Vec<u8>) {
    SPARE.with_borrow_mut(|spare| {
        buf.clear();
        spare.push(buf);
        crate::keep_largest(spare, Vec::capacity, SPARE_MAX);
    });
}

/// Hand each device code object of the bundle at `at` (plain or compressed; its room ends at
/// `end`) to `sink`, in the order of their offsets, host entries left out. Returns the bundle's
/// length in the file. One code object is held at a time; a compressed bundle is decoded as a
/// stream, bounded as [`thin_range`] bounds it.
pub fn read_objects<F: Positional>(
    file: &F,
    at: u64,
    end: u64,
    wants: &dyn Fn(&BundleEntry) -> bool,
    sink: &mut ObjectSink<'_>,
) -> Result<u64, RewriteError> {
    let mut head = [0u8; 4];
    file.read_exact_at(&mut head[..(end - at).min(4) as usize], at)?;
    if head != CCOB_MAGIC {
        let entries = table_at(file, at, end)?;
        let mut len = table_len(&entries);
        let mut order: Vec<&BundleEntry> = entries.iter().collect();
        order.sort_by_key(|e| e.offset);
        for e in order {
            let stop = e.offset.checked_add(e.size).filter(|&s| s <= end - at);
            let stop = stop.ok_or_else(|| lie(at, format!("entry `{}` runs past the end", e.id)))?;
            len = len.max(stop);
            if e.id.starts_with("host-") || !wants(e) {
                continue;
            }
            let from = at + e.offset;
            if file.held_until(from, from + e.size) < from + e.size {
                sink(e, Payload::NotHeld(from))?;
                continue;
            }
            if e.size > WHOLE_OBJECT {
                let mut reader = FileRange { file, at: from, end: from + e.size };
                sink(e, Payload::Streamed(&mut reader, Some(from)))?;
                continue;
            }
            let mut bytes = object_buffer(e.size as usize);
            file.read_exact_at(&mut bytes, from)?;
            sink(e, Payload::Plain(bytes, from))?;
        }
        return Ok(len);
    }
    let (header, header_len, _, mut decoder) = open_ccob(file, at, end)?;
    let bad = |e: io::Error| lie(at, format!("compressed: cannot decode: {e}"));
    let entries = read_table(&mut |buf: &mut [u8]| decoder.read_exact(buf), at)?;
    let mut order: Vec<&BundleEntry> = entries.iter().collect();
    order.sort_by_key(|e| e.offset);
    let mut consumed = table_len(&entries);
    let mut buf = vec![0u8; MOVE_CHUNK];
    // Entries not read are passed over wherever their tables place them (an empty host entry
    // may point into the table).
    for e in order.into_iter().filter(|e| !e.id.starts_with("host-") && wants(e)) {
        if e.offset < consumed || e.offset.saturating_add(e.size) > header.uncompressed {
            return Err(lie(at, format!("compressed: entry `{}` overlaps another or runs past the end", e.id)));
        }
        skip(&mut decoder, e.offset - consumed, &mut buf).map_err(bad)?;
        consumed = e.offset + e.size;
        if e.size > WHOLE_OBJECT {
            let mut object = (&mut decoder).take(e.size);
            sink(e, Payload::Streamed(&mut object, None))?;
            let rest = object.limit();
            skip(&mut decoder, rest, &mut buf).map_err(bad)?;
            continue;
        }
        let mut bytes = object_buffer(e.size as usize);
        decoder.read_exact(&mut bytes).map_err(bad)?;
        sink(e, Payload::Decoded(bytes))?;
    }
    skip(&mut decoder, header.uncompressed - consumed, &mut buf).map_err(bad)?;
    if decoder.read(&mut buf).map_err(bad)? != 0 {
        return Err(lie(at, "compressed: decodes to more than its header claims"));
    }
    Ok(header.total.unwrap_or_else(|| header_len + decoder.inner.consumed()))
}

/// Bytes [at, end) of a file, read in order.
struct FileRange<'f, F: Positional> {
    file: &'f F,
    at: u64,
    end: u64,
}

impl<F: Positional> Read for FileRange<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min((self.end - self.at) as usize);
        if n > 0 {
            self.file.read_exact_at(&mut buf[..n], self.at)?;
            self.at += n as u64;
        }
        Ok(n)
    }
}

/// Every bundle of [start, end) in order, each as (offset, length in the file), with the code
/// objects `wants` wants handed to `sink` (given the bundle's ordinal) as [`read_objects`]
/// reads them; `seen` is told of every device entry.
pub fn read_bundles<F: Positional>(
    file: &F,
    start: u64,
    end: u64,
    wants: &dyn Fn(&BundleEntry) -> bool,
    sink: &mut BundleObjectSink<'_>,
) -> Result<Vec<(u64, u64)>, RewriteError> {
    let mut found = Vec::new();
    let mut at = start;
    while let Some((offset, _)) = next_magic(file, at, end)? {
        let ordinal = found.len();
        let len = read_objects(file, offset, end, wants, &mut |e, bytes| sink(ordinal, e, bytes))?;
        found.push((offset, len));
        at = offset + len.max(1);
    }
    Ok(found)
}

/// What splitting a host binary's device code out did ([`split_host`]).
#[derive(Debug, Clone, Default)]
pub struct SplitHost {
    /// Bundles replaced by the marker, in wrapper order.
    pub bundles: usize,
    /// Code objects moved out, by target id.
    pub moved: BTreeMap<crate::TargetId, Count>,
    /// The space the bundles no longer use, after each marker.
    pub freed: Vec<Freed>,
    /// Wrappers whose pointer the file gives, each found pointing at its bundle.
    pub pointers_checked: usize,
    /// Every wrapper now points at one marker, the first bundle's.
    pub shared_marker: bool,
    /// Where the first bundle's marker lies (every marker holds the same bytes).
    pub first_marker: Option<u64>,
}

/// Move every bundle of a host binary out (kpack's layout): each code object goes to `sink`
/// with the ordinal of its bundle, each bundle's space becomes `marker` followed by zeros, and
/// each `__hip_fatbin_wrapper` in `wrappers` (the `.hipFatBinSegment` section's file range)
/// becomes a `HIPK` wrapper whose `reserved1` holds its index. The wrapper's pointer still
/// points where its bundle started, now at the marker: no relocation changes. Wrapper `i`
/// belongs to the `i`-th bundle by address, as linkers lay out both sections from the same
/// objects in the same order; a count that differs is refused.
/// What a host binary says of where its wrappers point, to check that wrapper `i` points at
/// bundle `i`: the wrappers' address, each `.hip_fatbin` piece's address (in the order of the
/// pieces), and its `SHT_RELA` sections (file ranges) with the machine's RELATIVE type. A
/// wrapper's pointer is in the file (a program) or the addend of its RELATIVE relocation (a
/// shared object); one found neither way is taken in order.
#[derive(Debug, Clone, Default)]
pub struct WrapperPointers {
    pub wrappers_addr: u64,
    pub piece_addrs: Vec<u64>,
    pub rela: Vec<(u64, u64)>,
    pub relative_type: Option<u32>,
}

/// Where one wrapper's pointer lives: its value in the file (0 where a RELATIVE relocation
/// supplies it) and the file offset of that relocation's entry, when there is one.
#[derive(Debug, Clone, Copy, Default)]
struct PointerAt {
    in_file: u64,
    rela_entry: Option<(u64, u64)>,
}

impl PointerAt {
    /// The address the loader puts in the pointer: a relocation's addend, else the file's value.
    fn value(&self) -> Option<u64> {
        match (self.rela_entry, self.in_file) {
            (Some((_, addend)), _) => Some(addend),
            (None, 0) => None,
            (None, p) => Some(p),
        }
    }
}

impl WrapperPointers {
    /// Where each of `count` wrappers' pointers lives, in the file and in RELATIVE relocations.
    fn locate<F: Positional>(&self, file: &F, wrappers_at: u64, count: usize) -> io::Result<Vec<PointerAt>> {
        let mut found = vec![PointerAt::default(); count];
        let mut wanted = BTreeMap::new();
        for (i, slot) in found.iter_mut().enumerate() {
            let mut pointer = [0u8; 8];
            file.read_exact_at(&mut pointer, wrappers_at + i as u64 * super::kpack::WRAPPER_LEN + 8)?;
            slot.in_file = u64::from_le_bytes(pointer);
            wanted.insert(self.wrappers_addr + i as u64 * super::kpack::WRAPPER_LEN + 8, i);
        }
        let Some(relative) = self.relative_type else { return Ok(found) };
        let mut buf = vec![0u8; 24 * 4096];
        for &(offset, size) in &self.rela {
            let mut at = 0;
            while at + 24 <= size && !wanted.is_empty() {
                let n = ((size - at) / 24 * 24).min(buf.len() as u64) as usize;
                file.read_exact_at(&mut buf[..n], offset + at)?;
                for (k, entry) in buf[..n].chunks_exact(24).enumerate() {
                    let r_offset = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes"));
                    let r_type = u32::from_le_bytes(entry[8..12].try_into().expect("4 bytes"));
                    if r_type == relative
                        && let Some(i) = wanted.remove(&r_offset)
                    {
                        let addend = u64::from_le_bytes(entry[16..24].try_into().expect("8 bytes"));
                        found[i].rela_entry = Some((offset + at + k as u64 * 24, addend));
                    }
                }
                at += n as u64;
            }
        }
        Ok(found)
    }

    /// Point every wrapper at `address`: its relocation's addend, and its value in the file
    /// where the file holds one. `false` (nothing written) when a pointer's place is not known.
    fn retarget<F: Positional>(
        &self,
        file: &mut F,
        wrappers_at: u64,
        found: &[PointerAt],
        address: u64,
    ) -> io::Result<bool> {
        if found.iter().any(|p| p.value().is_none()) {
            return Ok(false);
        }
        for (i, p) in found.iter().enumerate() {
            if p.in_file != 0 {
                file.write_all_at(&address.to_le_bytes(), wrappers_at + i as u64 * super::kpack::WRAPPER_LEN + 8)?;
            }
            if let Some((entry, _)) = p.rela_entry {
                file.write_all_at(&address.to_le_bytes(), entry + 16)?;
            }
        }
        Ok(true)
    }
}

/// Each bundle's wrapper is HIP's (`HIPF`), and each bundle's space holds the marker.
fn check_marker_room<F: Positional>(
    file: &F,
    spans: &[(u64, u64)],
    wrapper_at: u64,
    marker_len: u64,
) -> Result<(), RewriteError> {
    for (i, &(at, next)) in spans.iter().enumerate() {
        let w = wrapper_at + i as u64 * super::kpack::WRAPPER_LEN;
        let mut magic = [0u8; 4];
        file.read_exact_at(&mut magic, w)?;
        if magic != super::kpack::HIPF {
            return Err(lie(w, format!("wrapper {i} does not start with HIP's magic (found {magic:02x?})")));
        }
        if marker_len > next - at {
            return Err(lie(
                at,
                format!("the kpack marker ({marker_len} bytes) does not fit the bundle's {} bytes", next - at),
            ));
        }
    }
    Ok(())
}

pub fn split_host<F: Positional>(
    file: &mut F,
    fatbins: &[(u64, u64)],
    wrappers: (u64, u64),
    pointers: &WrapperPointers,
    marker: &[u8],
    wants: &dyn Fn(&str) -> bool,
    sink: &mut BundleObjectSink<'_>,
) -> Result<SplitHost, RewriteError> {
    let mut done = SplitHost::default();
    let mut spans = Vec::new();
    let (mut addresses, mut bundle_addrs) = (Vec::new(), Vec::new());
    for &(start, end) in fatbins {
        let first = spans.len();
        // Every device entry is counted as it is met; only those a group wants are read.
        let moved = std::cell::RefCell::new(&mut done.moved);
        let wants = |e: &BundleEntry| {
            let target = bundle_target(&e.id).unwrap_or(&e.id);
            moved.borrow_mut().entry(crate::TargetId::from_code(target)).or_default().add(e.size);
            wants(target)
        };
        let found = read_bundles(&*file, start, end, &wants, &mut |i, e, bytes| sink(first + i, e, bytes))?;
        // Each bundle's space runs to the next bundle, or the end of its piece; its address
        // from the piece's.
        let piece = addresses.len();
        let piece_addr = pointers.piece_addrs.get(piece).copied();
        addresses.push(piece_addr);
        for (k, &(at, _)) in found.iter().enumerate() {
            let next = found.get(k + 1).map_or(end, |&(n, _)| n);
            spans.push((at, next));
            bundle_addrs.push(piece_addr.map(|a| a + (at - start)));
        }
    }
    let (wrapper_at, wrapper_len) = wrappers;
    let count = (wrapper_len / super::kpack::WRAPPER_LEN) as usize;
    if count != spans.len() || wrapper_len % super::kpack::WRAPPER_LEN != 0 {
        return Err(lie(
            wrapper_at,
            format!(
                "{} bundles but {count} wrappers in .hipFatBinSegment: which wrapper points where is not known",
                spans.len()
            ),
        ));
    }
    // Wrapper i must point at bundle i where the file says where it points.
    let located = pointers.locate(&*file, wrapper_at, count)?;
    for (i, pointer) in located.iter().map(PointerAt::value).enumerate() {
        if let (Some(pointer), Some(bundle)) = (pointer, bundle_addrs[i])
            && pointer != bundle
        {
            let w = wrapper_at + i as u64 * super::kpack::WRAPPER_LEN;
            return Err(lie(
                w,
                format!(
                    "wrapper {i} points at {pointer:#x}, but bundle {i} starts at {bundle:#x}: the wrappers are not in the bundles' order"
                ),
            ));
        }
        done.pointers_checked += usize::from(pointer.is_some());
    }
    check_marker_room(&*file, &spans, wrapper_at, marker.len() as u64)?;
    // Every wrapper points at the first bundle's marker where the place of every pointer is
    // known (the runtime tells the wrappers apart by their index, not by their marker): the
    // rest of the section is free as one span, which a layout change takes out of the file
    // whole. A marker in each bundle's space, where the pointers stay, leaves a span between
    // each two, of which the program headers' room lets only the largest out (onnxruntime's
    // 845 bundles left 461 MB of zeros in the file).
    let shared = match (spans.first(), bundle_addrs.first().copied().flatten()) {
        (Some(_), Some(address)) => pointers.retarget(file, wrapper_at, &located, address)?,
        _ => false,
    };
    done.shared_marker = shared;
    done.first_marker = spans.first().map(|&(at, _)| at);
    for (i, &(at, next)) in spans.iter().enumerate() {
        let w = wrapper_at + i as u64 * super::kpack::WRAPPER_LEN;
        let from = if shared && i > 0 {
            at
        } else {
            file.write_all_at(marker, at)?;
            at + marker.len() as u64
        };
        file.zero_range(from, next)?;
        done.freed.push(Freed { from, to: next, frame: None });
        file.write_all_at(&super::kpack::HIPK, w)?;
        file.write_all_at(&(i as u64).to_le_bytes(), w + 16)?;
    }
    done.bundles = spans.len();
    Ok(done)
}
