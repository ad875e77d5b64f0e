//! The zip format as wheels use it: stored and deflated members, zip64, read by positional
//! reads ([`read`]) and written with raw copies of unchanged members ([`write`]).

pub mod blocks;
mod deflate;
pub mod read;
mod segment;
pub mod write;

use std::io::{self, Read};

pub use read::{Entry, ZipReader};
pub use write::{Compressed, Reuse, ReuseMismatch, Spilled, ZipWriter};

#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("cannot open: {0}")]
    Open(io::Error),
    #[error("not a zip archive: {0}")]
    NotZip(String),
    #[error("member `{0}`: the name is not valid UTF-8")]
    NameEncoding(String),
    #[error("member `{0}`: unsafe path (absolute, or with `..` or `\\`)")]
    UnsafePath(String),
    #[error("member `{0}` appears twice in the archive")]
    Duplicate(String),
    #[error("member `{name}`: {message}")]
    Member { name: String, message: String },
}

/// The records' signatures (APPNOTE.TXT 4.3).
pub(crate) const LOCAL_HEADER: u32 = 0x0403_4b50;
pub(crate) const CENTRAL_HEADER: u32 = 0x0201_4b50;
pub(crate) const END_OF_CENTRAL_DIRECTORY: u32 = 0x0605_4b50;
pub(crate) const ZIP64_END_OF_CENTRAL_DIRECTORY: u32 = 0x0606_4b50;
pub(crate) const ZIP64_LOCATOR: u32 = 0x0706_4b50;
/// The zip64 extended information extra field.
pub(crate) const ZIP64_EXTRA: u16 = 0x0001;
/// General purpose flag bit 11: the name is UTF-8.
pub(crate) const FLAG_UTF8: u16 = 1 << 11;

/// Compression methods a wheel may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Stored,
    Deflated,
}

impl Method {
    pub fn code(self) -> u16 {
        match self {
            Method::Stored => 0,
            Method::Deflated => 8,
        }
    }
}

/// An MS-DOS date and time as zip stores them (local time, 2-second steps, 1980–2107).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DosTime {
    pub time: u16,
    pub date: u16,
}

impl Default for DosTime {
    /// 1980-01-01 00:00:00, the earliest time zip can store.
    fn default() -> Self {
        DosTime { time: 0, date: 1 << 5 | 1 }
    }
}

impl DosTime {
    pub fn new(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Option<DosTime> {
        let valid = (1980..=2107).contains(&year)
            && (1..=12).contains(&month)
            && (1..=31).contains(&day)
            && hour < 24
            && minute < 60
            && second < 60;
        valid.then(|| DosTime {
            time: u16::from(hour) << 11 | u16::from(minute) << 5 | u16::from(second / 2),
            date: (year - 1980) << 9 | u16::from(month) << 5 | u16::from(day),
        })
    }

    /// Unix seconds (UTC), clamped to the range zip can store.
    pub fn from_epoch(secs: i64) -> DosTime {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = yoe + era * 400 + i64::from(month <= 2);
        if year < 1980 {
            return DosTime::default();
        }
        if year > 2107 {
            return DosTime::new(2107, 12, 31, 23, 59, 58).unwrap_or_default();
        }
        DosTime::new(year as u16, month, day, (rem / 3600) as u8, (rem % 3600 / 60) as u8, (rem % 60) as u8)
            .unwrap_or_default()
    }

    pub fn year(self) -> u16 {
        (self.date >> 9) + 1980
    }
    pub fn month(self) -> u8 {
        (self.date >> 5 & 0xf) as u8
    }
    pub fn day(self) -> u8 {
        (self.date & 0x1f) as u8
    }
    pub fn hour(self) -> u8 {
        (self.time >> 11) as u8
    }
    pub fn minute(self) -> u8 {
        (self.time >> 5 & 0x3f) as u8
    }
    pub fn second(self) -> u8 {
        ((self.time & 0x1f) * 2) as u8
    }
}

/// A deflate stream expands at most about 1032:1; a central directory that claims more is lying.
const MAX_DEFLATE_RATIO: u64 = 1032;

impl ZipReader {
    /// Whether the sizes an entry declares are possible for its method.
    pub fn check_sizes(entry: &Entry) -> Result<(), ZipError> {
        let impossible = match entry.method {
            Method::Stored => entry.size != entry.compressed_size,
            Method::Deflated => entry.size > entry.compressed_size.saturating_mul(MAX_DEFLATE_RATIO) + 1024,
        };
        if impossible {
            return Err(ZipError::Member {
                name: entry.name.to_string(),
                message: format!(
                    "the declared size {} cannot come from {} compressed bytes",
                    entry.size, entry.compressed_size
                ),
            });
        }
        Ok(())
    }

