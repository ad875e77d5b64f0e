//! Where the byte ranges that [`super::ElfFacts::parse_view`] reads lie, learned from the
//! structures that announce them, so that a file streaming past can keep only those.
//!
//! The ELF header (first bytes) names the program and section header tables; the program
//! headers name PT_INTERP, PT_DYNAMIC and the notes; PT_DYNAMIC names the dynamic string,
//! symbol and version tables by address. Most linkers put those tables in the first read-only
//! segment, before the code, so they have streamed past by the time PT_DYNAMIC arrives: a
//! streaming reader keeps that segment's bytes speculatively. patchelf moves them behind
//! `.dynamic`, where they are still ahead of the stream.

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::program_header::{PF_X, PT_DYNAMIC, PT_INTERP, PT_LOAD, PT_NOTE, ProgramHeader};
use goblin::elf::section_header::{
    SHF_ALLOC, SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_NOBITS, SHT_NOTE, SectionHeader,
};

use super::view::{FileView, ViewError};

/// A byte range of a file: (offset, size).
pub type Range = (u64, u64);

/// What the ELF header says about where the header tables lie.
#[derive(Debug, Clone, Copy)]
pub struct HeaderLayout {
    ctx: Ctx,
    /// Program header table.
    pub program_headers: Range,
    ph_count: usize,
    /// Section header table (its first entry only, when the count is in it).
    pub section_headers: Option<Range>,
}

impl HeaderLayout {
    /// From the first 64 bytes of an ELF file.
    pub fn parse(head: &[u8]) -> Option<HeaderLayout> {
        let header = goblin::elf::Elf::parse_header(head).ok()?;
        let is_64 = header.e_ident[goblin::elf::header::EI_CLASS] == goblin::elf::header::ELFCLASS64;
        let little = header.e_ident[goblin::elf::header::EI_DATA] != goblin::elf::header::ELFDATA2MSB;
        let ctx = Ctx::new(
            if is_64 { Container::Big } else { Container::Little },
            if little { Endian::Little } else { Endian::Big },
        );
        let ph_size = ProgramHeader::size(ctx) as u64;
        let entry = u64::from(header.e_shentsize);
        let section_headers =
            (header.e_shoff != 0).then(|| (header.e_shoff, entry.saturating_mul(u64::from(header.e_shnum.max(1)))));
        Some(HeaderLayout {
            ctx,
            program_headers: (header.e_phoff, ph_size.saturating_mul(u64::from(header.e_phnum))),
            ph_count: header.e_phnum as usize,
            section_headers,
        })
    }

    pub fn program_headers(&self, bytes: &[u8]) -> Option<Vec<ProgramHeader>> {
        ProgramHeader::parse(bytes, 0, self.ph_count, self.ctx).ok()
    }
}

/// What the program headers say.
#[derive(Debug, Clone, Default)]
pub struct Segments {
    /// PT_INTERP, PT_DYNAMIC and PT_NOTE contents.
    pub ranges: Vec<Range>,
    pub dynamic: Option<Range>,
    /// Where the first executable segment that does not start the file begins: the read-only
    /// segment before it holds the dynamic tables, with most linkers.
    pub first_code: Option<u64>,
    /// (vaddr, offset, filesz) of every PT_LOAD, for turning addresses into offsets.
    loads: Vec<(u64, u64, u64)>,
}

impl Segments {
    pub fn of(headers: &[ProgramHeader]) -> Segments {
        let mut segments = Segments::default();
        for ph in headers {
            match ph.p_type {
                PT_INTERP | PT_NOTE => segments.ranges.push((ph.p_offset, ph.p_filesz)),
                PT_DYNAMIC => {
                    segments.ranges.push((ph.p_offset, ph.p_filesz));
                    segments.dynamic = Some((ph.p_offset, ph.p_filesz));
                }
                PT_LOAD => {
                    segments.loads.push((ph.p_vaddr, ph.p_offset, ph.p_filesz));
                    if ph.p_flags & PF_X != 0 && ph.p_offset > 0 && segments.first_code.is_none() {
                        segments.first_code = Some(ph.p_offset);
                    }
                }
                _ => {}
            }
        }
        segments
    }

