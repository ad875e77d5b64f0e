//! Where a kpack-split binary finds its device code. kpack moves a host binary's offload
//! bundles into per-architecture archives and leaves a `.rocm_kpack_ref` marker naming them:
//! search paths relative to the binary's directory, with `@GFXARCH@` standing for the GPU
//! processor the runtime loads code for (`../.kpack/blas_lib_@GFXARCH@.kpack` →
//! `../.kpack/blas_lib_gfx942.kpack`). An archive that is not installed there makes the first
//! kernel launch fail, after an install that succeeded.
//!
//! Why one file: the kpack format whole, the
//! marker, the archive writer and its reader, so that what is written and what is read back
//! follow one description.

/// The placeholder the runtime replaces with the processor name.
pub const GFXARCH: &str = "@GFXARCH@";

/// The section ROCm's design names a split host's marker by; its tools find the marker there.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";
/// What `split` renames a host's `.hip_fatbin` sections to once their device code has moved
/// out (zeros, and the markers): ROCm's tools take a `.hip_fatbin` with file bytes for device
/// code and would split the host again.
pub const MOVED_SECTION: &str = ".rocm_kpack_moved";
/// HIP's wrapper magic (`__hipFatMAGIC2`) and kpack's, as the wrapper's first four file bytes.
pub const HIPF: [u8; 4] = *b"FPIH";
pub const HIPK: [u8; 4] = *b"HIPK";
/// One `__hip_fatbin_wrapper` record: u32 magic, u32 version, u64 pointer, u64 reserved1.
pub const WRAPPER_LEN: u64 = 24;

/// The reference a split host binary keeps where each of its bundles was: the MessagePack map
/// `{kernel_name, kpack_search_paths}` the kpack runtime reads at the wrapper's pointer.
pub fn marker(kernel_name: &str, search_paths: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    write::map_len(&mut out, 2);
    write::str(&mut out, "kernel_name");
    write::str(&mut out, kernel_name);
    write::str(&mut out, "kpack_search_paths");
    write::array_len(&mut out, search_paths.len());
    for path in search_paths {
        write::str(&mut out, path);
    }
    out
}

/// The most of a marker read: the runtime reads at most 64 KiB.
pub const MARKER_MAX: u64 = 64 << 10;

/// A kpack marker at the start of `bytes`: its kernel name and search paths, when it is one
/// (a map with a string `kernel_name` and a non-empty array of strings `kpack_search_paths`).
pub fn read_marker(bytes: &[u8]) -> Option<(String, Vec<String>)> {
    // A map of 1-15 entries or a map16/map32; anything else is not a marker.
    if !matches!(bytes.first()?, 0x81..=0x8f | 0xde | 0xdf) {
        return None;
    }
    let value = crate::msgpack::parse(bytes).ok()?;
    let name = value.get("kernel_name")?.as_str()?.to_string();
    let paths: Vec<String> =
        value.get("kpack_search_paths")?.as_array()?.iter().filter_map(|p| p.as_str()).map(String::from).collect();
    (!paths.is_empty()).then_some((name, paths))
}

/// Why a marker cannot be used by the runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerProblem {
    #[error("not MessagePack ({0})")]
    NotMessagePack(String),
    #[error("not a MessagePack map")]
    NotAMap,
    /// A count larger than the map's entries reads what follows it (zeros) as more entries.
    #[error("a key that is not a string (a map count past its entries?)")]
    KeyNotAString,
    /// A field is missing. Ex) `kernel_name`
    #[error("no {0}")]
    Missing(&'static str),
    #[error("kernel_name is not a string")]
    NameNotAString,
    #[error("kpack_search_paths is not an array")]
    PathsNotAnArray,
    #[error("a search path that is not a non-empty string")]
    BadPath,
    /// A marker cut short and padded with zeros still parses: its last string holds them.
    #[error("a string with a NUL byte (the marker cut short?)")]
    Nul,
    #[error("no search paths")]
    NoPaths,
}

/// A kpack marker at the start of `bytes` as the runtime uses it, or why it cannot: a map
/// with a string `kernel_name` and a non-empty array of non-empty strings `kpack_search_paths`.
/// Its kernel name, search paths, and length in bytes.
pub fn usable_marker(bytes: &[u8]) -> Result<(String, Vec<String>, usize), MarkerProblem> {
    use MarkerProblem as P;
    let (value, len) = crate::msgpack::parse_prefix(bytes).map_err(|e| P::NotMessagePack(e.to_string()))?;
    let map = value.as_map().ok_or(P::NotAMap)?;
    if map.iter().any(|(k, _)| k.as_str().is_none()) {
        return Err(P::KeyNotAString);
    }
    let name = value.get("kernel_name").ok_or(P::Missing("kernel_name"))?.as_str().ok_or(P::NameNotAString)?;
    let paths = value.get("kpack_search_paths").ok_or(P::Missing("kpack_search_paths"))?;
    let paths = paths.as_array().ok_or(P::PathsNotAnArray)?;
    let paths: Vec<String> = paths
        .iter()
        .map(|p| p.as_str().filter(|p| !p.is_empty()).map(String::from))
        .collect::<Option<_>>()
        .ok_or(P::BadPath)?;
    if paths.iter().any(|p| p.contains('\0')) || name.contains('\0') {
        return Err(P::Nul);
    }
    if paths.is_empty() {
        return Err(P::NoPaths);
    }
    Ok((name.to_string(), paths, len))
}

