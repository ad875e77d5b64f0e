//! The blocks of a member's deflate stream, and copying them into a new stream.
//!
//! A deflate block means the same bytes wherever it stands, given the same 32 KiB of content
//! before it: its back references reach no further (RFC 1951 §3.2.5). So where a new member's
//! content equals the original's over a run of blocks and the 32 KiB before them, the
//! original's bits for those blocks can stand in the new stream as they are, with no deflate:
//! `thin` keeps most of a fat library (its host code, the code objects it keeps) that way.
//!
//! [`MarkingInflate`] inflates as any inflater does and notes where blocks start (bit offset in
//! the compressed bytes, offset in the content), a mark at least every [`MARK_SPACING`] bytes of
//! content so that the list stays a small fraction of the member. [`reusable_runs`] finds the
//! runs of blocks whose content and window are unchanged, and [`copy_run`] writes one, shifted
//! to start on a byte boundary and followed by an empty stored block that brings the stream
//! back to one. A stored block cannot be moved to another bit position (its length field is
//! byte aligned) and the last block ends its stream, so no run holds either.
//!
//! Why one file: marking block starts while inflating, finding reusable runs and copying them are one
//! format's three views of the same bit positions, tested together.

use std::io::{self, Write};

use libz_rs_sys as z;

/// A mark is noted at a block start at least this many content bytes after the previous mark.
pub const MARK_SPACING: u64 = 32 << 10;
/// The deflate window: how far back a block's references reach.
pub const WINDOW: u64 = 32 << 10;

/// A block start: its bit in the compressed bytes and its byte in the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub content: u64,
    pub bit: u64,
    /// The CRC-32 of the content from this mark to the next (or to the end): a writer that
    /// copies these blocks checks that the content it means them for is this content.
    pub crc: u32,
    /// Whether the blocks from this mark to the next can stand at another bit position (no
    /// stored block among them, nor the stream's last).
    pub movable: bool,
}

/// Where the blocks of one member's deflate stream start, in content order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockMarks(Vec<Mark>);

impl BlockMarks {
    pub fn marks(&self) -> &[Mark] {
        &self.0
    }
}

/// A raw inflater (zlib-rs, through its zlib API) that notes block starts as it goes: it stops
/// at every block boundary (`Z_BLOCK`), which costs one call per block of tens of KB.
pub struct MarkingInflate {
    /// Boxed: zlib's state points back at its stream, which must not move.
    stream: Box<z::z_stream>,
    marks: Vec<Mark>,
    /// The last compressed bytes consumed, ending at `total_in` (a block header may begin
    /// up to 8 bytes before it: the inflater reads ahead into its bit buffer).
    recent: [u8; RECENT],
    /// A block start whose three header bits had not arrived yet, and the mark it belongs to.
    pending: Option<(u64, usize)>,
    /// The bit of the last block start noted (a stop is seen once even if inflate is called
    /// again there).
    last_start: Option<u64>,
    /// The CRC-32 of the content since the last mark.
    crc: libdeflater::Crc,
    /// Content ranges where no mark is wanted (what a copy leaves out): inflated without
    /// stopping at each block, which costs a call per block (a quarter of the inflate, for blocks
    /// of 16 KB).
    quiet: Vec<(u64, u64)>,
    /// Blocks have passed, in a quiet range, whose type was not read: their mark's run is
    /// not movable.
    unread_blocks: bool,
    ended: bool,
}

const RECENT: usize = 16;

impl MarkingInflate {
    pub fn new() -> io::Result<MarkingInflate> {
        let mut stream = Box::new(z::z_stream::default());
        // SAFETY: the stream is a default (zeroed, Rust allocator) z_stream on the heap that
        // outlives every call; the version and size are those of the linked library.
        let status =
            unsafe { z::inflateInit2_(&mut *stream, -15, z::zlibVersion(), std::mem::size_of::<z::z_stream>() as i32) };
        if status != z::Z_OK {
            return Err(io::Error::other(ZlibFailed::Call { what: "start an inflater", status }));
        }
        Ok(MarkingInflate {
            stream,
            marks: vec![Mark { content: 0, bit: 0, crc: 0, movable: true }],
            recent: [0; RECENT],
            pending: Some((0, 0)),
            last_start: Some(0),
            crc: libdeflater::Crc::new(),
            quiet: Vec::new(),
            unread_blocks: false,
            ended: false,
        })
    }

