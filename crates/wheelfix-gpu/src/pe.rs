//! Device code in Windows binaries (`.dll`, `.pyd`, `.exe`): HIP puts its fat binary in a
//! PE/COFF section named `.hip_fat` (section names are capped at 8 bytes: `.hip_fatbin`
//! becomes `.hip_fat`), CUDA in `.nv_fatb`, kpack its reference in `.kpackrf`. The section
//! table lies in the first bytes of the file; goblin reads it.

use super::scan::Hits;
use super::{Container, GpuCode};

/// Enough of a PE file's start for its headers and section table.
pub const HEAD: usize = 64 << 10;

/// A section that holds device code: its name and file range (offset, size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSection {
    pub name: String,
    pub offset: u64,
    pub size: u64,
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
    sections
        .iter()
        .filter_map(|s| {
            let name = String::from_utf8_lossy(&s.name).trim_end_matches('\0').to_string();
            let device = name.starts_with(".hip_fat") || name.starts_with(".nv_fatb") || name == ".kpackrf";
            device.then(|| DeviceSection {
                name,
                offset: u64::from(s.pointer_to_raw_data),
                size: u64::from(s.size_of_raw_data),
            })
        })
        .collect()
}

/// The device code of a PE file of `len` bytes whose device sections are `sections`, from the
/// containers its scan found ([`super::scan::Patterns::HOST`]).
pub fn binary(file: &str, sections: &[DeviceSection], len: u64, hits: &Hits) -> Option<GpuCode> {
    let in_file = |s: &DeviceSection| s.offset.checked_add(s.size).filter(|end| *end <= len && s.size > 0);
    if sections.iter().any(|s| s.name == ".kpackrf") {
        let mut code = GpuCode::new(file, Container::KpackSplit);
        code.notes.push("device code was split out by kpack: it lives in .kpack archives, not in this file".into());
        return Some(code.finish());
    }
    if let Some(s) = sections.iter().find(|s| s.name.starts_with(".hip_fat")) {
        let mut code = GpuCode::new(file, Container::PeHipFatbin);
        match in_file(s) {
            Some(end) => hits.blob(s.offset, end, &mut code),
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