/// Just enough MessagePack writing for markers and tables of contents (the smallest encoding of
/// each value, as every MessagePack writer chooses).
pub mod write {
    pub fn str(out: &mut Vec<u8>, s: &str) {
        let n = s.len();
        match n {
            0..=31 => out.push(0xa0 | n as u8),
            32..=0xff => out.extend([0xd9, n as u8]),
            0x100..=0xffff => {
                out.push(0xda);
                out.extend((n as u16).to_be_bytes());
            }
            _ => {
                out.push(0xdb);
                out.extend((n as u32).to_be_bytes());
            }
        }
        out.extend(s.as_bytes());
    }

    pub fn uint(out: &mut Vec<u8>, v: u64) {
        match v {
            0..=0x7f => out.push(v as u8),
            0x80..=0xff => out.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend((v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend((v as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend(v.to_be_bytes());
            }
        }
    }

    fn len(out: &mut Vec<u8>, n: usize, fix: u8, wide: u8) {
        if n < 16 {
            out.push(fix | n as u8);
        } else if n <= 0xffff {
            out.push(wide);
            out.extend((n as u16).to_be_bytes());
        } else {
            out.push(wide + 1);
            out.extend((n as u32).to_be_bytes());
        }
    }

    pub fn map_len(out: &mut Vec<u8>, n: usize) {
        len(out, n, 0x80, 0xde);
    }

    pub fn array_len(out: &mut Vec<u8>, n: usize) {
        len(out, n, 0x90, 0xdc);
    }
}

/// The header of an archive: `KPAK`, u32 version 1, u64 offset of the table of contents, then
/// zeros up to the first blob.
const ARCHIVE_HEADER: u64 = 64;
/// zstd level of archived code objects (the archives are stored in the device wheel, not
/// deflated again). Level 3, zstd's default, measured against 1, 6 and 9 (performance page):
/// real device code comes out 7% (jax-rocm7-pjrt) to 25% (cupy-rocm-7-0) smaller than at 1 for
/// the same split time; 6 and 9 save a few percent more for 30-70% more time. Objects in which
/// there are no repeats to find are compressed at [`POOR_ZSTD_LEVEL`].
const ARCHIVE_ZSTD_LEVEL: i32 = 3;

/// The level of a code object in which level 1 finds no repeats: its frame is no smaller than
/// an entropy coder alone would make it ([`level_for`]). Level 3 searches two hash tables at
/// every byte for repeats; where there are none to find (random tables, data compressed
/// already, the generated wheel's payloads), it runs at a quarter of level 1's speed and its
/// frame comes out larger (1 MiB of random letters of a 16-letter alphabet: 159 against 623
/// MB/s, 542,617 against 524,463 bytes), while on real code objects, dense code included, it
/// runs at nearly level 1's speed and is 3-25% smaller.
const POOR_ZSTD_LEVEL: i32 = 1;
/// The bytes of an object that choose its level: the first ones, which a streamed object gives
/// before the rest, so that an object is the same frame whichever way it came.
const LEVEL_SAMPLE: usize = 32 << 10;

/// The level an object is compressed at, from `sample` (its first [`LEVEL_SAMPLE`] bytes, or all
/// of a smaller one): level 1 when `compressor` at level 1 (its level is left there) shrinks it
/// no more than a byte-by-byte entropy coder would (90% of the sample's order-0 entropy, or
/// more): no repeats were found, and level 3 would find none either.
fn level_for(sample: &[u8], compressor: &mut zstd::bulk::Compressor<'static>) -> std::io::Result<i32> {
    thread_local! {
        static SAMPLE_FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // A small object's level costs little time, and its sample says less.
    if sample.len() < 4096 {
        return Ok(ARCHIVE_ZSTD_LEVEL);
    }
    compressor.set_compression_level(POOR_ZSTD_LEVEL)?;
    let compressed = SAMPLE_FRAME.with_borrow_mut(|frame| {
        frame.clear();
        frame.reserve(zstd::zstd_safe::compress_bound(sample.len()));
        compressor.compress_to_buffer(sample, frame)
    })?;
    Ok(if compressed as f64 >= 0.9 * entropy_bytes(sample) { POOR_ZSTD_LEVEL } else { ARCHIVE_ZSTD_LEVEL })
}

/// The bytes `data` takes coded byte by byte at its order-0 entropy (no repeats used).
fn entropy_bytes(data: &[u8]) -> f64 {
    let mut counts = [0u64; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let n = data.len() as f64;
    let bits: f64 = counts.iter().filter(|&&c| c > 0).map(|&c| c as f64 * (n / c as f64).log2()).sum();
    bits / 8.0
}

/// `work` done with a one-call compressor from the spares (made when none is free, its checksum
/// flag set), which goes back to them whatever `work` did.
fn with_spare_compressor<T>(
    work: impl FnOnce(&mut zstd::bulk::Compressor<'static>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let spare = SPARE_COMPRESSORS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    let mut compressor = match spare {
        Some(compressor) => compressor,
        None => {
            let mut compressor = zstd::bulk::Compressor::new(ARCHIVE_ZSTD_LEVEL)?;
            compressor.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
            compressor
        }
    };
    let done = work(&mut compressor);
    SPARE_COMPRESSORS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(compressor);
    done
}

/// Why an archive cannot be written as asked: a caller's mistake or a limit of the format,
/// carried inside the `io::Error` the writer returns (`io::Error::get_ref` downcasts to it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveWriteError {
    #[error("a code object of {got} bytes was to be {expected} bytes")]
    SizeChanged { got: u64, expected: u64 },
    #[error("a frame added while another is being streamed in")]
    FrameWhileStreaming,
    #[error("a frame begun before the last one ended")]
    FrameBeforeEnd,
    #[error("no frame begun")]
    NoFrameBegun,
    #[error("a code object over 4 GiB")]
    ObjectTooLarge,
    #[error("too many code objects")]
    TooManyObjects,
    #[error("two code objects for {target} in {key}")]
    TwoObjects { target: String, key: String },
    #[error("no code object for {target} in {key}")]
    NoObject { target: String, key: String },
    #[error("no name for the code objects of {0}")]
    NoName(String),
    #[error("two keys named {0}")]
    TwoKeys(String),
    #[error("an archive finished with a frame still being streamed in")]
    FinishedWhileStreaming,
}

impl From<ArchiveWriteError> for std::io::Error {
    fn from(e: ArchiveWriteError) -> std::io::Error {
        std::io::Error::other(e)
    }
}

/// A kpack archive being written (`zstd-per-kernel`): each code object one zstd frame, in order
/// after the header, and at the end the table of contents naming, for each
/// `<kernel_name>#<index>` and target id, its frame. Written to a file as objects arrive: one
/// object is held at a time.
pub struct ArchiveWriter {
    file: std::io::BufWriter<std::fs::File>,
    /// Where the next frame's length prefix goes.
    at: u64,
    /// (key, target id) → (ordinal, the code object's size and digest), in key order for the table.
    toc: std::collections::BTreeMap<String, std::collections::BTreeMap<String, (u64, Object)>>,
    /// Each frame's offset (past its length prefix) and length, by ordinal.
    frames: Vec<(u64, u32)>,
    /// The frame being streamed in ([`ArchiveWriter::begin_frame`]): its key, target id,
    /// encoder and the frame's bytes written so far.
    open: Option<(String, String, Box<FrameEncoder>, u64)>,
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveWriter").field("frames", &self.frames.len()).field("keys", &self.toc.len()).finish()
    }
}

/// A code object as one archive frame (zstd, with the content's checksum), and its
/// description.
pub fn compress_frame(code_object: &[u8]) -> std::io::Result<(Object, Vec<u8>)> {
    let mut frame = Vec::new();
    let object = compress_frame_into(code_object, &mut frame)?;
    Ok((object, frame))
}

/// A code object as one archive frame, into `frame` (its old content replaced; a buffer used
/// again is not faulted in afresh for every object), and its description.
///
/// Code objects larger than this are compressed, and reach a rewrite's sink, as a stream,
/// never whole (`rewrite` streams them; an archive compresses them in frames).
pub const WHOLE_OBJECT: u64 = 8 << 20;

/// An object of up to [`WHOLE_OBJECT`] bytes is compressed in one call: zstd
/// then matches within the object where it lies, where a stream copies every byte into its
/// window first and matches across the window's wrap (on 1.2 GB of code objects, 5% of
/// `split`'s time and frames 0.05% smaller). A larger one goes through [`FrameEncoder`], as
/// when it is streamed: the readers stream exactly the objects above that size, so an object
/// becomes the same frame whichever way it came.
pub fn compress_frame_into(code_object: &[u8], frame: &mut Vec<u8>) -> std::io::Result<Object> {
    frame.clear();
    frame.reserve(zstd::zstd_safe::compress_bound(code_object.len()));
    if code_object.len() as u64 > WHOLE_OBJECT {
        let mut encoder = FrameEncoder::new()?;
        let mut out = |bytes: &[u8]| {
            frame.extend_from_slice(bytes);
            Ok(())
        };
        encoder.start(code_object.len() as u64)?;
        encoder.write(code_object, &mut out)?;
        return encoder.finish(&mut out);
    }
    let sample = &code_object[..code_object.len().min(LEVEL_SAMPLE)];
    with_spare_compressor(|compressor| {
        let level = level_for(sample, compressor)?;
        compressor.set_compression_level(level)?;
        compressor.compress_to_buffer(code_object, frame)
    })?;
    Ok(Object::of(code_object))
}

/// One-call compressors kept between frames, for whichever thread compresses next: a
/// compressor made afresh allocates its tables and faults them in, and `split`'s compressor
/// threads live as long as a binary. It holds as many as ever compressed at once, no more.
static SPARE_COMPRESSORS: std::sync::Mutex<Vec<zstd::bulk::Compressor<'static>>> = std::sync::Mutex::new(Vec::new());

/// The encoder of archive frames: zstd at level 3 (`ARCHIVE_ZSTD_LEVEL`), the content's size in
/// the frame header and its checksum at the end (4 bytes, which every zstd decoder verifies: an
/// archive damaged after it was written fails to decode in `check` and at load time, instead of
/// handing the GPU other bytes). It streams: a code object of any size is compressed in bounded memory, fed
/// in pieces as it arrives, and zstd's streaming output does not depend on how the input is
/// cut, so a frame is the same bytes whether its object was held whole or streamed (objects
/// of up to [`WHOLE_OBJECT`] bytes are compressed in one call instead:
/// [`compress_frame_into`]).
pub struct FrameEncoder {
    encoder: zstd::stream::raw::Encoder<'static>,
    hasher: xxhash_rust::xxh3::Xxh3,
    size: u64,
    expected: u64,
    buf: Vec<u8>,
    /// The object's first bytes, held until they choose its level ([`level_for`]).
    sample: Option<Vec<u8>>,
}

impl FrameEncoder {
    pub fn new() -> std::io::Result<FrameEncoder> {
        let mut encoder = zstd::stream::raw::Encoder::new(ARCHIVE_ZSTD_LEVEL)?;
        encoder.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
        Ok(FrameEncoder {
            encoder,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            size: 0,
            expected: 0,
            buf: vec![0u8; 128 << 10],
            sample: None,
        })
    }

    /// Begin the frame of a code object of `size` bytes.
    pub fn start(&mut self, size: u64) -> std::io::Result<()> {
        use zstd::stream::raw::Operation;
        self.encoder.reinit()?;
        self.encoder.set_pledged_src_size(Some(size))?;
        self.hasher.reset();
        (self.size, self.expected) = (0, size);
        self.sample = Some(Vec::with_capacity(LEVEL_SAMPLE));
        Ok(())
    }

    /// Compress the object's next bytes, handing what comes out to `out`.
    pub fn write(&mut self, data: &[u8], out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        self.hasher.update(data);
        self.size += data.len() as u64;
        let mut data = data;
        if let Some(sample) = &mut self.sample {
            let take = data.len().min(LEVEL_SAMPLE - sample.len());
            sample.extend_from_slice(&data[..take]);
            data = &data[take..];
            if sample.len() < LEVEL_SAMPLE {
                return Ok(());
            }
            self.begin(out)?;
        }
        self.compress(data, out)
    }

    /// Choose the level from the sample, and compress the sample.
    fn begin(&mut self, out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        let Some(sample) = self.sample.take() else { return Ok(()) };
        let level = with_spare_compressor(|compressor| level_for(&sample, compressor))?;
        self.encoder.set_parameter(zstd::stream::raw::CParameter::CompressionLevel(level))?;
        self.compress(&sample, out)
    }

    fn compress(&mut self, data: &[u8], out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let mut input = InBuffer::around(data);
        while input.pos() < data.len() {
            let mut output = OutBuffer::around(&mut self.buf[..]);
            self.encoder.run(&mut input, &mut output)?;
            let n = output.pos();
            out(&self.buf[..n])?;
        }
        Ok(())
    }

    /// End the frame; the code object's description. An error if it was not the size begun with.
    pub fn finish(&mut self, out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<Object> {
        use zstd::stream::raw::{Operation, OutBuffer};
        if self.size != self.expected {
            return Err(ArchiveWriteError::SizeChanged { got: self.size, expected: self.expected }.into());
        }
        self.begin(out)?;
        loop {
            let mut output = OutBuffer::around(&mut self.buf[..]);
            let left = self.encoder.finish(&mut output, true)?;
            let n = output.pos();
            out(&self.buf[..n])?;
            if left == 0 {
                return Ok(Object { size: self.size, xxh3: self.hasher.digest128() });
            }
        }
    }
}

/// What an archive writer was given of one code object, kept to prove the archive by: its size
/// and 128-bit XXH3 digest, taken from the code object itself before it was compressed. The
/// proof needs a digest no writer bug can forge by chance, not one an adversary cannot: XXH3
/// runs at memory speed, where SHA-256 made the proof cost a quarter of a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Object {
    pub size: u64,
    pub xxh3: u128,
}

impl Object {
    pub fn of(code_object: &[u8]) -> Object {
        Object { size: code_object.len() as u64, xxh3: xxhash_rust::xxh3::xxh3_128(code_object) }
    }

    /// The description of what `reader` gives, read to its end a buffer at a time.
    pub fn of_reader(reader: &mut dyn std::io::Read) -> std::io::Result<Object> {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                return Ok(Object { size, xxh3: hasher.digest128() });
            }
            hasher.update(&buf[..n]);
            size += n as u64;
        }
    }
}

/// A code object the archive should hold: where, for which target id, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub key: String,
    pub target: String,
    pub object: Object,
}

