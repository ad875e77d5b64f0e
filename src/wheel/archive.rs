//! The zip archive of a wheel, memory-mapped and read in place.
//!
//! The central directory is read once into plain [`Member`] records; member data is then sliced
//! straight out of the map, so any number of threads can inflate members at once without seeking
//! a shared reader.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;
use zip::ZipArchive;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot open: {0}")]
    Open(std::io::Error),
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

/// Compression methods a wheel may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Stored,
    Deflated,
}

/// One entry of the central directory.
#[derive(Debug, Clone)]
pub struct Member {
    /// Position in the archive's central directory.
    pub index: usize,
    pub name: String,
    pub is_dir: bool,
    pub method: Method,
    /// Offset of the member's (compressed) data in the file.
    pub data_offset: u64,
    pub compressed_size: u64,
    pub size: u64,
    pub crc32: u32,
    pub unix_mode: Option<u32>,
    pub modified: Option<zip::DateTime>,
}

/// Bytes of a memory map that the zip reader can share.
#[derive(Clone)]
pub struct MapBytes(Arc<Mmap>);

impl AsRef<[u8]> for MapBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// An opened wheel archive.
pub struct Archive {
    pub path: PathBuf,
    map: Arc<Mmap>,
    zip: ZipArchive<Cursor<MapBytes>>,
    pub members: Vec<Member>,
    by_name: std::collections::HashMap<String, usize>,
}

/// A deflate stream expands at most about 1032:1; a central directory that claims more is lying.
const MAX_DEFLATE_RATIO: u64 = 1032;

impl Archive {
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let file = File::open(path).map_err(ArchiveError::Open)?;
        let len = file.metadata().map_err(ArchiveError::Open)?.len();
        if len < 22 {
            return Err(ArchiveError::NotZip(format!("the file has only {len} bytes")));
        }
        // SAFETY: the map is read-only; a wheel changed by another process while we read it is
        // outside what any wheel tool can defend against (auditwheel and pip read it the same way).
        let map = Arc::new(unsafe { Mmap::map(&file) }.map_err(ArchiveError::Open)?);
        let mut zip =
            ZipArchive::new(Cursor::new(MapBytes(map.clone()))).map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        if zip.has_duplicate_names() {
            return Err(ArchiveError::Duplicate(find_duplicate_name(&map, zip.central_directory_start())));
        }
        let mut members = Vec::with_capacity(zip.len());
        for index in 0..zip.len() {
            let entry = zip.by_index_raw(index).map_err(|e| ArchiveError::NotZip(e.to_string()))?;
            let raw_name = entry.name_raw().to_vec();
            let name = String::from_utf8(raw_name)
                .map_err(|e| ArchiveError::NameEncoding(String::from_utf8_lossy(e.as_bytes()).into_owned()))?;
            if !is_safe_member_path(&name) {
                return Err(ArchiveError::UnsafePath(name));
            }
            let method = match entry.compression() {
                zip::CompressionMethod::Stored => Method::Stored,
                zip::CompressionMethod::Deflated => Method::Deflated,
                other => {
                    return Err(ArchiveError::Member {
                        name,
                        message: format!(
                            "compression method {other:?} is not allowed in a wheel (only stored and deflate)"
                        ),
                    });
                }
            };
            if entry.encrypted() {
                return Err(ArchiveError::Member { name, message: "the member is encrypted".into() });
            }
            let data_offset = entry.data_start().ok_or_else(|| ArchiveError::Member {
                name: name.clone(),
                message: "the local header could not be read".into(),
            })?;
            let member = Member {
                index,
                is_dir: entry.is_dir(),
                method,
                data_offset,
                compressed_size: entry.compressed_size(),
                size: entry.size(),
                crc32: entry.crc32(),
                unix_mode: entry.unix_mode(),
                modified: entry.last_modified(),
                name,
            };
            let end = member.data_offset.checked_add(member.compressed_size);
            if end.is_none_or(|end| end > map.len() as u64) {
                return Err(ArchiveError::Member {
                    name: member.name,
                    message: "the data runs past the end of the file (truncated wheel?)".into(),
                });
            }
            if member.method == Method::Stored && member.size != member.compressed_size
                || member.method == Method::Deflated
                    && member.size > member.compressed_size.saturating_mul(MAX_DEFLATE_RATIO) + 1024
            {
                return Err(ArchiveError::Member {
                    name: member.name,
                    message: format!(
                        "the declared size {} cannot come from {} compressed bytes",
                        member.size, member.compressed_size
                    ),
                });
            }
            members.push(member);
        }
        let by_name = members.iter().map(|m| (m.name.clone(), m.index)).collect();
        Ok(Archive { path: path.to_path_buf(), map, zip, members, by_name })
    }

    /// Size of the wheel file.
    pub fn file_size(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn member(&self, name: &str) -> Option<&Member> {
        self.by_name.get(name).map(|&i| &self.members[i])
    }

    /// The member's bytes as stored in the archive.
    pub fn raw(&self, member: &Member) -> &[u8] {
        &self.map[member.data_offset as usize..(member.data_offset + member.compressed_size) as usize]
    }

    /// The member's whole content, inflated in one call, its CRC-32 checked.
    pub fn read(&self, member: &Member) -> Result<Vec<u8>, ArchiveError> {
        self.read_buffer(member).map(MemberData::into_vec)
    }

    /// Like [`Archive::read`], into a buffer suited to the size: members of tens of MB go into
    /// anonymous memory backed by transparent huge pages, which saves hundreds of thousands of
    /// page faults on a PyTorch wheel.
    pub fn read_buffer(&self, member: &Member) -> Result<MemberData, ArchiveError> {
        let fail = |message: String| ArchiveError::Member { name: member.name.clone(), message };
        let data = match member.method {
            Method::Stored => MemberData::Heap(self.raw(member).to_vec()),
            Method::Deflated => {
                let mut out = MemberData::zeroed(member.size as usize);
                let mut inflater = libdeflater::Decompressor::new();
                let n = inflater
                    .deflate_decompress(self.raw(member), &mut out)
                    .map_err(|e| fail(format!("cannot inflate: {e}")))?;
                if n != out.len() {
                    return Err(fail(format!("inflates to {n} bytes, the archive says {}", member.size)));
                }
                out
            }
        };
        let mut crc = libdeflater::Crc::new();
        crc.update(&data);
        if crc.sum() != member.crc32 {
            return Err(fail(format!(
                "CRC-32 mismatch: {:08x} in the archive, {:08x} computed",
                member.crc32,
                crc.sum()
            )));
        }
        Ok(data)
    }

    /// Up to `n` bytes from the start of the member, inflating only what that takes.
    pub fn peek(&self, member: &Member, n: usize) -> Result<Vec<u8>, ArchiveError> {
        let n = n.min(member.size as usize);
        match member.method {
            Method::Stored => Ok(self.raw(member)[..n].to_vec()),
            Method::Deflated => {
                let mut out = vec![0u8; n];
                let mut decoder = flate2::read::DeflateDecoder::new(self.raw(member));
                let mut filled = 0;
                while filled < n {
                    match decoder.read(&mut out[filled..]) {
                        Ok(0) => break,
                        Ok(k) => filled += k,
                        Err(e) => {
                            return Err(ArchiveError::Member {
                                name: member.name.clone(),
                                message: format!("cannot inflate: {e}"),
                            });
                        }
                    }
                }
                out.truncate(filled);
                Ok(out)
            }
        }
    }

    /// A second zip reader over the same map (cheap: the central directory is shared), for a
    /// thread that copies members while this one is read.
    pub fn zip_clone(&self) -> ZipArchive<Cursor<MapBytes>> {
        self.zip.clone()
    }

    /// The zip reader, for raw copies of unchanged members into a new archive.
    pub fn zip_mut(&mut self) -> &mut ZipArchive<Cursor<MapBytes>> {
        &mut self.zip
    }
}

