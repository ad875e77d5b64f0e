//! Loadability: the rules the kernel and `ld.so` hold an ELF file to when they map it, checked
//! on the layout read with its facts ([`Layout`]). A file that breaks one may install and then
//! fail at load (or crash before `main`), far from the wheel that shipped it; each finding names
//! its rule.
//!
//! Rules (ids as printed):
//! - `segment-outside-file`: a segment's file bytes run past the end of the file.
//! - `load-misaligned`: a `PT_LOAD` whose `p_offset` and `p_vaddr` differ modulo `p_align`, or
//!   whose alignment is not a power of two (`ld.so`: "ELF load command address/offset not
//!   properly aligned").
//! - `load-order`: `PT_LOAD`s not in ascending address order, or one with `p_filesz > p_memsz`.
//! - `phdrs-not-loaded`: a program's (a file with `PT_INTERP`) program headers where kernels that
//!   locate them through the first `PT_LOAD` (EL8's: `AT_PHDR` = its address − its offset +
//!   `e_phoff`) do not find them (outside the file bytes of every `PT_LOAD` mapped as the first
//!   is), or a `PT_PHDR` no `PT_LOAD` maps: the program gets a wrong `AT_PHDR` and crashes
//!   before `main`.
//! - `dynamic-not-loaded`: `PT_DYNAMIC` outside every `PT_LOAD`.
//! - `table-not-loaded`: a table the dynamic section points at (strings, symbols, hashes,
//!   versions) outside the file bytes of every `PT_LOAD`.
//! - `version-need-not-needed`: `.gnu.version_r` names a library DT_NEEDED does not (glibc's
//!   `dl-version.c` assertion `needed != NULL`).

use serde::Serialize;

use crate::ElfFacts;

pub const PT_LOAD: u32 = 1;
pub const PT_DYNAMIC: u32 = 2;
pub const PT_INTERP: u32 = 3;
pub const PT_PHDR: u32 = 6;

/// What the loader reads of a file's layout: its length, the program header table and every
/// segment, and where the dynamic section says its tables are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub file_len: u64,
    /// `e_phoff` and the table's size (`e_phnum × e_phentsize`).
    pub phdrs: (u64, u64),
    pub segments: Vec<Segment>,
    /// (DT_ tag name, address, size when the dynamic section gives one).
    pub tables: Vec<(&'static str, u64, Option<u64>)>,
}

/// One program header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    pub kind: u32,
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
    pub memsz: u64,
    pub align: u64,
}

impl Segment {
    fn name(&self) -> String {
        match self.kind {
            PT_LOAD => "PT_LOAD".into(),
            PT_DYNAMIC => "PT_DYNAMIC".into(),
            PT_INTERP => "PT_INTERP".into(),
            PT_PHDR => "PT_PHDR".into(),
            4 => "PT_NOTE".into(),
            other => format!("segment type {other:#x}"),
        }
    }

    /// Whether its memory holds [address, address + size).
    fn maps(&self, address: u64, size: u64) -> bool {
        address >= self.vaddr
            && address.checked_add(size).is_some_and(|end| end <= self.vaddr.saturating_add(self.memsz))
    }

    /// Whether its file bytes hold the memory [address, address + size).
    fn maps_from_file(&self, address: u64, size: u64) -> bool {
        address >= self.vaddr
            && address.checked_add(size).is_some_and(|end| end <= self.vaddr.saturating_add(self.filesz))
    }
}

/// A rule a file breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintFinding {
    pub rule: &'static str,
    pub message: String,
}

