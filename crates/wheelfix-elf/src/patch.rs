//! Patching ELF files in-process: DT_NEEDED (and the matching `.gnu.version_r` file names),
//! SONAME and RPATH, with the `object` crate's ELF builder.
//!
//! Renaming a needed library without renaming its `.gnu.version_r` entry makes glibc abort in
//! `dl-version.c`, so both change together. New names are longer than old ones; when the
//! regenerated dynamic string table (or any table the builder rewrites) no longer fits where it
//! was, the tables that grew — and whatever must make way for one more program header — move to
//! a new read-only `PT_LOAD` segment at the end of the file. Everything else keeps its address.

use std::collections::{BTreeMap, BTreeSet};

use object::build::elf::{Builder, Dynamic, SectionData, SectionId};
use object::elf;

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("cannot read the ELF file for patching: {0}")]
    Read(String),
    #[error("the ELF file has no dynamic section")]
    NoDynamic,
    #[error("no room to patch: {0}")]
    NoRoom(String),
    #[error("cannot write the patched ELF file: {0}")]
    Write(String),
    #[error("the patched file does not say what was asked: {0}")]
    Verify(String),
    #[error("{0}")]
    External(String),
}

/// How RPATH/RUNPATH change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RpathEdit {
    #[default]
    Keep,
    /// Remove DT_RPATH and DT_RUNPATH.
    Remove,
    /// Set DT_RPATH (removing DT_RUNPATH, as auditwheel's `--force-rpath` does).
    Set(String),
}

/// Everything to change in one ELF file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElfEdit {
    pub soname: Option<String>,
    /// Old DT_NEEDED name → new name.
    pub replace_needed: BTreeMap<String, String>,
    pub remove_needed: BTreeSet<String>,
    pub rpath: RpathEdit,
}

impl ElfEdit {
    pub fn is_empty(&self) -> bool {
        *self == ElfEdit::default()
    }
}

/// The one interface to patching, so tests can put `patchelf` behind it and compare.
pub trait Patcher: Sync {
    fn patch(&self, data: &[u8], edit: &ElfEdit) -> Result<Vec<u8>, PatchError>;
}

/// The in-process patcher (no `patchelf` binary needed).
pub struct InProcessPatcher;

impl Patcher for InProcessPatcher {
    fn patch(&self, data: &[u8], edit: &ElfEdit) -> Result<Vec<u8>, PatchError> {
        // The builder trusts the layout it read; a hostile file must not take the process down.
        let out = std::panic::catch_unwind(|| patch_elf(data, edit))
            .map_err(|_| PatchError::Write("the ELF writer failed on this file's layout".into()))??;
        // The output is read once, for both checks.
        let facts = super::ElfFacts::parse(&out).map_err(|e| PatchError::Verify(e.to_string()))?;
        verify_facts(&facts, edit)?;
        loadable_as_before(data, &facts)?;
        Ok(out)
    }
}

/// The patched file breaks no loadability rule ([`crate::lint`]) the input did not break
/// already: a patch never makes a file the loader refuses.
pub fn verify_loadable(input: &[u8], output: &[u8]) -> Result<(), PatchError> {
    let facts = super::ElfFacts::parse(output).map_err(|e| PatchError::Verify(e.to_string()))?;
    loadable_as_before(input, &facts)
}

/// [`verify_loadable`] with the output's facts already read.
fn loadable_as_before(input: &[u8], output: &super::ElfFacts) -> Result<(), PatchError> {
    let after = crate::lint::loadability(output);
    if after.is_empty() {
        return Ok(());
    }
    let input = super::ElfFacts::parse(input).map_err(|e| PatchError::Verify(e.to_string()))?;
    let before: Vec<&'static str> = crate::lint::loadability(&input).into_iter().map(|f| f.rule).collect();
    match after.into_iter().find(|f| !before.contains(&f.rule)) {
        Some(f) => Err(PatchError::Verify(format!("the patched file would not load ({}): {}", f.rule, f.message))),
        None => Ok(()),
    }
}

/// auditwheel's `--patcher none`: files that need patching make the repair fail, naming them.
pub struct NoPatcher;

