//! Reading a zip archive with positional reads ([APPNOTE.TXT](https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT)).
//!
//! The central directory is parsed once into compact [`Entry`] records; member data is read
//! with `pread` on one shared file descriptor, so any number of threads read members at once
//! without seeking a shared reader, and nothing is mapped: a file that shrinks while it is read
//! gives an error naming the member, never a `SIGBUS`.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use wheelfix_base::files::FileIdentity;

use super::{
    CENTRAL_HEADER, END_OF_CENTRAL_DIRECTORY, FLAG_UTF8, LOCAL_HEADER, Method, ZIP64_END_OF_CENTRAL_DIRECTORY,
    ZIP64_EXTRA, ZIP64_LOCATOR, ZipError,
};

/// General purpose flag bit 0: the member is encrypted.
const FLAG_ENCRYPTED: u16 = 1;

/// One member of the central directory: what it takes to find, read and copy it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: Box<str>,
    pub method: Method,
    pub flags: u16,
    pub crc32: u32,
    pub compressed_size: u64,
    pub size: u64,
    /// Offset of the local file header.
    pub header_offset: u64,
    pub dos_time: u16,
    pub dos_date: u16,
    /// `version made by`: the high byte names the system (3 = Unix).
    pub made_by: u16,
    pub external_attr: u32,
    /// Where the next member's local header (or the central directory) starts: the member's
    /// header and data must end there, or two members share bytes.
    pub end: u64,
}

impl Entry {
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }

    /// Unix permission bits, when the archive was made on a Unix system and records them.
    pub fn unix_mode(&self) -> Option<u32> {
        let mode = self.external_attr >> 16;
        (self.made_by >> 8 == 3 && mode != 0).then_some(mode)
    }
}

/// An open zip file and its central directory.
pub struct ZipReader {
    pub path: PathBuf,
    file: File,
    pub identity: FileIdentity,
    /// Unix permission bits of the file itself.
    pub file_mode: u32,
    pub entries: Vec<Entry>,
    /// Where the central directory starts: member data must end before it.
    central_start: u64,
}

/// Bytes read from the end of the file to find the end-of-central-directory record: zipfile's
/// window, its 22 bytes and a comment of up to 64 KiB.
const TAIL: u64 = (1 << 16) + 22;

impl ZipReader {
    pub fn open(path: &Path) -> Result<ZipReader, ZipError> {
        let file = wheelfix_base::files::open_regular(path).map_err(ZipError::Open)?;
        let metadata = file.metadata().map_err(ZipError::Open)?;
        let len = metadata.len();
        if len < 22 {
            return Err(ZipError::NotZip(format!("the file has only {len} bytes")));
        }
        let tail_start = len.saturating_sub(TAIL);
        let mut tail = vec![0u8; (len - tail_start) as usize];
        read_exact_at(&file, &mut tail, tail_start).map_err(|e| ZipError::NotZip(e.to_string()))?;
        let eocd_at = find_eocd(&tail).ok_or_else(|| {
            ZipError::NotZip("no end-of-central-directory record (not a zip file, or truncated)".into())
        })?;
        let eocd = &tail[eocd_at..eocd_at + 22];
        let mut cd_size = u64::from(le32(eocd, 12));
        let mut cd_offset = u64::from(le32(eocd, 16));
        let eocd_pos = tail_start + eocd_at as u64;
        let mut directory_end = eocd_pos;
        // As Python's zipfile reads it: a zip64 locator right before the end record, and the
        // zip64 end record right before the locator (anything else: no zip64).
        if eocd_pos >= 20 + 56 {
            let mut records = [0u8; 76];
            read_exact_at(&file, &mut records, eocd_pos - 76)
                .map_err(|e| ZipError::NotZip(format!("unreadable zip64 end record: {e}")))?;
            let (record, locator) = records.split_at(56);
            if le32(locator, 0) == ZIP64_LOCATOR {
                if le32(locator, 4) != 0 || le32(locator, 16) > 1 {
                    return Err(ZipError::NotZip("zipfiles that span multiple disks are not supported".into()));
                }
                if le32(record, 0) == ZIP64_END_OF_CENTRAL_DIRECTORY {
                    cd_size = le64(record, 40);
                    cd_offset = le64(record, 48);
                    directory_end = eocd_pos - 76;
                }
            }
        }
        // Data prepended to the archive (a self-extracting stub) shifts every offset; Python's
        // zipfile corrects for it the same way.
        let shift = directory_end
            .checked_sub(cd_size)
            .and_then(|start| start.checked_sub(cd_offset))
            .ok_or_else(|| ZipError::NotZip("Bad offset for central directory".into()))?;
        let central_start = cd_offset + shift;
        // The records fill the central directory's size, whatever count the end record gives
        // (zipfile reads them so); each takes at least 46 bytes.
        // A buffer no larger than the directory (it is filled, zeroed, before each read).
        let capacity = (1 << 20).min(cd_size.max(1) as usize);
        let mut reader = io::BufReader::with_capacity(capacity, PositionalReader::new(&file, central_start, cd_size));
        let mut entries = Vec::with_capacity((cd_size / 46).min(1 << 20) as usize);
        let mut consumed = 0u64;
        while consumed < cd_size {
            let (mut entry, record_len) = read_central_record(&mut reader)?;
            entry.header_offset += shift;
            consumed += record_len;
            entries.push(entry);
        }
        limit_entries(&mut entries, central_start)?;
        let file_mode = metadata.mode() & 0o7777;
        Ok(ZipReader {
            path: path.to_path_buf(),
            file,
            identity: FileIdentity::of(&metadata),
            file_mode,
            entries,
            central_start,
        })
    }