    /// Content ranges, sorted, where no mark is wanted; the ranges given before are replaced.
    pub fn set_quiet(&mut self, ranges: Vec<(u64, u64)>) {
        self.quiet = ranges;
    }

    /// The end of the quiet range the next output byte lies in.
    fn quiet_until(&self) -> Option<u64> {
        let at = self.total_out();
        let i = self.quiet.partition_point(|&(_, end)| end <= at);
        self.quiet.get(i).filter(|&&(start, _)| start <= at).map(|&(_, end)| end)
    }

    pub fn total_in(&self) -> u64 {
        self.stream.total_in
    }

    pub fn total_out(&self) -> u64 {
        self.stream.total_out
    }

    /// Inflate what `input` gives into `output`: (bytes consumed, bytes produced, whether the
    /// stream ended). Neither consuming nor producing means the input ended early.
    pub fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> Result<(usize, usize, bool), CorruptStream> {
        let (in_start, out_start) = (self.total_in(), self.total_out());
        let mut consumed = 0usize;
        let mut produced = 0usize;
        self.classify_pending(input);
        // Called even with no input or output room left: the inflater may hold bits, or a copy,
        // still to give, and the last block's end needs no room.
        while !self.ended {
            let rest_in = &input[consumed..];
            let mut rest_out = &mut output[produced..];
            // In a quiet range, on to its end without stopping at blocks.
            let quiet = self.quiet_until().filter(|_| !rest_out.is_empty());
            if let Some(end) = quiet {
                let room = (end - self.total_out()).min(rest_out.len() as u64) as usize;
                rest_out = &mut rest_out[..room];
                self.unread_blocks = true;
            }
            self.stream.next_in = rest_in.as_ptr();
            self.stream.avail_in = rest_in.len().min(u32::MAX as usize) as u32;
            self.stream.next_out = rest_out.as_mut_ptr();
            self.stream.avail_out = rest_out.len().min(u32::MAX as usize) as u32;
            let flush = if quiet.is_some() { z::Z_NO_FLUSH } else { z::Z_BLOCK };
            // SAFETY: next_in/next_out point into live slices of the lengths given; the stream
            // was initialised by inflateInit2_ and is not moved.
            let status = unsafe { z::inflate(&mut *self.stream, flush) };
            let (now_in, now_out) = ((self.total_in() - in_start) as usize, (self.total_out() - out_start) as usize);
            self.remember(&input[consumed..now_in]);
            // A call stops at every block start or gives no mark, so what it gave belongs to the
            // last mark.
            self.crc.update(&output[produced..now_out]);
            let progress = now_in > consumed || now_out > produced;
            consumed = now_in;
            produced = now_out;
            match status {
                z::Z_STREAM_END => {
                    self.ended = true;
                    let last = self.marks.last_mut().expect("the first mark is made at the start");
                    last.crc = self.crc.sum();
                    last.movable &= !self.unread_blocks;
                }
                z::Z_OK | z::Z_BUF_ERROR => {}
                _ => return Err(CorruptStream(self.message(status))),
            }
            if !self.ended && self.stream.data_type & 128 != 0 {
                self.block_start(&input[consumed..]);
            }
            if !progress && !self.ended {
                break;
            }
        }
        self.stream.avail_in = 0;
        Ok((consumed, produced, self.ended))
    }

    /// The marks noted, once the stream has ended.
    pub fn take_marks(&mut self) -> Option<BlockMarks> {
        self.ended.then(|| BlockMarks(std::mem::take(&mut self.marks)))
    }