impl Patcher for NoPatcher {
    fn patch(&self, _data: &[u8], _edit: &ElfEdit) -> Result<Vec<u8>, PatchError> {
        Err(PatchError::External("the 'none' patcher can't patch files (--patcher none)".into()))
    }
}

fn patch_elf(data: &[u8], edit: &ElfEdit) -> Result<Vec<u8>, PatchError> {
    let mut builder = Builder::read(data).map_err(|e| PatchError::Read(e.to_string()))?;
    let original: Vec<(SectionId, u64, u64)> = builder
        .sections
        .iter()
        .filter(|s| s.is_alloc() && s.sh_type != elf::SHT_NOBITS)
        .map(|s| (s.id(), s.sh_addr, s.sh_size))
        .collect();
    let dynamic_id = builder.dynamic_section().ok_or(PatchError::NoDynamic)?;
    let dynamic_room = builder.sections.get(dynamic_id).sh_size;

    let dynamic = builder.dynamic_data_mut().ok_or(PatchError::NoDynamic)?;
    let string = |tag, val: &str| Dynamic::String { tag, val: val.as_bytes().to_vec().into() };
    dynamic.retain(|d| match d {
        Dynamic::String { tag, val } if *tag == elf::DT_NEEDED => {
            !edit.remove_needed.contains(&*String::from_utf8_lossy(val))
        }
        Dynamic::String { tag, .. } if *tag == elf::DT_RPATH || *tag == elf::DT_RUNPATH => {
            edit.rpath == RpathEdit::Keep
        }
        _ => true,
    });
    for d in dynamic.iter_mut() {
        if let Dynamic::String { tag, val } = d {
            let text = String::from_utf8_lossy(val).into_owned();
            if *tag == elf::DT_NEEDED
                && let Some(new) = edit.replace_needed.get(&text)
            {
                *val = new.as_bytes().to_vec().into();
            }
            if *tag == elf::DT_SONAME
                && let Some(new) = &edit.soname
            {
                *val = new.as_bytes().to_vec().into();
            }
        }
    }
    // New entries go right after the DT_NEEDED entries, where linkers put them.
    let after_needed = dynamic.iter().rposition(|d| d.tag() == elf::DT_NEEDED).map_or(0, |i| i + 1);
    let mut insert = Vec::new();
    if let Some(soname) = &edit.soname
        && !dynamic.iter().any(|d| d.tag() == elf::DT_SONAME)
    {
        insert.push(string(elf::DT_SONAME, soname));
    }
    if let RpathEdit::Set(rpath) = &edit.rpath {
        insert.push(string(elf::DT_RPATH, rpath));
    }
    for (i, entry) in insert.into_iter().enumerate() {
        dynamic.insert(after_needed + i, entry);
    }
    for file in builder.version_files.iter_mut() {
        let name = String::from_utf8_lossy(&file.name).into_owned();
        if let Some(new) = edit.replace_needed.get(&name) {
            file.name = new.as_bytes().to_vec().into();
        }
    }

    builder.set_section_sizes();
    // GNU ld leaves spare DT_NULL entries, where new tags fit; lld leaves none (ROCm's libraries),
    // and then the dynamic section moves to the new segment with the other tables that grew.
    if builder.sections.get(dynamic_id).sh_size <= dynamic_room {
        builder.sections.get_mut(dynamic_id).sh_size = dynamic_room;
    }
    make_room(&mut builder, &original)?;
    // Nothing of a sane file lies far past its end: refuse layouts that would make the writer
    // allocate more than the input plus the moved tables.
    let limit = data.len() as u64 + (64 << 20);
    let beyond = builder
        .sections
        .iter()
        .filter(|s| s.sh_type != elf::SHT_NOBITS)
        .any(|s| s.sh_offset.saturating_add(s.sh_size) > limit)
        || builder.segments.iter().any(|s| s.p_offset.saturating_add(s.p_filesz) > limit);
    if beyond {
        return Err(PatchError::Read("sections or segments lie past the end of the file".into()));
    }
    let mut out = Vec::with_capacity(data.len() + 8192);
    builder.write(&mut out).map_err(|e| PatchError::Write(e.to_string()))?;
    Ok(out)
}

