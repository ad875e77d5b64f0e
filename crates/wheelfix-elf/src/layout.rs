//! Changing where an ELF file's bytes lie while every address the code uses keeps its bytes:
//! freed spans (zeros nothing reads, such as the space a thinned offload bundle no longer uses)
//! leave the file.
//!
//! A `PT_LOAD` whose file bytes hold a hole is split in two around it: the first part ends
//! where the hole starts, the second maps what follows from its new, earlier offset, at its old
//! address. The hole's addresses are no longer mapped (nothing reads freed bytes: a bundle is
//! read by its own header's sizes), and everything after a hole moves down the file by the
//! hole's size, a whole number of pages (the architecture's largest page), so each segment's
//! offset stays congruent to its address; alignments above that page are lowered to it where a
//! segment moved by less. A hole that ends a segment's file bytes needs no split. A section a
//! hole cuts through becomes one section per piece (the first keeps its index; symbols that
//! point past it follow their piece), so that a reader of a section still reads file bytes
//! that are the section's. No memory is left to be zero-filled in the middle of a segment:
//! musl maps file bytes there, and elflint matches sections to segments by offset.
//!
//! More segments need a larger program header table. It takes the first page of the first
//! hole, which stays in the file (outside every section): for a program, only where the kernel
//! computes `AT_PHDR` to be (a segment mapped like the first). The kernel reads at most a page of
//! program headers, so only the largest holes split a segment (at most [`MAX_PROGRAM_HEADERS`]).
//!
//! [`compact`] plans and [`Compacted::check`] proves: re-read as the loader reads it, the new
//! file maps every address of the old one to the same byte, or leaves it unmapped where the old
//! bytes were freed zeros, and breaks no loadability rule ([`crate::lint`]) the old one kept.
//!
//! Why one file: compaction is one algorithm
//! (choose holes, split segments and sections, move tables, fix symbols and dynamic entries) whose
//! steps share the map of old offsets to new.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::program_header::{PF_R, PT_INTERP, PT_LOAD, PT_PHDR, ProgramHeader};
use goblin::elf::section_header::{
    SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_DYNSYM, SHT_NOBITS, SHT_PROGBITS, SHT_SYMTAB, SectionHeader,
};
use goblin::elf::sym::Sym;
use scroll::Pread;
use scroll::ctx::TryIntoCtx;

/// Reads `buf.len()` bytes at an offset of the file being changed.
pub type Source<'a> = &'a dyn Fn(&mut [u8], u64) -> io::Result<()>;

/// The most program headers a compacted file has: the kernel reads at most a page of them
/// for a program (`load_elf_phdrs`), and each split costs the loader one more mapping.
pub const MAX_PROGRAM_HEADERS: usize = 64;

/// Why a file's layout was left as it was.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("left as it is: {0}")]
    Refused(String),
    /// No freed span holds a whole page: nothing would leave the file.
    #[error("no freed span holds a whole page")]
    NothingToFree,
    #[error("the compacted file does not read as the original: {0}")]
    Check(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

fn refuse<T>(why: impl Into<String>) -> Result<T, LayoutError> {
    Err(LayoutError::Refused(why.into()))
}

/// The largest page the architecture's kernels use: holes are whole numbers of it.
pub fn page_size(machine: u16) -> Option<u64> {
    match machine {
        62 | 3 => Some(0x1000),                    // x86-64, i386
        183 | 21 | 20 | 22 | 243 => Some(0x10000), // aarch64, ppc64, ppc, s390, riscv
        _ => None,
    }
}

/// One piece of the new file: bytes of the old file, or new bytes.
#[derive(Debug, Clone)]
enum Piece {
    Copy { len: u64, from: u64 },
    Bytes(Arc<[u8]>),
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Copy { len, .. } => *len,
            Piece::Bytes(b) => b.len() as u64,
        }
    }
}

/// A planned new layout: the new file as pieces of the old one and new header bytes.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// Pieces by their offset in the new file; they follow each other without gaps.
    pieces: BTreeMap<u64, Piece>,
    pub len: u64,
    pub old_len: u64,
    /// Ranges of the old file left out, in order.
    pub removed: Vec<(u64, u64)>,
    /// The holes, in old file offsets: where the sections they cut end (a hole's first page
    /// may stay in the file for the program headers) and where they resume.
    pub holes: Vec<(u64, u64)>,
    /// Segments added by splits.
    pub splits: usize,
    /// Holes freed but left in the file (too small, too many, or not in a segment).
    pub kept_holes: usize,
    old_loads: Vec<ProgramHeader>,
    new_headers: Vec<ProgramHeader>,
    /// New-file ranges of new bytes the loader maps (the program headers, symbols that moved
    /// section, the old table zeroed): the only places the memory may differ.
    changed_in_memory: Vec<(u64, u64)>,
}

/// What the ELF header says, as far as a layout change needs.
#[derive(Debug, Clone, Copy)]
struct Header {
    ctx: Ctx,
    is_program: bool,
    machine: u16,
    phoff: u64,
    phentsize: u64,
    phnum: usize,
    shoff: u64,
    shentsize: u64,
    shnum: usize,
    shstrndx: usize,
}

impl Header {
    fn read(source: Source<'_>, len: u64) -> Result<(Header, Vec<u8>), LayoutError> {
        let mut head = vec![0u8; 64.min(len as usize)];
        source(&mut head, 0)?;
        let Ok(h) = goblin::elf::Elf::parse_header(&head) else { return refuse("not an ELF file") };
        let is_64 = h.e_ident[goblin::elf::header::EI_CLASS] == goblin::elf::header::ELFCLASS64;
        let little = h.e_ident[goblin::elf::header::EI_DATA] != goblin::elf::header::ELFDATA2MSB;
        let ctx = Ctx::new(
            if is_64 { Container::Big } else { Container::Little },
            if little { Endian::Little } else { Endian::Big },
        );
        if h.e_type != goblin::elf::header::ET_DYN && h.e_type != goblin::elf::header::ET_EXEC {
            return refuse("not a program or shared library: the loader does not map it");
        }
        if h.e_phnum == 0xffff || (h.e_shnum == 0 && h.e_shoff != 0) {
            return refuse("its header counts are extended (more than 65,279 headers)");
        }
        let header = Header {
            ctx,
            is_program: false,
            machine: h.e_machine,
            phoff: h.e_phoff,
            phentsize: u64::from(h.e_phentsize),
            phnum: usize::from(h.e_phnum),
            shoff: h.e_shoff,
            shentsize: u64::from(h.e_shentsize),
            shnum: usize::from(h.e_shnum),
            shstrndx: usize::from(h.e_shstrndx),
        };
        Ok((header, head))
    }