    /// Where the member's compressed data starts, read from its local header.
    pub fn data_offset(&self, entry: &Entry) -> Result<u64, ZipError> {
        let mut header = vec![0u8; 30 + entry.name.len()];
        self.read_at(entry, &mut header, entry.header_offset)?;
        self.data_offset_from(entry, &header)
    }

    /// The data offset from a buffer holding the local header and (at least) as many bytes of
    /// its name as the central directory's name has. The checks are Python's zipfile's, with
    /// its words: a missing signature, a name that differs from the directory's, and data that
    /// runs into the next member (which zipfile refuses since 3.12 as a possible zip bomb).
    fn data_offset_from(&self, entry: &Entry, header: &[u8]) -> Result<u64, ZipError> {
        if header.len() < 30 || le32(header, 0) != LOCAL_HEADER {
            return Err(self.member_error(entry, "Bad magic number for file header (corrupt archive)"));
        }
        let name_len = usize::from(le16(header, 26));
        if header.len() < 30 + name_len.min(entry.name.len()) {
            return Err(self.member_error(entry, "its local header lies past the end of the file (truncated?)"));
        }
        let local_name = header.get(30..30 + name_len.min(entry.name.len()));
        let local_utf8 = le16(header, 6) & FLAG_UTF8 != 0;
        let same_flags = entry.name.is_ascii() || local_utf8 == (entry.flags & FLAG_UTF8 != 0);
        if name_len != entry.name.len() || local_name != Some(entry.name.as_bytes()) || !same_flags {
            let shown = local_name.map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
            return Err(self.member_error(
                entry,
                &format!(
                    "File name in directory {:?} and header {:?} differ (pip and Python's zipfile refuse such an archive)",
                    &*entry.name, shown
                ),
            ));
        }
        let start = entry.header_offset + 30 + name_len as u64 + u64::from(le16(header, 28));
        match start.checked_add(entry.compressed_size) {
            Some(end) if end <= entry.end => Ok(start),
            Some(end) if end <= self.central_start => Err(overlapped(entry)),
            _ => Err(self.member_error(entry, "its data runs into the central directory (truncated or corrupt)")),
        }
    }

    /// Up to `n` compressed bytes from the start of the member's data (one read).
    pub fn raw_prefix(&self, entry: &Entry, n: usize) -> Result<Vec<u8>, ZipError> {
        let want = (n as u64).min(entry.compressed_size) as usize;
        // One read covers the local header, a name and extra field as long as the central
        // directory's, and the wanted bytes; a longer local extra field takes a second read.
        let guess = 30 + entry.name.len() + 64 + want;
        let mut buf = vec![0u8; guess];
        let got = self.read_some_at(&mut buf, entry.header_offset).map_err(|e| self.io_error(entry, e))?;
        buf.truncate(got);
        if buf.len() < 30 {
            return Err(self.member_error(entry, "its local header lies past the end of the file (truncated?)"));
        }
        let start = self.data_offset_from(entry, &buf)?;
        let skip = (start - entry.header_offset) as usize;
        if buf.len() >= skip + want {
            buf.drain(..skip);
            buf.truncate(want);
            return Ok(buf);
        }
        let mut out = vec![0u8; want];
        self.read_at(entry, &mut out, start)?;
        Ok(out)
    }

    /// The member's compressed bytes, read in chunks of `chunk` bytes.
    pub fn raw_reader<'a>(&'a self, entry: &'a Entry) -> Result<RawReader<'a>, ZipError> {
        let start = self.data_offset(entry)?;
        Ok(RawReader { zip: self, entry, at: start, end: start + entry.compressed_size })
    }

