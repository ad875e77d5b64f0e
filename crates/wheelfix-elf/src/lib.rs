//! What a binary says: the facts wheelfix reads from an ELF file, parsed once.
//!
//! Parsing is lazy on purpose: goblin's eager `Elf::parse` walks every relocation of a library,
//! which costs seconds on a PyTorch wheel; we read only the headers, the dynamic section, the
//! dynamic symbols with their versions, and the notes.
//!
//! Why one file: the lazy parser of every fact a policy reads (headers, dynamic
//! section, versioned symbols, notes, the x86-64 ISA level), each read bounded against the file.

pub mod header;
pub mod layout;
pub mod lint;
pub mod patch;
pub mod pe;
pub mod ranges;
pub mod view;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod tests;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::dynamic::{DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, Dynamic};
use goblin::elf::program_header::{PT_DYNAMIC, PT_INTERP, ProgramHeader};
use goblin::elf::section_header::{
    SHF_ALLOC, SHT_DYNSYM, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_NOBITS, SHT_NOTE, SectionHeader,
};
use goblin::elf::sym::{STB_WEAK, STT_FUNC, Symtab};
use goblin::elf::symver::{VerneedSection, VersymSection};
use serde::Serialize;

use view::{FileView, ViewError};
use wheelfix_base::platform::Arch;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ElfError {
    #[error("not an ELF file")]
    NotElf,
    #[error("malformed ELF: {0}")]
    Malformed(String),
    /// A range the parser needs was not kept from the stream: read the file again, keeping it.
    #[error("bytes {offset:#x}..+{size:#x} were not kept")]
    NotKept { offset: u64, size: u64 },
}

impl From<goblin::error::Error> for ElfError {
    fn from(e: goblin::error::Error) -> Self {
        ElfError::Malformed(e.to_string())
    }
}

pub use header::ELF_MAGIC;

/// One symbol a binary needs from elsewhere. Ex) `memcpy@GLIBC_2.14` (weak: false)
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UndefinedSymbol {
    pub name: String,
    /// The version it is bound to, when it has one. Ex) `GLIBC_2.14`
    pub version: Option<String>,
    /// The library file that version comes from (`.gnu.version_r`). Ex) `libc.so.6`
    pub library: Option<String>,
    pub weak: bool,
}

/// One `.gnu.version_r` entry: the library file and the versions required from it.
/// Ex) `libc.so.6`: `GLIBC_2.2.5`, `GLIBC_2.14`
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionNeed {
    pub file: String,
    pub versions: Vec<String>,
}

/// A section header, kept for GPU container detection and reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectionInfo {
    pub name: String,
    pub kind: u32,
    /// `sh_flags` (`SHF_EXECINSTR` marks code).
    pub flags: u64,
    pub offset: u64,
    pub size: u64,
    /// `sh_addr`: where the section is loaded (0 for a section that is not).
    pub addr: u64,
}

impl SectionInfo {
    /// Its bytes are in the file: any kind but `SHT_NOBITS` (`.bss`, a `.hip_fatbin` emptied
    /// by kpack), whose `offset` and `size` name no bytes.
    pub fn has_file_bytes(&self) -> bool {
        self.kind != goblin::elf::section_header::SHT_NOBITS
    }
}

/// Everything wheelfix needs to know about one ELF file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ElfFacts {
    pub is_64: bool,
    pub little_endian: bool,
    pub machine: u16,
    pub flags: u32,
    pub os_abi: u8,
    pub abi_version: u8,
    pub elf_type: u16,
    pub interpreter: Option<String>,
    pub soname: Option<String>,
    pub needed: Vec<String>,
    /// DT_RPATH entries split on `:`, unexpanded. Ex) `$ORIGIN/../lib`
    pub rpath: Vec<String>,
    /// DT_RUNPATH entries split on `:`, unexpanded.
    pub runpath: Vec<String>,
    pub version_needs: Vec<VersionNeed>,
    pub undefined: Vec<UndefinedSymbol>,
    /// Defined functions that make a file a Python extension (`PyInit_*`, `init*`, `_cffi_pypyinit_*`).
    pub init_functions: Vec<String>,
    /// `GNU_PROPERTY_X86_ISA_1_NEEDED` bits, when the file carries the property note.
    pub x86_isa_needed: Option<u32>,
    pub sections: Vec<SectionInfo>,
    /// What the loader reads of the layout, for the loadability rules ([`lint`]).
    #[serde(skip)]
    pub layout: lint::Layout,
}

