//! Test fixtures: ELF shared objects with exactly the dynamic facts a test asks for, written with
//! the `object` crate. They are not meant to run; they let a test name versions no real host has
//! (`GLIBC_2.43`), any architecture, and hostile layouts.

use object::Endianness;
use object::elf;
use object::write::elf::{FileHeader, ProgramHeader, SectionHeader, Sym, Vernaux, Verneed, Writer};

/// A symbol the object needs: name, optional `(library, version)`, weak.
#[derive(Clone, Debug)]
pub struct Import {
    pub name: String,
    pub version: Option<(String, String)>,
    pub weak: bool,
}

/// An extra section with raw content (GPU containers, notes of other kinds).
#[derive(Clone, Debug)]
pub struct RawSection {
    pub name: String,
    pub kind: u32,
    pub data: Vec<u8>,
    /// Size of a `SHT_NOBITS` section (no data in the file).
    pub nobits_size: u64,
}

/// What to put into the ELF file.
#[derive(Clone, Debug)]
pub struct ElfSpec {
    pub machine: u16,
    pub is_64: bool,
    pub little_endian: bool,
    pub flags: u32,
    pub os_abi: u8,
    pub abi_version: u8,
    pub e_type: u16,
    pub interpreter: Option<String>,
    pub soname: Option<String>,
    pub needed: Vec<String>,
    pub rpath: Option<String>,
    pub runpath: Option<String>,
    pub imports: Vec<Import>,
    /// Defined functions (`PyInit_foo` makes a Python extension `foo`).
    pub exports: Vec<String>,
    /// `GNU_PROPERTY_X86_ISA_1_NEEDED` bits.
    pub x86_isa_needed: Option<u32>,
    pub sections: Vec<RawSection>,
    /// Bytes of padding added in a `.data`-like section (for large-file tests).
    pub padding: usize,
}

impl Default for ElfSpec {
    fn default() -> Self {
        ElfSpec {
            machine: 62,
            is_64: true,
            little_endian: true,
            flags: 0,
            os_abi: 0,
            abi_version: 0,
            e_type: 3,
            interpreter: None,
            soname: None,
            needed: vec!["libc.so.6".into()],
            rpath: None,
            runpath: None,
            imports: vec![Import::versioned("malloc", "libc.so.6", "GLIBC_2.2.5")],
            exports: Vec::new(),
            x86_isa_needed: None,
            sections: Vec::new(),
            padding: 0,
        }
    }
}

impl Import {
    pub fn versioned(name: &str, library: &str, version: &str) -> Self {
        Import { name: name.into(), version: Some((library.into(), version.into())), weak: false }
    }
    pub fn plain(name: &str) -> Self {
        Import { name: name.into(), version: None, weak: false }
    }
    pub fn weak(name: &str) -> Self {
        Import { name: name.into(), version: None, weak: true }
    }
}

impl ElfSpec {
    /// A Python extension module `module` for x86-64 needing `needed` and `versions`
    /// (`(library, version)` pairs, one imported symbol each).
    pub fn extension(module: &str) -> Self {
        ElfSpec { exports: vec![format!("PyInit_{module}")], ..Default::default() }
    }

    pub fn for_arch(mut self, machine: u16, is_64: bool, little_endian: bool, flags: u32) -> Self {
        self.machine = machine;
        self.is_64 = is_64;
        self.little_endian = little_endian;
        self.flags = flags;
        self
    }

    /// Add a versioned import and the DT_NEEDED entry for its library.
    pub fn needs_version(mut self, symbol: &str, library: &str, version: &str) -> Self {
        if !self.needed.iter().any(|n| n == library) {
            self.needed.push(library.into());
        }
        self.imports.push(Import::versioned(symbol, library, version));
        self
    }

    pub fn needs(mut self, library: &str) -> Self {
        self.needed.push(library.into());
        self
    }

    pub fn build(&self) -> Vec<u8> {
        build(self)
    }
}