    fn is_64(&self) -> bool {
        self.ctx.container == Container::Big
    }

    /// The ELF header with the tables' new places and counts.
    fn patched(&self, head: &[u8], phoff: u64, phnum: usize, shoff: u64, shnum: usize) -> Vec<u8> {
        let mut out = head.to_vec();
        let little = self.ctx.le == Endian::Little;
        let mut put = |at: usize, value: u64, size: usize| {
            let bytes = if little { value.to_le_bytes() } else { value.to_be_bytes() };
            let bytes = if little { &bytes[..size] } else { &bytes[8 - size..] };
            out[at..at + size].copy_from_slice(bytes);
        };
        if self.is_64() {
            put(32, phoff, 8);
            put(40, shoff, 8);
            put(56, phnum as u64, 2);
            put(60, shnum as u64, 2);
        } else {
            put(28, phoff, 4);
            put(32, shoff, 4);
            put(44, phnum as u64, 2);
            put(48, shnum as u64, 2);
        }
        out
    }
}

fn read_vec(source: Source<'_>, at: u64, len: u64) -> Result<Vec<u8>, LayoutError> {
    if len > 64 << 20 {
        return refuse(format!("a header table of {len} bytes"));
    }
    let mut buf = vec![0u8; len as usize];
    source(&mut buf, at)?;
    Ok(buf)
}

fn encode<T: TryIntoCtx<Ctx, Error = goblin::error::Error>>(items: Vec<T>, size: u64, ctx: Ctx) -> Vec<u8> {
    let mut out = vec![0u8; items.len() * size as usize];
    for (i, item) in items.into_iter().enumerate() {
        let at = i * size as usize;
        item.try_into_ctx(&mut out[at..at + size as usize], ctx).expect("the buffer has room for the entry");
    }
    out
}

/// A hole: file bytes [from, to) that leave the file, in the `PT_LOAD` at index `load`.
#[derive(Debug, Clone, Copy)]
struct Hole {
    from: u64,
    to: u64,
    load: usize,
    /// Whether file bytes of its segment follow it (then the segment splits).
    splits: bool,
    /// Its first page stays in the file: the program header table is there.
    holds_table: bool,
}

impl Hole {
    /// Where the bytes that leave the file start.
    fn removed_from(&self, unit: u64) -> u64 {
        if self.holds_table { self.from + unit } else { self.from }
    }
}

/// Bytes of the file that a section of their own names, added by a layout change: a split
/// host's kpack marker, which ROCm's tools find by the section name `.rocm_kpack_ref`.
#[derive(Debug, Clone, Copy)]
pub struct NamedSpan<'a> {
    /// The span's offset in the original file, inside an allocated `PROGBITS` section (the
    /// holder), before any byte that leaves the file.
    pub from: u64,
    pub len: u64,
    pub name: &'a str,
    /// The holder's name: a span in a section named otherwise is refused.
    pub holder: &'a str,
    /// The name the holder's bytes around the span take, and every section named as the holder
    /// (a split host's `.hip_fatbin` pieces, which ROCm's tools would take for device code).
    pub others: &'a str,
}

/// Plan a layout of `len` bytes read through `source` without the page-sized parts of the
/// `freed` spans (bytes that are zero and that nothing reads by file offset).
pub fn compact(source: Source<'_>, len: u64, freed: &[(u64, u64)]) -> Result<Compacted, LayoutError> {
    compact_naming(source, len, freed, None)
}

/// [`compact`], and a section named as `named` asks over its bytes (in their new place). The
/// section names' table is written anew at the end of the file, the new name after the old
/// ones; the old table's bytes stay where they were, in no section.
pub fn compact_naming(
    source: Source<'_>,
    len: u64,
    freed: &[(u64, u64)],
    named: Option<NamedSpan<'_>>,
) -> Result<Compacted, LayoutError> {
    let Headers { header, head, phdrs, sections } = read_headers(source, len)?;
    let Some(unit) = page_size(header.machine) else {
        return refuse(format!("machine {}: its page size is not known here", header.machine));
    };
    let holes = find_holes(&phdrs, &sections, len, freed, unit);
    let freed_holes = holes.len();
    // With nothing to free, a section to name is still a layout change: only the tables move.
    let (holes, table_at) = match choose_holes(holes, &phdrs, &header, unit)? {
        Some(chosen) => chosen,
        None if named.is_some() => (Vec::new(), None),
        None => return Err(LayoutError::NothingToFree),
    };
    let removed: Vec<(u64, u64)> = holes.iter().map(|h| (h.removed_from(unit), h.to)).collect();
    let map = OffsetMap { removed: removed.clone() };
    let splits = holes.iter().filter(|h| h.splits).count();
    let mut new_headers = split_loads(&phdrs, &holes, &map, unit)?;
    read_only_pieces(source, &header, &phdrs, &sections, &mut new_headers)?;
    let mut edits = Edits { overlays: Vec::new(), changed_in_memory: vec![(0, head.len() as u64)] };
    let phoff = place_table(&header, table_at, &map, &mut new_headers, &mut edits)?;

    let (mut new_sections, mut moved_symbols) = split_sections(&sections, &holes, &map)?;
    let names = match named {
        Some(span) => Some(name_span(source, &header, &sections, &mut new_sections, &mut moved_symbols, &map, span)?),
        None => None,
    };
    let symbol_overlays = moved_symbol_entries(source, &sections, &moved_symbols, &header)?;
    for (at, bytes) in symbol_overlays {
        let new_at = map.new_offset(at);
        if sections.iter().any(|s| s.sh_type == SHT_DYNSYM && s.sh_offset <= at && at < s.sh_offset + s.sh_size) {
            edits.changed_in_memory.push((new_at, new_at + bytes.len() as u64));
        }
        edits.overlays.push((new_at, bytes));
    }

    // The section header table: where it was when nothing follows it, else at the end.
    let old_table = (header.shoff, header.shoff + header.shentsize * header.shnum as u64);
    let table_is_last = header.shnum > 0 && old_table.1 == len;
    let mut removed_all = removed.clone();
    if table_is_last {
        removed_all.push(old_table);
    } else if header.shnum > 0 {
        edits.overlays.push((map.new_offset(old_table.0), vec![0u8; (old_table.1 - old_table.0) as usize].into()));
    }
    let (pieces, out) =
        new_pieces(len, &removed_all, names, &header, &head, phoff, &new_headers, new_sections, &mut edits);
    let old_loads = phdrs.into_iter().filter(|p| p.p_type == PT_LOAD).collect();
    Ok(Compacted {
        pieces,
        len: out,
        old_len: len,
        holes: holes.iter().map(|h| (h.from, h.to)).collect(),
        removed,
        splits,
        kept_holes: freed_holes.saturating_sub(holes.len()),
        old_loads,
        new_headers,
        changed_in_memory: edits.changed_in_memory,
    })
}