impl ArchiveWriter {
    pub fn new(file: std::fs::File) -> std::io::Result<ArchiveWriter> {
        use std::io::Write;
        let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
        // The table's offset and the frame count are written by `finish`.
        file.write_all(&[0u8; ARCHIVE_HEADER as usize + 4])?;
        Ok(ArchiveWriter { file, at: ARCHIVE_HEADER + 4, toc: Default::default(), frames: Vec::new(), open: None })
    }

    /// Add the code object of `key` (`<kernel_name>#<index>`) for `target` (a target id).
    pub fn add(&mut self, key: &str, target: &str, code_object: &[u8]) -> std::io::Result<()> {
        let (object, frame) = compress_frame(code_object)?;
        self.add_frame(key, target, object, &frame)
    }

    /// Add the code object `object` describes, already made a frame by [`compress_frame`].
    pub fn add_frame(&mut self, key: &str, target: &str, object: Object, frame: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        if self.open.is_some() {
            return Err(ArchiveWriteError::FrameWhileStreaming.into());
        }
        let len = u32::try_from(frame.len()).map_err(|_| std::io::Error::from(ArchiveWriteError::ObjectTooLarge))?;
        let ordinal = self.frames.len() as u64;
        let previous = self.toc.entry(key.to_string()).or_default().insert(target.to_string(), (ordinal, object));
        if previous.is_some() {
            return Err(ArchiveWriteError::TwoObjects { target: target.to_string(), key: key.to_string() }.into());
        }
        self.file.write_all(&len.to_le_bytes())?;
        self.file.write_all(frame)?;
        self.frames.push((self.at + 4, len));
        self.at += 4 + frame.len() as u64;
        Ok(())
    }