    /// The inflater stopped at a block boundary (mode `TYPE`): note it, and the next block's type.
    fn block_start(&mut self, unconsumed: &[u8]) {
        let data_type = self.stream.data_type;
        // The inflater holds up to 63 bits it has read but not used.
        let bit = self.total_in() * 8 - (data_type & 63) as u64;
        if self.last_start == Some(bit) {
            return;
        }
        self.last_start = Some(bit);
        if data_type & 64 != 0 {
            // The block that just ended was the last: this is the stream's end, no block starts.
            return;
        }
        let content = self.total_out();
        let last = self.marks.last_mut().expect("the first mark is made at the start");
        if std::mem::take(&mut self.unread_blocks) {
            last.movable = false;
        }
        if content - last.content >= MARK_SPACING {
            last.crc = std::mem::replace(&mut self.crc, libdeflater::Crc::new()).sum();
            self.marks.push(Mark { content, bit, crc: 0, movable: true });
        }
        self.pending = Some((bit, self.marks.len() - 1));
        self.classify_pending(unconsumed);
    }

    /// Read the pending block's header bits (BFINAL, BTYPE) once they have arrived: a stored or
    /// final block makes its mark's run immovable.
    fn classify_pending(&mut self, unconsumed: &[u8]) {
        let Some((bit, mark)) = self.pending else { return };
        let total_in = self.total_in();
        let byte_at = |at: u64| -> Option<u8> {
            if at < total_in {
                let back = (total_in - at) as usize;
                (back <= RECENT).then(|| self.recent[RECENT - back])
            } else {
                unconsumed.get((at - total_in) as usize).copied()
            }
        };
        let (Some(lo), Some(hi)) = (byte_at(bit / 8), byte_at((bit + 2) / 8)) else { return };
        let word = u16::from(lo) | u16::from(hi) << 8;
        let header = (word >> (bit % 8)) & 0b111;
        let (last, kind) = (header & 1, header >> 1);
        if last == 1 || kind == 0 {
            self.marks[mark].movable = false;
        }
        self.pending = None;
    }

    fn remember(&mut self, took: &[u8]) {
        if took.len() >= RECENT {
            self.recent.copy_from_slice(&took[took.len() - RECENT..]);
        } else if !took.is_empty() {
            self.recent.copy_within(took.len().., 0);
            self.recent[RECENT - took.len()..].copy_from_slice(took);
        }
    }

    fn message(&self, status: i32) -> String {
        if self.stream.msg.is_null() {
            return format!("zlib status {status}");
        }
        // SAFETY: zlib-rs sets msg to a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(self.stream.msg) }.to_string_lossy().into_owned()
    }
}