impl ElfFacts {
    /// Parse the facts of a whole ELF file held in memory.
    pub fn parse(bytes: &[u8]) -> Result<ElfFacts, ElfError> {
        Self::parse_view(bytes)
    }

    /// Parse the facts from a view of the file: the ranges parsed are the ELF header, the program
    /// and section headers, the section names, PT_INTERP, the dynamic section and its string
    /// table, `.dynsym`, `.gnu.version`, `.gnu.version_r` and the notes.
    pub fn parse_view<V: FileView + ?Sized>(view: &V) -> Result<ElfFacts, ElfError> {
        let magic = view.get(0, 16.min(view.len())).map_err(|e| ElfError::from_view(e, "ELF identification"))?;
        if magic.len() < 16 || &magic[..4] != ELF_MAGIC {
            return Err(ElfError::NotElf);
        }
        // goblin is careful, but a hostile file must never take the process down.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_facts(view))) {
            Ok(result) => result,
            Err(_) => Err(ElfError::Malformed("the ELF parser failed on this file".into())),
        }
    }

    /// Parse the facts of a file of `len` bytes read by position, reading only the ranges the
    /// parser asks for (a bounded amount of memory, however large the file).
    pub fn parse_by_ranges(
        len: u64,
        read: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    ) -> Result<ElfFacts, ElfError> {
        let mut kept = view::Kept::new(len);
        let mut want: Vec<ranges::Range> = vec![(0, 64.min(len))];
        // Each pass learns more of where the tables are; a well-formed file needs three or four.
        for _ in 0..8 {
            for (offset, size) in want.drain(..) {
                let size = size.min(len.saturating_sub(offset)).min(256 << 20);
                if size == 0 || kept.contains(offset, size) {
                    continue;
                }
                let mut buf = vec![0u8; size as usize];
                read(&mut buf, offset).map_err(|e| ElfError::Malformed(format!("cannot read it: {e}")))?;
                kept.insert(offset, &buf);
            }
            match Self::parse_view(&kept) {
                Err(ElfError::NotKept { offset, size }) => {
                    want = ranges::needed_ranges(&kept);
                    want.push((offset, size));
                }
                done => return done,
            }
        }
        Err(ElfError::Malformed("its tables point at each other without end".into()))
    }

    /// The policy architecture of this file, if any policy covers it.
    pub fn arch(&self) -> Option<Arch> {
        Arch::from_elf(self.machine, self.is_64, self.little_endian, self.flags)
    }

    /// Class, byte order and machine: what decides whether one file can load another.
    pub fn ident(&self) -> header::ElfIdent {
        header::ElfIdent { is_64: self.is_64, little_endian: self.little_endian, machine: self.machine }
    }

    /// The libc the file was linked against, from its interpreter or its DT_NEEDED entries.
    pub fn libc(&self) -> Option<wheelfix_base::platform::Libc> {
        use wheelfix_base::platform::Libc;
        if let Some(interp) = &self.interpreter {
            let base = interp.rsplit('/').next().unwrap_or(interp);
            return Some(if base.starts_with("ld-musl-") {
                Libc::Musl
            } else if interp.starts_with("/system/bin/linker") {
                Libc::Android
            } else {
                Libc::Glibc
            });
        }
        for lib in &self.needed {
            if lib.starts_with("libc.musl-") || lib.starts_with("ld-musl-") || lib == "libc.so" {
                return Some(Libc::Musl);
            }
            if lib == "libc.so.6" || lib.starts_with("ld-linux") || lib.starts_with("ld64.so.") {
                return Some(Libc::Glibc);
            }
        }
        None
    }

    /// Every section of that name (a compacted file has one per piece: [`layout`]).
    pub fn sections_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a SectionInfo> + 'a {
        self.sections.iter().filter(move |s| s.name == name && s.has_file_bytes())
    }

    pub fn section(&self, name: &str) -> Option<&SectionInfo> {
        self.sections.iter().find(|s| s.name == name)
    }
}