/// Write the ELF file.
pub fn build(spec: &ElfSpec) -> Vec<u8> {
    let endian = if spec.little_endian { Endianness::Little } else { Endianness::Big };
    let mut out = Vec::new();
    let mut w = Writer::new(endian, spec.is_64, &mut out);

    // Version needs grouped by library, in first-use order; index 2 onwards.
    let mut libraries: Vec<(String, Vec<String>)> = Vec::new();
    for import in &spec.imports {
        if let Some((lib, ver)) = &import.version {
            match libraries.iter_mut().find(|(l, _)| l == lib) {
                Some((_, versions)) if !versions.contains(ver) => versions.push(ver.clone()),
                Some(_) => {}
                None => libraries.push((lib.clone(), vec![ver.clone()])),
            }
        }
    }
    let version_index = |lib: &str, ver: &str| -> u16 {
        let mut index = 2;
        for (l, versions) in &libraries {
            for v in versions {
                if l == lib && v == ver {
                    return index;
                }
                index += 1;
            }
        }
        1
    };

    // Strings.
    let needed_ids: Vec<_> = spec.needed.iter().map(|n| w.add_dynamic_string(n.as_bytes())).collect();
    let soname_id = spec.soname.as_ref().map(|s| w.add_dynamic_string(s.as_bytes()));
    let rpath_id = spec.rpath.as_ref().map(|s| w.add_dynamic_string(s.as_bytes()));
    let runpath_id = spec.runpath.as_ref().map(|s| w.add_dynamic_string(s.as_bytes()));
    let lib_ids: Vec<_> = libraries
        .iter()
        .map(|(l, versions)| {
            (
                w.add_dynamic_string(l.as_bytes()),
                versions.iter().map(|v| w.add_dynamic_string(v.as_bytes())).collect::<Vec<_>>(),
            )
        })
        .collect();
    let import_ids: Vec<_> = spec.imports.iter().map(|i| w.add_dynamic_string(i.name.as_bytes())).collect();
    let export_ids: Vec<_> = spec.exports.iter().map(|e| w.add_dynamic_string(e.as_bytes())).collect();

    // Layout.
    let has_interp = spec.interpreter.is_some();
    let mut note = Vec::new();
    if let Some(bits) = spec.x86_isa_needed {
        note = gnu_property_note(bits, spec.little_endian, spec.is_64);
    }
    let phnum = 2 + u32::from(has_interp) + u32::from(!note.is_empty());
    w.reserve_file_header();
    w.reserve_program_headers(phnum);
    let interp_bytes = spec.interpreter.as_ref().map(|i| {
        let mut b = i.as_bytes().to_vec();
        b.push(0);
        b
    });
    let interp_offset = interp_bytes.as_ref().map(|b| w.reserve(b.len() as u64, 1)).unwrap_or(0);
    let note_offset = if note.is_empty() { 0 } else { w.reserve(note.len() as u64, 8) };

    w.reserve_null_dynamic_symbol_index();
    for _ in 0..spec.imports.len() + spec.exports.len() {
        w.reserve_dynamic_symbol_index();
    }
    let dynsym_offset = w.reserve_dynsym();
    let versym_offset = w.reserve_gnu_versym();
    let verneed_offset = if libraries.is_empty() {
        0
    } else {
        w.reserve_gnu_verneed(libraries.len() as u16, libraries.iter().map(|(_, v)| v.len()).sum())
    };
    let dynstr_offset = w.reserve_dynstr().expect("dynstr");
    let text_offset = w.reserve(16 + spec.padding as u64, 16);
    let raw_offsets: Vec<u64> = spec
        .sections
        .iter()
        .map(|s| if s.kind == 8 { w.reserved_len() } else { w.reserve(s.data.len() as u64, 16) })
        .collect();
    let dynamic_count = spec.needed.len()
        + usize::from(soname_id.is_some())
        + usize::from(rpath_id.is_some())
        + usize::from(runpath_id.is_some())
        + 6
        + if libraries.is_empty() { 0 } else { 2 }
        + 2; // spare DT_NULL entries, as GNU ld leaves them
    let dynamic_offset = w.reserve_dynamic(dynamic_count);
    let file_end = w.reserved_len();

    w.reserve_null_section_index();
    let interp_name = has_interp.then(|| w.add_section_name(b".interp"));
    let interp_index = has_interp.then(|| w.reserve_section_index());
    let note_name = (!note.is_empty()).then(|| w.add_section_name(b".note.gnu.property"));
    let note_index = (!note.is_empty()).then(|| w.reserve_section_index());
    w.reserve_dynsym_section_index();
    w.reserve_gnu_versym_section_index();
    if !libraries.is_empty() {
        w.reserve_gnu_verneed_section_index();
    }
    w.reserve_dynstr_section_index();
    let text_name = w.add_section_name(b".text");
    w.reserve_section_index();
    let raw_names: Vec<_> = spec.sections.iter().map(|s| w.add_section_name(s.name.as_bytes())).collect();
    for _ in &spec.sections {
        w.reserve_section_index();
    }
    w.reserve_dynamic_section_index();
    w.reserve_shstrtab_section_index();
    w.reserve_shstrtab().expect("shstrtab");
    w.reserve_section_headers();
    let _ = (interp_index, note_index);

    // Write. Addresses equal file offsets: one PT_LOAD maps the file.
    w.write_file_header(&FileHeader {
        os_abi: elf::OsAbi(spec.os_abi),
        abi_version: spec.abi_version,
        e_type: elf::FileType(spec.e_type),
        e_machine: elf::Machine(spec.machine),
        e_entry: 0,
        e_flags: elf::FileFlags(spec.flags),
    })
    .expect("header");
    w.write_align_program_headers();
    if has_interp {
        let len = interp_bytes.as_ref().map(|b| b.len() as u64).unwrap_or(0);
        w.write_program_header(&ProgramHeader {
            p_type: elf::PT_INTERP,
            p_flags: elf::PF_R,
            p_offset: interp_offset,
            p_vaddr: interp_offset,
            p_paddr: interp_offset,
            p_filesz: len,
            p_memsz: len,
            p_align: 1,
        });
    }
    w.write_program_header(&ProgramHeader {
        p_type: elf::PT_LOAD,
        p_flags: elf::PF_R | elf::PF_W,
        p_offset: 0,
        p_vaddr: 0,
        p_paddr: 0,
        p_filesz: file_end,
        p_memsz: file_end,
        p_align: 0x1000,
    });
    let dyn_size = dynamic_count as u64 * if spec.is_64 { 16 } else { 8 };
    w.write_program_header(&ProgramHeader {
        p_type: elf::PT_DYNAMIC,
        p_flags: elf::PF_R | elf::PF_W,
        p_offset: dynamic_offset,
        p_vaddr: dynamic_offset,
        p_paddr: dynamic_offset,
        p_filesz: dyn_size,
        p_memsz: dyn_size,
        p_align: 8,
    });
    if !note.is_empty() {
        w.write_program_header(&ProgramHeader {
            p_type: elf::PT_NOTE,
            p_flags: elf::PF_R,
            p_offset: note_offset,
            p_vaddr: note_offset,
            p_paddr: note_offset,
            p_filesz: note.len() as u64,
            p_memsz: note.len() as u64,
            p_align: 8,
        });
    }
    if let Some(b) = &interp_bytes {
        w.write(b);
    }
    if !note.is_empty() {
        w.write_align(8);
        w.write(&note);
    }

    w.write_null_dynamic_symbol();
    for (import, id) in spec.imports.iter().zip(&import_ids) {
        let bind = if import.weak { elf::STB_WEAK } else { elf::STB_GLOBAL };
        w.write_dynamic_symbol(&Sym {
            st_name: w.dynamic_string_offset(Some(*id)),
            section: None,
            st_info: elf::SymbolInfo::new(bind, elf::STT_FUNC),
            st_other: elf::STV_DEFAULT.into(),
            st_shndx: elf::SHN_UNDEF,
            st_value: 0,
            st_size: 0,
        });
    }
    let text_section_index =
        1 + u32::from(has_interp) + u32::from(!note.is_empty()) + 3 + u32::from(!libraries.is_empty());
    for id in &export_ids {
        w.write_dynamic_symbol(&Sym {
            st_name: w.dynamic_string_offset(Some(*id)),
            section: None,
            st_info: elf::SymbolInfo::new(elf::STB_GLOBAL, elf::STT_FUNC),
            st_other: elf::STV_DEFAULT.into(),
            st_shndx: elf::SymbolSection(text_section_index as u16),
            st_value: text_offset,
            st_size: 1,
        });
    }
    w.write_null_gnu_versym();
    for import in &spec.imports {
        let index = import.version.as_ref().map(|(l, v)| version_index(l, v)).unwrap_or(1);
        w.write_gnu_versym(elf::VersymIndex(index));
    }
    for _ in &spec.exports {
        w.write_gnu_versym(elf::VersymIndex(1));
    }
    if !libraries.is_empty() {
        w.write_align_gnu_verneed();
        for ((lib, versions), (lib_id, version_ids)) in libraries.iter().zip(&lib_ids) {
            w.write_gnu_verneed(&Verneed {
                version: elf::VER_NEED_CURRENT,
                aux_count: versions.len() as u16,
                file: w.dynamic_string_offset(Some(*lib_id)),
            });
            for (v, id) in versions.iter().zip(version_ids) {
                w.write_gnu_vernaux(&Vernaux {
                    flags: elf::VersionFlags(0),
                    index: elf::VersionIndex(version_index(lib, v)),
                    name: w.dynamic_string_offset(Some(*id)),
                    hash: elf_hash(v.as_bytes()),
                });
            }
        }
    }
    w.write_dynstr();
    w.write_align(16);
    w.write(&[0xc3; 16]);
    w.write(&vec![0u8; spec.padding]);
    for (s, offset) in spec.sections.iter().zip(&raw_offsets) {
        if s.kind != 8 {
            w.write_align(16);
            debug_assert_eq!(w.len(), *offset);
            w.write(&s.data);
        }
    }
    w.write_align_dynamic();
    for id in &needed_ids {
        w.write_dynamic_string(elf::DT_NEEDED, *id).expect("dyn");
    }
    if let Some(id) = soname_id {
        w.write_dynamic_string(elf::DT_SONAME, id).expect("dyn");
    }
    if let Some(id) = rpath_id {
        w.write_dynamic_string(elf::DT_RPATH, id).expect("dyn");
    }
    if let Some(id) = runpath_id {
        w.write_dynamic_string(elf::DT_RUNPATH, id).expect("dyn");
    }
    w.write_dynamic(elf::DT_STRTAB, dynstr_offset).expect("dyn");
    w.write_dynamic(elf::DT_STRSZ, w.dynstr_len() as u64).expect("dyn");
    w.write_dynamic(elf::DT_SYMTAB, dynsym_offset).expect("dyn");
    w.write_dynamic(elf::DT_SYMENT, if spec.is_64 { 24 } else { 16 }).expect("dyn");
    w.write_dynamic(elf::DT_VERSYM, versym_offset).expect("dyn");
    if !libraries.is_empty() {
        w.write_dynamic(elf::DT_VERNEED, verneed_offset).expect("dyn");
        w.write_dynamic(elf::DT_VERNEEDNUM, libraries.len() as u64).expect("dyn");
    }
    for _ in 0..3 {
        w.write_dynamic(elf::DT_NULL, 0).expect("dyn");
    }

    w.write_shstrtab();
    w.write_null_section_header();
    if let (Some(name), Some(b)) = (interp_name, &interp_bytes) {
        w.write_section_header(&SectionHeader {
            sh_name: w.section_name_offset(Some(name)),
            sh_type: elf::SHT_PROGBITS,
            sh_flags: elf::SHF_ALLOC,
            sh_addr: interp_offset,
            sh_offset: interp_offset,
            sh_size: b.len() as u64,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 1,
            sh_entsize: 0,
        });
    }
    if let Some(name) = note_name {
        w.write_section_header(&SectionHeader {
            sh_name: w.section_name_offset(Some(name)),
            sh_type: elf::SHT_NOTE,
            sh_flags: elf::SHF_ALLOC,
            sh_addr: note_offset,
            sh_offset: note_offset,
            sh_size: note.len() as u64,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 8,
            sh_entsize: 0,
        });
    }
    w.write_dynsym_section_header(dynsym_offset, 1);
    w.write_gnu_versym_section_header(versym_offset);
    if !libraries.is_empty() {
        w.write_gnu_verneed_section_header(verneed_offset);
    }
    w.write_dynstr_section_header(dynstr_offset);
    w.write_section_header(&SectionHeader {
        sh_name: w.section_name_offset(Some(text_name)),
        sh_type: elf::SHT_PROGBITS,
        sh_flags: elf::SHF_ALLOC | elf::SHF_EXECINSTR,
        sh_addr: text_offset,
        sh_offset: text_offset,
        sh_size: 16 + spec.padding as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 16,
        sh_entsize: 0,
    });
    for ((s, name), offset) in spec.sections.iter().zip(&raw_names).zip(&raw_offsets) {
        w.write_section_header(&SectionHeader {
            sh_name: w.section_name_offset(Some(*name)),
            sh_type: elf::SectionType(s.kind),
            sh_flags: elf::SHF_ALLOC,
            sh_addr: *offset,
            sh_offset: *offset,
            sh_size: if s.kind == 8 { s.nobits_size } else { s.data.len() as u64 },
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 16,
            sh_entsize: 0,
        });
    }
    w.write_dynamic_section_header(dynamic_offset);
    w.write_shstrtab_section_header();
    out
}

/// A `.note.gnu.property` with `GNU_PROPERTY_X86_ISA_1_NEEDED`.
fn gnu_property_note(bits: u32, little_endian: bool, is_64: bool) -> Vec<u8> {
    let u32b = |v: u32| {
        if little_endian { v.to_le_bytes() } else { v.to_be_bytes() }
    };
    let mut desc = Vec::new();
    desc.extend(u32b(0xc000_8002));
    desc.extend(u32b(4));
    desc.extend(u32b(bits));
    if is_64 {
        desc.extend([0; 4]);
    }
    let mut note = Vec::new();
    note.extend(u32b(4));
    note.extend(u32b(desc.len() as u32));
    note.extend(u32b(5));
    note.extend(b"GNU\0");
    note.extend(desc);
    note
}

/// The SysV ELF hash of a version name (`vna_hash`).
fn elf_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}
