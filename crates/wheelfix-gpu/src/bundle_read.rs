//! The offload bundles of a range of a file read back for a proof: every plain bundle
//! (`__CLANG_OFFLOAD_BUNDLE__`) and compressed bundle (`CCOB`) found in it, and each device
//! code object they hold, sized and hashed. Like [`crate::kpack_read`], it shares nothing with
//! the rewriter ([`crate::rewrite`]) or the scanner but the format's description
//! (`../shared/reference/gpu-code-formats.md` §2–3): its own table parser and the zlib and zstd
//! libraries' own readers, so that a rewrite's mistake is not read back as its own intention.
//! A compressed bundle's MD5 field is not checked: clang checks it only when asked to be
//! verbose, the runtime never, and published bundles (and tests' fixtures) carry wrong ones.
//! Memory stays a buffer's worth whatever the size of a code object.

use std::io::Read;

use crate::kpack::Object;
use crate::kpack_read::RangeReader;
use wheelfix_base::le;

const PLAIN_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const COMPRESSED_MAGIC: &[u8] = b"CCOB";
/// Why a range's bundles do not read back: the file could not be read, or a bundle whose
/// table reads holds contents that do not.
#[derive(Debug, thiserror::Error)]
pub enum BundleReadError {
    #[error("cannot read bytes {from}..{to}: {source}")]
    Read { from: u64, to: u64, source: std::io::Error },
    /// A plain bundle: its bytes could not be read, or an entry runs past its end.
    #[error("the bundle at {at}: {problem}")]
    Plain { at: u64, problem: String },
    /// A compressed bundle: its bytes could not be read or decoded, or what they decode to is
    /// not the bundle its header describes.
    #[error("the compressed bundle at {at}: {problem}")]
    Compressed { at: u64, problem: String },
}

/// More entries or a longer id than any bundler writes: the bytes are not a bundle table.
const MAX_ENTRIES: u64 = 1 << 16;
const MAX_ID: u64 = 1 << 12;

/// A device code object of a bundle, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledObject {
    /// The entry's id as its table names it. Ex) `hipv4-amdgcn-amd-amdhsa--gfx942:xnack-`
    pub id: String,
    pub object: Object,
    /// Where its bytes lie in the file (a plain bundle's entry; `None` inside a compressed one).
    pub at: Option<u64>,
}

/// The bundles of a range: where each lies, and their device code objects in table order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundlesRead {
    pub spans: Vec<(u64, u64)>,
    pub objects: Vec<BundledObject>,
}

/// Read every bundle in [from, to) of a file that `read_at` reads. A magic whose header does
/// not read as a bundle is passed over; a bundle whose table reads but whose contents do not
/// (an entry past its end, a stream that does not decode or decodes to another size than its
/// header says) is an error naming it.
pub fn read_bundles(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    from: u64,
    to: u64,
) -> Result<BundlesRead, BundleReadError> {
    let mut found = BundlesRead::default();
    let mut at = from;
    while let Some((start, compressed)) = next_magic(read_at, at, to)? {
        let read = if compressed { compressed_bundle(read_at, start, to)? } else { plain_bundle(read_at, start, to)? };
        match read {
            Some((len, objects)) => {
                found.spans.push((start, start + len));
                found.objects.extend(objects);
                at = start + len.max(1);
            }
            None => at = start + 1,
        }
    }
    Ok(found)
}

/// The next magic of either kind at or after `at`, and whether it is a compressed bundle's.
fn next_magic(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    mut at: u64,
    to: u64,
) -> Result<Option<(u64, bool)>, BundleReadError> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = Vec::new();
    while at < to {
        let n = CHUNK.min(to - at) as usize;
        buf.resize(n, 0);
        read_at(&mut buf, at).map_err(|source| BundleReadError::Read { from: at, to: at + n as u64, source })?;
        let plain = memchr::memmem::find(&buf, PLAIN_MAGIC).map(|p| (p, false));
        let compressed = memchr::memmem::find(&buf, COMPRESSED_MAGIC).map(|p| (p, true));
        if let Some((p, kind)) = [plain, compressed].into_iter().flatten().min() {
            return Ok(Some((at + p as u64, kind)));
        }
        if at + n as u64 >= to {
            break;
        }
        // A magic may straddle two chunks.
        at += n as u64 - (PLAIN_MAGIC.len() as u64 - 1);
    }
    Ok(None)
}

/// One entry of a bundle table: offset (from the bundle's start), size, id.
type Entry = (u64, u64, String);