    /// The member's whole content, inflated in one call, its size and CRC-32 checked.
    pub fn read(&self, entry: &Entry) -> Result<Buffer, ZipError> {
        let fail = |message: String| ZipError::Member { name: entry.name.to_string(), message };
        let start = self.data_offset(entry)?;
        let mut raw = Buffer::zeroed(entry.compressed_size as usize);
        self.read_at(entry, &mut raw, start)?;
        let data = match entry.method {
            Method::Stored => raw,
            Method::Deflated => {
                let mut out = Buffer::zeroed(entry.size as usize);
                let n = libdeflater::Decompressor::new()
                    .deflate_decompress(&raw, &mut out)
                    .map_err(|e| fail(format!("cannot inflate: {e}")))?;
                if n != out.len() {
                    return Err(fail(format!("inflates to {n} bytes, the archive says {}", entry.size)));
                }
                out
            }
        };
        let mut crc = libdeflater::Crc::new();
        crc.update(&data);
        check_crc(entry, crc.sum())?;
        Ok(data)
    }

    /// [`ZipReader::read`], inflated by an inflater that notes where its deflate blocks start
    /// ([`blocks::MarkingInflate`]; `None` for a stored member). Slower than libdeflate, so only
    /// for members whose blocks may be reused.
    pub fn read_marking(&self, entry: &Entry) -> Result<(Buffer, Option<blocks::BlockMarks>), ZipError> {
        if entry.method == Method::Stored {
            return Ok((self.read(entry)?, None));
        }
        let fail = |message: String| ZipError::Member { name: entry.name.to_string(), message };
        let start = self.data_offset(entry)?;
        let mut raw = Buffer::zeroed(entry.compressed_size as usize);
        self.read_at(entry, &mut raw, start)?;
        let mut out = Buffer::zeroed(entry.size as usize);
        let mut inflater = blocks::MarkingInflate::new().map_err(|e| fail(e.to_string()))?;
        let (_, produced, ended) =
            inflater.inflate(&raw, &mut out).map_err(|e| fail(format!("cannot inflate: {e}")))?;
        match (ended, produced as u64 == entry.size) {
            (true, true) => {}
            (false, true) => {
                return Err(fail(format!("inflates to more than the {} bytes the archive says", entry.size)));
            }
            (true, false) => {
                return Err(fail(format!("inflates to {produced} bytes, the archive says {}", entry.size)));
            }
            (false, false) => return Err(fail("the deflate stream ends early".into())),
        }
        let mut crc = libdeflater::Crc::new();
        crc.update(&out);
        check_crc(entry, crc.sum())?;
        Ok((out, inflater.take_marks()))
    }

    /// The member's content as a stream; the size and CRC-32 are checked when it ends.
    pub fn stream<'a>(&'a self, entry: &'a Entry) -> Result<MemberStream<'a>, ZipError> {
        self.stream_with(entry, None)
    }