/// zlib refusing a call, with its status (carried in the `io::Error` the caller returns): a
/// bug or exhausted memory, not bad input, which is [`CorruptStream`].
#[derive(Debug, thiserror::Error)]
pub enum ZlibFailed {
    #[error("cannot {what} (zlib status {status})")]
    Call { what: &'static str, status: i32 },
    #[error("cannot inflate from a block start: {what} ({status})")]
    FromBlockStart { what: &'static str, status: i32 },
}

/// A DEFLATE stream the inflater refuses, with zlib's reason. Ex) `invalid distance too far back`
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CorruptStream(pub String);

impl Drop for MarkingInflate {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by inflateInit2_ and is ended once.
        unsafe { z::inflateEnd(&mut *self.stream) };
    }
}

// SAFETY: the stream's pointers are set for each call and cleared of meaning after it; its
// state belongs to this value alone.
unsafe impl Send for MarkingInflate {}

/// Inflate the original's content from `mark` until `until`, giving it to `out` with its content
/// offset, a chunk at a time: `window` is the content just before the mark (up to 32 KiB; the
/// back references of its first blocks read it), `read_original` gives the compressed bytes by
/// offset (`compressed_len` of them). Random access into a stream that was inflated once (how
/// zlib's `zran` reads one).
pub fn inflate_from(
    mark: &Mark,
    window: &[u8],
    read_original: &dyn Fn(&mut [u8], u64) -> io::Result<()>,
    compressed_len: u64,
    until: u64,
    out: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let fail = |what: &'static str, status: i32| io::Error::other(ZlibFailed::FromBlockStart { what, status });
    let mut stream = Box::new(z::z_stream::default());
    // SAFETY: as in MarkingInflate::new.
    let status =
        unsafe { z::inflateInit2_(&mut *stream, -15, z::zlibVersion(), std::mem::size_of::<z::z_stream>() as i32) };
    if status != z::Z_OK {
        return Err(fail("init", status));
    }
    let result = (|| {
        let mut at_byte = mark.bit / 8;
        let shift = (mark.bit % 8) as i32;
        if shift > 0 {
            let mut first = [0u8];
            read_original(&mut first, at_byte)?;
            // SAFETY: the stream was initialised above and is not moved.
            let status = unsafe { z::inflatePrime(&mut *stream, 8 - shift, i32::from(first[0] >> shift)) };
            if status != z::Z_OK {
                return Err(fail("prime", status));
            }
            at_byte += 1;
        }
        let window = &window[window.len().saturating_sub(WINDOW as usize)..];
        if !window.is_empty() {
            // SAFETY: the dictionary is a live slice of the length given.
            let status = unsafe { z::inflateSetDictionary(&mut *stream, window.as_ptr(), window.len() as u32) };
            if status != z::Z_OK {
                return Err(fail("window", status));
            }
        }
        let mut input = vec![0u8; 256 << 10];
        let mut output = vec![0u8; 1 << 20];
        let mut content = mark.content;
        let (mut input_at, mut input_len) = (0usize, 0usize);
        while content < until {
            if input_at == input_len {
                input_len = (input.len() as u64).min(compressed_len.saturating_sub(at_byte)) as usize;
                if input_len == 0 {
                    return Err(io::Error::other("the stream ends before the range"));
                }
                read_original(&mut input[..input_len], at_byte)?;
                at_byte += input_len as u64;
                input_at = 0;
            }
            let want = (output.len() as u64).min(until - content) as usize;
            stream.next_in = input[input_at..input_len].as_ptr();
            stream.avail_in = (input_len - input_at) as u32;
            stream.next_out = output.as_mut_ptr();
            stream.avail_out = want as u32;
            let before_in = stream.total_in;
            let before_out = stream.total_out;
            // SAFETY: next_in/next_out point into live buffers of the lengths given.
            let status = unsafe { z::inflate(&mut *stream, z::Z_NO_FLUSH) };
            input_at += (stream.total_in - before_in) as usize;
            let produced = (stream.total_out - before_out) as usize;
            out(content, &output[..produced])?;
            content += produced as u64;
            match status {
                z::Z_OK => {}
                z::Z_STREAM_END if content >= until => {}
                z::Z_BUF_ERROR if produced > 0 || input_at == input_len => {}
                _ => return Err(fail("data", status)),
            }
            if status == z::Z_STREAM_END && content < until {
                return Err(io::Error::other("the stream ends before the range"));
            }
        }
        Ok(())
    })();
    // SAFETY: the stream was initialised above and is ended once.
    unsafe { z::inflateEnd(&mut *stream) };
    result
}

/// New content equal to the original's: [from, to) of the new is the original's from `original`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SameAs {
    pub from: u64,
    pub to: u64,
    pub original: u64,
}

/// A run of original blocks that stands in the new stream for content [from, to): the
/// compressed bits [start_bit, end_bit) of the original, its marks `marks.0..marks.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub from: u64,
    pub to: u64,
    pub start_bit: u64,
    pub end_bit: u64,
    pub marks: (usize, usize),
}

impl Run {
    /// The parts of the run's content, [from, to) of the new content, and the CRC-32 the
    /// original's content has there: the content the run is copied for must have the same.
    pub fn parts<'m>(&self, marks: &'m BlockMarks) -> impl Iterator<Item = (u64, u64, u32)> + 'm {
        let shift = marks.0[self.marks.0].content - self.from;
        (self.marks.0..self.marks.1).map(move |k| {
            let (here, next) = (&marks.0[k], &marks.0[k + 1]);
            (here.content - shift, next.content - shift, here.crc)
        })
    }
}