/// A member path is safe when it is relative and never leaves the archive root.
pub fn is_safe_member_path(name: &str) -> bool {
    let drive_letter = name.len() >= 2 && name.as_bytes()[1] == b':';
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.contains(['\\', '\0'])
        || drive_letter
        || name.split('/').any(|part| part == "..");
    !bad
}

/// The first name that appears twice in the central directory (the zip reader keeps only one).
fn find_duplicate_name(map: &[u8], mut at: u64) -> String {
    let mut seen = std::collections::HashSet::new();
    let u16_at = |p: usize| map.get(p..p + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    while let Some(sig) = map.get(at as usize..at as usize + 4) {
        if sig != [0x50, 0x4b, 0x01, 0x02] {
            break;
        }
        let p = at as usize;
        let (Some(name_len), Some(extra_len), Some(comment_len)) = (u16_at(p + 28), u16_at(p + 30), u16_at(p + 32))
        else {
            break;
        };
        let Some(name) = map.get(p + 46..p + 46 + name_len) else {
            break;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if !seen.insert(name.clone()) {
            return name;
        }
        at += (46 + name_len + extra_len + comment_len) as u64;
    }
    "(unknown)".into()
}

/// An inflated member: on the heap, or in huge-page-backed anonymous memory when large.
pub enum MemberData {
    Heap(Vec<u8>),
    Mapped(memmap2::MmapMut),
}

/// Members at least this large get huge-page-backed buffers.
const LARGE_MEMBER: usize = 32 << 20;

impl MemberData {
    fn zeroed(len: usize) -> MemberData {
        if len >= LARGE_MEMBER
            && let Ok(map) = memmap2::MmapMut::map_anon(len)
        {
            let _ = map.advise(memmap2::Advice::HugePage);
            return MemberData::Mapped(map);
        }
        MemberData::Heap(vec![0u8; len])
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            MemberData::Heap(v) => v,
            MemberData::Mapped(m) => m.to_vec(),
        }
    }
}

impl std::ops::Deref for MemberData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            MemberData::Heap(v) => v,
            MemberData::Mapped(m) => m,
        }
    }
}

impl std::ops::DerefMut for MemberData {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            MemberData::Heap(v) => v,
            MemberData::Mapped(m) => m,
        }
    }
}