    /// [`ZipReader::stream`], inflated on up to `parallel.threads` threads of its own when the
    /// member is deflated and large enough to split (rapidgzip's method: blocks found
    /// speculatively, windows resolved afterwards). Should the parallel decoder fail, the
    /// member is inflated again in one stream from where it stood, so that what it accepts is
    /// exactly what the one-stream path accepts.
    pub fn stream_with<'a>(
        &'a self,
        entry: &'a Entry,
        parallel: Option<&ParallelInflate>,
    ) -> Result<MemberStream<'a>, ZipError> {
        #[cfg(feature = "parallel-inflate")]
        {
            let mut stream = self.plain_stream(entry)?;
            if let Some(p) = parallel.filter(|p| p.wants(entry)) {
                stream.parallel = p.reader(self.member_bytes(entry)?, entry.size);
                if stream.parallel.is_some() {
                    wheelfix_base::debug!("member `{}`: inflated on up to {} threads", entry.name, p.threads);
                }
            }
            Ok(stream)
        }
        #[cfg(not(feature = "parallel-inflate"))]
        {
            let _ = parallel;
            self.plain_stream(entry)
        }
    }

    /// [`ZipReader::stream`] by an inflater that notes where its deflate blocks start
    /// ([`MemberStream::take_marks`] once it has ended).
    pub fn stream_marking<'a>(&'a self, entry: &'a Entry) -> Result<MemberStream<'a>, ZipError> {
        let mut stream = self.plain_stream(entry)?;
        if stream.inflate.is_some() {
            let inflater = blocks::MarkingInflate::new().map_err(|e| self.member_error(entry, &e.to_string()))?;
            stream.inflate = Some(Inflater::Marking(Box::new(inflater)));
        }
        Ok(stream)
    }

    fn plain_stream<'a>(&'a self, entry: &'a Entry) -> Result<MemberStream<'a>, ZipError> {
        Ok(MemberStream {
            entry,
            raw: self.raw_reader(entry)?,
            inflate: (entry.method == Method::Deflated).then(|| Inflater::Plain(flate2::Decompress::new(false))),
            // No larger than the compressed member: a batch streams thousands of small ones.
            input: vec![0u8; (256 << 10).min(entry.compressed_size.max(1) as usize)].into_boxed_slice(),
            input_at: 0,
            input_len: 0,
            produced: 0,
            crc: libdeflater::Crc::new(),
            ended: false,
            #[cfg(feature = "parallel-inflate")]
            parallel: None,
        })
    }

    /// Up to `n` bytes from the start of the member, inflating only what that takes (no CRC
    /// check: the member is not read to its end).
    pub fn peek(&self, entry: &Entry, n: usize) -> Result<Vec<u8>, ZipError> {
        let n = n.min(entry.size as usize);
        let fail = |message: String| ZipError::Member { name: entry.name.to_string(), message };
        match entry.method {
            Method::Stored => self.raw_prefix(entry, n),
            Method::Deflated => {
                // Deflate rarely shrinks the first bytes below a quarter; a short first read
                // takes a second one.
                let mut raw_len = (n + 64).min(entry.compressed_size as usize);
                loop {
                    let raw = self.raw_prefix(entry, raw_len)?;
                    let mut out = Vec::with_capacity(n);
                    let mut inflate = flate2::Decompress::new(false);
                    let status = inflate
                        .decompress_vec(&raw, &mut out, flate2::FlushDecompress::None)
                        .map_err(|e| fail(format!("cannot inflate: {e}")))?;
                    if out.len() >= n || status == flate2::Status::StreamEnd || raw_len as u64 >= entry.compressed_size
                    {
                        out.truncate(n);
                        return Ok(out);
                    }
                    raw_len = (raw_len * 4).min(entry.compressed_size as usize);
                }
            }
        }
    }
}

/// A member's bytes in memory: on the heap, or, for members of tens of MB, in anonymous memory
/// backed by transparent huge pages (that saves hundreds of thousands of page faults on a
/// PyTorch wheel).
pub enum Buffer {
    Heap(Vec<u8>),
    Mapped(memmap2::MmapMut),
}

/// Buffers at least this large get huge pages.
const LARGE_BUFFER: usize = 32 << 20;

impl Buffer {
    pub fn zeroed(len: usize) -> Buffer {
        if len >= LARGE_BUFFER
            && let Ok(map) = memmap2::MmapMut::map_anon(len)
        {
            let _ = map.advise(memmap2::Advice::HugePage);
            return Buffer::Mapped(map);
        }
        Buffer::Heap(vec![0u8; len])
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Mapped(m) => m.to_vec(),
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Mapped(m) => m,
        }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Mapped(m) => m,
        }
    }
}

fn check_crc(entry: &Entry, computed: u32) -> Result<(), ZipError> {
    if computed != entry.crc32 {
        return Err(ZipError::Member {
            name: entry.name.to_string(),
            message: format!("CRC-32 mismatch: {:08x} in the archive, {computed:08x} computed", entry.crc32),
        });
    }
    Ok(())
}

/// How one large member is inflated on several threads.
#[derive(Debug, Clone)]
pub struct ParallelInflate {
    /// Threads of its own for one member.
    pub threads: usize,
    /// Members with fewer compressed bytes are inflated in one stream: splitting does not pay.
    pub min_compressed: u64,
    /// Bytes of each decoded chunk; one chunk in flight per thread.
    pub chunk: usize,
}