impl ElfError {
    fn from_view(e: ViewError, what: &str) -> ElfError {
        match e {
            ViewError::NotKept { offset, size } => ElfError::NotKept { offset, size },
            ViewError::PastEnd { offset, size } => ElfError::Malformed(format!(
                "the {what} (offset {offset:#x}, size {size:#x}) lies past the end of the file"
            )),
        }
    }
}

/// A range of the file, or the error that names it.
fn range<'a, V: FileView + ?Sized>(view: &'a V, offset: u64, size: u64, what: &str) -> Result<&'a [u8], ElfError> {
    view.get(offset, size).map_err(|e| ElfError::from_view(e, what))
}

/// A section header moved to offset 0, for goblin's readers given only that section's bytes.
fn rebased(sh: &SectionHeader) -> SectionHeader {
    SectionHeader { sh_offset: 0, ..sh.clone() }
}

/// The section header table; a count of 0 with a table means the real count overflowed, and
/// is in the first header's `sh_size`. No more headers are read than the file could hold.
fn section_headers<V: FileView + ?Sized>(
    view: &V,
    header: &goblin::elf::Header,
    ctx: Ctx,
) -> Result<Vec<SectionHeader>, ElfError> {
    if header.e_shoff == 0 {
        return Ok(Vec::new());
    }
    let entry = u64::from(header.e_shentsize);
    let first = range(view, header.e_shoff, entry * u64::from(header.e_shnum.max(1)), "section header table")?;
    let count = match header.e_shnum {
        0 => SectionHeader::parse_from(first, 0, 1, ctx)?.first().map_or(0, |sh| sh.sh_size),
        n => u64::from(n),
    };
    let count = count.min(view.len() / entry.max(1));
    let sh_bytes = range(view, header.e_shoff, entry * count.max(1), "section header table")?;
    Ok(SectionHeader::parse_from(sh_bytes, 0, count as usize, ctx)?)
}

/// Each section with its name from the section name table (`shstrndx`), if there is one.
fn named_sections<V: FileView + ?Sized>(
    view: &V,
    section_headers: &[SectionHeader],
    shstrndx: usize,
) -> Result<Vec<SectionInfo>, ElfError> {
    let shstrtab = section_headers
        .get(shstrndx)
        .filter(|sh| sh.sh_type != SHT_NOBITS)
        .map(|sh| range(view, sh.sh_offset, sh.sh_size, "section name table"))
        .transpose()?;
    Ok(section_headers
        .iter()
        .map(|sh| SectionInfo {
            name: shstrtab.and_then(|t| string_at(t, sh.sh_name as u64)).unwrap_or_default(),
            kind: sh.sh_type,
            flags: sh.sh_flags,
            offset: sh.sh_offset,
            size: sh.sh_size,
            addr: sh.sh_addr,
        })
        .collect())
}

