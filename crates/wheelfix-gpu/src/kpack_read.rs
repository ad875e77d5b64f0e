//! A kpack archive read back whole, as the runtime would read it: the header, the table of
//! contents, the frame index, and every code object decoded, sized, hashed and its processor
//! read from its own ELF header. It shares nothing with [`crate::kpack::ArchiveWriter`] but the
//! format's description (`../shared/reference/gpu-code-formats.md` §4.1), so that what it
//! finds is a proof of what the writer wrote, not a repetition of it. Memory stays a buffer's
//! worth whatever the size of a code object.

use std::io::Read;

use crate::msgpack::Value;

/// One code object the archive's table names, as decoded from its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRead {
    pub key: String,
    pub target: String,
    /// The size the table gives it.
    pub original_size: u64,
    /// What its frame decodes to: its size and XXH3-128 digest.
    pub object: crate::kpack::Object,
    /// The target ID its own ELF header names (`None`: not an AMDGPU ELF file).
    pub elf_target: Option<crate::TargetId>,
}

/// What is wrong with an archive. Each names the table's key and target id where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveProblem {
    #[error("not a kpack archive (no KPAK header)")]
    NotAnArchive,
    #[error("kpack archive version {0}, not 1")]
    Version(u32),
    #[error("its table of contents lies at {at}, outside the file's {len} bytes")]
    TocOutside { at: u64, len: u64 },
    #[error("its table of contents cannot be read: {0}")]
    Toc(String),
    #[error("its table of contents is not MessagePack: {0}")]
    TocNotMsgpack(#[from] crate::msgpack::MsgpackError),
    #[error("compression scheme {0:?}: neither zstd-per-kernel nor none")]
    Scheme(String),
    #[error("its frames ({from}..{to}) lie outside the file, or overlap its header or table of contents")]
    FramesOutside { from: u64, to: u64 },
    #[error("frame {ordinal} ({len} bytes at {at}) runs past the end of the frames")]
    FramePast { ordinal: u64, at: u64, len: u64 },
    #[error("{key} for {target}: ordinal {ordinal}, but the archive has {count} frames")]
    OrdinalOutOfRange { key: String, target: String, ordinal: u64, count: u64 },
    #[error("{key} for {target}: frame {ordinal} does not decode: {message}")]
    Undecodable { key: String, target: String, ordinal: u64, message: String },
    #[error("{key} for {target}: frame {ordinal} decodes to {got} bytes, the table says {expected}")]
    WrongSize { key: String, target: String, ordinal: u64, got: u64, expected: u64 },
    #[error("{key} for {target}: frame {ordinal} holds code for {found}")]
    WrongProcessor { key: String, target: String, ordinal: u64, found: String },
    #[error("{key} for {target}: frame {ordinal} is not an AMDGPU code object")]
    NotCode { key: String, target: String, ordinal: u64 },
    #[error("{key} for {target}: the table's entry has no {field}")]
    Entry { key: String, target: String, field: &'static str },
    #[error("cannot read the archive: {0}")]
    Io(String),
}

/// The archive read: every object its table names, and what is wrong with it.
#[derive(Debug, Default)]
pub struct ArchiveRead {
    pub group_name: Option<String>,
    pub objects: Vec<ObjectRead>,
    pub problems: Vec<ArchiveProblem>,
}

/// Read a whole archive of `len` bytes through `read_at` (bytes at an offset), decoding every
/// code object its table names. Stops at the first problem of the header or table; records
/// every problem of the objects.
pub fn read_archive(read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>, len: u64) -> ArchiveRead {
    let mut out = ArchiveRead::default();
    if let Err(problem) = read_into(read_at, len, &mut out) {
        out.problems.push(problem);
    }
    out
}

/// A table entry: key, target id, ordinal, original size.
type Entry = (String, String, u64, u64);

fn read_into(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    len: u64,
    out: &mut ArchiveRead,
) -> Result<(), ArchiveProblem> {
    let io = |e: std::io::Error| ArchiveProblem::Io(e.to_string());
    let mut header = [0u8; 16];
    if len < 16 {
        return Err(ArchiveProblem::NotAnArchive);
    }
    read_at(&mut header, 0).map_err(io)?;
    if &header[..4] != b"KPAK" {
        return Err(ArchiveProblem::NotAnArchive);
    }
    let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if version != 1 {
        return Err(ArchiveProblem::Version(version));
    }
    let toc_at = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if toc_at < 16 || toc_at >= len {
        return Err(ArchiveProblem::TocOutside { at: toc_at, len });
    }
    let toc_len = (len - toc_at).min(crate::KPACK_TOC_MAX);
    let mut toc_bytes = vec![0u8; toc_len as usize];
    read_at(&mut toc_bytes, toc_at).map_err(io)?;
    let toc = crate::msgpack::parse(&toc_bytes)?;
    drop(toc_bytes);
    out.group_name = toc.get("group_name").and_then(Value::as_str).map(str::to_string);
    let entries = entries(&toc)?;
    let scheme = toc.get("compression_scheme").and_then(Value::as_str).unwrap_or("");
    // Each frame's (offset, length): from the frame index for zstd, from `blobs` for none.
    let frames: Vec<(u64, u64)> = match scheme {
        "zstd-per-kernel" => {
            let from = uint(&toc, "zstd_offset").ok_or_else(|| ArchiveProblem::Toc("no zstd_offset".into()))?;
            let size = uint(&toc, "zstd_size").ok_or_else(|| ArchiveProblem::Toc("no zstd_size".into()))?;
            let to = from.checked_add(size).ok_or(ArchiveProblem::FramesOutside { from, to: u64::MAX })?;
            if from < 16 || to > toc_at || size < 4 {
                return Err(ArchiveProblem::FramesOutside { from, to });
            }
            frame_index(read_at, from, to)?
        }
        "none" => {
            let blobs = toc.get("blobs").and_then(Value::as_array).unwrap_or_default();
            let mut frames = Vec::new();
            for blob in blobs {
                let (Some(at), Some(size)) = (uint(blob, "offset"), uint(blob, "size")) else {
                    return Err(ArchiveProblem::Toc("a blob without offset and size".into()));
                };
                if at < 16 || at.checked_add(size).is_none_or(|end| end > toc_at) {
                    return Err(ArchiveProblem::FramesOutside { from: at, to: at.saturating_add(size) });
                }
                frames.push((at, size));
            }
            frames
        }
        other => return Err(ArchiveProblem::Scheme(other.to_string())),
    };
    let count = frames.len() as u64;
    for (key, target, ordinal, original_size) in entries {
        let Some(&(at, frame_len)) = frames.get(ordinal as usize) else {
            out.problems.push(ArchiveProblem::OrdinalOutOfRange { key, target, ordinal, count });
            continue;
        };
        let source = RangeReader { read_at, at, end: at + frame_len };
        let decoded = if scheme == "none" { measure(source) } else { decode(source) };
        let (object, head) = match decoded {
            Ok(found) => found,
            Err(e) => {
                out.problems.push(ArchiveProblem::Undecodable { key, target, ordinal, message: e.to_string() });
                continue;
            }
        };
        if object.size != original_size {
            out.problems.push(ArchiveProblem::WrongSize {
                key: key.clone(),
                target: target.clone(),
                ordinal,
                got: object.size,
                expected: original_size,
            });
        }
        let elf_target = elf_target(&head);
        match &elf_target {
            None => out.problems.push(ArchiveProblem::NotCode { key: key.clone(), target: target.clone(), ordinal }),
            Some(found) if found.processor() != processor(&target) => {
                out.problems.push(ArchiveProblem::WrongProcessor {
                    key: key.clone(),
                    target: target.clone(),
                    ordinal,
                    found: found.to_string(),
                });
            }
            Some(_) => {}
        }
        out.objects.push(ObjectRead { key, target, original_size, object, elf_target });
    }
    Ok(())
}

/// The table's entries: `toc: {key: {target: {ordinal, original_size}}}`.
fn entries(toc: &Value) -> Result<Vec<Entry>, ArchiveProblem> {
    let map = toc.get("toc").and_then(Value::as_map).ok_or_else(|| ArchiveProblem::Toc("no toc map".into()))?;
    let mut found = Vec::new();
    for (key, per_target) in map {
        let key = key.as_str().ok_or_else(|| ArchiveProblem::Toc("a key that is not a string".into()))?;
        let per_target =
            per_target.as_map().ok_or_else(|| ArchiveProblem::Toc(format!("{key}: not a map of target ids")))?;
        for (target, entry) in per_target {
            let target = target
                .as_str()
                .ok_or_else(|| ArchiveProblem::Toc(format!("{key}: a target id that is not a string")))?;
            let missing = |field| ArchiveProblem::Entry { key: key.to_string(), target: target.to_string(), field };
            let ordinal = uint(entry, "ordinal").ok_or_else(|| missing("ordinal"))?;
            let size = uint(entry, "original_size").ok_or_else(|| missing("original_size"))?;
            found.push((key.to_string(), target.to_string(), ordinal, size));
        }
    }
    Ok(found)
}

fn uint(value: &Value, field: &str) -> Option<u64> {
    match value.get(field)? {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// The frames of a `zstd-per-kernel` blob in [from, to): u32 count, then u32 length and frame.
fn frame_index(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    from: u64,
    to: u64,
) -> Result<Vec<(u64, u64)>, ArchiveProblem> {
    let io = |e: std::io::Error| ArchiveProblem::Io(e.to_string());
    let mut word = [0u8; 4];
    read_at(&mut word, from).map_err(io)?;
    let count = u64::from(u32::from_le_bytes(word));
    let mut frames = Vec::new();
    let mut at = from + 4;
    for ordinal in 0..count {
        if at + 4 > to {
            return Err(ArchiveProblem::FramePast { ordinal, at, len: 0 });
        }
        read_at(&mut word, at).map_err(io)?;
        let len = u64::from(u32::from_le_bytes(word));
        if at + 4 + len > to {
            return Err(ArchiveProblem::FramePast { ordinal, at: at + 4, len });
        }
        frames.push((at + 4, len));
        at += 4 + len;
    }
    Ok(frames)
}

/// Bytes [at, end) of a file as a stream (also [`crate::bundle_read`]'s).
pub(crate) struct RangeReader<'r> {
    pub(crate) read_at: &'r dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    pub(crate) at: u64,
    pub(crate) end: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.end - self.at) as usize);
        if n > 0 {
            (self.read_at)(&mut buf[..n], self.at)?;
            self.at += n as u64;
        }
        Ok(n)
    }
}