impl ParallelInflate {
    /// Every thread of the run's pool (`RAYON_NUM_THREADS`), for deflated members of
    /// `min_compressed` bytes and more; `None` on one core.
    /// Always `None` in a build without the `parallel-inflate` feature.
    pub fn with_pool_threads(min_compressed: u64) -> Option<ParallelInflate> {
        let threads = rayon::current_num_threads();
        (cfg!(feature = "parallel-inflate") && threads > 1).then_some(ParallelInflate {
            threads,
            min_compressed,
            chunk: 1 << 20,
        })
    }

    /// Whether `entry` is inflated on several threads.
    pub fn wants(&self, entry: &Entry) -> bool {
        entry.method == Method::Deflated && entry.compressed_size >= self.min_compressed && self.threads > 1
    }

    /// The bytes its buffers hold at most: a decoded chunk in flight per thread (as 16-bit
    /// symbols until its window is known), and a window and an input page per thread.
    pub fn memory(&self) -> u64 {
        (self.threads * (2 * self.chunk + (1 << 20) + (64 << 10))) as u64
    }

    #[cfg(feature = "parallel-inflate")]
    fn reader(&self, source: read::MemberBytes, size: u64) -> Option<rapidgzip_core::DecoderReader> {
        let decoder = rapidgzip_core::Decoder::builder()
            .format(rapidgzip_core::Format::RawDeflate)
            .decoder_threads(self.threads)
            .decoded_chunk_size(self.chunk)
            .in_flight_chunks(self.threads)
            .expected_uncompressed_size(Some(size))
            .build()
            .ok()?;
        decoder.reader(source).ok()
    }
}

/// The inflater of a member stream.
enum Inflater {
    Plain(flate2::Decompress),
    Marking(Box<blocks::MarkingInflate>),
}

impl Inflater {
    /// Inflate from `input` into `output`: (bytes consumed, bytes produced, whether the stream
    /// ended).
    fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> Result<(usize, usize, bool), blocks::CorruptStream> {
        match self {
            Inflater::Plain(inflate) => {
                let (before_in, before_out) = (inflate.total_in(), inflate.total_out());
                let status = inflate
                    .decompress(input, output, flate2::FlushDecompress::None)
                    .map_err(|e| blocks::CorruptStream(e.to_string()))?;
                let (consumed, produced) = (inflate.total_in() - before_in, inflate.total_out() - before_out);
                Ok((consumed as usize, produced as usize, status == flate2::Status::StreamEnd))
            }
            Inflater::Marking(inflate) => inflate.inflate(input, output),
        }
    }
}

/// A member read as a stream: positional reads of the compressed bytes, inflated as they come.
pub struct MemberStream<'a> {
    entry: &'a Entry,
    raw: read::RawReader<'a>,
    inflate: Option<Inflater>,
    input: Box<[u8]>,
    input_at: usize,
    input_len: usize,
    produced: u64,
    crc: libdeflater::Crc,
    ended: bool,
    /// The member inflated on several threads ([`ZipReader::stream_with`]).
    #[cfg(feature = "parallel-inflate")]
    parallel: Option<rapidgzip_core::DecoderReader>,
}

