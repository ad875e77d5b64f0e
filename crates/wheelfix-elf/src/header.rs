//! What the first bytes of a file say: ELF identification (class, byte order, machine, flags)
//! and the other executable formats a wheel may carry (PE, Mach-O). The one place that reads
//! headers by hand; everything past them is goblin's.

use std::path::Path;

use wheelfix_base::platform::{EM_AMDGPU, EM_CUDA};

/// `\x7fELF`
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// The part of an ELF header that decides what a file is for and whether a library can be
/// loaded into a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfIdent {
    pub is_64: bool,
    pub little_endian: bool,
    pub machine: u16,
}

impl ElfIdent {
    /// From the first 20 bytes of a file, if it is ELF.
    pub fn parse(head: &[u8]) -> Option<ElfIdent> {
        if !head.starts_with(ELF_MAGIC) {
            return None;
        }
        let little_endian = *head.get(5)? != 2;
        let bytes = [*head.get(18)?, *head.get(19)?];
        let machine = if little_endian { u16::from_le_bytes(bytes) } else { u16::from_be_bytes(bytes) };
        Some(ElfIdent { is_64: head[4] == 2, little_endian, machine })
    }

    pub fn of_file(path: &Path) -> Option<ElfIdent> {
        use std::io::Read;
        let mut head = [0u8; 20];
        std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
        Self::parse(&head)
    }

    /// Device code (AMDGPU or NVIDIA), never a host binary.
    pub fn is_gpu(&self) -> bool {
        matches!(self.machine, EM_AMDGPU | EM_CUDA)
    }
}

/// `e_flags`, `EI_OSABI` and `EI_ABIVERSION` of a 64-bit little-endian ELF header (all GPU code
/// objects are), from its first 52 bytes.
pub fn gpu_header_fields(head: &[u8]) -> Option<(u32, u8, u8)> {
    let flags = u32::from_le_bytes(head.get(48..52)?.try_into().ok()?);
    Some((flags, *head.get(7)?, *head.get(8)?))
}

/// Executable formats other than ELF that a wheel may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignFormat {
    Pe,
    MachO,
}

impl ForeignFormat {
    /// PE (`MZ` with a `PE\0\0` signature where the DOS header points) or Mach-O (thin, 32/64-bit,
    /// either byte order, or a fat file with a plausible architecture count).
    pub fn sniff(head: &[u8]) -> Option<ForeignFormat> {
        if head.starts_with(b"MZ")
            && let Some(at) = wheelfix_base::le::u32_at(head, 0x3c).map(|at| at as usize)
            && head.get(at..at + 4) == Some(b"PE\0\0")
        {
            return Some(ForeignFormat::Pe);
        }
        let magic = head.get(..4)?;
        let thin =
            [[0xfe, 0xed, 0xfa, 0xce], [0xfe, 0xed, 0xfa, 0xcf], [0xce, 0xfa, 0xed, 0xfe], [0xcf, 0xfa, 0xed, 0xfe]];
        if thin.iter().any(|m| magic == m) {
            return Some(ForeignFormat::MachO);
        }
        // `0xcafebabe` is also a Java class file, whose next word (a version) is far above the
        // handful of architectures a fat Mach-O file holds.
        if magic == [0xca, 0xfe, 0xba, 0xbe] || magic == [0xca, 0xfe, 0xba, 0xbf] {
            let count = u32::from_be_bytes(head.get(4..8)?.try_into().ok()?);
            return (1..=16).contains(&count).then_some(ForeignFormat::MachO);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_elf_pe_and_mach_o() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(ELF_MAGIC);
        elf[4] = 2;
        elf[5] = 1;
        elf[18..20].copy_from_slice(&224u16.to_le_bytes());
        let ident = ElfIdent::parse(&elf).unwrap();
        assert!(ident.is_64 && ident.little_endian && ident.is_gpu());
        let mut pe = vec![0u8; 0x100];
        pe[..2].copy_from_slice(b"MZ");
        pe[0x3c] = 0x80;
        pe[0x80..0x84].copy_from_slice(b"PE\0\0");
        assert_eq!(ForeignFormat::sniff(&pe), Some(ForeignFormat::Pe));
        assert_eq!(ForeignFormat::sniff(&[0xcf, 0xfa, 0xed, 0xfe, 0, 0, 0, 0]), Some(ForeignFormat::MachO));
        // A Java class file is not a fat Mach-O file.
        assert_eq!(ForeignFormat::sniff(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52]), None);
        assert_eq!(ForeignFormat::sniff(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2]), Some(ForeignFormat::MachO));
    }
}
