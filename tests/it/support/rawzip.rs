//! Zip archives written field by field, for the hostile layouts no zip library writes: names in
//! local headers that differ from the central directory's, entries that share one stream, a
//! second central directory in the archive comment.

/// One stored-or-deflated member as it lies in the file.
#[derive(Clone, Debug)]
pub struct RawEntry {
    /// The name in the central directory.
    pub name: String,
    /// The name in the local header (usually the same).
    pub local_name: String,
    pub data: Vec<u8>,
    /// Deflate the data.
    pub deflate: bool,
    /// Bytes after the deflate stream, counted in the compressed size (zipfile ignores them).
    pub trailing: Vec<u8>,
}

impl RawEntry {
    pub fn new(name: &str, data: impl Into<Vec<u8>>) -> Self {
        RawEntry { name: name.into(), local_name: name.into(), data: data.into(), deflate: true, trailing: Vec::new() }
    }
}

/// Where an entry was written: the central record fields it needs.
#[derive(Clone, Debug)]
pub struct Placed {
    pub name: String,
    pub offset: u32,
    pub crc: u32,
    pub compressed: u32,
    pub size: u32,
    pub method: u16,
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

fn deflate(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Append a local header and data to `out`.
pub fn local(out: &mut Vec<u8>, e: &RawEntry) -> Placed {
    let offset = out.len() as u32;
    let (method, mut body) = if e.deflate { (8u16, deflate(&e.data)) } else { (0, e.data.clone()) };
    body.extend(&e.trailing);
    let crc = crc32(&e.data);
    out.extend(0x0403_4b50u32.to_le_bytes());
    out.extend(20u16.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(method.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(0x21u16.to_le_bytes());
    out.extend(crc.to_le_bytes());
    out.extend((body.len() as u32).to_le_bytes());
    out.extend((e.data.len() as u32).to_le_bytes());
    out.extend((e.local_name.len() as u16).to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(e.local_name.as_bytes());
    out.extend(&body);
    Placed { name: e.name.clone(), offset, crc, compressed: body.len() as u32, size: e.data.len() as u32, method }
}

/// A central directory of `entries`; returns its bytes.
pub fn central(entries: &[Placed]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in entries {
        out.extend(0x0201_4b50u32.to_le_bytes());
        out.extend((3u16 << 8 | 20).to_le_bytes());
        out.extend(20u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(p.method.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0x21u16.to_le_bytes());
        out.extend(p.crc.to_le_bytes());
        out.extend(p.compressed.to_le_bytes());
        out.extend(p.size.to_le_bytes());
        out.extend((p.name.len() as u16).to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(((0o100644u32) << 16).to_le_bytes());
        out.extend(p.offset.to_le_bytes());
        out.extend(p.name.as_bytes());
    }
    out
}

/// An end-of-central-directory record for a directory of `count` entries and `size` bytes at
/// `offset`, with `comment` (its length field says `comment.len()` unless `claimed` is given).
pub fn end_record(count: usize, size: usize, offset: usize, comment: &[u8], claimed: Option<u16>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend((count as u16).to_le_bytes());
    out.extend((count as u16).to_le_bytes());
    out.extend((size as u32).to_le_bytes());
    out.extend((offset as u32).to_le_bytes());
    out.extend(claimed.unwrap_or(comment.len() as u16).to_le_bytes());
    out.extend(comment);
    out
}

/// A whole archive: the entries, their central directory, the end record with `comment`.
pub fn archive(entries: &[RawEntry], comment: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let placed: Vec<Placed> = entries.iter().map(|e| local(&mut out, e)).collect();
    let cd = central(&placed);
    let at = out.len();
    out.extend(&cd);
    out.extend(end_record(placed.len(), cd.len(), at, comment, None));
    out
}
