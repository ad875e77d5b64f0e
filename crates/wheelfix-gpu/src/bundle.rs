//! The clang offload bundle format, read in one place: the entry table of a bundle
//! (`__CLANG_OFFLOAD_BUNDLE__`, u64 count, then per entry u64 offset, u64 size, u64 id length
//! and the id) and the header of a compressed bundle (`CCOB`, versions 1–3). The scanner and
//! the rewriter both read through here, with one set of limits.

use super::CCOB_MAGIC;
use wheelfix_base::le;

/// The bytes before a table's first entry: the magic (24) and the entry count (8).
pub const TABLE_HEADER: u64 = 32;
/// The fixed part of an entry: offset, size, id length.
const ENTRY_FIXED: u64 = 24;
/// The most entries a bundle table may claim, and the longest entry id: a header past them
/// lies (real bundles hold tens of entries of ids under 100 bytes).
pub const MAX_ENTRIES: u64 = 1 << 16;
pub const MAX_ID: u64 = 4096;

/// One entry of a bundle's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry {
    pub offset: u64,
    pub size: u64,
    pub id: String,
}

#[derive(Debug)]
pub enum TableError {
    /// The data ends inside the table (more may be decoded).
    Truncated,
    /// The header lies (a count or size no file could hold).
    Lie(String),
}

/// Read a bundle's entry table from `read`, which fills each buffer with the bundle's next
/// bytes (from its start) or says the data ended.
pub fn read_table(read: &mut dyn FnMut(&mut [u8]) -> bool) -> Result<Vec<BundleEntry>, TableError> {
    let mut head = [0u8; TABLE_HEADER as usize];
    if !read(&mut head) {
        return Err(TableError::Truncated);
    }
    let count = u64::from_le_bytes(head[24..32].try_into().expect("8 bytes"));
    if count > MAX_ENTRIES {
        return Err(TableError::Lie(format!("claims {count} entries")));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let mut fields = [0u8; ENTRY_FIXED as usize];
        if !read(&mut fields) {
            return Err(TableError::Truncated);
        }
        let field = |i: usize| u64::from_le_bytes(fields[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (offset, size, id_len) = (field(0), field(1), field(2));
        if id_len > MAX_ID {
            return Err(TableError::Lie(format!("an entry id of {id_len} bytes")));
        }
        let mut id = vec![0u8; id_len as usize];
        if !read(&mut id) {
            return Err(TableError::Truncated);
        }
        entries.push(BundleEntry { offset, size, id: String::from_utf8_lossy(&id).into_owned() });
    }
    Ok(entries)
}

/// The entry table of a bundle at the start of `data`.
pub fn bundle_table(data: &[u8]) -> Result<Vec<BundleEntry>, TableError> {
    let mut at = 0usize;
    read_table(&mut |buf: &mut [u8]| match data.get(at..at + buf.len()) {
        Some(bytes) => {
            buf.copy_from_slice(bytes);
            at += buf.len();
            true
        }
        None => false,
    })
}

/// The bytes a table of `entries` takes.
pub fn table_len<'a>(entries: impl IntoIterator<Item = &'a BundleEntry>) -> u64 {
    TABLE_HEADER + entries.into_iter().map(|e| ENTRY_FIXED + e.id.len() as u64).sum::<u64>()
}

/// Why a compressed bundle's header does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CcobError {
    /// Its bytes end first (a reader that has more to come waits for them).
    #[error("its header is cut short")]
    CutShort,
    #[error("unknown CCOB version {0}")]
    Version(u16),
    #[error("unknown compression method {0}")]
    Method(u16),
}

/// A compressed bundle's header. Ex) v3 = `CCOB`, u16 version, u16 method, u64 total size,
/// u64 uncompressed size, u64 hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcobHeader {
    pub version: u16,
    pub method: u16,
    /// The whole compressed bundle, header included (none in v1: its stream ends it).
    pub total: Option<u64>,
    pub uncompressed: u64,
    pub hash: u64,
}

