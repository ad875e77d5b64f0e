//! Writing a zip archive: members copied as their compressed bytes from another archive (with
//! `copy_file_range`, so the kernel moves them), or added from bytes compressed beforehand, then
//! the central directory. Every header field is written from values we hold, so the same members
//! give the same bytes; zip64 records appear exactly when a size, offset or count needs them.
//!
//! Why one file: the writer, and the members it writes (compressed beforehand, or
//! spilled: deflated in parallel blocks ([`super::deflate`]) with runs of original blocks
//! copied in).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use super::read::{Entry, ZipReader};
use super::{
    CENTRAL_HEADER, DosTime, END_OF_CENTRAL_DIRECTORY, FLAG_UTF8, LOCAL_HEADER, Method, ZIP64_END_OF_CENTRAL_DIRECTORY,
    ZIP64_EXTRA, ZIP64_LOCATOR,
};

/// `version made by`: Unix, spec 3.0 (the value Python's zipfile writes on Unix).
const MADE_BY_UNIX: u16 = 3 << 8 | 20;
const U32_MAX: u64 = 0xffff_ffff;

/// A member's fields, as the central directory will record them.
#[derive(Debug, Clone)]
struct Written {
    name: Box<str>,
    method: Method,
    crc32: u32,
    compressed_size: u64,
    size: u64,
    header_offset: u64,
    time: DosTime,
    made_by: u16,
    external_attr: u32,
}

/// A member compressed ahead of writing (in parallel), ready to be appended.
#[derive(Debug, Clone)]
pub struct Compressed {
    pub method: Method,
    pub crc32: u32,
    pub size: u64,
    pub data: Vec<u8>,
}

impl Compressed {
    /// Deflate `data` at zlib `level` (0 stores it).
    pub fn new(data: &[u8], level: u32) -> Compressed {
        let mut crc = libdeflater::Crc::new();
        crc.update(data);
        if level == 0 {
            return Compressed {
                method: Method::Stored,
                crc32: crc.sum(),
                size: data.len() as u64,
                data: data.to_vec(),
            };
        }
        let mut encoder = flate2::write::DeflateEncoder::new(
            Vec::with_capacity(data.len() / 3 + 64),
            flate2::Compression::new(level.min(9)),
        );
        encoder.write_all(data).expect("writing to a Vec cannot fail");
        let out = encoder.finish().expect("writing to a Vec cannot fail");
        Compressed { method: Method::Deflated, crc32: crc.sum(), size: data.len() as u64, data: out }
    }
}

/// The CRC-32 and SHA-256 of a stored member, taken from the reads of another pass over its
/// file (an archive's proof reads it nearly in order), so that the file is read once, not twice.
/// Only bytes that continue what was hashed are hashed; [`Spilled::stored_after`] reads the rest.
pub struct StoredDigest {
    /// Bytes [0, at) are hashed.
    at: u64,
    crc: libdeflater::Crc,
    sha: sha2::Sha256,
}

impl Default for StoredDigest {
    fn default() -> Self {
        StoredDigest { at: 0, crc: libdeflater::Crc::new(), sha: sha2::Sha256::default() }
    }
}

impl StoredDigest {
    /// A gap this small before a read is read to keep the hash going (a frame's length word
    /// read before the frame); a larger one waits for a later read or for the end.
    const GAP_READ: u64 = 64 << 10;

    /// Read `buf` at `at` from `file`, hashing it where it continues what was hashed.
    pub fn read_at(&mut self, file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        if at > self.at && at - self.at <= Self::GAP_READ {
            let mut gap = vec![0u8; (at - self.at) as usize];
            let from = self.at;
            file.read_exact_at(&mut gap, from)?;
            self.saw(&gap, from);
        }
        file.read_exact_at(buf, at)?;
        self.saw(buf, at);
        Ok(())
    }

    /// Bytes `buf` found at `at`: the part past what was hashed, when it starts there or before.
    fn saw(&mut self, buf: &[u8], at: u64) {
        let end = at + buf.len() as u64;
        if at <= self.at && end > self.at {
            let new = &buf[(self.at - at) as usize..];
            self.crc.update(new);
            sha2::Digest::update(&mut self.sha, new);
            self.at = end;
        }
    }
}

/// A member deflated into an unlinked file of its own, so that a large new member (a patched
/// library) leaves memory as soon as it is ready, and nothing is left behind on any exit.
#[derive(Debug)]
pub struct Spilled {
    file: File,
    pub method: Method,
    pub crc32: u32,
    pub size: u64,
    pub compressed_size: u64,
    pub sha256: [u8; 32],
}