    /// Begin the frame of the code object of `key` for `target`, `size` bytes long, whose
    /// bytes arrive in pieces ([`ArchiveWriter::write_frame`]): memory stays the encoder's
    /// whatever the object's size.
    pub fn begin_frame(&mut self, key: &str, target: &str, size: u64) -> std::io::Result<()> {
        use std::io::Write;
        if self.open.is_some() {
            return Err(ArchiveWriteError::FrameBeforeEnd.into());
        }
        let mut encoder = Box::new(FrameEncoder::new()?);
        encoder.start(size)?;
        // The length prefix is written when the frame ends.
        self.file.write_all(&[0u8; 4])?;
        self.open = Some((key.to_string(), target.to_string(), encoder, 0));
        Ok(())
    }

    /// Add the code object of `key` for `target` (`size` bytes) as `reader` gives it, a buffer
    /// at a time ([`ArchiveWriter::begin_frame`]).
    pub fn add_streamed(
        &mut self,
        key: &str,
        target: &str,
        size: u64,
        reader: &mut dyn std::io::Read,
    ) -> std::io::Result<Object> {
        self.begin_frame(key, target, size)?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                return self.end_frame();
            }
            self.write_frame(&buf[..n])?;
        }
    }

    /// The next bytes of the frame begun.
    pub fn write_frame(&mut self, data: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let Some((_, _, encoder, written)) = self.open.as_mut() else {
            return Err(std::io::Error::from(ArchiveWriteError::NoFrameBegun));
        };
        let file = &mut self.file;
        encoder.write(data, &mut |bytes| {
            *written += bytes.len() as u64;
            file.write_all(bytes)
        })
    }

    /// End the frame begun: its length written before it, and its object in the table.
    pub fn end_frame(&mut self) -> std::io::Result<Object> {
        use std::io::Write;
        let (key, target, mut encoder, mut len) =
            self.open.take().ok_or_else(|| std::io::Error::from(ArchiveWriteError::NoFrameBegun))?;
        let file = &mut self.file;
        let object = encoder.finish(&mut |bytes| {
            len += bytes.len() as u64;
            file.write_all(bytes)
        })?;
        let len32 = u32::try_from(len).map_err(|_| std::io::Error::from(ArchiveWriteError::ObjectTooLarge))?;
        let ordinal = self.frames.len() as u64;
        let previous = self.toc.entry(key.clone()).or_default().insert(target.clone(), (ordinal, object));
        if previous.is_some() {
            return Err(ArchiveWriteError::TwoObjects { target: target.to_string(), key: key.to_string() }.into());
        }
        self.file.flush()?;
        std::os::unix::fs::FileExt::write_all_at(self.file.get_ref(), &len32.to_le_bytes(), self.at)?;
        self.frames.push((self.at + 4, len32));
        self.at += 4 + len;
        Ok(object)
    }

    /// The keys and, for each, the target ids and original sizes of its code objects.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.toc.iter().flat_map(|(key, per)| per.iter().map(move |(t, (_, o))| (key.as_str(), t.as_str(), o.size)))
    }

    /// Every code object the archive should hold, for its proof.
    pub fn expected(&self) -> Vec<Expected> {
        let mut all = Vec::new();
        for (key, per) in &self.toc {
            for (target, &(_, object)) in per {
                all.push(Expected { key: key.clone(), target: target.clone(), object });
            }
        }
        all
    }

    /// The size of the code object of `key` for `target`, if the archive has one.
    pub fn original_size(&self, key: &str, target: &str) -> Option<u64> {
        self.toc.get(key)?.get(target).map(|(_, o)| o.size)
    }

    /// Where the frame of `key` for `target` lies in the file (its offset and length, the file
    /// flushed so that it can be read there), and its code object's description.
    fn stored(&mut self, key: &str, target: &str) -> std::io::Result<(Object, u64, u32)> {
        use std::io::Write;
        let &(ordinal, object) = self.toc.get(key).and_then(|per| per.get(target)).ok_or_else(|| {
            std::io::Error::from(ArchiveWriteError::NoObject { target: target.to_string(), key: key.to_string() })
        })?;
        self.file.flush()?;
        let (at, len) = self.frames[ordinal as usize];
        Ok((object, at, len))
    }

    /// The frame of `key` for `target` and its code object's description, read back from the file.
    pub fn frame(&mut self, key: &str, target: &str) -> std::io::Result<(Object, Vec<u8>)> {
        let (object, at, len) = self.stored(key, target)?;
        let mut frame = vec![0u8; len as usize];
        std::os::unix::fs::FileExt::read_exact_at(self.file.get_ref(), &mut frame, at)?;
        Ok((object, frame))
    }

    /// Copy the frame of `key` for `target` from the archive `from`, as it is, under `as_key`:
    /// a piece at a time, whatever its size.
    pub fn copy_frame(
        &mut self,
        from: &mut ArchiveWriter,
        key: &str,
        target: &str,
        as_key: &str,
    ) -> std::io::Result<()> {
        use std::io::Write;
        if self.open.is_some() {
            return Err(ArchiveWriteError::FrameWhileStreaming.into());
        }
        let (object, at, len) = from.stored(key, target)?;
        let ordinal = self.frames.len() as u64;
        let previous = self.toc.entry(as_key.to_string()).or_default().insert(target.to_string(), (ordinal, object));
        if previous.is_some() {
            return Err(ArchiveWriteError::TwoObjects { target: target.to_string(), key: as_key.to_string() }.into());
        }
        self.file.write_all(&len.to_le_bytes())?;
        let mut buf = vec![0u8; (len as usize).min(1 << 20)];
        let mut done = 0u64;
        while done < u64::from(len) {
            let n = (u64::from(len) - done).min(buf.len() as u64) as usize;
            std::os::unix::fs::FileExt::read_exact_at(from.file.get_ref(), &mut buf[..n], at + done)?;
            self.file.write_all(&buf[..n])?;
            done += n as u64;
        }
        self.frames.push((self.at + 4, len));
        self.at += 4 + u64::from(len);
        Ok(())
    }

    /// Give every key the name `rename` gives it (frames written before their keys were known);
    /// an error, nothing renamed, if it gives one none or two keys the same name.
    pub fn rename_keys(&mut self, rename: &dyn Fn(&str) -> Option<String>) -> std::io::Result<()> {
        let mut renamed = std::collections::BTreeMap::new();
        for (key, per) in &self.toc {
            let new = rename(key).ok_or_else(|| std::io::Error::from(ArchiveWriteError::NoName(key.to_string())))?;
            if renamed.insert(new.clone(), per.clone()).is_some() {
                return Err(ArchiveWriteError::TwoKeys(new.to_string()).into());
            }
        }
        self.toc = renamed;
        Ok(())
    }

    /// The target ids the archive holds code for.
    pub fn targets(&self) -> std::collections::BTreeSet<&str> {
        self.toc.values().flat_map(|per| per.keys().map(String::as_str)).collect()
    }

    /// Write the table of contents and the header; the archive is complete.
    pub fn finish(self, group_name: &str, family: &str) -> std::io::Result<std::fs::File> {
        use std::io::{Seek, SeekFrom, Write};
        if self.open.is_some() {
            return Err(ArchiveWriteError::FinishedWhileStreaming.into());
        }
        let arches = self.targets();
        let mut toc = Vec::new();
        write::map_len(&mut toc, 8);
        write::str(&mut toc, "format_version");
        write::uint(&mut toc, 1);
        write::str(&mut toc, "group_name");
        write::str(&mut toc, group_name);
        write::str(&mut toc, "gfx_arch_family");
        write::str(&mut toc, family);
        write::str(&mut toc, "gfx_arches");
        write::array_len(&mut toc, arches.len());
        for arch in &arches {
            write::str(&mut toc, arch);
        }
        write::str(&mut toc, "compression_scheme");
        write::str(&mut toc, "zstd-per-kernel");
        write::str(&mut toc, "zstd_offset");
        write::uint(&mut toc, ARCHIVE_HEADER);
        write::str(&mut toc, "zstd_size");
        write::uint(&mut toc, self.at - ARCHIVE_HEADER);
        write::str(&mut toc, "toc");
        write::map_len(&mut toc, self.toc.len());
        for (key, per_target) in &self.toc {
            write::str(&mut toc, key);
            write::map_len(&mut toc, per_target.len());
            for (target, (ordinal, object)) in per_target {
                write::str(&mut toc, target);
                write::map_len(&mut toc, 3);
                write::str(&mut toc, "type");
                write::str(&mut toc, "hsaco");
                write::str(&mut toc, "ordinal");
                write::uint(&mut toc, *ordinal);
                write::str(&mut toc, "original_size");
                write::uint(&mut toc, object.size);
            }
        }
        let (at, frames) = (self.at, self.frames.len());
        let mut file = self.file;
        file.write_all(&toc)?;
        let mut file = file.into_inner().map_err(|e| e.into_error())?;
        let mut header = Vec::with_capacity(ARCHIVE_HEADER as usize + 4);
        header.extend(b"KPAK");
        header.extend(1u32.to_le_bytes());
        header.extend(at.to_le_bytes());
        header.resize(ARCHIVE_HEADER as usize, 0);
        header.extend(
            u32::try_from(frames).map_err(|_| std::io::Error::from(ArchiveWriteError::TooManyObjects))?.to_le_bytes(),
        );
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header)?;
        file.flush()?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_frame_streamed_in_pieces_is_the_frame_of_the_whole_object() {
        let object: Vec<u8> = (0..(9u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 27) as u8).collect();
        let whole = {
            let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
            w.add("k#0", "gfx942", &object).unwrap();
            w.frame("k#0", "gfx942").unwrap()
        };
        let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        w.begin_frame("k#0", "gfx942", object.len() as u64).unwrap();
        for piece in object.chunks(777_777) {
            w.write_frame(piece).unwrap();
        }
        assert_eq!(w.end_frame().unwrap(), Object::of(&object));
        assert_eq!(w.frame("k#0", "gfx942").unwrap(), whole, "the same bytes however the object came");
        let mut copied = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        copied.copy_frame(&mut w, "k#0", "gfx942", "k#1").unwrap();
        assert_eq!(copied.frame("k#1", "gfx942").unwrap(), whole);
        // An object that is not the size begun with is an error, not a frame.
        w.begin_frame("k#1", "gfx942", 10).unwrap();
        w.write_frame(b"short").unwrap();
        assert!(w.end_frame().is_err());
    }

    use super::*;

    #[test]
    fn a_frame_made_in_one_call_names_its_size_and_carries_its_checksum() {
        for len in [0usize, 1, 4096, 3 << 20, WHOLE_OBJECT as usize] {
            let object: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
            let (described, frame) = compress_frame(&object).unwrap();
            assert_eq!(described, Object::of(&object));
            assert_eq!(zstd::zstd_safe::get_frame_content_size(&frame).unwrap(), Some(len as u64));
            // The frame header descriptor's bit 2: a content checksum follows the last block.
            assert_eq!(frame[4] & 0b100, 0b100, "{len} bytes: checksum flag");
            assert_eq!(zstd::bulk::decompress(&frame, len).unwrap(), object);
            let mut again = vec![9u8; 5];
            assert_eq!(compress_frame_into(&object, &mut again).unwrap(), described);
            assert_eq!(again, frame, "{len} bytes: the same frame in a used buffer");
        }
    }

    /// `len` bytes: random letters of a 16-letter alphabet (no repeats to find), or code-like
    /// bytes (a few hundred distinct instruction words, repeated in a random order).
    fn sample_object(len: usize, random_letters: bool) -> Vec<u8> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        if random_letters {
            return (0..len).map(|_| b'a' + (next() % 16) as u8).collect();
        }
        let words: Vec<u64> = (0..300).map(|_| next()).collect();
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend(words[(next() % 300) as usize].to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `object` compressed whole at `level`, with the archive's checksum.
    fn at_level(object: &[u8], level: i32) -> Vec<u8> {
        let mut compressor = zstd::bulk::Compressor::new(level).unwrap();
        compressor.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true)).unwrap();
        compressor.compress(object).unwrap()
    }

    #[test]
    fn an_object_with_no_repeats_is_framed_at_level_1_and_the_same_frame_when_streamed() {
        for (random_letters, level) in [(true, POOR_ZSTD_LEVEL), (false, ARCHIVE_ZSTD_LEVEL)] {
            for len in [100usize, 5000, 1 << 20] {
                let object = sample_object(len, random_letters);
                let (described, frame) = compress_frame(&object).unwrap();
                assert_eq!(described, Object::of(&object));
                // Small objects are always at level 3.
                let level = if len < 4096 { ARCHIVE_ZSTD_LEVEL } else { level };
                assert_eq!(frame, at_level(&object, level), "{len} bytes, random letters {random_letters}");
                // Streamed in pieces of every size, the level is chosen from the same first bytes.
                for piece in [1000usize, LEVEL_SAMPLE, len] {
                    let mut encoder = FrameEncoder::new().unwrap();
                    let mut streamed = Vec::new();
                    let mut out = |bytes: &[u8]| {
                        streamed.extend_from_slice(bytes);
                        Ok(())
                    };
                    encoder.start(len as u64).unwrap();
                    for chunk in object.chunks(piece) {
                        encoder.write(chunk, &mut out).unwrap();
                    }
                    assert_eq!(encoder.finish(&mut out).unwrap(), described);
                    assert!(zstd::bulk::decompress(&streamed, len).unwrap() == object, "{len} in pieces of {piece}");
                    let streamed_whole = at_level_streamed(&object, level);
                    assert_eq!(streamed, streamed_whole, "{len} bytes in pieces of {piece}: the level's frame");
                }
            }
        }
        // Where level 1 wins: smaller than level 3's frame.
        let letters = sample_object(1 << 20, true);
        assert!(compress_frame(&letters).unwrap().1.len() < at_level(&letters, ARCHIVE_ZSTD_LEVEL).len());
    }

    /// `object` through a zstd stream at `level` with the archive's parameters.
    fn at_level_streamed(object: &[u8], level: i32) -> Vec<u8> {
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), level).unwrap();
        encoder.include_checksum(true).unwrap();
        encoder.set_pledged_src_size(Some(object.len() as u64)).unwrap();
        encoder.include_contentsize(true).unwrap();
        std::io::Write::write_all(&mut encoder, object).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn an_archive_reads_back_through_its_table() {
        let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        w.add("lib/k.so#0", "gfx942", b"first object").unwrap();
        w.add("lib/k.so#1", "gfx942:xnack+", &[7u8; 300]).unwrap();
        assert!(w.add("lib/k.so#0", "gfx942", b"again").is_err(), "one object per key and target");
        let mut file = w.finish("k", "gfx9").unwrap();
        let mut bytes = Vec::new();
        use std::io::{Read, Seek};
        file.rewind().unwrap();
        file.read_to_end(&mut bytes).unwrap();
        assert_eq!(&bytes[..8], b"KPAK\x01\0\0\0");
        let (toc_at, _) = crate::kpack_toc_range(&bytes[..16], bytes.len() as u64).unwrap();
        let toc = crate::msgpack::parse(&bytes[toc_at as usize..]).unwrap();
        let arches: Vec<&str> =
            toc.get("gfx_arches").unwrap().as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
        assert_eq!(arches, ["gfx942", "gfx942:xnack+"]);
        let entry = toc.get("toc").unwrap().get("lib/k.so#1").unwrap().get("gfx942:xnack+").unwrap();
        assert_eq!(entry.get("original_size"), Some(&crate::msgpack::Value::Int(300)));
        let ordinal = match entry.get("ordinal") {
            Some(crate::msgpack::Value::Int(n)) => *n as usize,
            _ => panic!(),
        };
        // Frames: u32 count, then u32 length + frame each.
        let mut at = 64;
        let count = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(count, 2);
        at += 4;
        for _ in 0..ordinal {
            at += 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        }
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(zstd::bulk::decompress(&bytes[at + 4..at + 4 + len], 1 << 20).unwrap(), vec![7u8; 300]);
    }

    #[test]
    fn frames_written_before_their_keys_are_named_after() {
        let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        w.add("@4096", "gfx942", b"first").unwrap();
        w.add("@8192", "gfx942", &[3u8; 100]).unwrap();
        let (object, frame) = w.frame("@8192", "gfx942").unwrap();
        assert_eq!((object.size, zstd::bulk::decompress(&frame, 100).unwrap()), (100, vec![3u8; 100]));
        assert_eq!(object, Object::of(&[3u8; 100]));
        assert!(w.frame("@1", "gfx942").is_err());
        assert!(w.rename_keys(&|k| (k == "@4096").then(|| "k.so#0".to_string())).is_err(), "one left unnamed");
        assert!(w.rename_keys(&|_| Some("k.so#0".to_string())).is_err(), "two named the same");
        w.rename_keys(&|k| Some(if k == "@4096" { "k.so#0" } else { "k.so#1" }.to_string())).unwrap();
        let keys: Vec<(&str, &str, u64)> = w.entries().collect();
        assert_eq!(keys, [("k.so#0", "gfx942", 5), ("k.so#1", "gfx942", 100)]);
        assert_eq!(w.frame("k.so#1", "gfx942").unwrap().1, frame);
    }

    #[test]
    fn markers_are_the_map_the_runtime_reads() {
        let m = marker("p/lib/libk.so", &[".kpack/libk.so_@GFXARCH@.kpack".into()]);
        assert_eq!(read_marker(&m).unwrap().1, [".kpack/libk.so_@GFXARCH@.kpack"]);
        assert_eq!(read_marker(b"\x82\xa1a\x01"), None);
        let v = crate::msgpack::parse(&m).unwrap();
        assert_eq!(v.get("kernel_name").and_then(|k| k.as_str()), Some("p/lib/libk.so"));
        assert_eq!(v.get("kpack_search_paths").unwrap().as_array().unwrap().len(), 1);
        let long = "x".repeat(70000);
        assert_eq!(
            crate::msgpack::parse(&marker(&long, &[])).unwrap().get("kernel_name").and_then(|k| k.as_str()),
            Some(long.as_str())
        );
    }
}