/// A file's ELF header (and its first bytes), program headers and section headers.
struct Headers {
    header: Header,
    head: Vec<u8>,
    phdrs: Vec<ProgramHeader>,
    sections: Vec<SectionHeader>,
}

fn read_headers(source: Source<'_>, len: u64) -> Result<Headers, LayoutError> {
    let (mut header, head) = Header::read(source, len)?;
    let phdr_bytes = read_vec(source, header.phoff, header.phentsize * header.phnum as u64)?;
    let phdrs = ProgramHeader::parse(&phdr_bytes, 0, header.phnum, header.ctx)
        .or_else(|_| refuse("its program headers do not parse"))?;
    header.is_program = phdrs.iter().any(|p| p.p_type == PT_INTERP);
    let sh_bytes = read_vec(source, header.shoff, header.shentsize * header.shnum as u64)?;
    let sections = if header.shnum == 0 {
        Vec::new()
    } else {
        // (goblin's `SectionHeader::parse` takes offset 0 for "no table".)
        let entry = |i: usize| sh_bytes.pread_with::<SectionHeader>(i * header.shentsize as usize, header.ctx);
        (0..header.shnum)
            .map(entry)
            .collect::<Result<Vec<_>, _>>()
            .or_else(|_| refuse("its section headers do not parse"))?
    };
    Ok(Headers { header, head, phdrs, sections })
}

/// The compacted file's pieces and its length: the old file's bytes less `removed_all`, the
/// new section names (if any) and section header table at the end, then the edits over them.
#[allow(clippy::too_many_arguments)]
fn new_pieces(
    len: u64,
    removed_all: &[(u64, u64)],
    names: Option<Vec<u8>>,
    header: &Header,
    head: &[u8],
    phoff: u64,
    new_headers: &[ProgramHeader],
    mut new_sections: Vec<SectionHeader>,
    edits: &mut Edits,
) -> (BTreeMap<u64, Piece>, u64) {
    let mut pieces = BTreeMap::new();
    let mut out = 0u64;
    let mut from = 0u64;
    for &(a, b) in removed_all.iter().chain(std::iter::once(&(len, len))) {
        if a > from {
            pieces.insert(out, Piece::Copy { len: a - from, from });
            out += a - from;
        }
        from = b;
    }
    if let Some(names) = names {
        new_sections[header.shstrndx].sh_offset = out;
        new_sections[header.shstrndx].sh_size = names.len() as u64;
        new_sections[header.shstrndx].sh_addralign = 1;
        out += names.len() as u64;
        pieces.insert(out - names.len() as u64, Piece::Bytes(names.into()));
    }
    let shoff = if header.shnum == 0 {
        0
    } else {
        let at = out.next_multiple_of(8);
        if at > out {
            pieces.insert(out, Piece::Bytes(vec![0u8; (at - out) as usize].into()));
        }
        let bytes = encode(new_sections.clone(), header.shentsize, header.ctx);
        out = at + bytes.len() as u64;
        pieces.insert(at, Piece::Bytes(bytes.into()));
        at
    };
    let shnum = if header.shnum == 0 { 0 } else { new_sections.len() };
    edits.overlays.push((0, header.patched(head, phoff, new_headers.len(), shoff, shnum).into()));
    for (at, bytes) in edits.overlays.drain(..) {
        overlay(&mut pieces, at, bytes);
    }
    (pieces, out)
}

/// Give `span` a section of its own, cut out of its holder's first piece, and rename the rest of
/// the holder and the sections named as it; the new names' table (the old table's bytes and the
/// new names). The sections never overlap: GNU objcopy and strip lay overlapping sections out one
/// after the other and move the segment's bytes. Symbols past the span's start name the piece
/// that now holds their address.
fn name_span(
    source: Source<'_>,
    header: &Header,
    sections: &[SectionHeader],
    new_sections: &mut Vec<SectionHeader>,
    moved: &mut Vec<MovedSymbols>,
    map: &OffsetMap,
    span: NamedSpan<'_>,
) -> Result<Vec<u8>, LayoutError> {
    let end = span.from + span.len;
    let holder = sections.iter().position(|s| {
        s.sh_type == SHT_PROGBITS
            && s.sh_flags & u64::from(SHF_ALLOC) != 0
            && s.sh_offset <= span.from
            && end <= s.sh_offset + s.sh_size
    });
    let Some(h) = holder else {
        return refuse(format!("no allocated section holds bytes {}..{end} to name {}", span.from, span.name));
    };
    if map.removed.iter().any(|&(a, b)| a < end && b > span.from) {
        return refuse(format!("the bytes {} names leave the file", span.name));
    }
    // The holder's first piece (holes cut the rest off), in new offsets.
    let piece = new_sections[h].clone();
    let (from, to) = (map.new_offset(span.from), map.new_offset(end));
    let piece_end = piece.sh_offset + piece.sh_size;
    if to > piece_end {
        return refuse(format!("the bytes {} names run past their section's first piece", span.name));
    }
    let Some(strings) = sections.get(header.shstrndx).filter(|s| s.sh_type == goblin::elf::section_header::SHT_STRTAB)
    else {
        return refuse("it has no section names' table");
    };
    let mut names = read_vec(source, strings.sh_offset, strings.sh_size)?;
    let name_of = |names: &[u8], at: usize| -> Vec<u8> {
        let tail = names.get(at..).unwrap_or_default();
        tail[..tail.iter().position(|&b| b == 0).unwrap_or(tail.len())].to_vec()
    };
    let holder_name = name_of(&names, sections[h].sh_name);
    if holder_name != span.holder.as_bytes() {
        return refuse(format!("the bytes {} names are not in a section named {}", span.name, span.holder));
    }
    let mut add = |name: &str| {
        let at = names.len();
        names.extend_from_slice(name.as_bytes());
        names.push(0);
        at
    };
    let (name_at, others_at) = (add(span.name), add(span.others));
    for s in new_sections.iter_mut() {
        if name_of(&names, s.sh_name) == holder_name {
            s.sh_name = others_at;
        }
    }
    let at_address = |offset: u64| piece.sh_addr + (offset - piece.sh_offset);
    let named = SectionHeader {
        sh_name: name_at,
        sh_type: SHT_PROGBITS,
        sh_flags: piece.sh_flags & !u64::from(SHF_WRITE | SHF_EXECINSTR),
        sh_addr: at_address(from),
        sh_offset: from,
        sh_size: span.len,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 1,
        sh_entsize: 0,
    };
    if from == piece.sh_offset {
        new_sections[h] = named;
    } else {
        new_sections[h].sh_size = from - piece.sh_offset;
        moved.push(MovedSymbols { old: h, address: named.sh_addr, new: new_sections.len() });
        new_sections.push(named);
    }
    if to < piece_end {
        let rest = SectionHeader {
            sh_name: others_at,
            sh_addr: at_address(to),
            sh_offset: to,
            sh_size: piece_end - to,
            sh_addralign: 1,
            ..piece
        };
        moved.push(MovedSymbols { old: h, address: rest.sh_addr, new: new_sections.len() });
        new_sections.push(rest);
    }
    Ok(names)
}

