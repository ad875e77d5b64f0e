//! Device code in Windows binaries (`.dll`, `.pyd`, `.exe`): HIP puts its fat binary in a
//! PE/COFF section named `.hip_fat` (section names are capped at 8 bytes: `.hip_fatbin`
//! becomes `.hip_fat`), CUDA in `.nv_fatb`, kpack its reference in `.kpackrf` (TheRock's
//! splitter; the HIP wrappers, `HIPK` once split, in `.hipFatB`). The section table lies in the
//! first bytes of the file; goblin reads it.

use wheelfix_elf::view::FileView;

use super::scan::Hits;
use super::{Container, GpuCode, kpack};

/// The section of a kpack-split PE binary that holds its marker (`.rocm_kpack_ref` in ELF).
pub const MARKER_SECTION: &str = ".kpackrf";
/// The section of a PE binary that holds HIP's wrappers (`.hipFatBinSegment` in ELF).
pub const WRAPPER_SECTION: &str = ".hipFatB";

/// Enough of a PE file's start for its headers and section table.
pub const HEAD: usize = 64 << 10;

/// A section that holds device code (or its wrappers): its name and file range (offset, size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSection {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    /// Its size in memory (the file's raw data is padded with zeros to the file alignment).
    pub memory_size: u64,
}

/// The most of a `.hipFatB` section read: 43,690 wrappers.
const WRAPPERS_READ_MAX: u64 = 1 << 20;

impl DeviceSection {
    /// The file range [`binary`] reads of a marker or wrappers section: its bytes in memory (the
    /// raw data without the padding), as far as a marker or the wrappers can reach.
    fn read_range(&self) -> (u64, u64) {
        let size = if self.memory_size == 0 { self.size } else { self.size.min(self.memory_size) };
        let cap = if self.name == MARKER_SECTION { kpack::MARKER_MAX } else { WRAPPERS_READ_MAX };
        (self.offset, size.min(cap))
    }
}

/// The device-code sections of a PE file, from its first bytes; empty when it has none (or its
/// headers cannot be read: then it is no binary this reader can say more of).
pub fn device_sections(head: &[u8]) -> Vec<DeviceSection> {
    let Ok(header) = goblin::pe::header::Header::parse(head) else { return Vec::new() };
    let mut offset = header.dos_header.pe_pointer as usize
        + 4
        + goblin::pe::header::SIZEOF_COFF_HEADER
        + header.coff_header.size_of_optional_header as usize;
    let Ok(sections) = header.coff_header.sections(head, &mut offset) else { return Vec::new() };
    let found = sections
        .iter()
        .filter_map(|s| {
            let name = String::from_utf8_lossy(&s.name).trim_end_matches('\0').to_string();
            let device = name.starts_with(".hip_fat")
                || name.starts_with(".nv_fatb")
                || name == MARKER_SECTION
                || name == WRAPPER_SECTION;
            device.then(|| DeviceSection {
                name,
                offset: u64::from(s.pointer_to_raw_data),
                size: u64::from(s.size_of_raw_data),
                memory_size: u64::from(s.virtual_size),
            })
        })
        .collect::<Vec<_>>();
    // Wrappers alone are no device code.
    if found.iter().all(|s| s.name == WRAPPER_SECTION) { Vec::new() } else { found }
}

/// The file ranges [`binary`] reads from the file itself rather than from the scan: a split
/// binary's marker and its wrappers.
pub fn sections_read(sections: &[DeviceSection]) -> Vec<(u64, u64)> {
    if !sections.iter().any(|s| s.name == MARKER_SECTION) {
        return Vec::new();
    }
    sections
        .iter()
        .filter(|s| s.name == MARKER_SECTION || s.name == WRAPPER_SECTION)
        .map(DeviceSection::read_range)
        .collect()
}

