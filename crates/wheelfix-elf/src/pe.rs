//! The DLLs a Windows binary (PE/COFF: `.dll`, `.pyd`, `.exe`) imports, read as the loader
//! reads them: the import directory its optional header names, one 20-byte descriptor per DLL
//! until an all-zero one, each naming its DLL by an RVA. Read by position from the headers in
//! the file's first bytes: memory does not grow with the file (a ROCm DLL is hundreds of MB).

/// Enough of a PE file's start for its headers and section table.
pub const HEAD: usize = 64 << 10;
/// The most DLLs read from one import directory.
const IMPORTS_MAX: usize = 4096;
/// The longest DLL name read.
const NAME_MAX: usize = 512;
const DESCRIPTOR_LEN: usize = 20;

/// One section's place in memory and in the file.
struct Section {
    rva: u64,
    virtual_size: u64,
    offset: u64,
    raw_size: u64,
}

/// The DLL names a PE file imports, in the order its import directory lists them; empty for
/// none. `read_at(buf, offset)` fills `buf` from the file; `len` is the file's size.
pub fn imports(len: u64, read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>) -> Result<Vec<String>, String> {
    let mut head = vec![0u8; (HEAD as u64).min(len) as usize];
    read_at(&mut head, 0).map_err(|e| e.to_string())?;
    let header = goblin::pe::header::Header::parse(&head).map_err(|e| format!("not a PE file: {e}"))?;
    let Some(optional) = header.optional_header else { return Ok(Vec::new()) };
    let Some(table) = optional.data_directories.get_import_table().filter(|t| t.virtual_address != 0) else {
        return Ok(Vec::new());
    };
    let mut at = header.dos_header.pe_pointer as usize
        + 4
        + goblin::pe::header::SIZEOF_COFF_HEADER
        + header.coff_header.size_of_optional_header as usize;
    let sections: Vec<Section> = header
        .coff_header
        .sections(&head, &mut at)
        .map_err(|e| format!("its section table cannot be read: {e}"))?
        .iter()
        .map(|s| Section {
            rva: u64::from(s.virtual_address),
            virtual_size: u64::from(s.virtual_size),
            offset: u64::from(s.pointer_to_raw_data),
            raw_size: u64::from(s.size_of_raw_data),
        })
        .collect();
    // Where an RVA's bytes lie in the file, and how many of them the file holds there.
    let in_file = |rva: u64| -> Option<(u64, u64)> {
        let s = sections.iter().find(|s| rva >= s.rva && rva < s.rva + s.virtual_size.max(s.raw_size))?;
        let into = rva - s.rva;
        (into < s.raw_size).then(|| (s.offset + into, (s.raw_size - into).min(len.saturating_sub(s.offset + into))))
    };
    let (offset, room) = in_file(u64::from(table.virtual_address))
        .ok_or_else(|| "its import directory lies outside every section's bytes".to_string())?;
    let count = (room as usize / DESCRIPTOR_LEN).min(IMPORTS_MAX);
    let mut descriptors = vec![0u8; count * DESCRIPTOR_LEN];
    read_at(&mut descriptors, offset).map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    for d in descriptors.chunks_exact(DESCRIPTOR_LEN) {
        if d.iter().all(|&b| b == 0) {
            return Ok(names);
        }
        let name_rva = u64::from(u32::from_le_bytes([d[12], d[13], d[14], d[15]]));
        let (at, room) = in_file(name_rva)
            .ok_or_else(|| format!("an imported DLL's name (RVA {name_rva:#x}) lies outside the file"))?;
        let mut name = vec![0u8; (room as usize).min(NAME_MAX)];
        read_at(&mut name, at).map_err(|e| e.to_string())?;
        let end = name.iter().position(|&b| b == 0).ok_or_else(|| "an imported DLL's name does not end".to_string())?;
        names.push(String::from_utf8_lossy(&name[..end]).into_owned());
    }
    Err(format!("its import directory does not end within {} entries", names.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imports_of(bytes: &[u8]) -> Result<Vec<String>, String> {
        imports(bytes.len() as u64, &|buf, at| {
            let at = at as usize;
            let end = at.checked_add(buf.len()).filter(|e| *e <= bytes.len());
            let Some(end) = end else { return Err(std::io::ErrorKind::UnexpectedEof.into()) };
            buf.copy_from_slice(&bytes[at..end]);
            Ok(())
        })
    }

    #[test]
    fn what_is_not_a_pe_file_is_refused_never_read_past() {
        assert!(imports_of(b"").is_err());
        assert!(imports_of(b"MZ").is_err());
        let mut dos = vec![0u8; 256];
        dos[..2].copy_from_slice(b"MZ");
        // e_lfanew past the end.
        dos[0x3c..0x40].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(imports_of(&dos).is_err());
        // A PE signature with a COFF header whose section table runs past the file.
        dos[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
        dos[0x80..0x84].copy_from_slice(b"PE\0\0");
        dos[0x84..0x86].copy_from_slice(&0x8664u16.to_le_bytes());
        dos[0x86..0x88].copy_from_slice(&0xffffu16.to_le_bytes());
        assert!(imports_of(&dos).map(|v| v.is_empty()).unwrap_or(true));
    }
}