/// The program headers: each load a hole splits in two, every offset moved down by what left
/// before it.
fn split_loads(
    phdrs: &[ProgramHeader],
    holes: &[Hole],
    map: &OffsetMap,
    unit: u64,
) -> Result<Vec<ProgramHeader>, LayoutError> {
    let splits = holes.iter().filter(|h| h.splits).count();
    let mut new_headers = Vec::with_capacity(phdrs.len() + splits);
    for (i, p) in phdrs.iter().enumerate() {
        if p.p_type != PT_LOAD {
            let mut q = p.clone();
            q.p_offset = map.new_offset(p.p_offset);
            new_headers.push(q);
            continue;
        }
        let mut rest = p.clone();
        for hole in holes.iter().filter(|h| h.load == i) {
            let mut part = rest.clone();
            part.p_filesz = hole.removed_from(unit) - rest.p_offset;
            // The table's page is a load of its own, which it starts: GNU objcopy and strip
            // take a table inside a segment's file bytes for one at its start, move the
            // segment's sections after it, and write a file that does not load.
            let own_load = hole.holds_table && (hole.splits || rest.p_memsz == rest.p_filesz);
            let table = own_load.then(|| {
                let mut table = rest.clone();
                let at = hole.from - rest.p_offset;
                (table.p_offset, table.p_vaddr, table.p_paddr) = (hole.from, rest.p_vaddr + at, rest.p_paddr + at);
                (table.p_filesz, table.p_memsz, table.p_flags) = (unit, unit, PF_R);
                table
            });
            if table.is_some() {
                part.p_filesz = hole.from - rest.p_offset;
            }
            if hole.splits {
                part.p_memsz = part.p_filesz;
                if part.p_filesz > 0 {
                    new_headers.push(fix_align(part, map, unit)?);
                }
                if let Some(table) = table {
                    new_headers.push(fix_align(table, map, unit)?);
                }
                rest.p_vaddr += hole.to - rest.p_offset;
                rest.p_paddr += hole.to - rest.p_offset;
                rest.p_memsz -= hole.to - rest.p_offset;
                rest.p_filesz -= hole.to - rest.p_offset;
                rest.p_offset = hole.to;
            } else {
                // The hole ends the file bytes: its addresses are unmapped, or zero-fill where
                // the segment has some after them anyway (a .bss).
                if rest.p_memsz == rest.p_filesz {
                    part.p_memsz = part.p_filesz;
                }
                rest = match table {
                    Some(table) => {
                        if part.p_filesz > 0 {
                            new_headers.push(fix_align(part, map, unit)?);
                        }
                        table
                    }
                    None => part,
                };
            }
        }
        new_headers.push(fix_align(rest, map, unit)?);
    }
    Ok(new_headers)
}

/// A split segment's pieces get the permissions of what they hold, as a linker would have
/// given them: one that holds no code is not executable (`.hip_fatbin` after `.text`, as old GNU
/// ld layouts have it), and one that holds no writable section nor any address a dynamic
/// relocation writes is not writable (`.hip_fatbin` after `.data`).
fn read_only_pieces(
    source: Source<'_>,
    header: &Header,
    phdrs: &[ProgramHeader],
    sections: &[SectionHeader],
    new_headers: &mut [ProgramHeader],
) -> Result<(), LayoutError> {
    use goblin::elf::program_header::{PF_W, PF_X};
    let was = |p: &ProgramHeader| phdrs.iter().any(|o| o.p_vaddr == p.p_vaddr && o.p_memsz == p.p_memsz);
    let holds = |p: &ProgramHeader, flag: u32| {
        let flags = u64::from(flag | SHF_ALLOC);
        sections.iter().any(|s| {
            s.sh_flags & flags == flags && s.sh_addr < p.p_vaddr + p.p_memsz && s.sh_addr + s.sh_size.max(1) > p.p_vaddr
        })
    };
    for p in new_headers.iter_mut().filter(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0 && !was(p)) {
        if !holds(p, SHF_EXECINSTR) {
            p.p_flags &= !PF_X;
        }
    }
    let candidates: Vec<usize> = (0..new_headers.len())
        .filter(|&i| {
            let p = &new_headers[i];
            p.p_type == PT_LOAD && p.p_flags & PF_W != 0 && !was(p) && !holds(p, SHF_WRITE)
        })
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    let ranges: Vec<(u64, u64)> =
        candidates.iter().map(|&i| (new_headers[i].p_vaddr, new_headers[i].p_vaddr + new_headers[i].p_memsz)).collect();
    let mut written = vec![false; ranges.len()];
    relocated_addresses(source, header, sections, &mut |a| {
        if let Some(k) = ranges.iter().position(|&(from, to)| from <= a && a < to) {
            written[k] = true;
        }
    })?;
    for (k, i) in candidates.into_iter().enumerate() {
        if !written[k] {
            new_headers[i].p_flags &= !PF_W;
        }
    }
    Ok(())
}