impl Spilled {
    /// Deflate `data` at zlib `level` (0 stores it) into a file in `dir`, in blocks on every
    /// core ([`deflate_in_blocks`]).
    pub fn new(data: &[u8], level: u32, dir: &Path) -> io::Result<Spilled> {
        Spilled::from_blocks(data.len() as u64, level, dir, None, Source::Slice(data))
    }

    /// Deflate `len` bytes that `read_at` gives by position (a file this run made, such as a
    /// member thinned in place) the same way, reading a few blocks at a time: the bytes are
    /// those [`Spilled::new`] makes of the same content, but where `reuse` gives runs of the
    /// original member's deflate blocks to stand in for the content they mean.
    pub fn from_reader(
        len: u64,
        level: u32,
        dir: &Path,
        reuse: Option<&Reuse<'_>>,
        read_at: impl Fn(&mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<Spilled> {
        Spilled::from_blocks(len, level, dir, reuse, Source::Reader(&read_at))
    }

    /// A file this run made, taken as it is to be stored (not deflated): its CRC-32 and sha256
    /// are read from it, and it is not copied. Ex) a kpack archive, whose zstd frames deflate
    /// no further.
    pub fn stored(file: File) -> io::Result<Spilled> {
        Spilled::stored_after(file, StoredDigest::default())
    }

    /// [`Spilled::stored`], taking the CRC-32 and SHA-256 that `digest` gathered from the reads
    /// another pass made of `file` and reading only what it has not hashed yet.
    pub fn stored_after(file: File, mut digest: StoredDigest) -> io::Result<Spilled> {
        use std::os::unix::fs::FileExt;
        let len = file.metadata()?.len();
        let mut buf = vec![0u8; (1 << 20).min(len.saturating_sub(digest.at)) as usize];
        while digest.at < len {
            let n = buf.len().min((len - digest.at) as usize);
            let at = digest.at;
            file.read_exact_at(&mut buf[..n], at)?;
            digest.saw(&buf[..n], at);
        }
        Ok(Spilled {
            file,
            method: Method::Stored,
            crc32: digest.crc.sum(),
            size: len,
            compressed_size: len,
            sha256: sha2::Digest::finalize(digest.sha).into(),
        })
    }

    fn from_blocks(
        len: u64,
        level: u32,
        dir: &Path,
        reuse: Option<&Reuse<'_>>,
        source: Source<'_>,
    ) -> io::Result<Spilled> {
        // Content read into buffers of its own is hashed on a thread beside the reads and the
        // deflate: with the original's blocks copied, one large member's sha256 is most of its
        // writing, and would otherwise leave the other cores idle.
        let beside = matches!(source, Source::Reader(_)) && len >= HASH_BESIDE_MIN && rayon::current_num_threads() > 1;
        Spilled::hashed(len, level, dir, reuse, source, beside)
    }

    /// [`Spilled::from_blocks`], its content hashed beside when `beside` (the same result).
    fn hashed(
        len: u64,
        level: u32,
        dir: &Path,
        reuse: Option<&Reuse<'_>>,
        source: Source<'_>,
        beside: bool,
    ) -> io::Result<Spilled> {
        use sha2::Digest;
        let mut crc = libdeflater::Crc::new();
        let mut sha = sha2::Sha256::new();
        let method = if level == 0 { Method::Stored } else { Method::Deflated };
        let (file, compressed_size) = if beside {
            let digest = |bytes: &[u8]| {
                crc.update(bytes);
                sha.update(bytes);
            };
            wheelfix_base::parallel::beside(2, digest, |handoff| {
                write_pieces(len, level, dir, reuse, &source, &mut Hashing::Beside(handoff))
            })?
        } else {
            write_pieces(len, level, dir, reuse, &source, &mut Hashing::Here(&mut crc, &mut sha))?
        };
        Ok(Spilled { file, method, crc32: crc.sum(), size: len, compressed_size, sha256: sha.finalize().into() })
    }
}

/// Members at least this large, read by position, are hashed beside their deflate.
const HASH_BESIDE_MIN: u64 = 64 << 20;

/// Where a new member's CRC-32 and sha256 are computed: here, or on the thread beside.
enum Hashing<'a> {
    Here(&'a mut libdeflater::Crc, &'a mut sha2::Sha256),
    Beside(&'a mut wheelfix_base::parallel::Handoff),
}

impl Hashing<'_> {
    /// Hash `bytes[from..]`, the next content; the buffer goes back to `spare` when done with.
    fn take(&mut self, bytes: std::borrow::Cow<'_, [u8]>, from: usize, spare: &mut Vec<Vec<u8>>) {
        use sha2::Digest;
        match (self, bytes) {
            (Hashing::Beside(handoff), std::borrow::Cow::Owned(buf)) => {
                let len = buf.len();
                spare.extend(handoff.pass_range(buf, from..len));
                // Every buffer hashed by now, for the next reads to fill.
                spare.extend(handoff.spent());
            }
            (Hashing::Beside(_), std::borrow::Cow::Borrowed(_)) => unreachable!("content beside is read into buffers"),
            (Hashing::Here(crc, sha), bytes) => {
                crc.update(&bytes[from..]);
                sha.update(&bytes[from..]);
                if let std::borrow::Cow::Owned(buf) = bytes {
                    spare.push(buf);
                }
            }
        }
    }
}

/// Deflate the content in pieces (reused runs copied) into a new file in `dir`, each piece's
/// content given to `hashing` in order: the file and its length.
fn write_pieces(
    len: u64,
    level: u32,
    dir: &Path,
    reuse: Option<&Reuse<'_>>,
    source: &Source<'_>,
    hashing: &mut Hashing<'_>,
) -> io::Result<(File, u64)> {
    let mut writer = BufWriter::with_capacity(1 << 20, tempfile::tempfile_in(dir)?);
    let runs = match reuse {
        Some(reuse) if level > 0 => &reuse.runs[..],
        _ => &[],
    };
    let pieces = pieces(len, runs);
    let in_flight = 2 * rayon::current_num_threads();
    // Buffers of read content and of deflated blocks, used again window after window rather
    // than allocated (a large allocation is a fresh mapping, faulted in and zeroed, every time);
    // the same for shifting the original's bits.
    let mut spare: Vec<Vec<u8>> = SpareBuffers::take();
    let mut copy_buffers = super::blocks::CopyBuffers::default();
    let mut first = 0;
    while first < pieces.len() {
        // A few pieces to deflate in parallel, or one reused run: content is hashed in order.
        let deflating =
            pieces[first..].iter().take(in_flight).take_while(|p| matches!(p, Piece::Deflate { .. })).count();
        let window = &pieces[first..first + deflating.max(1)];
        // Each piece to deflate with the window before it (its dictionary), read in order; the
        // content of a reused run only hashed, and checked against the original's.
        let mut inputs = Vec::with_capacity(window.len());
        for piece in window {
            match *piece {
                Piece::Deflate { start, end } => {
                    let dict = if level == 0 { 0 } else { (WINDOW as u64).min(start) };
                    inputs.push(Some((source.read(start - dict, end, &mut spare)?, dict as usize)));
                }
                Piece::Reuse(run) => {
                    let reuse = reuse.expect("runs come from a reuse");
                    for (from, to, expected) in run.parts(reuse.marks) {
                        let mut part_crc = libdeflater::Crc::new();
                        let mut at = from;
                        while at < to {
                            let end = to.min(at + BLOCK as u64);
                            let bytes = source.read(at, end, &mut spare)?;
                            part_crc.update(&bytes);
                            hashing.take(bytes, 0, &mut spare);
                            at = end;
                        }
                        if part_crc.sum() != expected {
                            return Err(io::Error::other(ReuseMismatch { from, to }));
                        }
                    }
                    inputs.push(None);
                }
            }
        }
        if level == 0 {
            for (bytes, _) in inputs.iter().flatten() {
                writer.write_all(bytes)?;
            }
        } else {
            // Each piece to deflate with an output buffer of an earlier window's.
            let jobs: Vec<_> = inputs
                .iter()
                .map(|input| (input, if input.is_some() { spare.pop().unwrap_or_default() } else { Vec::new() }))
                .collect();
            let compress = |(input, out): (&Option<Input<'_>>, Vec<u8>)| {
                input.as_ref().map(|(bytes, dict)| deflate_block(bytes, *dict, level.min(9), out)).transpose()
            };
            let deflated = wheelfix_base::parallel::map_owned(jobs, compress);
            for (piece, block) in window.iter().zip(deflated) {
                match (piece, block?) {
                    (_, Some(block)) => {
                        writer.write_all(&block)?;
                        spare.push(block);
                    }
                    (Piece::Reuse(run), None) => {
                        let reuse = reuse.expect("runs come from a reuse");
                        super::blocks::copy_run(run, reuse.read_original, &mut writer, &mut copy_buffers)?;
                    }
                    (Piece::Deflate { .. }, None) => unreachable!("every piece to deflate is deflated"),
                }
            }
        }
        for (bytes, dict) in inputs.into_iter().flatten() {
            hashing.take(bytes, dict, &mut spare);
        }
        first += window.len();
    }
    if level > 0 {
        // An empty final block with fixed codes: the stream's end.
        writer.write_all(&[0x03, 0x00])?;
    }
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    let compressed_size = file.metadata()?.len();
    SpareBuffers::give_back(spare);
    Ok((file, compressed_size))
}

/// Buffers a write has finished with, for the next member's write: each write would otherwise
/// fault in its few MiB of fresh buffers again, page by page (a thinned wheel of seven
/// libraries: 40,000 page faults). Bounded: what is kept was in flight a moment before.
struct SpareBuffers;

static SPARE: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// The most bytes of buffers kept between writes.
const SPARE_KEPT: usize = 32 << 20;

impl SpareBuffers {
    fn take() -> Vec<Vec<u8>> {
        std::mem::take(&mut *SPARE.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn give_back(buffers: Vec<Vec<u8>>) {
        let mut kept = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        let mut held: usize = kept.iter().map(Vec::capacity).sum();
        for buf in buffers {
            if held + buf.capacity() <= SPARE_KEPT {
                held += buf.capacity();
                kept.push(buf);
            }
        }
    }
}

/// A piece's content read with the window before it, and that window's length.
type Input<'a> = (std::borrow::Cow<'a, [u8]>, usize);

/// Where a new member's content comes from.
enum Source<'a> {
    /// Held whole.
    Slice(&'a [u8]),
    /// Read by position.
    Reader(&'a dyn Fn(&mut [u8], u64) -> io::Result<()>),
}

impl<'a> Source<'a> {
    /// The content [start, end), read into a spare buffer when it is not held.
    fn read(&self, start: u64, end: u64, spare: &mut Vec<Vec<u8>>) -> io::Result<std::borrow::Cow<'a, [u8]>> {
        match self {
            Source::Slice(data) => Ok(std::borrow::Cow::Borrowed(&data[start as usize..end as usize])),
            Source::Reader(read_at) => {
                let len = (end - start) as usize;
                // The smallest spare buffer that holds it, else the largest (grown).
                let fits =
                    spare.iter().enumerate().filter(|(_, b)| b.capacity() >= len).min_by_key(|(_, b)| b.capacity());
                let pick = fits.or_else(|| spare.iter().enumerate().max_by_key(|(_, b)| b.capacity())).map(|(i, _)| i);
                let mut buf = pick.map(|i| spare.swap_remove(i)).unwrap_or_default();
                buf.resize(len, 0);
                read_at(&mut buf, start)?;
                Ok(std::borrow::Cow::Owned(buf))
            }
        }
    }
}

/// Runs of an original member's deflate blocks that stand in a new stream for the content they
/// mean ([`super::blocks::reusable_runs`]), the marks they were found from, and the original's
/// compressed bytes by offset.
pub struct Reuse<'a> {
    pub runs: Vec<super::blocks::Run>,
    pub marks: &'a super::blocks::BlockMarks,
    pub read_original: &'a dyn Fn(&mut [u8], u64) -> io::Result<()>,
}

/// The new content where a run of original blocks was to stand is not the content they mean:
/// the runs were found wrongly, and nothing was written with them.
#[derive(Debug, thiserror::Error)]
#[error("the original deflate blocks for bytes {from}..{to} would not mean the new content")]
pub struct ReuseMismatch {
    pub from: u64,
    pub to: u64,
}

/// A part of a new member's content, as its stream is made.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// Deflated anew, on any core.
    Deflate { start: u64, end: u64 },
    /// The original's blocks, copied.
    Reuse(super::blocks::Run),
}

