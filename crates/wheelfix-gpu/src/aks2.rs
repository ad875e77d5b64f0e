//! AOTriton kernel archives (`.aks2`, "kernel storage v2", under `aotriton.images/amd-gfx…/`).
//!
//! Layout, as AOTriton's packer writes it and its runtime reads it: `AKS2`, three u32 in the
//! writer's byte order (little-endian on every platform ROCm supports): the size of everything
//! decompressed, the number of kernels and the size of the directory; then one xz stream holding
//! the directory and the code objects back to back. A directory entry is five u32 (shared memory
//! size, block threads, the offset of its image after the directory, the image size, the length
//! of its name with the NUL) and the NUL-terminated name. An image of size 0 is a kernel that did
//! not compile.
//!
//! Only as much is decoded as the headers need, never more than [`super::MAX_DECODED`] bytes,
//! with a bound on the decoder's memory: a lying directory or an xz stream that expands without
//! end gives a note.

use std::io::Read;

use super::{Container, GpuCode, MAX_DECODED, embedded_object};
use wheelfix_base::le;
use wheelfix_elf::view::FileView;

/// The most of an archive read (compressed): the directory and the first headers lie in it.
pub const KEEP: u64 = 16 << 20;
/// The decoder's memory limit (KiB): the dictionary AOTriton's packer uses is 8 MiB.
const MEMORY_LIMIT_KB: u32 = 128 << 10;
/// Bytes of a directory entry before its name.
const ENTRY_FIXED: usize = 20;

struct Entry {
    offset: u64,
    size: u64,
}

/// Read an AKS2 archive from a view of its first [`KEEP`] bytes (or all of them).
pub fn archive<V: FileView + ?Sized>(file: &str, view: &V) -> GpuCode {
    let mut code = GpuCode::new(file, Container::AotritonArchive);
    if let Err(note) = read(view, &mut code) {
        code.notes.push(note.to_string());
    }
    code.finish()
}

/// Why an archive's kernels cannot be listed; the report notes it.
#[derive(Debug, thiserror::Error)]
enum Aks2Problem {
    #[error("the header is cut short")]
    ShortHeader,
    #[error("the header lies: {kernels} kernels in a directory of {directory_size} bytes")]
    HeaderLies { kernels: u64, directory_size: u64 },
    #[error("the xz stream was not read")]
    Unread,
    #[error("cannot decode the xz stream: {0}")]
    Xz(#[from] std::io::Error),
    /// The directory ends inside an entry or a name.
    #[error("the directory ends inside {0}")]
    ShortDirectory(&'static str),
}

fn read<V: FileView + ?Sized>(view: &V, code: &mut GpuCode) -> Result<(), Aks2Problem> {
    let header = view.get(0, 16).map_err(|_| Aks2Problem::ShortHeader)?;
    let u32_at = |at: usize| le::u32_at(header, at).map(u64::from).unwrap_or(0);
    let (total, kernels, directory_size) = (u32_at(4), u32_at(8), u32_at(12));
    if directory_size > MAX_DECODED as u64 || kernels > directory_size / (ENTRY_FIXED as u64 + 1) {
        return Err(Aks2Problem::HeaderLies { kernels, directory_size });
    }
    let available = view.len().min(KEEP);
    let compressed = view.get(16, available.saturating_sub(16)).map_err(|_| Aks2Problem::Unread)?;
    let mut xz = lzma_rust2::XzReader::new_mem_limit(compressed, false, MEMORY_LIMIT_KB).take(MAX_DECODED as u64);
    let xz_error = Aks2Problem::Xz;
    let mut directory = vec![0u8; directory_size as usize];
    xz.read_exact(&mut directory).map_err(xz_error)?;
    let entries = parse_directory(&directory, kernels)?;
    let compiled: Vec<&Entry> = entries.iter().filter(|e| e.size > 0).collect();
    code.objects = compiled.len();
    let failed = entries.len() - compiled.len();
    code.notes.push(format!(
        "{} kernel(s){}, {} bytes decompressed",
        entries.len(),
        if failed > 0 { format!(" ({failed} did not compile)") } else { String::new() },
        total
    ));
    // The header of every image, in stream order, as far as the bound allows.
    let mut sorted = compiled;
    sorted.sort_by_key(|e| e.offset);
    let mut at = 0u64; // decoded past the directory
    let mut unread = 0;
    for entry in &sorted {
        if entry.offset < at || directory_size + entry.offset + 64 > MAX_DECODED as u64 {
            unread += 1;
            continue;
        }
        std::io::copy(&mut (&mut xz).take(entry.offset - at), &mut std::io::sink()).map_err(xz_error)?;
        let mut head = [0u8; 64];
        if let Err(e) = xz.read_exact(&mut head) {
            code.notes.push(xz_error(e).to_string());
            return Ok(());
        }
        at = entry.offset + 64;
        match embedded_object(&head, entry.size) {
            Some((target, cov, _)) => {
                code.targets.push(target);
                code.code_object_versions.extend(cov);
            }
            None => code.notes.push(format!("the image at offset {} is no AMDGPU code object", entry.offset)),
        }
    }
    if unread > 0 {
        code.notes.push(format!("{unread} image header(s) not read (past the decoding bound)"));
    }
    Ok(())
}

fn parse_directory(directory: &[u8], kernels: u64) -> Result<Vec<Entry>, Aks2Problem> {
    let mut entries = Vec::new();
    let mut at = 0;
    for _ in 0..kernels {
        let fixed = directory.get(at..at + ENTRY_FIXED).ok_or(Aks2Problem::ShortDirectory("an entry"))?;
        let u32_at = |i: usize| le::u32_at(fixed, i * 4).map(u64::from).unwrap_or(0);
        let (offset, size, name_len) = (u32_at(2), u32_at(3), u32_at(4) as usize);
        at += ENTRY_FIXED;
        directory.get(at..at + name_len).ok_or(Aks2Problem::ShortDirectory("a name"))?;
        at += name_len;
        entries.push(Entry { offset, size });
    }
    Ok(entries)
}