/// Every address a dynamic relocation writes (`SHT_REL`, `SHT_RELA`, `SHT_RELR` sections the
/// loader maps), given to `found`, read a bounded piece at a time.
fn relocated_addresses(
    source: Source<'_>,
    header: &Header,
    sections: &[SectionHeader],
    found: &mut dyn FnMut(u64),
) -> Result<(), LayoutError> {
    const SHT_RELR: u32 = 19;
    let word: u64 = if header.is_64() { 8 } else { 4 };
    let little = header.ctx.le == Endian::Little;
    let value = |b: &[u8]| -> u64 {
        let mut bytes = [0u8; 8];
        if little {
            bytes[..b.len()].copy_from_slice(b);
            u64::from_le_bytes(bytes)
        } else {
            bytes[8 - b.len()..].copy_from_slice(b);
            u64::from_be_bytes(bytes)
        }
    };
    for s in sections.iter().filter(|s| s.sh_flags & u64::from(SHF_ALLOC) != 0) {
        let entry = match s.sh_type {
            goblin::elf::section_header::SHT_RELA => 3 * word,
            goblin::elf::section_header::SHT_REL => 2 * word,
            SHT_RELR => word,
            _ => continue,
        };
        let per_read = ((1 << 20) / entry).max(1) * entry;
        let mut next_base = 0u64;
        let mut at = 0;
        while at + entry <= s.sh_size {
            let n = per_read.min(s.sh_size - at) / entry * entry;
            let bytes = read_vec(source, s.sh_offset + at, n)?;
            for e in bytes.chunks_exact(entry as usize) {
                let first = value(&e[..word as usize]);
                if s.sh_type != SHT_RELR {
                    found(first);
                } else if first & 1 == 0 {
                    // An address, then the bitmaps that follow it.
                    found(first);
                    next_base = first + word;
                } else {
                    for bit in 1..word * 8 {
                        if first >> bit & 1 == 1 {
                            found(next_base + (bit - 1) * word);
                        }
                    }
                    next_base += (word * 8 - 1) * word;
                }
            }
            at += n;
        }
    }
    Ok(())
}

/// New bytes laid over the new file, and which of them the loader maps.
struct Edits {
    overlays: Vec<Overlay>,
    changed_in_memory: Vec<(u64, u64)>,
}

/// New bytes at an offset of the new file.
type Overlay = (u64, Arc<[u8]>);

/// Write the program header table where it goes (in place, or at `table_at` with `PT_PHDR`
/// following it and the old table zeroed): its new offset.
fn place_table(
    header: &Header,
    table_at: Option<u64>,
    map: &OffsetMap,
    new_headers: &mut [ProgramHeader],
    edits: &mut Edits,
) -> Result<u64, LayoutError> {
    let table_len = header.phentsize * new_headers.len() as u64;
    let phoff = match table_at {
        Some(at) => {
            let new_at = map.new_offset(at);
            let host = host_of(new_headers, new_at, table_len)
                .ok_or_else(|| LayoutError::Refused("the program headers' new place is in no segment".into()))?;
            let vaddr = host.p_vaddr + (new_at - host.p_offset);
            for q in new_headers.iter_mut().filter(|q| q.p_type == PT_PHDR) {
                (q.p_offset, q.p_vaddr, q.p_paddr, q.p_filesz, q.p_memsz) =
                    (new_at, vaddr, vaddr, table_len, table_len);
            }
            let old = (map.new_offset(header.phoff), header.phentsize * header.phnum as u64);
            edits.overlays.push((old.0, vec![0u8; old.1 as usize].into()));
            edits.changed_in_memory.push((old.0, old.0 + old.1));
            edits.changed_in_memory.push((new_at, new_at + table_len));
            new_at
        }
        None => {
            edits.changed_in_memory.push((header.phoff, header.phoff + table_len));
            header.phoff
        }
    };
    edits.overlays.push((phoff, encode(new_headers.to_vec(), header.phentsize, header.ctx).into()));
    Ok(phoff)
}

/// A symbol that names a split section and lies at or past `address` names section `new` now.
struct MovedSymbols {
    old: usize,
    address: u64,
    new: usize,
}

/// The section headers: offsets moved, and one section per piece of a section a hole cuts
/// through (the pieces after the first at the end of the table).
fn split_sections(
    sections: &[SectionHeader],
    holes: &[Hole],
    map: &OffsetMap,
) -> Result<(Vec<SectionHeader>, Vec<MovedSymbols>), LayoutError> {
    let mut new_sections = sections.to_vec();
    let mut moved = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        new_sections[i].sh_offset = map.new_offset(s.sh_offset);
        if s.sh_type == SHT_NOBITS || s.sh_size == 0 {
            continue;
        }
        let end = s.sh_offset + s.sh_size;
        let cuts: Vec<&Hole> = holes.iter().filter(|h| h.from < end && h.to > s.sh_offset).collect();
        if cuts.is_empty() {
            continue;
        }
        // Only a hole that lies inside the section: the section's own freed bytes.
        if s.sh_type != SHT_PROGBITS || cuts.iter().any(|h| h.from < s.sh_offset) {
            return refuse(format!("a freed span cuts section {i} (type {}) where it cannot split", s.sh_type));
        }
        new_sections[i].sh_size = cuts[0].from - s.sh_offset;
        for (k, hole) in cuts.iter().enumerate() {
            let piece_end = cuts.get(k + 1).map_or(end, |h| h.from);
            if piece_end <= hole.to {
                continue;
            }
            // A piece starts on a page: its alignment holds.
            let mut piece = s.clone();
            piece.sh_addr = s.sh_addr + (hole.to - s.sh_offset);
            piece.sh_offset = map.new_offset(hole.to);
            piece.sh_size = piece_end - hole.to;
            moved.push(MovedSymbols { old: i, address: piece.sh_addr, new: new_sections.len() });
            new_sections.push(piece);
        }
    }
    if new_sections.len() >= 0xff00 {
        return refuse("the split sections would need extended section numbering");
    }
    Ok((new_sections, moved))
}