fn parse_facts<V: FileView + ?Sized>(view: &V) -> Result<ElfFacts, ElfError> {
    let head = range(view, 0, 64.min(view.len()), "ELF header")?;
    let header = goblin::elf::Elf::parse_header(head)?;
    let container = if header.e_ident[goblin::elf::header::EI_CLASS] == goblin::elf::header::ELFCLASS64 {
        Container::Big
    } else {
        Container::Little
    };
    let little_endian = header.e_ident[goblin::elf::header::EI_DATA] != goblin::elf::header::ELFDATA2MSB;
    let ctx = Ctx::new(container, if little_endian { Endian::Little } else { Endian::Big });

    let ph_size = ProgramHeader::size(ctx) as u64;
    let ph_bytes = range(view, header.e_phoff, ph_size * u64::from(header.e_phnum), "program header table")?;
    let program_headers = ProgramHeader::parse(ph_bytes, 0, header.e_phnum as usize, ctx)?;
    let section_headers = section_headers(view, &header, ctx)?;

    let mut facts = ElfFacts {
        is_64: container.is_big(),
        little_endian,
        machine: header.e_machine,
        flags: header.e_flags,
        os_abi: header.e_ident[goblin::elf::header::EI_OSABI],
        abi_version: header.e_ident[goblin::elf::header::EI_ABIVERSION],
        elf_type: header.e_type,
        interpreter: None,
        soname: None,
        needed: Vec::new(),
        rpath: Vec::new(),
        runpath: Vec::new(),
        version_needs: Vec::new(),
        undefined: Vec::new(),
        init_functions: Vec::new(),
        x86_isa_needed: None,
        sections: Vec::new(),
        layout: lint::Layout {
            file_len: view.len(),
            phdrs: (header.e_phoff, ph_size * u64::from(header.e_phnum)),
            segments: program_headers
                .iter()
                .map(|ph| lint::Segment {
                    kind: ph.p_type,
                    offset: ph.p_offset,
                    filesz: ph.p_filesz,
                    vaddr: ph.p_vaddr,
                    memsz: ph.p_memsz,
                    align: ph.p_align,
                })
                .collect(),
            tables: Vec::new(),
        },
    };

    for ph in &program_headers {
        if ph.p_type == PT_INTERP && ph.p_filesz > 1 {
            let bytes = range(view, ph.p_offset, ph.p_filesz - 1, "PT_INTERP")?;
            facts.interpreter = Some(String::from_utf8_lossy(bytes).trim_end_matches('\0').to_string());
        }
    }

    facts.sections = named_sections(view, &section_headers, header.e_shstrndx as usize)?;

    if let Some(dyn_header) = program_headers.iter().find(|ph| ph.p_type == PT_DYNAMIC) {
        // goblin reads the entries from the bytes given at the header's offset, and turns the
        // addresses they hold into file offsets with the PT_LOAD headers.
        let bytes = range(view, dyn_header.p_offset, dyn_header.p_filesz, "PT_DYNAMIC")?;
        let headers: Vec<ProgramHeader> = program_headers
            .iter()
            .map(|ph| if ph.p_type == PT_DYNAMIC { ProgramHeader { p_offset: 0, ..ph.clone() } } else { ph.clone() })
            .collect();
        if let Some(dynamic) = Dynamic::parse(bytes, &headers, ctx)? {
            read_dynamic(view, ctx, &dynamic, &program_headers, &section_headers, &mut facts)?;
        }
    }
    facts.x86_isa_needed = read_x86_isa_needed(view, &section_headers, little_endian, container.is_big())?;
    Ok(facts)
}

/// More DT_NEEDED entries than this are no real library (the largest have a few hundred): a
/// file that claims a million is refused before a million library searches.
pub const MAX_NEEDED: usize = 4096;