/// The rules `facts`' file breaks; none for a file the loader does not map (an object file).
pub fn loadability(facts: &ElfFacts) -> Vec<LintFinding> {
    let layout = &facts.layout;
    let mut found = Vec::new();
    let mut add = |rule: &'static str, message: String| found.push(LintFinding { rule, message });
    let loads: Vec<&Segment> = layout.segments.iter().filter(|s| s.kind == PT_LOAD).collect();
    if loads.is_empty() {
        return found;
    }
    for s in &layout.segments {
        if s.filesz > 0 && s.offset.checked_add(s.filesz).is_none_or(|end| end > layout.file_len) {
            add(
                "segment-outside-file",
                format!(
                    "{} at offset {:#x} holds {:#x} bytes, but the file ends at {:#x}",
                    s.name(),
                    s.offset,
                    s.filesz,
                    layout.file_len
                ),
            );
        }
    }
    for s in &loads {
        if s.align > 1 && !s.align.is_power_of_two() {
            add(
                "load-misaligned",
                format!("PT_LOAD at {:#x}: alignment {:#x} is not a power of two", s.vaddr, s.align),
            );
        } else if s.align > 1 && s.offset % s.align != s.vaddr % s.align {
            add(
                "load-misaligned",
                format!(
                    "PT_LOAD at {:#x}: offset {:#x} and address differ modulo its alignment {:#x}",
                    s.vaddr, s.offset, s.align
                ),
            );
        }
        if s.filesz > s.memsz {
            add(
                "load-order",
                format!("PT_LOAD at {:#x}: {:#x} file bytes in {:#x} of memory", s.vaddr, s.filesz, s.memsz),
            );
        }
    }
    if let Some(w) = loads.windows(2).find(|w| w[1].vaddr < w[0].vaddr) {
        add(
            "load-order",
            format!("PT_LOAD at {:#x} follows the one at {:#x}: not in address order", w[1].vaddr, w[0].vaddr),
        );
    }
    let is_program = layout.segments.iter().any(|s| s.kind == PT_INTERP);
    let (phoff, phsize) = layout.phdrs;
    let first = loads[0];
    let mapped_as_first = |l: &&&Segment| l.vaddr.wrapping_sub(l.offset) == first.vaddr.wrapping_sub(first.offset);
    let holds_table =
        |l: &&&Segment| phoff >= l.offset && phoff.saturating_add(phsize) <= l.offset.saturating_add(l.filesz);
    if is_program && !loads.iter().filter(mapped_as_first).any(|l| holds_table(&l)) {
        add(
            "phdrs-not-loaded",
            format!(
                "the program headers (offset {phoff:#x}) are not where the first PT_LOAD (offset {:#x}, address {:#x}) puts them in memory: kernels that find them through it start the program with a wrong AT_PHDR",
                first.offset, first.vaddr
            ),
        );
    }
    for phdr in layout.segments.iter().filter(|s| s.kind == PT_PHDR) {
        if !loads.iter().any(|l| l.maps(phdr.vaddr, phdr.memsz)) {
            add("phdrs-not-loaded", format!("PT_PHDR at {:#x} lies in no PT_LOAD", phdr.vaddr));
        }
    }
    for d in layout.segments.iter().filter(|s| s.kind == PT_DYNAMIC) {
        if !loads.iter().any(|l| l.maps_from_file(d.vaddr, d.filesz)) {
            add(
                "dynamic-not-loaded",
                format!("PT_DYNAMIC at {:#x} ({:#x} bytes) lies in no PT_LOAD's file bytes", d.vaddr, d.filesz),
            );
        }
    }
    for &(tag, address, size) in &layout.tables {
        if !loads.iter().any(|l| l.maps_from_file(address, size.unwrap_or(1))) {
            let extent = size.map(|s| format!(", {s:#x} bytes")).unwrap_or_default();
            add("table-not-loaded", format!("{tag} at {address:#x}{extent} lies in no PT_LOAD's file bytes"));
        }
    }
    for need in &facts.version_needs {
        if !facts.needed.contains(&need.file) {
            add(
                "version-need-not-needed",
                format!(
                    "the version needs name {} ({}), which DT_NEEDED does not: glibc stops with an assertion when it loads the file",
                    need.file,
                    need.versions.join(", ")
                ),
            );
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(offset: u64, vaddr: u64, size: u64) -> Segment {
        Segment { kind: PT_LOAD, offset, filesz: size, vaddr, memsz: size, align: 0x1000 }
    }

    fn facts(layout: Layout) -> ElfFacts {
        ElfFacts { layout, ..empty() }
    }

    fn empty() -> ElfFacts {
        ElfFacts {
            is_64: true,
            little_endian: true,
            machine: 62,
            elf_type: 3,
            needed: vec!["libc.so.6".into()],
            ..ElfFacts::default()
        }
    }

    fn good() -> Layout {
        Layout {
            file_len: 0x3000,
            phdrs: (0x40, 0x38 * 4),
            segments: vec![
                load(0, 0, 0x1000),
                load(0x1000, 0x11000, 0x1800),
                Segment { kind: PT_DYNAMIC, offset: 0x2000, filesz: 0x100, vaddr: 0x12000, memsz: 0x100, align: 8 },
            ],
            tables: vec![("DT_STRTAB", 0x300, Some(0x100)), ("DT_SYMTAB", 0x200, None)],
        }
    }

    fn rules(layout: Layout) -> Vec<&'static str> {
        loadability(&facts(layout)).into_iter().map(|f| f.rule).collect()
    }

    #[test]
    fn a_good_layout_passes_and_each_rule_catches_its_breach() {
        assert!(rules(good()).is_empty(), "{:?}", loadability(&facts(good())));
        let mut l = good();
        l.file_len = 0x2000;
        assert!(rules(l).contains(&"segment-outside-file"));
        let mut l = good();
        l.segments[1].vaddr = 0x11800;
        assert_eq!(rules(l), ["load-misaligned"]);
        let mut l = good();
        l.segments.swap(0, 1);
        assert!(rules(l).contains(&"load-order"));
        let mut l = good();
        l.segments.push(Segment { kind: PT_INTERP, offset: 0x200, filesz: 0x1c, vaddr: 0x200, memsz: 0x1c, align: 1 });
        assert!(rules(l.clone()).is_empty(), "a program whose headers the first PT_LOAD holds");
        l.phdrs.0 = 0x2800;
        assert_eq!(rules(l.clone()), ["phdrs-not-loaded"], "mapped 0x10000 above where AT_PHDR points");
        l.segments.insert(1, load(0x3000, 0x3000, 0x1000));
        l.file_len = 0x4000;
        l.phdrs.0 = 0x3100;
        assert!(rules(l).is_empty(), "a later segment mapped as the first holds them: AT_PHDR is right");
        let mut l = good();
        l.segments[2].vaddr = 0x40000;
        assert_eq!(rules(l), ["dynamic-not-loaded"]);
        let mut l = good();
        l.tables.push(("DT_GNU_HASH", 0x12900, None));
        assert_eq!(rules(l), ["table-not-loaded"], "past the file bytes of its segment (.bss)");
        let mut f = facts(good());
        f.version_needs
            .push(crate::VersionNeed { file: "libstdc++.so.6".into(), versions: vec!["GLIBCXX_3.4".into()] });
        assert_eq!(loadability(&f)[0].rule, "version-need-not-needed");
        assert!(loadability(&facts(Layout::default())).is_empty(), "an object file is not loaded");
    }
}