/// The page-aligned parts of the freed spans that may leave the file: inside one `PT_LOAD`'s
/// file bytes, in no other segment, cutting no section but the one that holds them. Past the
/// end of a segment's file bytes the hole may take the padding up to what the file holds next.
fn find_holes(
    phdrs: &[ProgramHeader],
    sections: &[SectionHeader],
    len: u64,
    freed: &[(u64, u64)],
    unit: u64,
) -> Vec<Hole> {
    let mut holes = Vec::new();
    // What holds file bytes, as (from, to): segments other than loads, and sections.
    let others: Vec<(u64, u64)> = phdrs
        .iter()
        .filter(|p| p.p_type != PT_LOAD && p.p_filesz > 0)
        .map(|p| (p.p_offset, p.p_offset + p.p_filesz))
        .collect();
    let claimed: Vec<(u64, u64)> = sections
        .iter()
        .filter(|s| s.sh_type != SHT_NOBITS && s.sh_size > 0)
        .map(|s| (s.sh_offset, s.sh_offset + s.sh_size))
        .chain(phdrs.iter().filter(|p| p.p_type == PT_LOAD).map(|p| (p.p_offset, p.p_offset + p.p_filesz)))
        .collect();
    // Only read-only data sections split (`.hip_fatbin`): nothing writes or runs there, and no
    // relocation or symbol but the bundle wrappers' points into them.
    let splittable = |f: u64, t: u64| {
        sections.iter().any(|s| {
            let flags = s.sh_flags;
            s.sh_type == SHT_PROGBITS
                && flags & u64::from(SHF_ALLOC) != 0
                && flags & u64::from(SHF_WRITE | SHF_EXECINSTR) == 0
                && s.sh_offset <= f
                && t <= s.sh_offset + s.sh_size
        })
    };
    let mut freed = freed.to_vec();
    freed.sort_unstable();
    for &(f, t) in freed.iter().filter(|&&(f, t)| splittable(f, t)) {
        let Some((load, l)) = phdrs
            .iter()
            .enumerate()
            .find(|(_, p)| p.p_type == PT_LOAD && p.p_offset <= f && t <= p.p_offset + p.p_filesz)
        else {
            continue;
        };
        let file_end = l.p_offset + l.p_filesz;
        // A span that ends the segment's file bytes may run on over the padding after them.
        let reach =
            if t == file_end { claimed.iter().map(|c| c.0).filter(|&c| c >= t).min().unwrap_or(len) } else { t };
        let from = f.next_multiple_of(unit);
        let to = from + reach.saturating_sub(from) / unit * unit;
        if to <= from || others.iter().any(|&(a, b)| a < to && b > from) {
            continue;
        }
        let splits = to < file_end;
        holes.push(Hole { from, to, load, splits, holds_table: false });
    }
    holes
}

/// The holes that leave the file, and where the program header table goes when it grows.
type Chosen = (Vec<Hole>, Option<u64>);

/// Which holes leave the file and where a larger program header table goes (the first page of
/// the first hole of two pages or more, which then stays in the file), or `None` when nothing
/// leaves. Holes that split a segment: the largest, as many as the table may grow by; none when
/// the table has nowhere to go.
fn choose_holes(
    holes: Vec<Hole>,
    phdrs: &[ProgramHeader],
    header: &Header,
    unit: u64,
) -> Result<Option<Chosen>, LayoutError> {
    let Some(first_load) = phdrs.iter().find(|p| p.p_type == PT_LOAD) else { return Ok(None) };
    // For a program the kernel computes AT_PHDR from the first load's mapping.
    let may_hold_table = |h: &Hole| {
        let host = &phdrs[h.load];
        h.to - h.from >= 2 * unit
            && (!header.is_program
                || host.p_vaddr.wrapping_sub(host.p_offset) == first_load.p_vaddr.wrapping_sub(first_load.p_offset))
    };
    let room = (unit / header.phentsize.max(1)).min(MAX_PROGRAM_HEADERS as u64) as usize;
    let room = room.saturating_sub(header.phnum);
    let table = holes.iter().position(may_hold_table);
    let mut splitting: Vec<usize> = (0..holes.len()).filter(|&i| holes[i].splits).collect();
    // The table's own hole first: it is never left out.
    splitting.sort_by_key(|&i| (Some(i) != table, std::cmp::Reverse(holes[i].to - holes[i].from)));
    // The table's page takes a header of its own ([`split_loads`]).
    let allowed = if table.is_some() { room.saturating_sub(1) } else { 0 };
    let left_out: Vec<usize> = splitting.iter().skip(allowed).copied().collect();
    let mut kept: Vec<Hole> = Vec::new();
    let mut table_at = None;
    for (i, mut hole) in holes.into_iter().enumerate() {
        if left_out.contains(&i) {
            continue;
        }
        if Some(i) == table && splitting.len() > left_out.len() {
            hole.holds_table = true;
            table_at = Some(hole.from);
        }
        kept.push(hole);
    }
    if kept.is_empty() {
        return Ok(None);
    }
    if table_at.is_none() && kept.iter().any(|h| h.splits) {
        return refuse("the program headers have nowhere to grow");
    }
    Ok(Some((kept, table_at)))
}

/// The load segment whose file bytes hold the new program header table.
fn host_of(headers: &[ProgramHeader], at: u64, len: u64) -> Option<&ProgramHeader> {
    headers.iter().find(|p| p.p_type == PT_LOAD && p.p_offset <= at && at + len <= p.p_offset + p.p_filesz)
}

/// A load moved down by less than its alignment gets the page as its alignment (its offset
/// and address stay congruent modulo the page, which is what the loader maps by).
fn fix_align(mut p: ProgramHeader, map: &OffsetMap, unit: u64) -> Result<ProgramHeader, LayoutError> {
    p.p_offset = map.new_offset(p.p_offset);
    if p.p_align > 1 && p.p_offset % p.p_align != p.p_vaddr % p.p_align {
        if p.p_offset % unit != p.p_vaddr % unit {
            return refuse(format!("the segment at {:#x} would not map from a page boundary", p.p_vaddr));
        }
        p.p_align = unit;
    }
    Ok(p)
}

/// Offsets of the old file in the new one.
struct OffsetMap {
    removed: Vec<(u64, u64)>,
}

impl OffsetMap {
    /// Where an old offset lands (an offset inside a hole lands where the hole was).
    fn new_offset(&self, at: u64) -> u64 {
        let mut shift = 0;
        for &(a, b) in &self.removed {
            if at >= b {
                shift += b - a;
            } else if at > a {
                shift += at - a;
            }
        }
        at - shift
    }
}