    /// The member's compressed bytes as a source of their own (the archive opened once more),
    /// for a decoder that reads them by position from threads of its own.
    #[cfg(feature = "parallel-inflate")]
    pub fn member_bytes(&self, entry: &Entry) -> Result<MemberBytes, ZipError> {
        let start = self.data_offset(entry)?;
        let file = self.file.try_clone().map_err(|e| self.io_error(entry, e))?;
        Ok(MemberBytes { file, start, len: entry.compressed_size })
    }

    /// `pread` that fills `buf` or says why not, naming the member.
    pub fn read_at(&self, entry: &Entry, buf: &mut [u8], offset: u64) -> Result<(), ZipError> {
        read_exact_at(&self.file, buf, offset).map_err(|e| self.io_error(entry, e))
    }

    fn read_some_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// sha256 of the whole file, in hex (read by positional reads from the same descriptor).
    pub fn sha256(&self) -> io::Result<String> {
        let mut reader = PositionalReader::new(&self.file, 0, self.identity.len);
        let digest = wheelfix_base::digest::sha256_of_reader(&mut reader)?;
        if reader.at != self.identity.len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while it was hashed"));
        }
        Ok(wheelfix_base::digest::hex(&digest))
    }

    fn io_error(&self, entry: &Entry, e: io::Error) -> ZipError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            self.member_error(
                entry,
                "the file ends before the member does: it was truncated or changed while it was read",
            )
        } else {
            ZipError::Member { name: entry.name.to_string(), message: format!("cannot read: {e}") }
        }
    }

    pub fn member_error(&self, entry: &Entry, message: &str) -> ZipError {
        ZipError::Member { name: entry.name.to_string(), message: message.to_string() }
    }
}

/// A member's compressed bytes as a `Read`, by positional reads.
/// One member's compressed bytes, read by position (offsets from the member's first byte).
#[cfg(feature = "parallel-inflate")]
pub struct MemberBytes {
    file: File,
    start: u64,
    len: u64,
}

#[cfg(feature = "parallel-inflate")]
impl rapidgzip_core::ReadAt for MemberBytes {
    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }

    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(offset);
        let n = (buffer.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        std::os::unix::fs::FileExt::read_at(&self.file, &mut buffer[..n], self.start + offset)
    }
}

pub struct RawReader<'a> {
    zip: &'a ZipReader,
    entry: &'a Entry,
    at: u64,
    end: u64,
}

impl RawReader<'_> {
    /// Where the next byte comes from in the archive file.
    pub fn position(&self) -> u64 {
        self.at
    }

    pub fn remaining(&self) -> u64 {
        self.end - self.at
    }
}

impl Read for RawReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.end - self.at) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.zip.file.read_at(&mut buf[..n], self.at)?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "member `{}`: the file ends before the member does: it was truncated or changed while it was read",
                    self.entry.name
                ),
            ));
        }
        self.at += got as u64;
        Ok(got)
    }
}

/// Sequential reads of a byte range of a file, by `pread`.
struct PositionalReader<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl<'a> PositionalReader<'a> {
    fn new(file: &'a File, start: u64, len: u64) -> Self {
        PositionalReader { file, at: start, end: start.saturating_add(len) }
    }
}

impl Read for PositionalReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.end.saturating_sub(self.at)) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.at)?;
        self.at += got as u64;
        Ok(got)
    }
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

/// Give every entry the offset its bytes must end before: the next local header in file order,
/// or the central directory. Two entries whose local headers cannot both fit (one stream
/// shared by a thousand entries) are refused at once, before any member is read.
fn limit_entries(entries: &mut [Entry], central_start: u64) -> Result<(), ZipError> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| (entries[i].header_offset, i));
    let mut next = central_start;
    for &i in order.iter().rev() {
        let entry = &mut entries[i];
        entry.end = next;
        if entry.header_offset.saturating_add(30 + entry.name.len() as u64) > next && next < central_start {
            return Err(overlapped(entry));
        }
        next = entry.header_offset;
    }
    Ok(())
}

fn overlapped(entry: &Entry) -> ZipError {
    ZipError::Member {
        name: entry.name.to_string(),
        message: format!(
            "Overlapped entries: {:?} (possible zip bomb): its bytes run into another member's, which Python's zipfile refuses",
            &*entry.name
        ),
    }
}