/// The content [0, len) in pieces: the runs, and between them pieces to deflate that end at
/// multiples of [`BLOCK`] (so that the bytes depend on the content alone, not the core count).
fn pieces(len: u64, runs: &[super::blocks::Run]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut at = 0;
    let end_run = super::blocks::Run { from: len, to: len, start_bit: 0, end_bit: 0, marks: (0, 0) };
    for run in runs.iter().chain([&end_run]) {
        // Runs come sorted and apart; one that is not is deflated instead.
        if run.from < at || run.to > len {
            continue;
        }
        while at < run.from {
            let end = run.from.min((at / BLOCK as u64 + 1) * BLOCK as u64);
            pieces.push(Piece::Deflate { start: at, end });
            at = end;
        }
        if run.to > run.from {
            pieces.push(Piece::Reuse(*run));
            at = run.to;
        }
    }
    pieces
}

/// Uncompressed bytes per block of [`Spilled`]'s deflate.
const BLOCK: usize = 4 << 20;
use super::deflate::{WINDOW, deflate_block};

pub struct ZipWriter {
    out: BufWriter<File>,
    offset: u64,
    written: Vec<Written>,
    /// Where the disk writes started so far end ([`ZipWriter::start_writeback`]).
    written_back: u64,
}

/// Disk writes of what is written are started every this many bytes.
const WRITEBACK_STEP: u64 = 16 << 20;