/// The symbol table entries that name a split section but lie in a later piece: their new
/// bytes, by old file offset.
fn moved_symbol_entries(
    source: Source<'_>,
    sections: &[SectionHeader],
    moved: &[MovedSymbols],
    header: &Header,
) -> Result<Vec<Overlay>, LayoutError> {
    let mut out = Vec::new();
    if moved.is_empty() {
        return Ok(out);
    }
    let size = Sym::size(header.ctx.container) as u64;
    for table in sections.iter().filter(|s| s.sh_type == SHT_SYMTAB || s.sh_type == SHT_DYNSYM) {
        let count = table.sh_size / size;
        let per_read = (1 << 20) / size;
        let mut first = 0;
        while first < count {
            let n = per_read.min(count - first);
            let at = table.sh_offset + first * size;
            let bytes = read_vec(source, at, n * size)?;
            let symbols = goblin::elf::sym::Symtab::parse(&bytes, 0, n as usize, header.ctx)
                .or_else(|_| refuse("a symbol table does not parse"))?;
            for (k, mut sym) in symbols.iter().enumerate() {
                let piece = moved
                    .iter()
                    .filter(|m| m.old == sym.st_shndx && sym.st_value >= m.address)
                    .max_by_key(|m| m.address);
                if let Some(m) = piece {
                    sym.st_shndx = m.new;
                    let mut entry = vec![0u8; size as usize];
                    sym.try_into_ctx(&mut entry[..], header.ctx).or_else(|_| refuse("a symbol does not encode"))?;
                    out.push((at + k as u64 * size, entry.into()));
                }
            }
            first += n;
        }
    }
    Ok(out)
}

/// A byte that should have been zero, by its offset.
#[derive(Debug, thiserror::Error)]
#[error("byte {0:#x} is not zero")]
pub struct NotZero(pub u64);

/// Whether the old file's [from, to) is all zeros (an error names the first that is not).
fn all_zero(source: Source<'_>, from: u64, to: u64) -> io::Result<()> {
    let mut buf = vec![0u8; (1 << 16).min(to.saturating_sub(from)) as usize];
    let mut at = from;
    while at < to {
        let n = (buf.len() as u64).min(to - at) as usize;
        source(&mut buf[..n], at)?;
        // OR-folding whole chunks vectorizes; the byte is looked for only once one is not zero.
        if buf[..n].chunks(256).any(|c| c.iter().fold(0u8, |a, b| a | b) != 0) {
            let i = buf[..n].iter().position(|b| *b != 0).unwrap_or(0);
            return Err(io::Error::other(NotZero(at + i as u64)));
        }
        at += n as u64;
    }
    Ok(())
}

/// Put `bytes` at `at` of the new file, over what the pieces held there.
fn overlay(pieces: &mut BTreeMap<u64, Piece>, at: u64, bytes: Arc<[u8]>) {
    let end = at + bytes.len() as u64;
    split_at(pieces, at);
    split_at(pieces, end);
    let inside: Vec<u64> = pieces.range(at..end).map(|(k, _)| *k).collect();
    for k in inside {
        pieces.remove(&k);
    }
    pieces.insert(at, Piece::Bytes(bytes));
}

/// Make `at` the start of a piece.
fn split_at(pieces: &mut BTreeMap<u64, Piece>, at: u64) {
    let Some((&start, piece)) = pieces.range(..at).next_back() else { return };
    if start + piece.len() <= at {
        return;
    }
    let cut = at - start;
    let (head, tail) = match piece {
        Piece::Copy { len, from } => {
            (Piece::Copy { len: cut, from: *from }, Piece::Copy { len: len - cut, from: from + cut })
        }
        Piece::Bytes(b) => (Piece::Bytes(b[..cut as usize].into()), Piece::Bytes(b[cut as usize..].into())),
    };
    pieces.insert(start, head);
    pieces.insert(at, tail);
}

impl Compacted {
    /// Bytes left out of the file.
    pub fn saved(&self) -> u64 {
        self.old_len.saturating_sub(self.len)
    }