/// Tables the builder regenerates and nothing refers to by address but the dynamic section
/// (whose entries it rewrites): these may move. The dynamic section itself is found through
/// `PT_DYNAMIC`, which follows it (as patchelf moves it).
fn movable(data: &SectionData<'_>, name: &[u8]) -> bool {
    matches!(
        data,
        SectionData::Note(_)
            | SectionData::Dynamic(_)
            | SectionData::DynamicString
            | SectionData::DynamicSymbol
            | SectionData::Hash
            | SectionData::GnuHash
            | SectionData::GnuVersym
            | SectionData::GnuVerdef
            | SectionData::GnuVerneed
    ) || (matches!(data, SectionData::Data(_)) && name == b".interp")
}

/// Move the sections that outgrew their place (and whatever a new program header displaces)
/// into a new `PT_LOAD` segment.
fn make_room(builder: &mut Builder<'_>, original: &[(SectionId, u64, u64)]) -> Result<(), PatchError> {
    let movers = sections_to_move(builder, original);
    if movers.is_empty() {
        return Ok(());
    }
    for id in &movers {
        let section = builder.sections.get(*id);
        if !movable(&section.data, &section.name) {
            return Err(PatchError::NoRoom(format!(
                "{} is in the way and cannot move",
                String::from_utf8_lossy(&section.name)
            )));
        }
    }
    let mut order = movers.clone();
    order.sort_by_key(|id| builder.sections.get(*id).sh_addr);
    let align = builder.load_align.max(0x1000);
    // The dynamic section stays writable where it was (ld.so writes DT_DEBUG of a program).
    let writable = movers.iter().any(|id| builder.sections.get(*id).sh_flags.contains(elf::SHF_WRITE));
    let flags = if writable { elf::PF_R | elf::PF_W } else { elf::PF_R };
    let segment_id = builder.segments.add_load_segment(flags, align).id();
    let old_addr: Vec<(SectionId, u64)> = order.iter().map(|id| (*id, builder.sections.get(*id).sh_addr)).collect();
    for id in &order {
        let section = builder.sections.get_mut(*id);
        section.sh_offset = 0;
        let segment = builder.segments.get_mut(segment_id);
        segment.append_section(builder.sections.get_mut(*id));
    }
    // Symbols defined in a moved section move with it (`_DYNAMIC`, which must name the dynamic
    // segment's address).
    let moved_by = |section: Option<SectionId>| {
        let (id, old) = old_addr.iter().find(|(id, _)| Some(*id) == section)?;
        Some(builder.sections.get(*id).sh_addr.wrapping_sub(*old))
    };
    let shifts: Vec<Option<u64>> = builder.symbols.iter().map(|s| moved_by(s.section)).collect();
    let dynamic_shifts: Vec<Option<u64>> = builder.dynamic_symbols.iter().map(|s| moved_by(s.section)).collect();
    for (symbol, shift) in builder.symbols.iter_mut().zip(shifts) {
        if let Some(shift) = shift {
            symbol.st_value = symbol.st_value.wrapping_add(shift);
        }
    }
    for (symbol, shift) in builder.dynamic_symbols.iter_mut().zip(dynamic_shifts) {
        if let Some(shift) = shift {
            symbol.st_value = symbol.st_value.wrapping_add(shift);
        }
    }
    let sections = &builder.sections;
    for segment in builder.segments.iter_mut() {
        if segment.p_type == elf::PT_GNU_RELRO {
            segment.sections.retain(|id| !movers.contains(id));
        }
        if segment.p_type != elf::PT_LOAD && segment.sections.iter().any(|id| movers.contains(id))
            || segment.p_type == elf::PT_GNU_RELRO
        {
            segment.recalculate_ranges(sections);
        }
    }
    let size = builder.program_headers_size();
    for segment in builder.segments.iter_mut().filter(|s| s.p_type == elf::PT_PHDR) {
        segment.p_filesz = size;
        segment.p_memsz = size;
    }
    Ok(())
}