fn read_dynamic<V: FileView + ?Sized>(
    view: &V,
    ctx: Ctx,
    dynamic: &Dynamic,
    program_headers: &[ProgramHeader],
    section_headers: &[SectionHeader],
    facts: &mut ElfFacts,
) -> Result<(), ElfError> {
    let info = &dynamic.info;
    // goblin turns an address no segment maps into offset 0: that is no string table.
    let raw = |tag: u64| dynamic.dyns.iter().find(|d| d.d_tag == tag).map(|d| d.d_val);
    if let Some(address) = raw(goblin::elf::dynamic::DT_STRTAB)
        && vm_to_offset(program_headers, address).is_none()
    {
        return Err(ElfError::Malformed(format!(
            "DT_STRTAB ({address:#x}) lies in no loaded segment: the dynamic string table is outside the file"
        )));
    }
    // Where the loader reads its tables, for the loadability rules.
    for (name, tag, size_tag) in [
        ("DT_STRTAB", goblin::elf::dynamic::DT_STRTAB, Some(goblin::elf::dynamic::DT_STRSZ)),
        ("DT_SYMTAB", goblin::elf::dynamic::DT_SYMTAB, None),
        ("DT_HASH", goblin::elf::dynamic::DT_HASH, None),
        ("DT_GNU_HASH", goblin::elf::dynamic::DT_GNU_HASH, None),
        ("DT_VERSYM", goblin::elf::dynamic::DT_VERSYM, None),
        ("DT_VERNEED", goblin::elf::dynamic::DT_VERNEED, None),
        ("DT_VERDEF", goblin::elf::dynamic::DT_VERDEF, None),
    ] {
        if let Some(address) = raw(tag) {
            facts.layout.tables.push((name, address, size_tag.and_then(raw)));
        }
    }
    let dynstr = range(view, info.strtab as u64, info.strsz as u64, "dynamic string table")?;
    let string = |offset: u64| -> Result<String, ElfError> {
        string_at(dynstr, offset)
            .ok_or_else(|| ElfError::Malformed(format!("dynamic string offset {offset} is out of range")))
    };
    let split = |s: String| -> Vec<String> { s.split(':').filter(|p| !p.is_empty()).map(str::to_string).collect() };
    let needed_count = dynamic.dyns.iter().filter(|d| d.d_tag == DT_NEEDED).count();
    if needed_count > MAX_NEEDED {
        return Err(ElfError::Malformed(format!(
            "{needed_count} DT_NEEDED entries: more than {MAX_NEEDED}, which no real library has"
        )));
    }
    for d in &dynamic.dyns {
        match d.d_tag {
            DT_NEEDED => {
                let name = string(d.d_val)?;
                if name.is_empty() {
                    return Err(ElfError::Malformed("a DT_NEEDED entry names an empty string".into()));
                }
                facts.needed.push(name);
            }
            DT_SONAME => facts.soname = Some(string(d.d_val)?),
            DT_RPATH => facts.rpath.extend(split(string(d.d_val)?)),
            DT_RUNPATH => facts.runpath.extend(split(string(d.d_val)?)),
            _ => {}
        }
    }
    let tables = SymbolTables::find(view, ctx, facts, dynamic, section_headers)?;

    // Version index → (file, version name) from the version needs.
    let mut version_names: Vec<(u16, String, String)> = Vec::new();
    let verneed = match &tables.verneed {
        Some((bytes, sh)) => VerneedSection::parse(bytes, std::slice::from_ref(sh), ctx)?,
        None => None,
    };
    if let Some(verneed) = verneed {
        for need in verneed.iter() {
            let file = string(need.vn_file as u64)?;
            let mut versions = Vec::new();
            for aux in need.iter() {
                let name = string(aux.vna_name as u64)?;
                version_names.push((aux.vna_other, file.clone(), name.clone()));
                versions.push(name);
            }
            facts.version_needs.push(VersionNeed { file, versions });
        }
    }

    read_symbols(&tables, ctx, dynstr, &version_names, facts)
}