/// The device code of a PE file of `len` bytes whose device sections are `sections`, from the
/// containers its scan found ([`super::scan::Patterns::HOST`]) and, for a kpack-split binary,
/// its marker and wrappers as `view` holds them ([`sections_read`]).
pub fn binary<V: FileView + ?Sized>(
    file: &str,
    sections: &[DeviceSection],
    len: u64,
    hits: &Hits,
    view: &V,
) -> Option<GpuCode> {
    let in_file = |s: &DeviceSection| s.offset.checked_add(s.size).filter(|end| *end <= len && s.size > 0);
    if let Some(marker) = sections.iter().find(|s| s.name == MARKER_SECTION) {
        return Some(split_binary(file, marker, sections.iter().find(|s| s.name == WRAPPER_SECTION), view));
    }
    if let Some(s) = sections.iter().find(|s| s.name.starts_with(".hip_fat")) {
        let mut code = GpuCode::new(file, Container::PeHipFatbin);
        match in_file(s) {
            Some(end) => {
                hits.blob(s.offset, end, &mut code);
                // Where `thin` rewrites the bundles, in place: the section's raw data.
                code.bundle_spans = vec![(s.offset, end)];
            }
            None => code.notes.push(format!("the {} section lies past the end of the file", s.name)),
        }
        if code.objects == 0 && code.notes.is_empty() {
            code.notes.push(format!("the {} section holds no offload bundle", s.name));
        }
        return Some(code.finish());
    }
    let s = sections.iter().find(|s| s.name.starts_with(".nv_fatb"))?;
    let mut code = GpuCode::new(file, Container::NvFatbin);
    if let Some(end) = in_file(s) {
        hits.nv_fatbins(s.offset, end, &mut code);
    }
    Some(code.finish())
}

/// A binary TheRock's splitter left: its marker read as the runtime reads it (the MessagePack
/// map, then only the padding's zeros), and its wrappers, which must all be `HIPK`.
fn split_binary<V: FileView + ?Sized>(
    file: &str,
    marker: &DeviceSection,
    wrappers: Option<&DeviceSection>,
    view: &V,
) -> GpuCode {
    let mut code = GpuCode::new(file, Container::KpackSplit);
    code.notes.push("device code was split out by kpack: it lives in .kpack archives, not in this file".into());
    let wrapper_bytes = wrappers.and_then(|w| {
        let (offset, size) = w.read_range();
        view.get(offset, size).ok()
    });
    let count = wrapper_bytes.map_or(0, |b| b.len() / kpack::WRAPPER_LEN as usize);
    let mut problems = Vec::new();
    let (offset, size) = marker.read_range();
    match view.get(offset, size) {
        Ok(bytes) => match kpack::usable_marker(bytes) {
            Ok((name, paths, used)) => {
                if bytes[used..].iter().any(|&b| b != 0) {
                    problems.push(format!("its {MARKER_SECTION} section holds more than the marker"));
                }
                code.notes.push(format!("kernel name: {name}"));
                code.notes.push(format!("kpack search paths: {}", paths.join(", ")));
                code.kpack_kernel = Some((name, count));
                code.kpack_search_paths = paths;
            }
            Err(e) => problems.push(format!("its {MARKER_SECTION} marker: {e}")),
        },
        // The runtime reads the marker from there: a file cut short (or a section header that
        // lies) leaves it nothing to read, and the kernels nowhere to be found.
        Err(_) => problems.push(format!("its {MARKER_SECTION} section lies past the end of the file")),
    }
    match wrapper_bytes {
        Some(bytes) => {
            let not_hipk = bytes.chunks_exact(kpack::WRAPPER_LEN as usize).filter(|w| w[..4] != kpack::HIPK).count();
            if not_hipk > 0 {
                problems.push(format!(
                    "{not_hipk} of its {count} HIP wrappers are not HIPK: the runtime looks for their device code in this file, where there is none"
                ));
            }
        }
        None => problems.push(format!("it has no {WRAPPER_SECTION} section: no HIP wrapper points at the marker")),
    }
    for problem in problems {
        let problem = format!("a kpack marker the runtime cannot use: {problem}");
        code.notes.push(problem.clone());
        code.kpack_marker_problems.push(problem);
    }
    code.finish()
}