/// The sections that must move: those that outgrew their place, those in the way of the
/// program header table grown by one entry, and the rest of any non-load segment one of them
/// is in.
fn sections_to_move(builder: &Builder<'_>, original: &[(SectionId, u64, u64)]) -> Vec<SectionId> {
    let mut by_addr: Vec<(SectionId, u64, u64)> = original.to_vec();
    by_addr.sort_by_key(|(_, addr, _)| *addr);
    let load_end = |addr: u64| {
        builder
            .segments
            .iter()
            .filter(|s| s.p_type == elf::PT_LOAD && s.p_vaddr <= addr && addr < s.p_vaddr + s.p_memsz.max(1))
            .map(|s| s.p_vaddr + s.p_memsz)
            .next()
            .unwrap_or(u64::MAX)
    };
    let mut movers: Vec<SectionId> = Vec::new();
    for (i, (id, addr, _)) in by_addr.iter().enumerate() {
        let size = builder.sections.get(*id).sh_size;
        let next = by_addr.get(i + 1).map_or(u64::MAX, |(_, a, _)| *a);
        if addr + size > next.min(load_end(*addr)) {
            movers.push(*id);
        }
    }
    if movers.is_empty() {
        return movers;
    }
    // One more program header: sections in the way of the grown table move too.
    let phentsize = builder.encoder().program_header_size();
    let phdr_start = builder.header.e_phoff;
    let phdr_end = phdr_start + builder.program_headers_size() + phentsize;
    let first_load = builder.segments.iter().find(|s| s.p_type == elf::PT_LOAD && s.p_offset <= phdr_start);
    let phdr_addr_end = first_load.map_or(phdr_end, |s| s.p_vaddr + (phdr_end - s.p_offset));
    for (id, addr, _) in &by_addr {
        if *addr < phdr_addr_end && builder.sections.get(*id).sh_offset >= phdr_start && !movers.contains(id) {
            movers.push(*id);
        }
    }
    // Non-load segments (PT_NOTE, PT_INTERP, PT_GNU_PROPERTY) move whole. PT_GNU_RELRO is a
    // range to protect, not a unit: it lets go of what moves (below).
    loop {
        let mut grew = false;
        for segment in builder.segments.iter().filter(|s| s.p_type != elf::PT_LOAD && s.p_type != elf::PT_GNU_RELRO) {
            if segment.sections.iter().any(|id| movers.contains(id)) {
                for id in &segment.sections {
                    if !movers.contains(id) {
                        movers.push(*id);
                        grew = true;
                    }
                }
            }
        }
        if !grew {
            break;
        }
    }
    movers
}

/// Re-read the output and check that it says what was asked.
pub fn verify(data: &[u8], edit: &ElfEdit) -> Result<(), PatchError> {
    let facts = super::ElfFacts::parse(data).map_err(|e| PatchError::Verify(e.to_string()))?;
    verify_facts(&facts, edit)
}

/// [`verify`] with the output's facts already read.
fn verify_facts(facts: &super::ElfFacts, edit: &ElfEdit) -> Result<(), PatchError> {
    for (old, new) in &edit.replace_needed {
        if facts.needed.contains(old) || !facts.needed.contains(new) {
            return Err(PatchError::Verify(format!("DT_NEEDED still names {old} or lacks {new}")));
        }
        if facts.version_needs.iter().any(|v| &v.file == old) {
            return Err(PatchError::Verify(format!(".gnu.version_r still names {old}")));
        }
    }
    if let Some(removed) = edit.remove_needed.iter().find(|r| facts.needed.contains(r)) {
        return Err(PatchError::Verify(format!("DT_NEEDED still names {removed}")));
    }
    if let Some(soname) = &edit.soname
        && facts.soname.as_ref() != Some(soname)
    {
        return Err(PatchError::Verify(format!("SONAME is {:?}, not {soname}", facts.soname)));
    }
    match &edit.rpath {
        RpathEdit::Keep => {}
        RpathEdit::Remove if !facts.rpath.is_empty() || !facts.runpath.is_empty() => {
            return Err(PatchError::Verify("RPATH/RUNPATH still present".into()));
        }
        RpathEdit::Remove => {}
        RpathEdit::Set(r) => {
            if facts.rpath.join(":") != *r || !facts.runpath.is_empty() {
                return Err(PatchError::Verify(format!("RPATH is {:?}, not {r}", facts.rpath)));
            }
        }
    }
    Ok(())
}