/// The dynamic symbols: the undefined ones with the version each is bound to (`version_names`:
/// version index → file, version name), and the module init functions among the defined ones.
fn read_symbols(
    tables: &SymbolTables<'_>,
    ctx: Ctx,
    dynstr: &[u8],
    version_names: &[(u16, String, String)],
    facts: &mut ElfFacts,
) -> Result<(), ElfError> {
    let Some((dynsym, count)) = tables.dynsym else {
        return Ok(());
    };
    let symbols = Symtab::parse(dynsym, 0, count, ctx)?;
    let versym = match &tables.versym {
        Some((bytes, sh)) => VersymSection::parse(bytes, std::slice::from_ref(sh), ctx)?,
        None => None,
    };
    for (index, sym) in symbols.iter().enumerate() {
        if index == 0 || sym.st_name == 0 {
            continue;
        }
        let defined = sym.st_shndx != 0;
        let name = string_at(dynstr, sym.st_name as u64).unwrap_or_default();
        let name = name.as_str();
        if defined {
            if sym.st_type() == STT_FUNC
                && (name.starts_with("PyInit_") || name.starts_with("init") || name.starts_with("_cffi_pypyinit_"))
            {
                facts.init_functions.push(name.to_string());
            }
            continue;
        }
        let bound = versym.as_ref().and_then(|v| v.get_at(index)).and_then(|v| {
            let idx = v.version();
            version_names.iter().find(|(other, _, _)| *other == idx)
        });
        facts.undefined.push(UndefinedSymbol {
            name: name.to_string(),
            version: bound.map(|(_, _, n)| n.clone()),
            library: bound.map(|(_, f, _)| f.clone()),
            weak: sym.st_bind() == STB_WEAK,
        });
    }
    Ok(())
}

/// A file offset of a virtual address, through the PT_LOAD segments.
fn vm_to_offset(program_headers: &[ProgramHeader], address: u64) -> Option<u64> {
    use goblin::elf::program_header::PT_LOAD;
    program_headers
        .iter()
        .filter(|ph| ph.p_type == PT_LOAD)
        .find(|ph| address >= ph.p_vaddr && address - ph.p_vaddr < ph.p_filesz)
        .map(|ph| ph.p_offset + (address - ph.p_vaddr))
}