/// The runs of original blocks that can stand in a new stream whose content equals the
/// original's where `same` says (sorted by `from`, disjoint): each run's blocks and the window
/// before its first lie within one such range, none is immovable, and each covers at least
/// `min_len` bytes (shorter ones are not worth breaking the new stream for).
pub fn reusable_runs(marks: &BlockMarks, same: &[SameAs], min_len: u64) -> Vec<Run> {
    let marks = marks.marks();
    let mut runs = Vec::new();
    for s in merged(same) {
        let (start, end) = (s.original, s.original + (s.to - s.from));
        // Content before the range differs, so the first block must start a window past it
        // (unless both streams start there, with nothing before).
        let earliest = if s.from == 0 && s.original == 0 { 0 } else { start + WINDOW };
        let mut i = marks.partition_point(|m| m.content < earliest);
        while i + 1 < marks.len() {
            if !marks[i].movable {
                i += 1;
                continue;
            }
            let mut j = i;
            while j + 1 < marks.len() && marks[j].movable && marks[j + 1].content <= end {
                j += 1;
            }
            if j == i {
                break;
            }
            let (first, last) = (marks[i], marks[j]);
            if last.content - first.content >= min_len {
                runs.push(Run {
                    from: first.content - s.original + s.from,
                    to: last.content - s.original + s.from,
                    start_bit: first.bit,
                    end_bit: last.bit,
                    marks: (i, j),
                });
            }
            i = j;
        }
    }
    runs
}

/// Adjacent ranges that continue each other as one.
fn merged(same: &[SameAs]) -> Vec<SameAs> {
    let mut out: Vec<SameAs> = Vec::with_capacity(same.len());
    for &s in same.iter().filter(|s| s.to > s.from) {
        match out.last_mut() {
            Some(last) if last.to == s.from && last.original + (last.to - last.from) == s.original => last.to = s.to,
            _ => out.push(s),
        }
    }
    out
}

/// Bytes of compressed input shifted at a time.
const COPY_CHUNK: usize = 1 << 20;

/// The buffers [`copy_run`] reads and shifts in, kept from run to run (a fresh large buffer is
/// a fresh mapping, faulted in and unmapped each time).
#[derive(Default)]
pub struct CopyBuffers {
    read: Vec<u8>,
    shifted: Vec<u8>,
}

/// Write `run`'s bits (read by `read_original(buf, offset)` from the original's compressed
/// bytes) to `out`, which stands on a byte boundary, then an empty stored block, so that `out`
/// is on one again. Returns the bytes written.
pub fn copy_run(
    run: &Run,
    read_original: &dyn Fn(&mut [u8], u64) -> io::Result<()>,
    out: &mut dyn Write,
    buffers: &mut CopyBuffers,
) -> io::Result<u64> {
    let shift = (run.start_bit % 8) as u32;
    let bits = run.end_bit - run.start_bit;
    let whole = bits / 8;
    let first_byte = run.start_bit / 8;
    // Each output byte takes the rest of one input byte and the start of the next.
    let last_byte = (run.end_bit.div_ceil(8)).max(first_byte + 1);
    let mut written = 0u64;
    let CopyBuffers { read: buf, shifted } = buffers;
    buf.clear();
    buf.resize(COPY_CHUNK.min((last_byte - first_byte) as usize) + 1, 0);
    let mut at = first_byte;
    while written < whole {
        let want = (COPY_CHUNK as u64).min(whole - written) as usize;
        // `want` output bytes need `want + 1` input bytes when shifting (the last may lie past
        // the run's final bit only when the run ends on a byte boundary).
        let need = (want + usize::from(shift > 0)).min((last_byte - at) as usize);
        read_original(&mut buf[..need], at)?;
        buf[need..].fill(0);
        shifted.clear();
        shift_bytes(&buf[..want + 1], shift, shifted);
        out.write_all(shifted)?;
        written += want as u64;
        at += want as u64;
    }
    // The run's last bits, then BFINAL 0 and BTYPE 00 (stored), padding, LEN 0, NLEN 0xffff.
    let tail_bits = (bits % 8) as u32;
    let mut tail = 0u32;
    if tail_bits > 0 {
        let mut two = [0u8; 2];
        let need = (last_byte - at).min(2) as usize;
        read_original(&mut two[..need], at)?;
        tail = u32::from(shift_byte(&two, 0, shift)) & ((1 << tail_bits) - 1);
    }
    let header_end = tail_bits + 3;
    let mut end = Vec::with_capacity(6);
    end.push(tail as u8);
    if header_end > 8 {
        end.push(0);
    }
    end.extend_from_slice(&[0x00, 0x00, 0xff, 0xff]);
    out.write_all(&end)?;
    Ok(written + end.len() as u64)
}