/// The first bytes of a code object kept for its ELF header.
const HEAD: usize = 64;

/// Frames up to this size whose content is at most [`WHOLE_CONTENT`] are decoded in one call
/// into a buffer of the thread's: a third faster than as a stream, which copies everything
/// out of its window once more. Larger ones stream, in bounded memory.
const WHOLE_FRAME: u64 = 2 << 20;
const WHOLE_CONTENT: u64 = 8 << 20;

/// The decoder context and the frame and content buffers of whole decodes.
type WholeDecode = (zstd::bulk::Decompressor<'static>, Vec<u8>, Vec<u8>);

thread_local! {
    /// One [`WholeDecode`] per thread, kept between frames.
    static WHOLE: std::cell::RefCell<Option<WholeDecode>> =
        const { std::cell::RefCell::new(None) };
}

/// Why a frame does not decode to one code object.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    /// Reading the archive, or zstd's decoder, failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// zstd cannot find where the frame ends. Ex) `Unknown frame descriptor`
    #[error("{0}")]
    Zstd(&'static str),
    /// One frame must fill its range: what follows it is not part of the code object.
    #[error("{0} bytes after the zstd frame")]
    Trailing(u64),
}

/// A decoded frame: its content's size, XXH3-128 digest and head.
type Decoded = Result<(crate::kpack::Object, Vec<u8>), FrameError>;

/// Decode one zstd frame that must fill the whole range: its content's size, XXH3-128 digest and head.
fn decode(source: RangeReader<'_>) -> Decoded {
    if source.end - source.at <= WHOLE_FRAME
        && let Some(found) = decode_whole(&source)
    {
        return found;
    }
    decode_stream(source)
}

/// Decode a small frame whose header states its content size in one call; `None` when the
/// header states none or a larger one.
fn decode_whole(source: &RangeReader<'_>) -> Option<Decoded> {
    WHOLE.with_borrow_mut(|whole| {
        if whole.is_none() {
            *whole = Some((zstd::bulk::Decompressor::new().ok()?, Vec::new(), Vec::new()));
        }
        let (decompressor, frame, content) = whole.as_mut().expect("made above");
        frame.resize((source.end - source.at) as usize, 0);
        if let Err(e) = (source.read_at)(frame, source.at) {
            return Some(Err(e.into()));
        }
        let size = zstd::zstd_safe::get_frame_content_size(frame).ok().flatten()?;
        if size > WHOLE_CONTENT {
            return None;
        }
        content.clear();
        content.reserve(size as usize);
        // A frame that holds more than its header says fails here, as it does in a stream.
        if let Err(e) = decompressor.decompress_to_buffer(frame.as_slice(), content) {
            return Some(Err(e.into()));
        }
        // One frame must fill the range: what follows it is not part of the code object.
        match zstd::zstd_safe::find_frame_compressed_size(frame) {
            Ok(n) if n == frame.len() => {}
            Ok(n) => return Some(Err(FrameError::Trailing((frame.len() - n) as u64))),
            Err(code) => return Some(Err(FrameError::Zstd(zstd::zstd_safe::get_error_name(code)))),
        }
        Some(Ok((crate::kpack::Object::of(content), content[..content.len().min(HEAD)].to_vec())))
    })
}

/// Decode one zstd frame as a stream.
fn decode_stream(source: RangeReader<'_>) -> Decoded {
    let mut decoder = zstd::stream::read::Decoder::new(source)?.single_frame();
    let found = measure(&mut decoder)?;
    let rest = decoder.finish();
    let left = rest.buffer().len() as u64 + (rest.get_ref().end - rest.get_ref().at);
    if left != 0 {
        return Err(FrameError::Trailing(left));
    }
    Ok(found)
}

/// Size, XXH3-128 digest and head of everything `source` gives.
fn measure(mut source: impl Read) -> Decoded {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 256 << 10];
    let (mut size, mut head) = (0u64, Vec::with_capacity(HEAD));
    loop {
        let n = source.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if head.len() < HEAD {
            let take = (HEAD - head.len()).min(n);
            head.extend_from_slice(&buf[..take]);
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((crate::kpack::Object { size, xxh3: hasher.digest128() }, head))
}

/// The target ID an AMDGPU code object's ELF header names.
pub fn elf_target(head: &[u8]) -> Option<crate::TargetId> {
    const EM_AMDGPU: u16 = 224;
    if head.len() < 52 || &head[..4] != b"\x7fELF" || u16::from_le_bytes([head[18], head[19]]) != EM_AMDGPU {
        return None;
    }
    let (flags, os_abi, abi_version) = wheelfix_elf::header::gpu_header_fields(head)?;
    Some(crate::amdgpu_target(flags, os_abi, abi_version).0)
}

use crate::targets::processor_of as processor;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpack::{ArchiveWriter, Object};

    /// A minimal AMDGPU ELF header for `mach`, then `body`.
    fn code_object(mach: u32, body: &[u8]) -> Vec<u8> {
        let mut head = vec![0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = 2;
        head[5] = 1;
        head[7] = 64;
        head[8] = 3;
        head[18..20].copy_from_slice(&224u16.to_le_bytes());
        head[48..52].copy_from_slice(&(mach | 0x400).to_le_bytes());
        head.extend_from_slice(body);
        head
    }

    fn written(objects: &[(&str, &str, &[u8])]) -> Vec<u8> {
        let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        for (key, target, bytes) in objects {
            w.add(key, target, bytes).unwrap();
        }
        let mut file = w.finish("k", "gfx9").unwrap();
        let mut bytes = Vec::new();
        use std::io::Seek;
        file.rewind().unwrap();
        file.read_to_end(&mut bytes).unwrap();
        bytes
    }

    fn read(bytes: &[u8]) -> ArchiveRead {
        let read_at = |buf: &mut [u8], at: u64| {
            let at = at as usize;
            match bytes.get(at..at + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(())
                }
                None => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
            }
        };
        read_archive(&read_at, bytes.len() as u64)
    }

    #[test]
    fn every_object_reads_back_with_its_size_digest_and_processor() {
        let a = code_object(0x4c, &[1u8; 5000]);
        let b = code_object(0x3f, &[2u8; 300]);
        let bytes = written(&[("k.so#0", "gfx942", &a), ("k.so#1", "gfx90a:xnack+", &b)]);
        let found = read(&bytes);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        assert_eq!(found.objects.len(), 2);
        assert_eq!(found.objects[0].object, Object::of(&a));
        assert_eq!(found.objects[0].elf_target.as_ref().map(|t| t.as_str()), Some("gfx942"));
        assert_eq!(found.objects[1].object, Object::of(&b));
    }

    #[test]
    fn corrupt_archives_are_named_for_what_is_wrong() {
        let a = code_object(0x4c, &[1u8; 5000]);
        let bytes = written(&[("k.so#0", "gfx942", &a)]);
        // A frame byte flipped, anywhere: the frame's checksum no longer matches.
        let frame_len = u32::from_le_bytes(bytes[68..72].try_into().unwrap()) as usize;
        for at in [72 + 6, 72 + frame_len / 2, 72 + frame_len - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0xff;
            let found = read(&flipped);
            assert!(!found.problems.is_empty(), "a byte flipped at {at} passes");
        }
        // Incompressible content (stored as raw blocks) too.
        let mut x = 88_172_645_463_325_252u64;
        let noise: Vec<u8> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let raw = written(&[("k.so#0", "gfx942", &code_object(0x4c, &noise))]);
        let mut flipped = raw.clone();
        flipped[72 + 10_000] ^= 1;
        assert!(!read(&flipped).problems.is_empty(), "a flipped byte of a raw block passes");
        // gfx90a code under the gfx942 key.
        let other = code_object(0x3f, &[1u8; 5000]);
        let found = read(&written(&[("k.so#0", "gfx942", &other)]));
        assert!(matches!(found.problems[..], [ArchiveProblem::WrongProcessor { .. }]), "{:?}", found.problems);
        // Not a code object at all.
        let found = read(&written(&[("k.so#0", "gfx942", b"junk")]));
        assert!(matches!(found.problems[..], [ArchiveProblem::NotCode { .. }]), "{:?}", found.problems);
        // The table's offset past the end.
        let mut past = bytes.clone();
        past[8..16].copy_from_slice(&(bytes.len() as u64 + 5).to_le_bytes());
        assert!(matches!(read(&past).problems[..], [ArchiveProblem::TocOutside { .. }]));
        // An empty frame where the table says 5064 bytes.
        let mut w = ArchiveWriter::new(tempfile::tempfile().unwrap()).unwrap();
        w.add_frame("k.so#0", "gfx942", Object::of(&a), &[]).unwrap();
        let mut file = w.finish("k", "gfx9").unwrap();
        let mut empty = Vec::new();
        use std::io::Seek;
        file.rewind().unwrap();
        file.read_to_end(&mut empty).unwrap();
        assert!(!read(&empty).problems.is_empty(), "an empty frame passes");
    }

    #[test]
    fn an_ordinal_past_the_frames_is_a_problem() {
        let a = code_object(0x4c, &[1u8; 50]);
        let mut bytes = written(&[("k.so#0", "gfx942", &a)]);
        // The ordinal 0 in the table becomes 5 (a positive fixint, one byte).
        let key = b"ordinal";
        let pos = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
        assert_eq!(bytes[pos], 0);
        bytes[pos] = 5;
        assert!(matches!(read(&bytes).problems[..], [ArchiveProblem::OrdinalOutOfRange { .. }]));
    }
}