/// A bundle table read from `next` (the bytes after the magic); `None` when it does not read
/// as one. Also its length, magic included.
fn table(next: &mut dyn FnMut(&mut [u8]) -> std::io::Result<()>) -> std::io::Result<Option<(Vec<Entry>, u64)>> {
    let mut word = [0u8; 8];
    next(&mut word)?;
    let count = u64::from_le_bytes(word);
    if count == 0 || count > MAX_ENTRIES {
        return Ok(None);
    }
    let mut len = PLAIN_MAGIC.len() as u64 + 8;
    let mut entries = Vec::new();
    for _ in 0..count {
        let mut fields = [0u8; 24];
        next(&mut fields)?;
        let field = |i: usize| u64::from_le_bytes(fields[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (offset, size, id_len) = (field(0), field(1), field(2));
        if id_len == 0 || id_len > MAX_ID {
            return Ok(None);
        }
        let mut id = vec![0u8; id_len as usize];
        next(&mut id)?;
        let Ok(id) = String::from_utf8(id) else { return Ok(None) };
        len += 24 + id_len;
        entries.push((offset, size, id));
    }
    Ok(Some((entries, len)))
}

/// Host entries hold no device code.
fn is_device(id: &str) -> bool {
    !id.starts_with("host-")
}

/// The plain bundle at `start`: its length and device code objects.
fn plain_bundle(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    start: u64,
    to: u64,
) -> Result<Option<(u64, Vec<BundledObject>)>, BundleReadError> {
    let fail = |problem: String| BundleReadError::Plain { at: start, problem };
    let io = |e: std::io::Error| fail(e.to_string());
    let mut at = start + PLAIN_MAGIC.len() as u64;
    let mut next = |buf: &mut [u8]| {
        if at + buf.len() as u64 > to {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        read_at(buf, at).map(|()| at += buf.len() as u64)
    };
    let (entries, mut len) = match table(&mut next) {
        Ok(Some(read)) => read,
        Ok(None) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut objects = Vec::new();
    for (offset, size, id) in entries {
        let end = offset.checked_add(size).filter(|&end| start.saturating_add(end) <= to);
        let end = end.ok_or_else(|| fail(format!("entry `{id}` runs past the end")))?;
        len = len.max(end);
        if !is_device(&id) {
            continue;
        }
        let source = RangeReader { read_at, at: start + offset, end: start + end };
        let object = Object::of_reader(&mut { source }).map_err(io)?;
        objects.push(BundledObject { id, object, at: Some(start + offset) });
    }
    Ok(Some((len, objects)))
}

/// The compressed bundle at `start`: its length and the device code objects of the bundle
/// it decodes to.
fn compressed_bundle(
    read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    start: u64,
    to: u64,
) -> Result<Option<(u64, Vec<BundledObject>)>, BundleReadError> {
    let fail = |problem: String| BundleReadError::Compressed { at: start, problem };
    let mut head = [0u8; 32];
    let n = head.len().min((to - start) as usize);
    read_at(&mut head[..n], start).map_err(|e| fail(e.to_string()))?;
    // `head` is 32 bytes: every read below lies inside it (the match checks `n` first).
    let half = |i: usize| le::u16_at(&head, i).unwrap_or(0);
    let word = |i: usize| le::u32_at(&head, i).unwrap_or(0);
    let long = |i: usize| le::u64_at(&head, i).unwrap_or(0);
    // (header length, total length in the file if stated, uncompressed length)
    let (header, total, uncompressed) = match (n, half(4)) {
        (20.., 1) => (20, None, u64::from(word(8))),
        (24.., 2) => (24, Some(u64::from(word(8))), u64::from(word(12))),
        (32.., 3) => (32, Some(long(8)), long(16)),
        _ => return Ok(None),
    };
    let method = half(6);
    if method > 1 || total.is_some_and(|t| t < header || t > to - start) {
        return Ok(None);
    }
    let end = total.map_or(to, |t| start + t);
    let source = std::io::BufReader::with_capacity(1 << 18, RangeReader { read_at, at: start + header, end });
    let mut stream: Box<dyn Read + '_> = if method == 0 {
        Box::new(flate2::bufread::ZlibDecoder::new(source))
    } else {
        Box::new(zstd::stream::read::Decoder::with_buffer(source).map_err(|e| fail(e.to_string()))?.single_frame())
    };
    let mut decoded = Positioned { inner: &mut stream, at: 0 };
    let mut magic = [0u8; 24];
    decoded.read_exact(&mut magic).map_err(|e| fail(format!("cannot decode: {e}")))?;
    if magic != PLAIN_MAGIC {
        return Err(fail("does not decode to a bundle".into()));
    }
    let mut next = |buf: &mut [u8]| decoded.read_exact(buf);
    let (mut entries, _) = table(&mut next)
        .map_err(|e| fail(format!("cannot decode its table: {e}")))?
        .ok_or_else(|| fail("decodes to a bundle whose table does not read".into()))?;
    // Host entries hold no code, and may point anywhere (an empty one into the table).
    entries.retain(|e| is_device(&e.2));
    entries.sort_by_key(|e| e.0);
    let mut objects = Vec::new();
    for (offset, size, id) in entries {
        if offset < decoded.at || offset.saturating_add(size) > uncompressed {
            return Err(fail(format!("entry `{id}` overlaps another or runs past the end")));
        }
        let gap = offset - decoded.at;
        std::io::copy(&mut (&mut decoded).take(gap), &mut std::io::sink())
            .map_err(|e| fail(format!("cannot decode: {e}")))?;
        let before = decoded.at;
        let object =
            Object::of_reader(&mut (&mut decoded).take(size)).map_err(|e| fail(format!("cannot decode: {e}")))?;
        if decoded.at - before != size {
            return Err(fail(format!("entry `{id}` ends early")));
        }
        objects.push(BundledObject { id, object, at: None });
    }
    std::io::copy(&mut decoded, &mut std::io::sink()).map_err(|e| fail(format!("cannot decode: {e}")))?;
    if decoded.at != uncompressed {
        return Err(fail(format!("decodes to {} bytes, its header says {uncompressed}", decoded.at)));
    }
    Ok(Some((total.unwrap_or(to - start), objects)))
}

/// The decoded stream, its position kept as it is read.
struct Positioned<R> {
    inner: R,
    at: u64,
}

impl<R: Read> Read for Positioned<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain bundle: a host entry and one device entry per (id, bytes).
    fn plain(objects: &[(&str, &[u8])]) -> Vec<u8> {
        let host = "host-x86_64-unknown-linux-gnu-";
        let ids: Vec<&str> = std::iter::once(host).chain(objects.iter().map(|o| o.0)).collect();
        let table: u64 = 24 + 8 + ids.iter().map(|id| 24 + id.len() as u64).sum::<u64>();
        let mut out = PLAIN_MAGIC.to_vec();
        out.extend((ids.len() as u64).to_le_bytes());
        let mut offset = table;
        for (i, id) in ids.iter().enumerate() {
            let size = if i == 0 { 0 } else { objects[i - 1].1.len() as u64 };
            for field in [offset, size, id.len() as u64] {
                out.extend(field.to_le_bytes());
            }
            out.extend(id.as_bytes());
            offset += size;
        }
        for (_, bytes) in objects {
            out.extend(*bytes);
        }
        out
    }

    fn compressed_v3(inner: &[u8]) -> Vec<u8> {
        let payload = zstd::bulk::compress(inner, 3).unwrap();
        let mut out = COMPRESSED_MAGIC.to_vec();
        out.extend(3u16.to_le_bytes());
        out.extend(1u16.to_le_bytes());
        out.extend((32 + payload.len() as u64).to_le_bytes());
        out.extend((inner.len() as u64).to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend(payload);
        out
    }

    fn read(data: &[u8]) -> Result<BundlesRead, BundleReadError> {
        let read_at = |buf: &mut [u8], at: u64| {
            let at = at as usize;
            buf.copy_from_slice(data.get(at..at + buf.len()).ok_or(std::io::ErrorKind::UnexpectedEof)?);
            Ok(())
        };
        read_bundles(&read_at, 0, data.len() as u64)
    }

    #[test]
    fn plain_and_compressed_bundles_read_back_with_their_objects() {
        let a =
            plain(&[("hipv4-amdgcn-amd-amdhsa--gfx942", b"code for 942"), ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"90a")]);
        let mut file = vec![0u8; 100];
        file.extend(&a);
        file.resize(4096, 0);
        file.extend(compressed_v3(&plain(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", b"rdna3 code")])));
        file.extend([0u8; 50]);
        let found = read(&file).unwrap();
        assert_eq!(found.spans.len(), 2);
        assert_eq!(found.spans[0], (100, 100 + a.len() as u64));
        let ids: Vec<&str> = found.objects.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(
            ids,
            ["hipv4-amdgcn-amd-amdhsa--gfx942", "hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx1100"]
        );
        assert_eq!(found.objects[0].object, Object::of(b"code for 942"));
        assert_eq!(found.objects[2].object, Object::of(b"rdna3 code"));
        assert_eq!(found.objects[2].at, None);
    }

    #[test]
    fn a_bundle_that_does_not_match_its_header_is_an_error() {
        let mut ccob = compressed_v3(&plain(&[("hipv4-amdgcn-amd-amdhsa--gfx942", b"x")]));
        ccob[16] += 1; // the uncompressed size
        let err = read(&ccob).unwrap_err();
        assert!(
            matches!(&err, BundleReadError::Compressed { at: 0, problem } if problem.contains("its header says")),
            "{err:?}"
        );
        let mut short = plain(&[("hipv4-amdgcn-amd-amdhsa--gfx942", b"0123456789")]);
        short.truncate(short.len() - 3);
        let err = read(&short).unwrap_err();
        assert!(
            matches!(&err, BundleReadError::Plain { at: 0, problem } if problem.contains("runs past the end")),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "the bundle at 0: entry `hipv4-amdgcn-amd-amdhsa--gfx942` runs past the end");
    }
}