impl CcobHeader {
    pub fn len(version: u16) -> Option<usize> {
        match version {
            1 => Some(20),
            2 => Some(24),
            3 => Some(32),
            _ => None,
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<CcobHeader, CcobError> {
        let u16_at = |i: usize| le::u16_at(bytes, i);
        let u32_at = |i: usize| le::u32_at(bytes, i).map(u64::from);
        let u64_at = |i: usize| le::u64_at(bytes, i);
        let version = u16_at(4).ok_or(CcobError::CutShort)?;
        let method = u16_at(6).ok_or(CcobError::CutShort)?;
        let (total, uncompressed, hash) = match version {
            1 => (None, u32_at(8), u64_at(12)),
            2 => (u32_at(8), u32_at(12), u64_at(16)),
            3 => (u64_at(8), u64_at(16), u64_at(24)),
            v => return Err(CcobError::Version(v)),
        };
        if method > 1 {
            return Err(CcobError::Method(method));
        }
        Ok(CcobHeader {
            version,
            method,
            total,
            uncompressed: uncompressed.ok_or(CcobError::CutShort)?,
            hash: hash.ok_or(CcobError::CutShort)?,
        })
    }

    /// The length of this header. Ex) 32 for version 3
    pub fn header_len(&self) -> usize {
        Self::len(self.version).expect("a parsed header has a known version")
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.extend_from_slice(CCOB_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.method.to_le_bytes());
        let total = self.total.unwrap_or(0);
        match self.version {
            1 => out.extend_from_slice(&(self.uncompressed as u32).to_le_bytes()),
            2 => {
                out.extend_from_slice(&(total as u32).to_le_bytes());
                out.extend_from_slice(&(self.uncompressed as u32).to_le_bytes());
            }
            _ => {
                out.extend_from_slice(&total.to_le_bytes());
                out.extend_from_slice(&self.uncompressed.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.hash.to_le_bytes());
        out
    }
}

/// The hash clang's bundler puts in a compressed bundle's header: the low 64 bits of the MD5 of
/// the uncompressed bundle (`llvm::MD5::MD5Result::low`, the digest's first 8 bytes, little-endian).
pub fn bundle_hash(md5: md5::Md5) -> u64 {
    use md5::Digest;
    u64::from_le_bytes(md5.finalize()[..8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_and_its_length_counts_every_byte() {
        let mut data = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        data.extend(2u64.to_le_bytes());
        for (offset, size, id) in
            [(100u64, 0u64, "host-x86_64-unknown-linux-gnu-"), (100, 8, "hipv4-amdgcn-amd-amdhsa--gfx942")]
        {
            data.extend(offset.to_le_bytes());
            data.extend(size.to_le_bytes());
            data.extend((id.len() as u64).to_le_bytes());
            data.extend(id.as_bytes());
        }
        let entries = bundle_table(&data).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].id, "hipv4-amdgcn-amd-amdhsa--gfx942");
        assert_eq!(table_len(&entries), data.len() as u64);
        assert!(matches!(bundle_table(&data[..data.len() - 1]), Err(TableError::Truncated)));
        let mut lying = data.clone();
        lying[24..32].copy_from_slice(&(MAX_ENTRIES + 1).to_le_bytes());
        assert!(matches!(bundle_table(&lying), Err(TableError::Lie(_))));
    }

    #[test]
    fn ccob_headers_round_trip() {
        for version in 1..=3u16 {
            let h = CcobHeader { version, method: 1, total: (version > 1).then_some(99), uncompressed: 1234, hash: 7 };
            let bytes = h.to_bytes();
            assert_eq!(bytes.len(), CcobHeader::len(version).unwrap());
            assert_eq!(CcobHeader::parse(&bytes).unwrap(), h);
        }
        assert!(CcobHeader::parse(b"CCOB\x04\x00\x00\x00").is_err());
    }
}