    fn offset_of(&self, vaddr: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|(start, _, size)| vaddr >= *start && vaddr - start < *size)
            .map(|(start, offset, _)| offset + (vaddr - start))
    }

    /// The dynamic tables PT_DYNAMIC names, as file ranges: the string table with its size, the
    /// symbol and version tables up to the next table or `cap` bytes (their sizes are not in
    /// the dynamic section).
    pub fn dynamic_tables(&self, dynamic: &[u8], ctx_of: &HeaderLayout, cap: u64) -> Vec<Range> {
        const DT_NULL: u64 = 0;
        const DT_STRTAB: u64 = 5;
        const DT_SYMTAB: u64 = 6;
        const DT_STRSZ: u64 = 10;
        const DT_VERSYM: u64 = 0x6fff_fff0;
        const DT_VERNEED: u64 = 0x6fff_fffe;
        const DT_HASH: u64 = 4;
        const DT_GNU_HASH: u64 = 0x6fff_fef5;
        let ctx = ctx_of.ctx;
        let word = if ctx.container.is_big() { 8 } else { 4 };
        let read = |at: usize| -> Option<u64> {
            let b = dynamic.get(at..at + word)?;
            Some(match (word, ctx.le.is_little()) {
                (8, true) => u64::from_le_bytes(b.try_into().ok()?),
                (8, false) => u64::from_be_bytes(b.try_into().ok()?),
                (_, true) => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
                (_, false) => u64::from(u32::from_be_bytes(b.try_into().ok()?)),
            })
        };
        let (mut strtab, mut strsz, mut others) = (None, None, Vec::new());
        let mut at = 0;
        while let (Some(tag), Some(value)) = (read(at), read(at + word)) {
            match tag {
                DT_NULL => break,
                DT_STRTAB => strtab = self.offset_of(value),
                DT_STRSZ => strsz = Some(value),
                // The hash tables size the symbol table of a file without section headers.
                DT_SYMTAB | DT_VERSYM | DT_VERNEED | DT_HASH | DT_GNU_HASH => others.extend(self.offset_of(value)),
                _ => {}
            }
            at += 2 * word;
        }
        let mut starts: Vec<u64> = others.iter().copied().chain(strtab).collect();
        starts.sort_unstable();
        let mut ranges: Vec<Range> = others
            .iter()
            .map(|&start| {
                let next = starts.iter().copied().find(|s| *s > start).unwrap_or(u64::MAX);
                (start, (next - start).min(cap))
            })
            .collect();
        if let (Some(start), Some(size)) = (strtab, strsz) {
            ranges.push((start, size));
        }
        ranges
    }
}

/// Every range [`super::ElfFacts::parse_view`] and the GPU readers will ask for, as far as the
/// view tells (its ELF header, program and section headers). A range the view lacks to tell
/// more is itself in the list.
pub fn needed_ranges<V: FileView + ?Sized>(view: &V) -> Vec<Range> {
    let mut out = Vec::new();
    let Ok(head) = view.get(0, 64.min(view.len())) else {
        out.push((0, 64.min(view.len())));
        return out;
    };
    let Some(layout) = HeaderLayout::parse(head) else { return out };
    out.push((0, 64.min(view.len())));
    out.push(layout.program_headers);
    if let Some(headers) =
        view.get(layout.program_headers.0, layout.program_headers.1).ok().and_then(|b| layout.program_headers(b))
    {
        let segments = Segments::of(&headers);
        out.extend(&segments.ranges);
        if let Some(bytes) = segments.dynamic.and_then(|(o, s)| view.get(o, s).ok()) {
            out.extend(segments.dynamic_tables(bytes, &layout, 0).into_iter().filter(|(_, s)| *s > 0));
        }
    }
    let Some(table) = layout.section_headers else { return out };
    out.push(table);
    let Ok(first) = view.get(table.0, table.1) else { return out };
    let sections =
        match SectionHeader::parse_from(first, 0, (table.1 / entry_size(&layout).max(1)) as usize, layout.ctx) {
            Ok(s) => s,
            Err(_) => return out,
        };
    // A count of 0 in the ELF header: the real count is the first header's sh_size.
    if sections.len() == 1 && sections[0].sh_size > 1 {
        out.push((table.0, sections[0].sh_size.saturating_mul(entry_size(&layout))));
    }
    let wanted = [SHT_DYNSYM, SHT_GNU_VERSYM, SHT_GNU_VERNEED, SHT_NOTE, SHT_DYNAMIC];
    for sh in &sections {
        let unmapped_note = sh.sh_type == SHT_NOTE && sh.sh_flags & u64::from(SHF_ALLOC) == 0;
        if sh.sh_type != SHT_NOBITS && wanted.contains(&sh.sh_type) && !unmapped_note {
            out.push((sh.sh_offset, sh.sh_size));
            if sh.sh_type == SHT_DYNSYM
                && let Some(strtab) = sections.get(sh.sh_link as usize)
            {
                out.push((strtab.sh_offset, strtab.sh_size));
            }
        }
    }
    if let Ok(h) = goblin::elf::Elf::parse_header(head)
        && let Some(names) = sections.get(h.e_shstrndx as usize).filter(|s| s.sh_type != SHT_NOBITS)
    {
        out.push((names.sh_offset, names.sh_size));
        // The GPU reader asks for the kpack reference section by name.
        if let Ok(table) = view.get(names.sh_offset, names.sh_size) {
            for sh in &sections {
                let name = table.get(sh.sh_name..).and_then(|n| n.split(|b| *b == 0).next());
                if name == Some(b".rocm_kpack_ref".as_slice()) {
                    out.push((sh.sh_offset, sh.sh_size));
                }
            }
        }
    }
    out
}

fn entry_size(layout: &HeaderLayout) -> u64 {
    SectionHeader::size(layout.ctx) as u64
}

/// The range a parse stopped at because the view lacked it.
pub fn missing(e: &ViewError) -> Option<Range> {
    match e {
        ViewError::NotKept { offset, size } => Some((*offset, *size)),
        ViewError::PastEnd { .. } => None,
    }
}