impl ZipWriter {
    pub fn new(file: File) -> ZipWriter {
        ZipWriter { out: BufWriter::with_capacity(1 << 20, file), offset: 0, written: Vec::new(), written_back: 0 }
    }

    /// Start writing what is written to disk, without waiting, once enough has piled up: the
    /// `fsync` before the output is renamed into place then waits for the last part only, not
    /// for the whole wheel.
    fn start_writeback(&mut self) -> io::Result<()> {
        if self.offset - self.written_back < WRITEBACK_STEP {
            return Ok(());
        }
        self.out.flush()?;
        #[cfg(target_os = "linux")]
        // SAFETY: the descriptor is the open output file; the call only starts writeback of a
        // range of it and fails harmlessly (ignored) where it is not supported.
        unsafe {
            libc::sync_file_range(
                self.out.get_ref().as_raw_fd(),
                self.written_back as libc::off64_t,
                (self.offset - self.written_back) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
        self.written_back = self.offset;
        Ok(())
    }

    /// How many members are written.
    pub fn len(&self) -> usize {
        self.written.len()
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// Keep only the first `members` members written: the file is cut where the next began.
    pub fn truncate(&mut self, members: usize) -> io::Result<()> {
        let Some(next) = self.written.get(members) else { return Ok(()) };
        let offset = next.header_offset;
        self.out.flush()?;
        self.out.get_ref().set_len(offset)?;
        std::io::Seek::seek(self.out.get_mut(), io::SeekFrom::Start(offset))?;
        self.written.truncate(members);
        self.offset = offset;
        self.written_back = self.written_back.min(offset);
        Ok(())
    }

    /// Copy `entry` of `source` as its compressed bytes, under `name`. Mode and time stay.
    pub fn copy(&mut self, source: &ZipReader, entry: &Entry, name: &str) -> io::Result<()> {
        let data_offset = source.data_offset(entry).map_err(io::Error::other)?;
        let w = Written {
            name: name.into(),
            method: entry.method,
            crc32: entry.crc32,
            compressed_size: entry.compressed_size,
            size: entry.size,
            header_offset: self.offset,
            time: DosTime { time: entry.dos_time, date: entry.dos_date },
            made_by: entry.made_by,
            external_attr: entry.external_attr,
        };
        self.local_header(&w)?;
        self.out.flush()?;
        copy_range(source.file(), data_offset, self.out.get_mut(), entry.compressed_size)?;
        self.offset += entry.compressed_size;
        self.written.push(w);
        self.start_writeback()
    }

    /// Append a member compressed beforehand.
    pub fn add(&mut self, name: &str, mode: u32, time: DosTime, member: &Compressed) -> io::Result<()> {
        let (lengths, crc32) = ((member.data.len() as u64, member.size), member.crc32);
        let w = self.new_member(name, mode, time, member.method, crc32, lengths);
        self.local_header(&w)?;
        self.out.write_all(&member.data)?;
        self.offset += member.data.len() as u64;
        self.written.push(w);
        self.start_writeback()
    }

    /// Append a member deflated into its own file beforehand.
    pub fn add_spilled(&mut self, name: &str, mode: u32, time: DosTime, member: &Spilled) -> io::Result<()> {
        let (lengths, crc32) = ((member.compressed_size, member.size), member.crc32);
        let w = self.new_member(name, mode, time, member.method, crc32, lengths);
        self.local_header(&w)?;
        self.out.flush()?;
        copy_range(&member.file, 0, self.out.get_mut(), member.compressed_size)?;
        self.offset += member.compressed_size;
        self.written.push(w);
        self.start_writeback()
    }

    /// The fields of a member written anew at the current offset: a Unix regular file.
    /// `lengths`: (compressed, uncompressed).
    fn new_member(
        &self,
        name: &str,
        mode: u32,
        time: DosTime,
        method: Method,
        crc32: u32,
        lengths: (u64, u64),
    ) -> Written {
        Written {
            name: name.into(),
            method,
            crc32,
            compressed_size: lengths.0,
            size: lengths.1,
            header_offset: self.offset,
            time,
            made_by: MADE_BY_UNIX,
            // A name ending in `/` is a directory (`S_IFDIR`, and MS-DOS's directory bit).
            external_attr: if name.ends_with('/') {
                (0o040000 | (mode & 0o7777)) << 16 | 0x10
            } else {
                (0o100000 | (mode & 0o7777)) << 16
            },
        }
    }

    fn local_header(&mut self, w: &Written) -> io::Result<()> {
        let zip64 = w.size >= U32_MAX || w.compressed_size >= U32_MAX;
        let mut h = Vec::with_capacity(30 + w.name.len() + 20);
        put32(&mut h, LOCAL_HEADER);
        put16(&mut h, if zip64 { 45 } else { 20 });
        put16(&mut h, flags(&w.name));
        put16(&mut h, w.method.code());
        put16(&mut h, w.time.time);
        put16(&mut h, w.time.date);
        put32(&mut h, w.crc32);
        put32(&mut h, if zip64 { U32_MAX as u32 } else { w.compressed_size as u32 });
        put32(&mut h, if zip64 { U32_MAX as u32 } else { w.size as u32 });
        put16(&mut h, w.name.len() as u16);
        put16(&mut h, if zip64 { 20 } else { 0 });
        h.extend_from_slice(w.name.as_bytes());
        if zip64 {
            put16(&mut h, ZIP64_EXTRA);
            put16(&mut h, 16);
            put64(&mut h, w.size);
            put64(&mut h, w.compressed_size);
        }
        self.out.write_all(&h)?;
        self.offset += h.len() as u64;
        Ok(())
    }

    /// Write the central directory and return the finished file (not yet synced).
    pub fn finish(mut self) -> io::Result<File> {
        let start = self.offset;
        for w in &self.written {
            let (big_size, big_compressed, big_offset) =
                (w.size >= U32_MAX, w.compressed_size >= U32_MAX, w.header_offset >= U32_MAX);
            let mut extra = Vec::new();
            if big_size || big_compressed || big_offset {
                let mut body = Vec::new();
                if big_size {
                    put64(&mut body, w.size);
                }
                if big_compressed {
                    put64(&mut body, w.compressed_size);
                }
                if big_offset {
                    put64(&mut body, w.header_offset);
                }
                put16(&mut extra, ZIP64_EXTRA);
                put16(&mut extra, body.len() as u16);
                extra.extend(body);
            }
            let mut h = Vec::with_capacity(46 + w.name.len() + extra.len());
            put32(&mut h, CENTRAL_HEADER);
            put16(&mut h, w.made_by);
            put16(&mut h, if extra.is_empty() { 20 } else { 45 });
            put16(&mut h, flags(&w.name));
            put16(&mut h, w.method.code());
            put16(&mut h, w.time.time);
            put16(&mut h, w.time.date);
            put32(&mut h, w.crc32);
            put32(&mut h, w.compressed_size.min(U32_MAX) as u32);
            put32(&mut h, w.size.min(U32_MAX) as u32);
            put16(&mut h, w.name.len() as u16);
            put16(&mut h, extra.len() as u16);
            put16(&mut h, 0); // comment
            put16(&mut h, 0); // disk
            put16(&mut h, 0); // internal attributes
            put32(&mut h, w.external_attr);
            put32(&mut h, w.header_offset.min(U32_MAX) as u32);
            h.extend_from_slice(w.name.as_bytes());
            h.extend(extra);
            self.out.write_all(&h)?;
            self.offset += h.len() as u64;
        }
        let size = self.offset - start;
        let count = self.written.len() as u64;
        let mut end = Vec::new();
        if count >= 0xffff || size >= U32_MAX || start >= U32_MAX {
            let record_at = self.offset;
            put32(&mut end, ZIP64_END_OF_CENTRAL_DIRECTORY);
            put64(&mut end, 44);
            put16(&mut end, MADE_BY_UNIX.max(45));
            put16(&mut end, 45);
            put32(&mut end, 0);
            put32(&mut end, 0);
            put64(&mut end, count);
            put64(&mut end, count);
            put64(&mut end, size);
            put64(&mut end, start);
            put32(&mut end, ZIP64_LOCATOR);
            put32(&mut end, 0);
            put64(&mut end, record_at);
            put32(&mut end, 1);
        }
        put32(&mut end, END_OF_CENTRAL_DIRECTORY);
        put16(&mut end, 0);
        put16(&mut end, 0);
        put16(&mut end, count.min(0xffff) as u16);
        put16(&mut end, count.min(0xffff) as u16);
        put32(&mut end, size.min(U32_MAX) as u32);
        put32(&mut end, start.min(U32_MAX) as u32);
        put16(&mut end, 0);
        self.out.write_all(&end)?;
        self.out.flush()?;
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

fn flags(name: &str) -> u16 {
    if name.is_ascii() { 0 } else { FLAG_UTF8 }
}

/// Copy `len` bytes at `offset` of `from` to the current position of `to`: in the kernel
/// when it can (`copy_file_range`), else through a buffer.
fn copy_range(from: &File, offset: u64, to: &mut File, len: u64) -> io::Result<()> {
    let mut off_in = offset as libc::loff_t;
    let mut left = len;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        // SAFETY: both descriptors are open files owned by the callers for the whole call;
        // the kernel reads from `from` at `off_in` and writes at `to`'s file position.
        let n = unsafe {
            libc::copy_file_range(from.as_raw_fd(), &mut off_in, to.as_raw_fd(), std::ptr::null_mut(), chunk, 0)
        };
        if n > 0 {
            left -= n as u64;
            continue;
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the input ended early (truncated while read?)"));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Not supported between these files (another file system, old kernel): copy by hand.
            Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP | libc::EPERM) => {
                return copy_by_buffer(from, off_in as u64, to, left);
            }
            _ => return Err(err),
        }
    }
    Ok(())
}

fn copy_by_buffer(from: &File, mut offset: u64, to: &mut File, mut left: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (1 << 20).min(left as usize)];
    while left > 0 {
        let n = (left as usize).min(buf.len());
        from.read_exact_at(&mut buf[..n], offset)?;
        to.write_all(&buf[..n])?;
        offset += n as u64;
        left -= n as u64;
    }
    Ok(())
}

fn put16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_deflated_in_parallel_make_one_stream() {
        use std::io::{Read, Seek};
        // Compressible, not trivial: words from a small vocabulary, across several blocks.
        let mut state = 7u64;
        let mut data = Vec::new();
        while data.len() < 3 * BLOCK + 12345 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            data.extend_from_slice([&b"alpha "[..], b"beta ", b"gamma ", b"delta\n"][(state >> 62) as usize]);
        }
        let dir = tempfile::tempdir().unwrap();
        let spilled = Spilled::new(&data, 6, dir.path()).unwrap();
        assert_eq!(spilled.size, data.len() as u64);
        let mut compressed = Vec::new();
        let mut file = &spilled.file;
        file.rewind().unwrap();
        file.read_to_end(&mut compressed).unwrap();
        assert_eq!(compressed.len() as u64, spilled.compressed_size);
        assert!(compressed.len() < data.len() / 3, "still compresses: {}", compressed.len());
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&compressed[..]).read_to_end(&mut back).unwrap();
        assert!(back == data, "round trip");
        let mut crc = libdeflater::Crc::new();
        crc.update(&data);
        assert_eq!(spilled.crc32, crc.sum());
        // The same bytes every time.
        let again = Spilled::new(&data, 6, dir.path()).unwrap();
        let mut second = Vec::new();
        let mut file = &again.file;
        file.rewind().unwrap();
        file.read_to_end(&mut second).unwrap();
        assert!(second == compressed);
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "spill files are unlinked");
    }

    #[test]
    fn blocks_of_zeros_among_data_round_trip() {
        use std::io::{Read, Seek};
        let mut data = Vec::new();
        for i in 0..(3 * BLOCK + 777) {
            data.push((i % 251) as u8 ^ (i / 4096) as u8);
        }
        // Whole zero blocks, a zero run across a block boundary, and zeros at the end.
        data[BLOCK..2 * BLOCK].fill(0);
        data[2 * BLOCK + BLOCK / 2..3 * BLOCK + 100].fill(0);
        let n = data.len();
        data[n - 50..].fill(0);
        for level in [0, 1, 6, 9] {
            let dir = tempfile::tempdir().unwrap();
            let spilled = Spilled::new(&data, level, dir.path()).unwrap();
            let mut compressed = Vec::new();
            let mut file = &spilled.file;
            file.rewind().unwrap();
            file.read_to_end(&mut compressed).unwrap();
            let back = if level == 0 {
                compressed
            } else {
                let mut back = Vec::new();
                flate2::read::DeflateDecoder::new(&compressed[..]).read_to_end(&mut back).unwrap();
                back
            };
            assert!(back == data, "level {level}: round trip");
            let from_reader = Spilled::from_reader(n as u64, level, dir.path(), None, |buf, at| {
                buf.copy_from_slice(&data[at as usize..at as usize + buf.len()]);
                Ok(())
            })
            .unwrap();
            assert_eq!((from_reader.sha256, from_reader.compressed_size), (spilled.sha256, spilled.compressed_size));
        }
    }

    #[test]
    fn reused_blocks_stand_for_the_content_and_a_wrong_origin_is_caught() {
        use crate::blocks::{self, SameAs};
        use std::io::{Read, Seek};
        let original = blocks::tests::content(9 << 20, 21);
        let compressed = blocks::tests::deflate(&original, 6);
        let (_, marks) = blocks::tests::inflate_marking(&compressed, original.len(), 1 << 20, 1 << 20);
        let mut new = original.clone();
        new[5_000_000..5_100_000].fill(0);
        new[7_000_000..7_000_100].copy_from_slice(&[9; 100]);
        let len = new.len() as u64;
        let read_original = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&compressed[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let read_new = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&new[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let spill = |same: &[SameAs]| {
            let runs = blocks::reusable_runs(&marks, same, 64 << 10);
            let reuse = Reuse { runs, marks: &marks, read_original: &read_original };
            let dir = tempfile::tempdir().unwrap();
            Spilled::from_reader(len, 6, dir.path(), Some(&reuse), read_new)
        };
        let truly = [
            SameAs { from: 0, to: 5_000_000, original: 0 },
            SameAs { from: 5_100_000, to: 7_000_000, original: 5_100_000 },
            SameAs { from: 7_000_100, to: len, original: 7_000_100 },
        ];
        let spilled = spill(&truly).unwrap();
        let mut stream = Vec::new();
        let mut file = &spilled.file;
        file.rewind().unwrap();
        file.read_to_end(&mut stream).unwrap();
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&stream[..]).read_to_end(&mut back).unwrap();
        assert!(back == new, "the stream means the new content");
        let plain = Spilled::new(&new, 6, tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!((spilled.crc32, spilled.sha256, spilled.size), (plain.crc32, plain.sha256, plain.size));
        // Hashed beside: the same member.
        let runs = blocks::reusable_runs(&marks, &truly, 64 << 10);
        let reuse = Reuse { runs, marks: &marks, read_original: &read_original };
        let dir = tempfile::tempdir().unwrap();
        let beside = Spilled::hashed(len, 6, dir.path(), Some(&reuse), Source::Reader(&read_new), true).unwrap();
        let mut again = Vec::new();
        let mut file = &beside.file;
        file.rewind().unwrap();
        file.read_to_end(&mut again).unwrap();
        assert!(again == stream && beside.sha256 == spilled.sha256 && beside.crc32 == spilled.crc32);
        // Most of it is the original's bits: about as small as the original.
        assert!(spilled.compressed_size < compressed.len() as u64 + 100_000, "{}", spilled.compressed_size);
        // Claiming the whole content is the original's: the changed bytes are caught.
        let wrong = [SameAs { from: 0, to: len, original: 0 }];
        let e = spill(&wrong).unwrap_err();
        assert!(e.get_ref().is_some_and(|inner| inner.is::<ReuseMismatch>()), "{e}");
    }

    #[test]
    fn content_hashed_beside_gives_the_same_member() {
        use std::io::{Read, Seek};
        let data = super::super::blocks::tests::content(3 * BLOCK + 999, 41);
        let read = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&data[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let bytes = |s: &Spilled| {
            let mut out = Vec::new();
            let mut file = &s.file;
            file.rewind().unwrap();
            file.read_to_end(&mut out).unwrap();
            out
        };
        let dir = tempfile::tempdir().unwrap();
        for level in [0, 6] {
            let len = data.len() as u64;
            let here = Spilled::hashed(len, level, dir.path(), None, Source::Reader(&read), false).unwrap();
            let beside = Spilled::hashed(len, level, dir.path(), None, Source::Reader(&read), true).unwrap();
            assert_eq!((here.crc32, here.sha256, here.size), (beside.crc32, beside.sha256, beside.size));
            assert!(bytes(&here) == bytes(&beside), "level {level}");
            let plain = Spilled::new(&data, level, dir.path()).unwrap();
            assert_eq!(plain.sha256, beside.sha256);
        }
    }
}