/// The bytes of the dynamic symbol table and its version tables, each with a section header
/// moved to offset 0 for goblin's readers: from the section headers when the file has them, else
/// from the dynamic segment, as the loader finds them (DT_SYMTAB sized by DT_HASH or
/// DT_GNU_HASH, DT_VERSYM, DT_VERNEED with DT_VERNEEDNUM): a file with its section headers
/// stripped still says which symbol versions it needs.
struct SymbolTables<'a> {
    /// The symbols' bytes and their count.
    dynsym: Option<(&'a [u8], usize)>,
    versym: Option<(&'a [u8], SectionHeader)>,
    verneed: Option<(&'a [u8], SectionHeader)>,
}

/// The most bytes of version needs read from the dynamic segment (real tables hold a few
/// hundred bytes).
const VERNEED_WINDOW: u64 = 64 << 10;

impl<'a> SymbolTables<'a> {
    fn find<V: FileView + ?Sized>(
        view: &'a V,
        ctx: Ctx,
        facts: &ElfFacts,
        dynamic: &Dynamic,
        section_headers: &[SectionHeader],
    ) -> Result<SymbolTables<'a>, ElfError> {
        let section = |kind: u32, what: &str| -> Result<Option<(&'a [u8], SectionHeader)>, ElfError> {
            let Some(sh) = section_headers.iter().find(|sh| sh.sh_type == kind) else { return Ok(None) };
            let bytes = range(view, sh.sh_offset, sh.sh_size, what)?;
            Ok(Some((bytes, rebased(sh))))
        };
        let entry_size = if facts.is_64 { 24 } else { 16 };
        let info = &dynamic.info;
        let has = |tag: u64| dynamic.dyns.iter().any(|d| d.d_tag == tag);
        let dynsym = match section(SHT_DYNSYM, "dynamic symbol table")? {
            Some((bytes, sh)) => Some((bytes, (sh.sh_size / entry_size) as usize)),
            None if has(goblin::elf::dynamic::DT_SYMTAB) && info.symtab != 0 => {
                let count = symbol_count(view, ctx, facts, info)?;
                count
                    .map(|n| {
                        range(view, info.symtab as u64, n * entry_size, "dynamic symbol table").map(|b| (b, n as usize))
                    })
                    .transpose()?
            }
            None => None,
        };
        let count = dynsym.map(|(_, n)| n as u64).unwrap_or(0);
        let versym = match section(SHT_GNU_VERSYM, "symbol versions")? {
            Some(found) => Some(found),
            None if has(goblin::elf::dynamic::DT_VERSYM) && info.versym != 0 && count > 0 => {
                let bytes = range(view, info.versym, count * 2, "symbol versions (DT_VERSYM)")?;
                Some((bytes, synthetic(SHT_GNU_VERSYM, bytes.len() as u64, 0)))
            }
            None => None,
        };
        let verneed = match section(SHT_GNU_VERNEED, "version needs")? {
            Some(found) => Some(found),
            None if has(goblin::elf::dynamic::DT_VERNEED) && info.verneed != 0 => {
                let offset = info.verneed;
                let size = view.len().saturating_sub(offset).min(VERNEED_WINDOW);
                let bytes = range(view, offset, size, "version needs (DT_VERNEED)")?;
                Some((bytes, synthetic(SHT_GNU_VERNEED, size, info.verneednum)))
            }
            None => None,
        };
        Ok(SymbolTables { dynsym, versym, verneed })
    }
}

fn synthetic(kind: u32, size: u64, info: u64) -> SectionHeader {
    SectionHeader { sh_type: kind, sh_offset: 0, sh_size: size, sh_info: info as u32, ..Default::default() }
}

/// How many dynamic symbols there are, from the hash tables (the only place the dynamic
/// segment says it): DT_HASH's chain count, or the last symbol DT_GNU_HASH's chains reach.
fn symbol_count<V: FileView + ?Sized>(
    view: &V,
    ctx: Ctx,
    facts: &ElfFacts,
    info: &goblin::elf::dynamic::DynamicInfo,
) -> Result<Option<u64>, ElfError> {
    let little = ctx.le.is_little();
    let u32_at = |bytes: &[u8], at: usize| -> Option<u64> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(u64::from(if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }))
    };
    // A count past what the file could hold is a lie.
    let limit = view.len() / if facts.is_64 { 24 } else { 16 };
    if let Some(hash) = info.hash {
        // s390x and Alpha write 64-bit hash words.
        let word = if facts.is_64 && facts.machine == wheelfix_base::platform::EM_S390 { 8 } else { 4 };
        let head = range(view, hash, 2 * word, "DT_HASH")?;
        let nchain = if word == 8 {
            let b: [u8; 8] = head[8..16].try_into().expect("8 bytes");
            if little { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) }
        } else {
            u32_at(head, 4).unwrap_or(0)
        };
        return Ok(Some(nchain.min(limit)));
    }
    let Some(gnu) = info.gnu_hash else { return Ok(None) };
    let head = range(view, gnu, 16, "DT_GNU_HASH")?;
    let (nbuckets, symoffset, bloom_size) =
        (u32_at(head, 0).unwrap_or(0), u32_at(head, 4).unwrap_or(0), u32_at(head, 8).unwrap_or(0));
    if nbuckets > limit || bloom_size > limit {
        return Err(ElfError::Malformed("DT_GNU_HASH claims more buckets than the file holds".into()));
    }
    let word = if facts.is_64 { 8 } else { 4 };
    let buckets_at = gnu + 16 + bloom_size * word;
    let buckets = range(view, buckets_at, nbuckets * 4, "DT_GNU_HASH buckets")?;
    let last = (0..nbuckets as usize).filter_map(|i| u32_at(buckets, i * 4)).max().unwrap_or(0);
    if last < symoffset {
        return Ok(Some(symoffset.min(limit)));
    }
    // Walk the last bucket's chain to its end (its low bit set).
    let chains_at = buckets_at + nbuckets * 4;
    let mut index = last;
    loop {
        if index >= limit {
            return Err(ElfError::Malformed("DT_GNU_HASH chains run past the symbol table".into()));
        }
        let entry = range(view, chains_at + (index - symoffset) * 4, 4, "DT_GNU_HASH chain")?;
        if u32_at(entry, 0).unwrap_or(1) & 1 == 1 {
            return Ok(Some(index + 1));
        }
        index += 1;
    }
}

