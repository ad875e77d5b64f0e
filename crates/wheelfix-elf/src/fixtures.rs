//! Test fixtures: ELF shared objects with exactly the dynamic facts a test asks for, written with
//! the `object` crate. They are not meant to run; they let a test name versions no real host has
//! (`GLIBC_2.43`), any architecture, and hostile layouts. Built for this crate's tests and, with
//! the `fixtures` feature, for the integration tests of the workspace.

use object::Endianness;
use object::elf;
use object::write::StringId;
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

/// Write the ELF file: strings and places reserved first, then every part in file order.
/// Addresses equal file offsets: one PT_LOAD maps the file.
pub fn build(spec: &ElfSpec) -> Vec<u8> {
    let endian = if spec.little_endian { Endianness::Little } else { Endianness::Big };
    let mut out = Vec::new();
    let mut w = Writer::new(endian, spec.is_64, &mut out);
    let versions = Versions::of(spec);
    let strings = Strings::add(&mut w, spec, &versions);
    let places = Places::reserve(&mut w, spec, &versions, &strings);
    write_program_headers(&mut w, spec, &places);
    write_symbols(&mut w, spec, &versions, &strings, &places);
    write_contents(&mut w, spec, &places);
    write_dynamic(&mut w, spec, &versions, &strings, &places);
    write_section_headers(&mut w, spec, &places);
    out
}

/// Version needs grouped by library, in first-use order; their indexes count from 2.
struct Versions(Vec<(String, Vec<String>)>);

impl Versions {
    fn of(spec: &ElfSpec) -> Versions {
        let mut libraries: Vec<(String, Vec<String>)> = Vec::new();
        for (lib, ver) in spec.imports.iter().filter_map(|i| i.version.as_ref()) {
            match libraries.iter_mut().find(|(l, _)| l == lib) {
                Some((_, versions)) if !versions.contains(ver) => versions.push(ver.clone()),
                Some(_) => {}
                None => libraries.push((lib.clone(), vec![ver.clone()])),
            }
        }
        Versions(libraries)
    }

    /// The version index of `ver` of `lib` (1: global, for an unversioned symbol).
    fn index(&self, lib: &str, ver: &str) -> u16 {
        let mut index = 2;
        for (l, versions) in &self.0 {
            for v in versions {
                if l == lib && v == ver {
                    return index;
                }
                index += 1;
            }
        }
        1
    }
}

/// The dynamic strings, added before anything is reserved.
struct Strings {
    needed: Vec<StringId>,
    soname: Option<StringId>,
    rpath: Option<StringId>,
    runpath: Option<StringId>,
    /// Per library of [`Versions`]: its name and its versions'.
    libraries: Vec<(StringId, Vec<StringId>)>,
    imports: Vec<StringId>,
    exports: Vec<StringId>,
}

impl Strings {
    fn add<'a>(w: &mut Writer<'a>, spec: &'a ElfSpec, versions: &'a Versions) -> Strings {
        let mut add = |s: &'a str| w.add_dynamic_string(s.as_bytes());
        Strings {
            needed: spec.needed.iter().map(|n| add(n)).collect(),
            soname: spec.soname.as_deref().map(&mut add),
            rpath: spec.rpath.as_deref().map(&mut add),
            runpath: spec.runpath.as_deref().map(&mut add),
            libraries: versions.0.iter().map(|(l, vs)| (add(l), vs.iter().map(|v| add(v)).collect())).collect(),
            imports: spec.imports.iter().map(|i| add(&i.name)).collect(),
            exports: spec.exports.iter().map(|e| add(e)).collect(),
        }
    }
}

/// Where each part goes, reserved in file order.
struct Places {
    interp: Option<(Vec<u8>, u64)>,
    note: Option<(Vec<u8>, u64)>,
    dynsym: u64,
    versym: u64,
    verneed: u64,
    dynstr: u64,
    text: u64,
    /// The raw sections' offsets (a `SHT_NOBITS` one takes no bytes).
    raw: Vec<u64>,
    dynamic: u64,
    dynamic_count: usize,
    file_end: u64,
    interp_name: Option<StringId>,
    note_name: Option<StringId>,
    text_name: StringId,
    raw_names: Vec<StringId>,
}