/// One central directory record, and the bytes it took.
fn read_central_record(reader: &mut impl Read) -> Result<(Entry, u64), ZipError> {
    let corrupt = |what: &str| ZipError::NotZip(format!("the central directory is corrupt ({what})"));
    let mut fixed = [0u8; 46];
    reader.read_exact(&mut fixed).map_err(|_| corrupt("it ends early"))?;
    if le32(&fixed, 0) != CENTRAL_HEADER {
        return Err(corrupt("a record has no signature"));
    }
    let (name_len, extra_len, comment_len) =
        (le16(&fixed, 28) as usize, le16(&fixed, 30) as usize, le16(&fixed, 32) as usize);
    let mut variable = vec![0u8; name_len + extra_len + comment_len];
    reader.read_exact(&mut variable).map_err(|_| corrupt("it ends inside a record"))?;
    let name = String::from_utf8(variable[..name_len].to_vec())
        .map_err(|e| ZipError::NameEncoding(String::from_utf8_lossy(e.as_bytes()).into_owned()))?;
    let flags = le16(&fixed, 8);
    let method = match le16(&fixed, 10) {
        0 => Method::Stored,
        8 => Method::Deflated,
        other => {
            return Err(ZipError::Member {
                name,
                message: format!(
                    "compression method {} is not allowed in a wheel (only stored and deflate)",
                    method_name(other)
                ),
            });
        }
    };
    if flags & FLAG_ENCRYPTED != 0 {
        return Err(ZipError::Member { name, message: "the member is encrypted".into() });
    }
    let mut size = u64::from(le32(&fixed, 24));
    let mut compressed_size = u64::from(le32(&fixed, 20));
    let mut header_offset = u64::from(le32(&fixed, 42));
    // The zip64 extra field holds, in this order, each value whose 32-bit field is saturated.
    let mut extra = &variable[name_len..name_len + extra_len];
    while extra.len() >= 4 {
        let (id, len) = (le16(extra, 0), le16(extra, 2) as usize);
        let Some(body) = extra.get(4..4 + len) else { break };
        if id == ZIP64_EXTRA {
            let mut values = body.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
            if size == 0xffff_ffff {
                size = values.next().ok_or_else(|| corrupt("a zip64 field is missing"))?;
            }
            if compressed_size == 0xffff_ffff {
                compressed_size = values.next().ok_or_else(|| corrupt("a zip64 field is missing"))?;
            }
            if header_offset == 0xffff_ffff {
                header_offset = values.next().ok_or_else(|| corrupt("a zip64 field is missing"))?;
            }
        }
        extra = &extra[4 + len..];
    }
    let entry = Entry {
        name: name.into_boxed_str(),
        method,
        flags,
        crc32: le32(&fixed, 16),
        compressed_size,
        size,
        header_offset,
        dos_time: le16(&fixed, 12),
        dos_date: le16(&fixed, 14),
        made_by: le16(&fixed, 4),
        external_attr: le32(&fixed, 38),
        end: u64::MAX,
    };
    Ok((entry, 46 + (name_len + extra_len + comment_len) as u64))
}

fn method_name(method: u16) -> String {
    match method {
        12 => "12 (bzip2)".into(),
        14 => "14 (lzma)".into(),
        93 => "93 (zstd)".into(),
        95 => "95 (xz)".into(),
        m => m.to_string(),
    }
}

/// The end-of-central-directory record in `tail` (the file's last bytes), found as Python's
/// zipfile finds it, so that wheelfix reads the archive pip reads: the record that ends the
/// file when it has no comment; else the last signature in the last 64 KiB + 22 bytes, whatever
/// its comment length says (a signature inside a comment wins, and usually makes the archive
/// unreadable, as it does for pip). `None` when there is none, or fewer than 22 bytes follow it.
fn find_eocd(tail: &[u8]) -> Option<usize> {
    let sig = END_OF_CENTRAL_DIRECTORY.to_le_bytes();
    let last = tail.len().checked_sub(22)?;
    if tail[last..last + 4] == sig && tail[tail.len() - 2..] == [0, 0] {
        return Some(last);
    }
    let search_from = tail.len().saturating_sub((1 << 16) + 22);
    let at = search_from + memchr::memmem::rfind(&tail[search_from..], &sig)?;
    (at + 22 <= tail.len()).then_some(at)
}

// The zip records' fields, at offsets their fixed sizes (checked where each is read) hold; a
// short record reads as zeros rather than panicking.
pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    wheelfix_base::le::u16_at(b, at).unwrap_or(0)
}

pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    wheelfix_base::le::u32_at(b, at).unwrap_or(0)
}

pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    wheelfix_base::le::u64_at(b, at).unwrap_or(0)
}