/// `src.len() - 1` bytes, each starting `shift` bits into a byte of `src`, eight at a time.
fn shift_bytes(src: &[u8], shift: u32, out: &mut Vec<u8>) {
    let n = src.len() - 1;
    if shift == 0 {
        out.extend_from_slice(&src[..n]);
        return;
    }
    let mut words = src[..n].chunks_exact(8);
    let mut next_at = 8;
    for word in words.by_ref() {
        let low = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let high = u64::from(src[next_at]);
        out.extend_from_slice(&((low >> shift) | (high << (64 - shift))).to_le_bytes());
        next_at += 8;
    }
    let done = n - words.remainder().len();
    out.extend((done..n).map(|i| shift_byte(src, i, shift)));
}

/// The byte that starts `shift` bits into `buf[i]`.
fn shift_byte(buf: &[u8], i: usize, shift: u32) -> u8 {
    if shift == 0 {
        return buf[i];
    }
    let next = buf.get(i + 1).copied().unwrap_or(0);
    (buf[i] >> shift) | (next << (8 - shift))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Content that deflate compresses about 3:1, with stretches of zeros and of noise.
    pub(crate) fn content(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let words: [&[u8]; 6] = [b"alpha ", b"beta ", b"gamma ", b"delta\n", b"\x7fELF\x02\x01", b"epsilon "];
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let r = next();
            match r % 20_000 {
                0 => out.extend(std::iter::repeat_n(0u8, (r >> 20) as usize % 50_000)),
                // Noise: deflate leaves it to literals, or stores it.
                1 => {
                    for _ in 0..(r >> 20) as usize % 70_000 {
                        out.push(next() as u8);
                    }
                }
                _ => {
                    out.extend_from_slice(words[(r >> 32) as usize % words.len()]);
                    out.extend_from_slice(format!("{} ", (r >> 40) % 5000).as_bytes());
                }
            }
        }
        out.truncate(len);
        out
    }

    /// Raw deflate by zlib-rs (levels 0-9) or, for levels 10 and up, by libdeflate at level - 10
    /// (another encoder's block choices, stored blocks among them).
    pub(crate) fn deflate(data: &[u8], level: u32) -> Vec<u8> {
        if level >= 10 {
            let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level as i32 - 10).unwrap());
            let mut out = vec![0u8; c.deflate_compress_bound(data.len())];
            let n = c.deflate_compress(data, &mut out).unwrap();
            out.truncate(n);
            return out;
        }
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    pub(crate) fn inflate_marking(
        compressed: &[u8],
        size: usize,
        input_step: usize,
        output_step: usize,
    ) -> (Vec<u8>, BlockMarks) {
        let mut inflater = MarkingInflate::new().unwrap();
        let mut out = vec![0u8; size + 1];
        let (mut at_in, mut at_out) = (0, 0);
        loop {
            let in_end = (at_in + input_step).min(compressed.len());
            let out_end = (at_out + output_step).min(out.len());
            let (c, p, ended) = inflater.inflate(&compressed[at_in..in_end], &mut out[at_out..out_end]).unwrap();
            at_in += c;
            at_out += p;
            if ended {
                break;
            }
            assert!(c > 0 || p > 0 || in_end < compressed.len(), "progress");
        }
        out.truncate(at_out);
        (out, inflater.take_marks().unwrap())
    }

    #[test]
    fn marks_are_block_starts_at_every_level_and_any_read_size() {
        // zlib-rs's level 1 makes one block of everything: nothing to mark.
        for (level, seed) in [(0, 1), (2, 2), (6, 3), (9, 4), (16, 5), (22, 6)] {
            let data = content(3 << 20, seed);
            let compressed = deflate(&data, level);
            let mut first: Option<BlockMarks> = None;
            for (input_step, output_step) in [(usize::MAX, usize::MAX), (1, 1 << 20), (7, 13), (4096, 65_536)] {
                let (back, marks) = inflate_marking(&compressed, data.len(), input_step, output_step);
                assert!(back == data, "level {level}: inflates to the content");
                match &first {
                    None => first = Some(marks),
                    Some(first) => assert_eq!(first, &marks, "level {level}: the same marks however it is fed"),
                }
            }
            let marks = first.unwrap();
            assert!(marks.marks().len() > 10, "level {level}: {} marks", marks.marks().len());
            if level == 0 {
                assert!(marks.marks().iter().all(|m| !m.movable), "stored blocks never move");
            } else {
                assert!(marks.marks().iter().filter(|m| m.movable).count() > 5, "level {level}");
            }
            assert!(!marks.marks().last().unwrap().movable, "the last block ends the stream");
            // Each mark is a block start: inflating from it with the window before it gives
            // the content from its offset.
            let read = |buf: &mut [u8], at: u64| {
                buf.copy_from_slice(&compressed[at as usize..at as usize + buf.len()]);
                Ok(())
            };
            for m in marks.marks() {
                let at = m.content as usize;
                let until = data.len().min(at + 100_000);
                let mut got = Vec::new();
                inflate_from(m, &data[..at], &read, compressed.len() as u64, until as u64, &mut |offset, bytes| {
                    assert_eq!(offset as usize, at + got.len());
                    got.extend_from_slice(bytes);
                    Ok(())
                })
                .unwrap();
                assert!(got[..] == data[at..until], "level {level}: mark {m:?}");
            }
        }
    }

    #[test]
    fn runs_copied_into_a_new_stream_decode_to_the_new_content() {
        use std::io::Read;
        let original = content(4 << 20, 11);
        let compressed = deflate(&original, 6);
        let (_, marks) = inflate_marking(&compressed, original.len(), 1 << 20, 1 << 20);
        // The new content: the original with a piece cut out (what follows moves 300,007
        // bytes back) and another overwritten.
        let mut new = original[..1_000_000].to_vec();
        new.extend_from_slice(&original[1_300_007..]);
        new[2_000_000..2_050_000].fill(0x55);
        let same = [
            SameAs { from: 0, to: 1_000_000, original: 0 },
            SameAs { from: 1_000_000, to: 2_000_000, original: 1_300_007 },
            SameAs { from: 2_050_000, to: new.len() as u64, original: 2_350_007 },
        ];
        let runs = reusable_runs(&marks, &same, 64 << 10);
        assert!(runs.len() >= 3, "{runs:?}");
        let reused: u64 = runs.iter().map(|r| r.to - r.from).sum();
        assert!(reused > new.len() as u64 * 2 / 3, "most is reused: {reused}");
        // A stream of the runs and, between them, the rest deflated with its window.
        let read = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&compressed[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let mut stream = Vec::new();
        let mut at = 0u64;
        let end = Run { from: new.len() as u64, to: new.len() as u64, start_bit: 0, end_bit: 0, marks: (0, 0) };
        for run in runs.iter().chain([&end]) {
            if run.from > at {
                let mut c = flate2::Compress::new(flate2::Compression::new(6), false);
                let window = &new[(at as usize).saturating_sub(WINDOW as usize)..at as usize];
                if !window.is_empty() {
                    c.set_dictionary(window).unwrap();
                }
                let mut out = Vec::with_capacity(new.len());
                c.compress_vec(&new[at as usize..run.from as usize], &mut out, flate2::FlushCompress::Sync).unwrap();
                stream.extend(out);
            }
            if run.to > run.from {
                for (from, to, crc) in run.parts(&marks) {
                    let mut c = libdeflater::Crc::new();
                    c.update(&new[from as usize..to as usize]);
                    assert_eq!(c.sum(), crc, "the run's parts are the content it stands for");
                }
                let n = copy_run(run, &read, &mut stream, &mut CopyBuffers::default()).unwrap();
                assert!(n > 0);
            }
            at = run.to;
        }
        stream.extend_from_slice(&[0x03, 0x00]);
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&stream[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), new.len());
        assert!(back == new, "the new stream decodes to the new content");
    }

    #[test]
    fn no_marks_where_quiet_and_the_blocks_passed_there_never_move() {
        let data = content(3 << 20, 31);
        let compressed = deflate(&data, 16);
        let (quiet_from, quiet_to) = (1_000_000u64, 2_000_000u64);
        let mut inflater = MarkingInflate::new().unwrap();
        inflater.set_quiet(vec![(quiet_from, quiet_to)]);
        let mut out = vec![0u8; data.len() + 1];
        let (mut at_in, mut at_out) = (0, 0);
        loop {
            let (c, p, ended) = inflater
                .inflate(&compressed[at_in..(at_in + 65_536).min(compressed.len())], &mut out[at_out..])
                .unwrap();
            (at_in, at_out) = (at_in + c, at_out + p);
            if ended {
                break;
            }
        }
        assert!(out[..at_out] == data[..], "inflates to the content");
        let marks = inflater.take_marks().unwrap();
        let marks = marks.marks();
        assert!(marks.iter().all(|m| m.content <= quiet_from || m.content >= quiet_to), "no mark inside");
        // The interval that holds the quiet range's blocks is not movable; others are.
        for pair in marks.windows(2) {
            if pair[0].content < quiet_to && pair[1].content > quiet_from {
                assert!(!pair[0].movable, "{pair:?}");
            }
        }
        assert!(marks.iter().filter(|m| m.movable).count() > 5);
        // Every mark is still a block start, its CRC the content's up to the next.
        let read = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&compressed[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        for (i, m) in marks.iter().enumerate() {
            let at = m.content as usize;
            let until = marks.get(i + 1).map_or(data.len(), |n| n.content as usize);
            let mut got = Vec::new();
            inflate_from(m, &data[..at], &read, compressed.len() as u64, until as u64, &mut |_, b| {
                got.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert!(got[..] == data[at..until], "mark {m:?}");
            let mut crc = libdeflater::Crc::new();
            crc.update(&got);
            assert_eq!(crc.sum(), m.crc, "mark {m:?}");
        }
    }

    #[test]
    fn bytes_shift_eight_at_a_time_as_one_at_a_time() {
        let src: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in [1, 2, 8, 9, 16, 17, 63, 100] {
            for shift in 0..8 {
                let mut out = Vec::new();
                shift_bytes(&src[..len], shift, &mut out);
                let expected: Vec<u8> = (0..len - 1).map(|i| shift_byte(&src[..len], i, shift)).collect();
                assert_eq!(out, expected, "{len} bytes, shift {shift}");
            }
        }
    }

    #[test]
    fn no_run_needs_a_window_from_outside_its_range() {
        let marks = BlockMarks(
            (0..100)
                .map(|i| Mark { content: i * 40_000, bit: i * 100_000, crc: 0, movable: i != 50 && i != 99 })
                .collect(),
        );
        let same = [SameAs { from: 10, to: 3_000_000, original: 1_000_000 }];
        let runs = reusable_runs(&marks, &same, 1);
        // The range starts at 1,000,000 of the original: the first run starts at the first mark
        // a window past it (1,040,000), and no run crosses the immovable mark 50 (2,000,000).
        assert_eq!(runs[0].from, 1_040_000 - 1_000_000 + 10);
        assert_eq!(runs[0].start_bit, 26 * 100_000);
        assert_eq!(runs[0].end_bit, 50 * 100_000);
        assert_eq!(runs[1].start_bit, 51 * 100_000);
        // It ends at the last mark within the range's end in the original (3,999,990).
        assert_eq!(runs[1].end_bit, 99 * 100_000);
        assert_eq!(runs.len(), 2);
    }
}