impl Places {
    fn reserve<'a>(w: &mut Writer<'a>, spec: &'a ElfSpec, versions: &Versions, strings: &Strings) -> Places {
        let interp = spec.interpreter.as_ref().map(|i| [i.as_bytes(), &[0]].concat());
        let note = spec.x86_isa_needed.map(|bits| gnu_property_note(bits, spec.little_endian, spec.is_64));
        w.reserve_file_header();
        w.reserve_program_headers(2 + u32::from(interp.is_some()) + u32::from(note.is_some()));
        let interp = interp.map(|b| {
            let at = w.reserve(b.len() as u64, 1);
            (b, at)
        });
        let note = note.map(|n| {
            let at = w.reserve(n.len() as u64, 8);
            (n, at)
        });
        w.reserve_null_dynamic_symbol_index();
        for _ in 0..spec.imports.len() + spec.exports.len() {
            w.reserve_dynamic_symbol_index();
        }
        let (dynsym, versym) = (w.reserve_dynsym(), w.reserve_gnu_versym());
        let libraries = &versions.0;
        let verneed = if libraries.is_empty() {
            0
        } else {
            w.reserve_gnu_verneed(libraries.len() as u16, libraries.iter().map(|(_, v)| v.len()).sum())
        };
        let dynstr = w.reserve_dynstr().expect("dynstr");
        let text = w.reserve(16 + spec.padding as u64, 16);
        let nobits = |s: &RawSection| s.kind == elf::SHT_NOBITS.0;
        let raw =
            spec.sections.iter().map(|s| if nobits(s) { w.reserved_len() } else { w.reserve(s.data.len() as u64, 16) });
        let raw: Vec<u64> = raw.collect();
        let dynamic_count = strings.needed.len()
            + [strings.soname, strings.rpath, strings.runpath].iter().filter(|s| s.is_some()).count()
            + 6
            + if libraries.is_empty() { 0 } else { 2 }
            + 2; // spare DT_NULL entries, as GNU ld leaves them
        let dynamic = w.reserve_dynamic(dynamic_count);
        let file_end = w.reserved_len();
        let names = Places::reserve_sections(w, spec, interp.is_some(), note.is_some(), !libraries.is_empty());
        let (interp_name, note_name, text_name, raw_names) = names;
        Places {
            interp,
            note,
            dynsym,
            versym,
            verneed,
            dynstr,
            text,
            raw,
            dynamic,
            dynamic_count,
            file_end,
            interp_name,
            note_name,
            text_name,
            raw_names,
        }
    }

    /// The section headers' indexes and names: (`.interp`, `.note.gnu.property`, `.text`, raw).
    fn reserve_sections<'a>(
        w: &mut Writer<'a>,
        spec: &'a ElfSpec,
        interp: bool,
        note: bool,
        verneed: bool,
    ) -> (Option<StringId>, Option<StringId>, StringId, Vec<StringId>) {
        w.reserve_null_section_index();
        let interp_name = interp.then(|| w.add_section_name(b".interp"));
        if interp {
            w.reserve_section_index();
        }
        let note_name = note.then(|| w.add_section_name(b".note.gnu.property"));
        if note {
            w.reserve_section_index();
        }
        w.reserve_dynsym_section_index();
        w.reserve_gnu_versym_section_index();
        if verneed {
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
        (interp_name, note_name, text_name, raw_names)
    }
}

/// A segment whose addresses are its offsets.
fn segment(
    p_type: elf::ProgramType,
    p_flags: elf::ProgramFlags,
    offset: u64,
    size: u64,
    p_align: u64,
) -> ProgramHeader {
    ProgramHeader {
        p_type,
        p_flags,
        p_offset: offset,
        p_vaddr: offset,
        p_paddr: offset,
        p_filesz: size,
        p_memsz: size,
        p_align,
    }
}

fn write_program_headers(w: &mut Writer<'_>, spec: &ElfSpec, places: &Places) {
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
    if let Some((bytes, at)) = &places.interp {
        w.write_program_header(&segment(elf::PT_INTERP, elf::PF_R, *at, bytes.len() as u64, 1));
    }
    w.write_program_header(&segment(elf::PT_LOAD, elf::PF_R | elf::PF_W, 0, places.file_end, 0x1000));
    let dyn_size = places.dynamic_count as u64 * if spec.is_64 { 16 } else { 8 };
    w.write_program_header(&segment(elf::PT_DYNAMIC, elf::PF_R | elf::PF_W, places.dynamic, dyn_size, 8));
    if let Some((note, at)) = &places.note {
        w.write_program_header(&segment(elf::PT_NOTE, elf::PF_R, *at, note.len() as u64, 8));
    }
    if let Some((bytes, _)) = &places.interp {
        w.write(bytes);
    }
    if let Some((note, _)) = &places.note {
        w.write_align(8);
        w.write(note);
    }
}