    /// Read `buf.len()` bytes of the new file at `at`.
    pub fn read_at(&self, source: Source<'_>, buf: &mut [u8], at: u64) -> io::Result<()> {
        let end = at + buf.len() as u64;
        if end > self.len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the compacted file"));
        }
        let first = self.pieces.range(..=at).next_back().map_or(at, |(k, _)| *k);
        for (&start, piece) in self.pieces.range(first..end) {
            let (a, b) = (start.max(at), (start + piece.len()).min(end));
            if a >= b {
                continue;
            }
            let out = &mut buf[(a - at) as usize..(b - at) as usize];
            match piece {
                Piece::Copy { from, .. } => source(out, from + (a - start))?,
                Piece::Bytes(bytes) => out.copy_from_slice(&bytes[(a - start) as usize..(b - start) as usize]),
            }
        }
        Ok(())
    }

    /// The ranges of the new file that hold the old file's bytes: (new from, new to, old from).
    pub fn copies(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.pieces.iter().filter_map(|(&at, p)| match p {
            Piece::Copy { len, from } => Some((at, at + len, *from)),
            Piece::Bytes(_) => None,
        })
    }

    /// Prove the new layout the loader's way: every address of every old `PT_LOAD` reads, through
    /// the new program headers, the same old byte (or zero-fill over old bytes that were zero,
    /// or new header bytes where the plan put them); and the new file, re-read, breaks no
    /// loadability rule the old one kept and says the same of its dependencies.
    pub fn check(&self, source: Source<'_>) -> Result<(), LayoutError> {
        let fail = |m: String| Err(LayoutError::Check(m));
        let new_loads: Vec<&ProgramHeader> = self.new_headers.iter().filter(|p| p.p_type == PT_LOAD).collect();
        for old in &self.old_loads {
            let (start, old_file_end, end) = (old.p_vaddr, old.p_vaddr + old.p_filesz, old.p_vaddr + old.p_memsz);
            let mut v = start;
            while v < end {
                let Some(new) = new_loads.iter().find(|p| p.p_vaddr <= v && v < p.p_vaddr + p.p_memsz) else {
                    // Unmapped now: only freed bytes that left the file.
                    let old_offset = old.p_offset + (v - start);
                    let next = new_loads.iter().map(|p| p.p_vaddr).filter(|&a| a > v).min().unwrap_or(end).min(end);
                    let gap_end = old.p_offset + (next - start);
                    if v >= old_file_end || !self.removed.iter().any(|&(a, b)| a <= old_offset && gap_end <= b) {
                        return fail(format!("address {v:#x} is no longer mapped"));
                    }
                    all_zero(source, old_offset, gap_end).map_err(|_| {
                        LayoutError::Check(format!("address {v:#x} held bytes and is no longer mapped"))
                    })?;
                    v = next;
                    continue;
                };
                let new_file_end = new.p_vaddr + new.p_filesz;
                if v >= old_file_end {
                    if v < new_file_end {
                        return fail(format!("address {v:#x} was zero-fill and is now read from the file"));
                    }
                    v = end.min(new.p_vaddr + new.p_memsz);
                    continue;
                }
                let old_offset = old.p_offset + (v - start);
                if v >= new_file_end {
                    // Zero-fill now (a .bss after a hole that ended the file bytes).
                    let stop = old_file_end.min(new.p_vaddr + new.p_memsz);
                    all_zero(source, old_offset, old.p_offset + (stop - start))
                        .map_err(|_| LayoutError::Check(format!("address {v:#x} held bytes and is now zero-fill")))?;
                    v = stop;
                    continue;
                }
                let new_offset = new.p_offset + (v - new.p_vaddr);
                let Some((&at, piece)) = self.pieces.range(..=new_offset).next_back() else {
                    return fail(format!("address {v:#x} maps past the new file"));
                };
                let step = (at + piece.len() - new_offset).min(new_file_end - v).min(old_file_end - v);
                match piece {
                    Piece::Copy { from, .. } if from + (new_offset - at) == old_offset => {}
                    Piece::Bytes(_)
                        if self.changed_in_memory.iter().any(|&(a, b)| a <= new_offset && new_offset + step <= b) => {}
                    _ => return fail(format!("address {v:#x} reads other bytes than before")),
                }
                v += step.max(1);
            }
        }
        let read = |buf: &mut [u8], at: u64| self.read_at(source, buf, at);
        let before =
            crate::ElfFacts::parse_by_ranges(self.old_len, source).map_err(|e| LayoutError::Check(e.to_string()))?;
        let after = crate::ElfFacts::parse_by_ranges(self.len, &read).map_err(|e| LayoutError::Check(e.to_string()))?;
        let said = |f: &crate::ElfFacts| {
            (
                f.soname.clone(),
                f.needed.clone(),
                f.rpath.clone(),
                f.runpath.clone(),
                f.version_needs.clone(),
                f.undefined.clone(),
            )
        };
        if said(&before) != said(&after) {
            return fail("its dynamic section or symbols read differently".into());
        }
        let rules_before: Vec<&str> = crate::lint::loadability(&before).iter().map(|f| f.rule).collect();
        if let Some(f) = crate::lint::loadability(&after).into_iter().find(|f| !rules_before.contains(&f.rule)) {
            return fail(format!("it would not load ({}): {}", f.rule, f.message));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_move_down_by_what_left_before_them() {
        let map = OffsetMap { removed: vec![(0x2000, 0x5000), (0x8000, 0x9000)] };
        assert_eq!(map.new_offset(0x1000), 0x1000);
        assert_eq!(map.new_offset(0x3000), 0x2000, "inside a hole: where the hole was");
        assert_eq!(map.new_offset(0x5000), 0x2000);
        assert_eq!(map.new_offset(0x8800), 0x5000);
        assert_eq!(map.new_offset(0xa000), 0x6000);
    }

    #[test]
    fn overlays_replace_exactly_their_bytes() {
        let source = |buf: &mut [u8], at: u64| {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (at as usize + i) as u8;
            }
            Ok(())
        };
        let mut pieces = BTreeMap::new();
        pieces.insert(0, Piece::Copy { len: 10, from: 0 });
        pieces.insert(10, Piece::Copy { len: 10, from: 30 });
        overlay(&mut pieces, 8, vec![0xee; 4].into());
        let c = Compacted {
            pieces,
            len: 20,
            old_len: 40,
            removed: vec![(10, 30)],
            holes: vec![],
            splits: 0,
            kept_holes: 0,
            old_loads: vec![],
            new_headers: vec![],
            changed_in_memory: vec![],
        };
        let mut out = vec![0u8; 20];
        c.read_at(&source, &mut out, 0).unwrap();
        let expected: Vec<u8> = (0..8).chain([0xee; 4]).chain(32..40).collect();
        assert_eq!(out, expected);
        let mut part = vec![0u8; 5];
        c.read_at(&source, &mut part, 9).unwrap();
        assert_eq!(part, [0xee, 0xee, 0xee, 32, 33]);
        assert_eq!(c.copies().collect::<Vec<_>>(), [(0, 8, 0), (12, 20, 32)]);
        assert!(c.read_at(&source, &mut part, 18).is_err(), "past the end");
    }

    /// A 64-bit little-endian ELF header of `e_type` for `machine`, with no tables.
    fn header(e_type: u16, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        (h[4], h[5], h[6]) = (2, 1, 1);
        h[16..18].copy_from_slice(&e_type.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[20] = 1;
        h[52] = 64;
        h[54] = 56;
        h[58] = 64;
        h
    }

    #[test]
    fn files_whose_layout_it_cannot_change_are_refused_with_the_reason() {
        let refused = |data: Vec<u8>| {
            let read = |buf: &mut [u8], at: u64| {
                buf.copy_from_slice(&data[at as usize..at as usize + buf.len()]);
                Ok(())
            };
            match compact(&read, data.len() as u64, &[(0, 64)]) {
                Err(LayoutError::Refused(why)) => why,
                other => panic!("{other:?}"),
            }
        };
        assert!(refused(header(1, 62)).contains("not a program or shared library"));
        assert!(refused(header(3, 224)).contains("page size"), "AMDGPU code objects are not host binaries");
        let read = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&header(3, 62)[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        assert!(matches!(compact(&read, 64, &[(0, 64)]), Err(LayoutError::NothingToFree)));
        assert_eq!(page_size(62), Some(0x1000));
        assert_eq!(page_size(183), Some(0x10000), "aarch64 kernels may use 64 KiB pages");
    }
}