/// The x86 ISA level a file declares it needs, from `.note.gnu.property`
/// (`NT_GNU_PROPERTY_TYPE_0`, property `GNU_PROPERTY_X86_ISA_1_NEEDED`). Notes that lie past the
/// end of the file are skipped.
fn read_x86_isa_needed<V: FileView + ?Sized>(
    view: &V,
    sections: &[SectionHeader],
    little_endian: bool,
    is_64: bool,
) -> Result<Option<u32>, ElfError> {
    const NT_GNU_PROPERTY_TYPE_0: u32 = 5;
    const GNU_PROPERTY_X86_ISA_1_NEEDED: u32 = 0xc000_8002;
    let u32_at = |data: &[u8], at: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if little_endian { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    };
    let align = |n: usize, a: usize| n.div_ceil(a) * a;
    // Only notes the loader maps: `.note.gnu.property` is one; annobin's build notes, kept
    // outside every segment, say nothing about what the file needs.
    for sh in sections.iter().filter(|sh| sh.sh_type == SHT_NOTE && sh.sh_flags & u64::from(SHF_ALLOC) != 0) {
        let notes = match view.get(sh.sh_offset, sh.sh_size) {
            Ok(notes) => notes,
            Err(ViewError::PastEnd { .. }) => continue,
            Err(ViewError::NotKept { offset, size }) => return Err(ElfError::NotKept { offset, size }),
        };
        // ELF64 property notes are 8-byte aligned, other notes 4-byte aligned.
        let note_align = if sh.sh_addralign == 8 { 8 } else { 4 };
        let prop_align = if is_64 { 8 } else { 4 };
        let found = (|| {
            let mut at = 0;
            while at + 12 <= notes.len() {
                let namesz = u32_at(notes, at)? as usize;
                let descsz = u32_at(notes, at + 4)? as usize;
                let kind = u32_at(notes, at + 8)?;
                let name_at = at + 12;
                let desc_at = at + align(12 + namesz, note_align);
                let desc_end = desc_at.checked_add(descsz)?;
                if desc_end > notes.len() {
                    break;
                }
                if kind == NT_GNU_PROPERTY_TYPE_0 && notes.get(name_at..name_at + namesz) == Some(b"GNU\0") {
                    let desc = &notes[desc_at..desc_end];
                    let mut p = 0;
                    while p + 8 <= desc.len() {
                        let (pr_type, pr_size) = (u32_at(desc, p)?, u32_at(desc, p + 4)? as usize);
                        if pr_type == GNU_PROPERTY_X86_ISA_1_NEEDED && pr_size >= 4 {
                            return Some(u32_at(desc, p + 8));
                        }
                        p += 8 + align(pr_size, prop_align);
                    }
                }
                at = at + align(desc_end - at, note_align);
            }
            None
        })();
        match found {
            Some(bits) => return Ok(bits),
            None => continue,
        }
    }
    Ok(None)
}

/// The NUL-terminated string at `offset` of a string table (lossy UTF-8).
fn string_at(table: &[u8], offset: u64) -> Option<String> {
    let rest = table.get(offset as usize..)?;
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The x86-64 micro-architecture level an ISA bit set asks for, 1 for the baseline.
/// Bits: 0 baseline, 1 v2, 2 v3, 3 v4 (`GNU_PROPERTY_X86_ISA_1_V2` and so on).
pub fn x86_isa_level(bits: u32) -> u32 {
    (1..=3).rev().find(|b| bits & (1 << b) != 0).map(|b| b + 1).unwrap_or(1)
}