impl MemberStream<'_> {
    /// Where the member's deflate blocks start, once it has been read to its end by a marking
    /// stream ([`ZipReader::stream_marking`]).
    pub fn take_marks(&mut self) -> Option<blocks::BlockMarks> {
        match &mut self.inflate {
            Some(Inflater::Marking(inflate)) if self.ended => inflate.take_marks(),
            _ => None,
        }
    }

    /// Content ranges where the marking inflater needs no marks (what a copy leaves out).
    pub fn set_quiet(&mut self, ranges: Vec<(u64, u64)>) {
        if let Some(Inflater::Marking(inflate)) = &mut self.inflate {
            inflate.set_quiet(ranges);
        }
    }

    #[cfg(feature = "parallel-inflate")]
    /// The parallel decoder failed after `produced` bytes: inflate in one stream from the
    /// start, the bytes already given dropped, so that the one-stream path has the last word.
    fn fall_back(&mut self, error: &io::Error) -> io::Result<()> {
        wheelfix_base::debug!(
            "member `{}`: parallel inflate stopped ({error}); inflating in one stream",
            self.entry.name
        );
        self.parallel = None;
        // The bytes dropped were counted once already: the sum so far is kept aside.
        let (given, crc) = (self.produced, std::mem::replace(&mut self.crc, libdeflater::Crc::new()));
        self.produced = 0;
        let mut scratch = vec![0u8; 1 << 20];
        let mut left = given;
        while left > 0 {
            let want = (scratch.len() as u64).min(left) as usize;
            let n = self.read(&mut scratch[..want])?;
            if n == 0 {
                return Err(self.fail("the deflate stream ends early".into()));
            }
            left -= n as u64;
        }
        self.crc = crc;
        self.produced = given;
        Ok(())
    }

    fn fail(&self, message: String) -> io::Error {
        io::Error::other(ZipError::Member { name: self.entry.name.to_string(), message })
    }

    /// Called when no more output comes: the size and CRC must match the central directory.
    fn finish(&mut self) -> io::Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        if self.produced != self.entry.size {
            return Err(self.fail(format!("inflates to {} bytes, the archive says {}", self.produced, self.entry.size)));
        }
        check_crc(self.entry, self.crc.sum()).map_err(io::Error::other)
    }
}

impl Read for MemberStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.ended {
            return Ok(0);
        }
        #[cfg(feature = "parallel-inflate")]
        if let Some(parallel) = &mut self.parallel {
            match parallel.read(buf) {
                Ok(0) => {
                    let stats = parallel.stats();
                    wheelfix_base::debug!(
                        "member `{}`: inflated on rapidgzip's {:?} path at {:.0} MB/s",
                        self.entry.name,
                        stats.path,
                        stats.decode_throughput_bps / 1e6
                    );
                    self.parallel = None;
                    self.finish()?;
                    return Ok(0);
                }
                Ok(n) => {
                    self.crc.update(&buf[..n]);
                    self.produced += n as u64;
                    return Ok(n);
                }
                Err(e) => self.fall_back(&e)?,
            }
        }
        loop {
            if self.input_at == self.input_len && self.raw.remaining() > 0 {
                self.input_len = self.raw.read(&mut self.input)?;
                self.input_at = 0;
            }
            let n = match &mut self.inflate {
                None => {
                    let n = (self.input_len - self.input_at).min(buf.len());
                    buf[..n].copy_from_slice(&self.input[self.input_at..self.input_at + n]);
                    self.input_at += n;
                    n
                }
                Some(inflate) => {
                    let (consumed, n, ended) =
                        inflate.inflate(&self.input[self.input_at..self.input_len], buf).map_err(|e| {
                            let message = format!("cannot inflate: {e}");
                            io::Error::other(ZipError::Member { name: self.entry.name.to_string(), message })
                        })?;
                    self.input_at += consumed;
                    let stuck = n == 0 && consumed == 0 && self.input_at < self.input_len;
                    if n == 0 && !ended && self.input_at == self.input_len && self.raw.remaining() > 0 {
                        // All the input so far went into the inflater's state: read on.
                        continue;
                    }
                    if n == 0 && ended {
                        0
                    } else if stuck || (n == 0 && self.input_at == self.input_len && self.raw.remaining() == 0) {
                        return Err(self.fail("the deflate stream ends early".into()));
                    } else {
                        n
                    }
                }
            };
            if n > 0 {
                self.crc.update(&buf[..n]);
                self.produced += n as u64;
                if self.produced > self.entry.size {
                    return Err(
                        self.fail(format!("inflates to more than the {} bytes the archive says", self.entry.size))
                    );
                }
                return Ok(n);
            }
            if self.inflate.is_none() && self.raw.remaining() > 0 {
                continue;
            }
            self.finish()?;
            return Ok(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_epoch_seconds_to_dos_time() {
        let t = DosTime::from_epoch(1_700_000_000); // 2023-11-14 22:13:20 UTC
        assert_eq!((t.year(), t.month(), t.day(), t.hour(), t.minute(), t.second()), (2023, 11, 14, 22, 13, 20));
        assert_eq!(DosTime::from_epoch(0), DosTime::default());
        assert_eq!(DosTime::from_epoch(i64::MAX / 4).year(), 2107);
    }
}