/// `.dynsym`, `.gnu.version` and `.gnu.version_r`.
fn write_symbols(w: &mut Writer<'_>, spec: &ElfSpec, versions: &Versions, strings: &Strings, places: &Places) {
    w.write_null_dynamic_symbol();
    for (import, id) in spec.imports.iter().zip(&strings.imports) {
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
    let libraries = &versions.0;
    let text_section_index = 1
        + u32::from(places.interp.is_some())
        + u32::from(places.note.is_some())
        + 3
        + u32::from(!libraries.is_empty());
    for id in &strings.exports {
        w.write_dynamic_symbol(&Sym {
            st_name: w.dynamic_string_offset(Some(*id)),
            section: None,
            st_info: elf::SymbolInfo::new(elf::STB_GLOBAL, elf::STT_FUNC),
            st_other: elf::STV_DEFAULT.into(),
            st_shndx: elf::SymbolSection(text_section_index as u16),
            st_value: places.text,
            st_size: 1,
        });
    }
    w.write_null_gnu_versym();
    for import in &spec.imports {
        let index = import.version.as_ref().map(|(l, v)| versions.index(l, v)).unwrap_or(1);
        w.write_gnu_versym(elf::VersymIndex(index));
    }
    for _ in &spec.exports {
        w.write_gnu_versym(elf::VersymIndex(1));
    }
    if libraries.is_empty() {
        return;
    }
    w.write_align_gnu_verneed();
    for ((lib, lib_versions), (lib_id, version_ids)) in libraries.iter().zip(&strings.libraries) {
        w.write_gnu_verneed(&Verneed {
            version: elf::VER_NEED_CURRENT,
            aux_count: lib_versions.len() as u16,
            file: w.dynamic_string_offset(Some(*lib_id)),
        });
        for (v, id) in lib_versions.iter().zip(version_ids) {
            w.write_gnu_vernaux(&Vernaux {
                flags: elf::VersionFlags(0),
                index: elf::VersionIndex(versions.index(lib, v)),
                name: w.dynamic_string_offset(Some(*id)),
                hash: elf_hash(v.as_bytes()),
            });
        }
    }
}

/// `.dynstr`, `.text` and the raw sections' bytes.
fn write_contents(w: &mut Writer<'_>, spec: &ElfSpec, places: &Places) {
    w.write_dynstr();
    w.write_align(16);
    w.write(&[0xc3; 16]);
    w.write(&vec![0u8; spec.padding]);
    for (s, offset) in spec.sections.iter().zip(&places.raw) {
        if s.kind != elf::SHT_NOBITS.0 {
            w.write_align(16);
            debug_assert_eq!(w.len(), *offset);
            w.write(&s.data);
        }
    }
}

fn write_dynamic(w: &mut Writer<'_>, spec: &ElfSpec, versions: &Versions, strings: &Strings, places: &Places) {
    w.write_align_dynamic();
    for id in &strings.needed {
        w.write_dynamic_string(elf::DT_NEEDED, *id).expect("dyn");
    }
    for (tag, id) in
        [(elf::DT_SONAME, strings.soname), (elf::DT_RPATH, strings.rpath), (elf::DT_RUNPATH, strings.runpath)]
    {
        if let Some(id) = id {
            w.write_dynamic_string(tag, id).expect("dyn");
        }
    }
    w.write_dynamic(elf::DT_STRTAB, places.dynstr).expect("dyn");
    w.write_dynamic(elf::DT_STRSZ, w.dynstr_len() as u64).expect("dyn");
    w.write_dynamic(elf::DT_SYMTAB, places.dynsym).expect("dyn");
    w.write_dynamic(elf::DT_SYMENT, if spec.is_64 { 24 } else { 16 }).expect("dyn");
    w.write_dynamic(elf::DT_VERSYM, places.versym).expect("dyn");
    if !versions.0.is_empty() {
        w.write_dynamic(elf::DT_VERNEED, places.verneed).expect("dyn");
        w.write_dynamic(elf::DT_VERNEEDNUM, versions.0.len() as u64).expect("dyn");
    }
    for _ in 0..3 {
        w.write_dynamic(elf::DT_NULL, 0).expect("dyn");
    }
}

/// An allocated section whose address is its offset.
fn section(
    w: &Writer<'_>,
    name: StringId,
    sh_type: elf::SectionType,
    sh_flags: elf::SectionFlags,
    at: u64,
    size: u64,
    align: u64,
) -> SectionHeader {
    SectionHeader {
        sh_name: w.section_name_offset(Some(name)),
        sh_type,
        sh_flags,
        sh_addr: at,
        sh_offset: at,
        sh_size: size,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: align,
        sh_entsize: 0,
    }
}

fn write_section_headers(w: &mut Writer<'_>, spec: &ElfSpec, places: &Places) {
    w.write_shstrtab();
    w.write_null_section_header();
    if let (Some(name), Some((bytes, at))) = (places.interp_name, &places.interp) {
        w.write_section_header(&section(w, name, elf::SHT_PROGBITS, elf::SHF_ALLOC, *at, bytes.len() as u64, 1));
    }
    if let (Some(name), Some((note, at))) = (places.note_name, &places.note) {
        w.write_section_header(&section(w, name, elf::SHT_NOTE, elf::SHF_ALLOC, *at, note.len() as u64, 8));
    }
    w.write_dynsym_section_header(places.dynsym, 1);
    w.write_gnu_versym_section_header(places.versym);
    if places.verneed != 0 {
        w.write_gnu_verneed_section_header(places.verneed);
    }
    w.write_dynstr_section_header(places.dynstr);
    let code = elf::SHF_ALLOC | elf::SHF_EXECINSTR;
    let text_size = 16 + spec.padding as u64;
    w.write_section_header(&section(w, places.text_name, elf::SHT_PROGBITS, code, places.text, text_size, 16));
    for ((s, name), at) in spec.sections.iter().zip(&places.raw_names).zip(&places.raw) {
        let size = if s.kind == elf::SHT_NOBITS.0 { s.nobits_size } else { s.data.len() as u64 };
        w.write_section_header(&section(w, *name, elf::SectionType(s.kind), elf::SHF_ALLOC, *at, size, 16));
    }
    w.write_dynamic_section_header(places.dynamic);
    w.write_shstrtab_section_header();
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
