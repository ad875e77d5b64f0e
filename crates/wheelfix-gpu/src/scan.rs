//! Finding device-code containers in a stream of bytes: clang offload bundles, compressed
//! bundles (CCOB) and NVIDIA fatbins, found by their magic as the bytes pass, each keeping only
//! what its report needs (the entry table, the code object headers, the decoded prefix of a
//! compressed bundle). A file in memory is one chunk of such a stream; a member too large to
//! hold is many.
//!
//! What a file's containers mean depends on where they lie (a bundle counts only inside
//! `.hip_fatbin`, a section whose place is known only at the end of an ELF file), so the scan
//! records every container by its file offset, and [`Hits::blob`] then reads the containers of
//! one range the way a reader of that range's bytes would: in order, each consuming its own
//! length, truncated at the range's end.
//!
//! Why one file: the three container kinds share one
//! streaming state machine (a container found in one chunk and finished in a later one, offsets
//! kept across chunks); split by format, each part would carry that bookkeeping again.

use crate::TargetId;
use std::collections::BTreeMap;
use wheelfix_base::le;

use super::codec::{Step, StreamDecoder};
use super::{
    BUNDLE_MAGIC, CCOB_MAGIC, GpuCode, KPAK_MAGIC, MAX_DECODED, NV_FATBIN_MAGIC, OFFLOAD_BINARY_MAGIC, amdgpu_target,
};
use wheelfix_base::platform::EM_AMDGPU;
use wheelfix_elf::ElfFacts;
use wheelfix_elf::header::{ElfIdent, gpu_header_fields};

/// The most bytes of one bundle's entry table kept.
const TABLE_CAP: usize = 4 << 20;
/// What is taken of a bundle's table first.
const FIRST_TAKE: usize = 4 << 10;
/// The first bytes of a compressed bundle's payload decoded: enough for most entry tables.
const TABLE_WANT: usize = 64 << 10;
/// The most entries of one fatbin followed.
const NV_ENTRIES_CAP: usize = 1 << 20;
/// Bytes of an `arch\0` value kept (OffloadBinary string maps).
const ARCH_VALUE: usize = 64;
/// The most ELF headers one file's scan keeps (64 bytes each).
const CODE_OBJECT_HITS: usize = 1 << 18;
/// What a 64-bit little-endian ELF file starts with (every AMDGPU code object).
const ELF64_LE: &[u8] = b"\x7fELF\x02\x01";

/// What a scan looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patterns {
    pub bundles: bool,
    pub nv_fatbins: bool,
    /// `arch\0` keys of OffloadBinary string maps.
    pub arch_keys: bool,
    /// 64-bit little-endian ELF headers: code objects embedded without a bundle.
    pub code_objects: bool,
}

impl Patterns {
    /// What host binaries carry: bundles and CCOBs (`.hip_fatbin`), fatbins (`.nv_fatbin`).
    pub const HOST: Patterns = Patterns { bundles: true, nv_fatbins: true, arch_keys: false, code_objects: true };
    const NONE: Patterns = Patterns { bundles: false, nv_fatbins: false, arch_keys: false, code_objects: false };
    /// What Windows binaries carry: bundles and CCOBs (`.hip_fat`), fatbins (`.nv_fatb`).
    pub const PE: Patterns = Patterns { bundles: true, nv_fatbins: true, ..Patterns::NONE };

    /// What a standalone container holds, by its first bytes; `None` if it is no container.
    pub fn for_container(head: &[u8]) -> Option<Patterns> {
        if head.starts_with(BUNDLE_MAGIC) || head.starts_with(CCOB_MAGIC) {
            Some(Patterns { bundles: true, ..Patterns::NONE })
        } else if head.starts_with(NV_FATBIN_MAGIC) {
            Some(Patterns { nv_fatbins: true, ..Patterns::NONE })
        } else if head.starts_with(OFFLOAD_BINARY_MAGIC) {
            Some(Patterns { arch_keys: true, ..Patterns::NONE })
        } else if head.starts_with(KPAK_MAGIC) || head.starts_with(super::AKS2_MAGIC) {
            Some(Patterns::NONE) // their tables of contents are read from the view
        } else {
            None
        }
    }
}

/// A container found, by the file offset of its magic, with the bytes its report needs.
#[derive(Debug)]
pub enum Hit {
    Bundle {
        at: u64,
        table: Vec<u8>,
        headers: BTreeMap<u64, Vec<u8>>,
    },
    Ccob(Box<Ccob>),
    Nv {
        at: u64,
        header: Vec<u8>,
        entries: Vec<(u64, Vec<u8>)>,
    },
    ArchKey {
        at: u64,
        value: Vec<u8>,
    },
    /// An ELF header (its first 64 bytes).
    Elf {
        at: u64,
        header: Vec<u8>,
    },
}

impl Hit {
    pub fn at(&self) -> u64 {
        match self {
            Hit::Bundle { at, .. } | Hit::Nv { at, .. } | Hit::ArchKey { at, .. } | Hit::Elf { at, .. } => *at,
            Hit::Ccob(c) => c.at,
        }
    }
}

/// A compressed bundle as it streamed past: its header and the decoded prefix of its payload.
#[derive(Debug)]
pub struct Ccob {
    pub at: u64,
    pub header: Vec<u8>,
    pub decoded: Vec<u8>,
    /// The decoder stopped: the payload's stream ended, or it could not be decoded (why).
    pub ended: bool,
    pub error: Option<String>,
    /// File offset just past the last compressed byte the decoder was given.
    pub input_end: u64,
    /// Code object headers by decoded offset, once compacted.
    headers: BTreeMap<u64, Vec<u8>>,
    decoder: Option<StreamDecoder>,
    want: usize,
    limit: usize,
    table_done: bool,
}

/// A hit still taking bytes.
#[derive(Debug)]
enum Open {
    Bundle { at: u64, table: Vec<u8>, entries: Option<Vec<(u64, usize)>>, headers: BTreeMap<u64, Vec<u8>> },
    Ccob(Box<Ccob>),
    Nv { at: u64, header: Vec<u8>, next: Option<u64>, end: u64, entries: Vec<(u64, Vec<u8>)> },
    ArchKey { at: u64, value: Vec<u8> },
    Elf { at: u64, header: Vec<u8> },
}

/// A push scanner: [`Scanner::feed`] the bytes of a file in order, then [`Scanner::finish`].
pub struct Scanner {
    patterns: Patterns,
    pos: u64,
    /// The last bytes of the input so far, for magics that straddle two chunks.
    tail: Vec<u8>,
    open: Vec<Open>,
    done: Vec<Hit>,
    /// ELF headers found so far (at most [`CODE_OBJECT_HITS`]).
    elf_hits: usize,
}

/// The longest magic, less one: how much of one chunk a magic may leave for the next.
const OVERLAP: usize = 23;

impl Scanner {
    pub fn new(patterns: Patterns) -> Scanner {
        Scanner::starting_at(patterns, 0)
    }

    /// A scanner fed the bytes of a file from offset `pos` on.
    pub fn starting_at(patterns: Patterns, pos: u64) -> Scanner {
        Scanner { patterns, pos, tail: Vec::new(), open: Vec::new(), done: Vec::new(), elf_hits: 0 }
    }

    /// Scan the next bytes of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let start = self.pos;
        // Magics that begin in the tail and end in this chunk.
        let head = &chunk[..chunk.len().min(OVERLAP)];
        let mut joined = Vec::with_capacity(self.tail.len() + head.len());
        joined.extend_from_slice(&self.tail);
        joined.extend_from_slice(head);
        let tail_start = start - self.tail.len() as u64;
        let mut found: Vec<(u64, Kind)> = Vec::new();
        for (kind, magic) in self.magics() {
            for i in memchr::memmem::find_iter(&joined, magic) {
                if i < self.tail.len() && i + magic.len() > self.tail.len() {
                    found.push((tail_start + i as u64, kind));
                }
            }
            for i in memchr::memmem::find_iter(chunk, magic) {
                found.push((start + i as u64, kind));
            }
        }
        found.sort_by_key(|(at, _)| *at);
        // A data section of fake magics costs 64 bytes each, up to a bound.
        found.retain(|(_, kind)| {
            let elf = matches!(kind, Kind::Elf);
            self.elf_hits += usize::from(elf);
            !elf || self.elf_hits <= CODE_OBJECT_HITS
        });
        // A hit that began in the tail gets the tail's bytes first.
        for (at, kind) in found {
            let mut open = Open::new(kind, at);
            if at < start {
                open.feed(at, &joined[(at - tail_start) as usize..self.tail.len()]);
            }
            self.open.push(open);
        }
        for open in &mut self.open {
            open.feed(start, chunk);
        }
        let (still, finished): (Vec<Open>, Vec<Open>) =
            std::mem::take(&mut self.open).into_iter().partition(|o| !o.done());
        self.open = still;
        self.done.extend(finished.into_iter().map(Open::into_hit));
        self.pos += chunk.len() as u64;
        let keep = chunk.len().min(OVERLAP);
        if keep == OVERLAP {
            self.tail.clear();
        } else {
            let drop = (self.tail.len() + keep).saturating_sub(OVERLAP);
            self.tail.drain(..drop);
        }
        self.tail.extend_from_slice(&chunk[chunk.len() - keep..]);
    }

    fn magics(&self) -> Vec<(Kind, &'static [u8])> {
        let mut out = Vec::new();
        if self.patterns.bundles {
            out.push((Kind::Bundle, BUNDLE_MAGIC));
            out.push((Kind::Ccob, CCOB_MAGIC));
        }
        if self.patterns.nv_fatbins {
            out.push((Kind::Nv, NV_FATBIN_MAGIC));
        }
        if self.patterns.arch_keys {
            out.push((Kind::ArchKey, b"arch\0".as_slice()));
        }
        if self.patterns.code_objects {
            out.push((Kind::Elf, ELF64_LE));
        }
        out
    }

    /// Every container found, ordered by offset.
    pub fn finish(mut self) -> Hits {
        self.done.extend(self.open.drain(..).map(Open::into_hit));
        self.done.sort_by_key(Hit::at);
        Hits { hits: self.done }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Bundle,
    Ccob,
    Nv,
    ArchKey,
    Elf,
}

/// The bytes a parsed entry table takes.
fn table_len(entries: &[super::BundleEntry]) -> usize {
    super::bundle::table_len(entries) as usize
}

/// Copy the part of `data` (which starts at file offset `at`) that falls in [want, want+len)
/// onto the end of `buf`, which holds the bytes from `want` so far.
fn take(buf: &mut Vec<u8>, want: u64, len: usize, at: u64, data: &[u8]) {
    let have = want + buf.len() as u64;
    let end = want + len as u64;
    if have >= end || at + data.len() as u64 <= have || at > have {
        return;
    }
    let from = (have - at) as usize;
    let to = ((end - at) as usize).min(data.len());
    buf.extend_from_slice(&data[from..to]);
}

impl Open {
    fn new(kind: Kind, at: u64) -> Open {
        match kind {
            Kind::Bundle => Open::Bundle { at, table: Vec::new(), entries: None, headers: BTreeMap::new() },
            Kind::Ccob => Open::Ccob(Box::new(Ccob {
                at,
                header: Vec::new(),
                decoded: Vec::new(),
                ended: false,
                error: None,
                input_end: at,
                headers: BTreeMap::new(),
                decoder: None,
                want: TABLE_WANT,
                limit: 0,
                table_done: false,
            })),
            Kind::Nv => Open::Nv { at, header: Vec::new(), next: None, end: 0, entries: Vec::new() },
            Kind::ArchKey => Open::ArchKey { at, value: Vec::new() },
            Kind::Elf => Open::Elf { at, header: Vec::new() },
        }
    }

    fn done(&self) -> bool {
        match self {
            Open::Bundle { table, entries, headers, .. } => match entries {
                None => table.len() >= TABLE_CAP,
                Some(e) => e.iter().all(|(off, _)| headers.get(off).is_some_and(|h| h.len() == 64)),
            },
            Open::Ccob(c) => c.ended,
            Open::Nv { header, next, .. } => header.len() == 16 && next.is_none(),
            Open::ArchKey { value, .. } => value.len() >= ARCH_VALUE + 5,
            Open::Elf { header, .. } => header.len() >= 64,
        }
    }

    fn feed(&mut self, pos: u64, data: &[u8]) {
        match self {
            Open::Bundle { at, table, entries, headers } => {
                // The table is taken in doubling steps (mostly it is a few hundred bytes; the
                // rest of a chunk taken for each of thousands of bundles would be a fresh buffer
                // each time), until it reads or this chunk has no more of it.
                while entries.is_none() {
                    let before = table.len();
                    take(table, *at, (before * 2).clamp(FIRST_TAKE, TABLE_CAP), pos, data);
                    match super::bundle_table(table) {
                        Ok(table_entries) => {
                            // Only the table's own bytes stay (a file of a thousand bundles
                            // must not hold a chunk for each).
                            table.truncate(table_len(&table_entries));
                            table.shrink_to_fit();
                            // The header of every code object: 64 bytes at its offset.
                            let wanted: Vec<(u64, usize)> = table_entries
                                .iter()
                                .filter(|e| !e.id.starts_with("host-"))
                                .filter_map(|e| at.checked_add(e.offset).map(|o| (o, 64)))
                                .collect();
                            for (off, _) in &wanted {
                                headers.entry(*off).or_default();
                            }
                            *entries = Some(wanted);
                            // The headers may lie within bytes already seen.
                            let (start, seen) = (*at, table.clone());
                            for (off, buf) in headers.iter_mut() {
                                take(buf, *off, 64, start, &seen);
                            }
                        }
                        Err(super::TableError::Truncated) => {
                            if table.len() == before || table.len() >= TABLE_CAP {
                                break;
                            }
                        }
                        // A lying table: nothing more to take.
                        Err(super::TableError::Lie(_)) => *entries = Some(Vec::new()),
                    }
                }
                if entries.is_some() {
                    for (off, buf) in headers.iter_mut() {
                        take(buf, *off, 64, pos, data);
                    }
                }
            }
            Open::Ccob(c) => c.feed(pos, data),
            Open::Nv { at, header, next, end, entries } => {
                if header.len() < 16 {
                    take(header, *at, 16, pos, data);
                    if header.len() == 16 {
                        let header_size = le::u16_at(header, 6).map_or(0, u64::from);
                        let payload = le::u64_at(header, 8).unwrap_or(0);
                        *end = (*at + header_size).saturating_add(payload);
                        *next = Some(*at + header_size);
                    }
                }
                // Follow the chain of entry headers as far as the bytes go.
                while let Some(entry) = *next {
                    if entry + 0x20 > *end || entries.len() >= NV_ENTRIES_CAP {
                        *next = None;
                        break;
                    }
                    if entries.last().is_none_or(|(o, _)| *o != entry) {
                        entries.push((entry, Vec::new()));
                    }
                    let buf = &mut entries.last_mut().expect("pushed").1;
                    take(buf, entry, 0x20, pos, data);
                    if buf.len() < 0x20 {
                        break;
                    }
                    let entry_header = le::u32_at(buf, 4).map_or(0, u64::from);
                    let size = le::u64_at(buf, 8).unwrap_or(0);
                    *next = (entry_header != 0).then(|| entry.saturating_add(entry_header).saturating_add(size));
                }
            }
            Open::ArchKey { at, value } => take(value, *at, ARCH_VALUE + 5, pos, data),
            Open::Elf { at, header } => take(header, *at, 64, pos, data),
        }
    }

    fn into_hit(self) -> Hit {
        match self {
            Open::Bundle { at, table, headers, .. } => Hit::Bundle { at, table, headers },
            Open::Ccob(mut c) => {
                c.compact();
                Hit::Ccob(c)
            }
            Open::Nv { at, header, entries, .. } => Hit::Nv { at, header, entries },
            Open::ArchKey { at, value } => Hit::ArchKey { at, value },
            Open::Elf { at, header } => Hit::Elf { at, header },
        }
    }
}

impl Ccob {
    /// The header, as far as it is known ([`super::bundle::CcobHeader`]).
    pub fn fields(&self) -> Result<super::bundle::CcobHeader, super::bundle::CcobError> {
        super::bundle::CcobHeader::parse(&self.header)
    }

    fn feed(&mut self, pos: u64, data: &[u8]) {
        if self.header.len() < 32 {
            take(&mut self.header, self.at, 32, pos, data);
        }
        if self.decoder.is_none() && !self.ended {
            let (method, uncompressed) = match self.fields() {
                Ok(h) => (h.method, h.uncompressed),
                // A header cut short waits for the next bytes; an unknown version or method
                // leaves nothing to decode.
                Err(e) => {
                    self.ended = e != super::bundle::CcobError::CutShort || self.header.len() >= 32;
                    return;
                }
            };
            let header = self.fields().map(|h| h.header_len()).unwrap_or(usize::MAX);
            if self.header.len() < header {
                return;
            }
            self.limit = (uncompressed as usize).min(MAX_DECODED);
            self.decoder = match StreamDecoder::for_method(method) {
                Some(Ok(d)) => Some(d),
                Some(Err(e)) => {
                    self.fail(e.to_string());
                    return;
                }
                None => {
                    self.ended = true;
                    return;
                }
            };
            self.input_end = self.at + header as u64;
        }
        let Ok(super::bundle::CcobHeader { total, .. }) = self.fields() else { return };
        // The compressed bytes of this chunk that belong to the payload and were not given yet.
        let payload_end = total.map_or(u64::MAX, |t| self.at.saturating_add(t));
        let chunk_end = pos + data.len() as u64;
        if self.input_end < pos || self.input_end >= chunk_end.min(payload_end) {
            if self.input_end >= payload_end {
                self.ended = true;
            }
            return;
        }
        let mut input = &data[(self.input_end - pos) as usize..(chunk_end.min(payload_end) - pos) as usize];
        while !self.ended && !input.is_empty() {
            let room = self.want.min(self.limit).saturating_sub(self.decoded.len());
            if room == 0 {
                self.next_want();
                continue;
            }
            let before = self.decoded.len();
            self.decoded.resize(before + room.min(256 << 10), 0);
            let decoded = self.decoder.as_mut().expect("set above").decode(input, &mut self.decoded[before..]);
            let Step { used, produced, ended: stream_end } = match decoded {
                Ok(step) => step,
                Err(e) => {
                    self.decoded.truncate(before);
                    self.fail(e.to_string());
                    return;
                }
            };
            self.decoded.truncate(before + produced);
            input = &input[used..];
            self.input_end += used as u64;
            if stream_end {
                self.ended = true;
            } else if used == 0 && produced == 0 {
                break;
            }
        }
        if self.input_end >= payload_end {
            self.ended = true;
        }
    }

    /// The decoded prefix holds `want` bytes: decide how much more the report needs — the
    /// whole entry table, then the header of the first code object — or stop.
    fn next_want(&mut self) {
        if self.decoded.len() >= self.limit {
            self.ended = true;
            return;
        }
        if !self.table_done {
            if !self.decoded.starts_with(BUNDLE_MAGIC) {
                self.ended = true;
                return;
            }
            match super::bundle_table(&self.decoded) {
                Ok(table) => {
                    self.table_done = true;
                    let first =
                        table.iter().filter(|e| !e.id.starts_with("host-") && e.size >= 64).map(|e| e.offset).min();
                    match first.filter(|o| (*o as usize) < self.limit) {
                        Some(offset) if offset as usize + 64 > self.decoded.len() => self.want = offset as usize + 64,
                        _ => self.ended = true,
                    }
                }
                Err(super::TableError::Truncated) => self.want = self.decoded.len() * 2,
                Err(super::TableError::Lie(_)) => self.ended = true,
            }
        } else {
            self.ended = true;
        }
    }

    /// Once decoding stopped, keep only what its report reads: the entry table and the code
    /// object headers within the decoded prefix.
    fn compact(&mut self) {
        self.decoder = None;
        if !self.decoded.starts_with(BUNDLE_MAGIC) {
            self.decoded.truncate(BUNDLE_MAGIC.len());
        } else if let Ok(table) = super::bundle_table(&self.decoded) {
            for entry in &table {
                let header = self.decoded.get(entry.offset as usize..).and_then(|p| p.get(..64));
                if let Some(header) = header {
                    self.headers.insert(entry.offset, header.to_vec());
                }
            }
            self.decoded.truncate(table_len(&table));
        }
        self.decoded.shrink_to_fit();
    }

    fn fail(&mut self, message: String) {
        self.error = Some(message);
        self.ended = true;
        self.decoder = None;
    }
}

/// Every container of a file, by offset.
/// The ranges of a host binary of `len` bytes that [`Hits::of_sections`] scans, and what for:
/// `.hip_fatbin` and `.nv_fatbin` for every container, the data sections for bundles, code
/// objects and fatbins that lie outside them (`.rodata`, `__nv_relfatbin`); the whole file when
/// it has no section header table. A `.hip_fatbin` whose header runs past the file is looked
/// for by its magic from where it says it starts (the whole file if that is past the end too;
/// see `super::past_the_file`).
fn scanned_ranges(facts: &ElfFacts, len: u64) -> Vec<(u64, u64, Patterns)> {
    if facts.sections.is_empty() {
        return vec![(0, len, Patterns::HOST)];
    }
    const SHF_EXECINSTR: u64 = 4;
    let code_objects = Patterns { bundles: true, code_objects: true, nv_fatbins: true, ..Patterns::NONE };
    let mut ranges = Vec::new();
    for s in &facts.sections {
        let patterns = match s.name.as_str() {
            ".hip_fatbin" | ".nv_fatbin" => Patterns::HOST,
            _ if s.flags & SHF_EXECINSTR == 0 && s.size >= 64 => code_objects,
            _ => continue,
        };
        if !s.has_file_bytes() {
            continue;
        }
        match s.offset.checked_add(s.size).filter(|end| *end <= len) {
            Some(end) => ranges.push((s.offset, end, patterns)),
            None if s.name == ".hip_fatbin" => ranges.push((super::past_the_file(s.offset, len), len, patterns)),
            None => {}
        }
    }
    ranges
}

#[derive(Debug, Default)]
pub struct Hits {
    pub hits: Vec<Hit>,
}

impl Hits {
    /// Scan a whole file held in memory.
    pub fn of(data: &[u8], patterns: Patterns) -> Hits {
        let mut scanner = Scanner::new(patterns);
        scanner.feed(data);
        scanner.finish()
    }

    /// Scan only the device-code sections of a host binary held in memory (where
    /// [`super::host_binary_view`] looks).
    pub fn of_sections(data: &[u8], facts: &ElfFacts) -> Hits {
        let mut hits = Vec::new();
        for (start, end, patterns) in scanned_ranges(facts, data.len() as u64) {
            let mut scanner = Scanner::starting_at(patterns, start);
            scanner.feed(&data[start as usize..end as usize]);
            hits.extend(scanner.finish().hits);
        }
        Hits::sorted(hits)
    }

    /// [`Hits::of_sections`] of a file of `len` bytes read by position, a chunk at a time: the
    /// memory it takes does not grow with the file (an installed library of several GB).
    pub fn of_sections_read(
        facts: &ElfFacts,
        len: u64,
        read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<Hits> {
        let mut hits = Vec::new();
        for (start, end, patterns) in scanned_ranges(facts, len) {
            hits.extend(Hits::of_range_read(start, end, patterns, read_at)?.hits);
        }
        Ok(Hits::sorted(hits))
    }

    /// The containers in bytes `start..end` of a file read by position, 4 MiB at a time (a
    /// device-code file on disk, scanned whole with [`Patterns::for_container`]).
    pub fn of_range_read(
        start: u64,
        end: u64,
        patterns: Patterns,
        read_at: &dyn Fn(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<Hits> {
        const CHUNK: u64 = 4 << 20;
        let mut scanner = Scanner::starting_at(patterns, start);
        let mut buf = Vec::new();
        let mut at = start;
        while at < end {
            let n = (end - at).min(CHUNK) as usize;
            buf.resize(n, 0);
            read_at(&mut buf, at)?;
            scanner.feed(&buf);
            at += n as u64;
        }
        Ok(scanner.finish())
    }

    fn sorted(mut hits: Vec<Hit>) -> Hits {
        hits.dedup_by_key(|h| h.at());
        hits.sort_by_key(Hit::at);
        Hits { hits }
    }

    fn within(&self, start: u64, end: u64) -> impl Iterator<Item = &Hit> {
        let from = self.hits.partition_point(|h| h.at() < start);
        self.hits[from..].iter().take_while(move |h| h.at() < end)
    }

    /// Read the bundles and compressed bundles of the file range [start, end) into `code`, as a
    /// reader of that range's bytes would: in order, each consuming its length (bundles may be
    /// concatenated, compressed ones padded to pages), truncated at the range's end.
    pub fn blob(&self, start: u64, end: u64, code: &mut GpuCode) {
        let mut at = start;
        let mut bundles = 0;
        let mut compressed: Vec<String> = Vec::new();
        for hit in self.within(start, end) {
            if hit.at() < at {
                continue;
            }
            let next = hit.at();
            let rel = next - start;
            let consumed = match hit {
                Hit::Bundle { table, headers, .. } => {
                    bundles += 1;
                    match read_bundle(next, table, headers, end, code) {
                        Ok(len) => len,
                        Err(e) => {
                            code.unreadable(format!("offload bundle at offset {rel}: {e}"));
                            BUNDLE_MAGIC.len() as u64
                        }
                    }
                }
                Hit::Ccob(ccob) => match read_ccob(ccob, end, code) {
                    Ok((len, what)) => {
                        compressed.push(what);
                        len
                    }
                    Err(e) => {
                        code.unreadable(format!("compressed bundle at offset {rel}: {e}"));
                        CCOB_MAGIC.len() as u64
                    }
                },
                _ => continue,
            };
            at = next + consumed.max(1);
        }
        if bundles > 0 {
            code.notes.push(wheelfix_base::log::plural(bundles, "offload bundle"));
        }
        if !compressed.is_empty() {
            let mut kinds = compressed.clone();
            kinds.sort();
            kinds.dedup();
            code.notes.push(format!(
                "{}: {}",
                wheelfix_base::log::plural(compressed.len(), "compressed bundle"),
                kinds.join(", ")
            ));
        }
    }

    /// Offload bundles in a host binary's data outside `.hip_fatbin` (tensorflow-rocm keeps the
    /// kernels it generates in `.rodata`, loaded by pointer), found by their magic: only those
    /// whose entry table reads, whose payloads lie after it, apart and within the range, and that
    /// hold a code object count (a string naming the magic, in code that reads bundles, is none).
    /// Returns each one's [start, end).
    pub fn bundles_in_data(&self, start: u64, end: u64, code: &mut GpuCode) -> Vec<(u64, u64)> {
        let mut spans = Vec::new();
        let mut at = start;
        for hit in self.within(start, end) {
            let Hit::Bundle { at: base, table, headers } = hit else { continue };
            if *base < at || !payloads_apart(table) {
                continue;
            }
            let mut one = GpuCode::new(&code.file, code.container);
            let Ok(len) = read_bundle(*base, table, headers, end, &mut one) else { continue };
            if one.objects == 0 || !one.bundle_problems.is_empty() {
                continue;
            }
            code.objects += one.objects;
            code.targets.extend(one.targets);
            code.bundle_targets.extend(one.bundle_targets);
            code.code_object_versions.extend(one.code_object_versions);
            super::Count::sum_into(&mut code.target_bytes, one.target_bytes);
            code.notes.extend(one.notes);
            spans.push((*base, base + len));
            at = base + len;
        }
        spans
    }

    /// Read the NVIDIA fatbins of the file range [start, end) into `code`.
    pub fn nv_fatbins(&self, start: u64, end: u64, code: &mut GpuCode) {
        self.read_fatbins(start, end, code, false);
    }

    /// Fatbins embedded in a host binary's data outside `.nv_fatbin` (`.rodata`, `__nv_relfatbin`),
    /// found by their magic: only those whose header is a fatbin's (version 1, a 16-byte header,
    /// a payload within the range, entries of a known kind) count. Returns how many there are.
    pub fn nv_fatbins_in_data(&self, start: u64, end: u64, code: &mut GpuCode) -> usize {
        self.read_fatbins(start, end, code, true)
    }

    fn read_fatbins(&self, start: u64, end: u64, code: &mut GpuCode, strict: bool) -> usize {
        let mut at = start;
        let mut found = 0;
        for hit in self.within(start, end) {
            let Hit::Nv { at: base, header, entries } = hit else { continue };
            if *base < at {
                continue;
            }
            let version = le::u16_at(header, 4);
            let header_size = le::u16_at(header, 6).map_or(16, u64::from);
            let payload = le::u64_at(header, 8).unwrap_or(0);
            let stop = (base + header_size).saturating_add(payload);
            if strict && (version != Some(1) || header_size != 16 || payload == 0 || stop > end) {
                continue;
            }
            let stop = stop.min(end);
            let mut targets = Vec::new();
            for (entry, bytes) in entries {
                if entry + 0x20 > stop || bytes.len() < 0x20 {
                    break;
                }
                // `bytes` holds 0x20 or more (checked above).
                let kind = le::u16_at(bytes, 0).unwrap_or(0);
                let entry_header = le::u32_at(bytes, 4).unwrap_or(0);
                let sm = le::u32_at(bytes, 0x1c).unwrap_or(0);
                if entry_header == 0 || (strict && (!matches!(kind, 1 | 2) || !(0x20..=0x1000).contains(&entry_header)))
                {
                    break;
                }
                targets.push(TargetId::from_code(if kind == 1 { format!("compute_{sm}") } else { format!("sm_{sm}") }));
            }
            if strict && targets.is_empty() {
                continue;
            }
            found += 1;
            code.objects += targets.len();
            code.targets.extend(targets);
            at = stop.max(base + 4);
        }
        found
    }

    /// The code objects embedded in [start, end) into `code`, each validated by its header and
    /// skipped over as a whole (an ELF magic inside one is not another), those inside the
    /// bundles `bundled` (sorted) left to them; returns how many ELF magics there are no code
    /// object.
    pub fn code_objects(&self, start: u64, end: u64, bundled: &[(u64, u64)], code: &mut GpuCode) -> usize {
        let (mut at, mut rejected) = (start, 0);
        let in_bundle = |offset: u64| {
            let i = bundled.partition_point(|&(_, to)| to <= offset);
            bundled.get(i).is_some_and(|&(from, _)| from <= offset)
        };
        for hit in self.within(start, end) {
            let Hit::Elf { at: hit_at, header } = hit else { continue };
            if *hit_at < at || in_bundle(*hit_at) {
                continue;
            }
            match super::embedded_object(header, end - hit_at) {
                Some((target, cov, length)) => {
                    code.objects += 1;
                    code.targets.push(target);
                    code.code_object_versions.extend(cov);
                    at = hit_at + length;
                }
                None => rejected += 1,
            }
        }
        rejected
    }

    /// The `arch` values of the OffloadBinary string maps in [start, end).
    pub fn arch_values(&self, start: u64, end: u64, code: &mut GpuCode) {
        for hit in self.within(start, end) {
            let Hit::ArchKey { at, value } = hit else { continue };
            let available = (end - at).min(value.len() as u64) as usize;
            let bytes = &value[5.min(available)..available];
            let stop = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let text = String::from_utf8_lossy(&bytes[..stop.min(ARCH_VALUE)]).into_owned();
            if text.starts_with("gfx") || text.starts_with("sm_") {
                code.targets.push(TargetId::from_code(text));
                code.objects += 1;
            }
        }
    }
}

/// One uncompressed bundle whose magic is at `at`, read up to the range's `end`: returns its
/// length (the end of its last entry) so the reading continues after it.
/// Whether the payloads of a bundle's entry table lie after the table and apart (as every
/// bundle clang writes has them, and as `thin` needs them); false when the table does not read.
fn payloads_apart(table: &[u8]) -> bool {
    let Ok(entries) = super::bundle_table(table) else { return false };
    let mut payloads: Vec<(u64, u64)> = entries.iter().filter(|e| e.size > 0).map(|e| (e.offset, e.size)).collect();
    payloads.sort_unstable();
    let mut previous_end = 32 + entries.iter().map(|e| 24 + e.id.len() as u64).sum::<u64>();
    payloads.iter().all(|&(offset, size)| {
        let fits = offset >= previous_end;
        previous_end = offset.saturating_add(size);
        fits
    })
}

/// Why a bundle the scan met cannot be read; the report says it of the bundle's offset.
#[derive(Debug, thiserror::Error)]
enum BundleProblem {
    #[error("truncated entry table")]
    Truncated,
    /// The table's header lies (a count or size no file could hold).
    #[error("{0}")]
    Lie(String),
    #[error(transparent)]
    Header(#[from] super::bundle::CcobError),
    #[error("claims {claims} bytes, but only {remain} remain")]
    PastEnd { claims: u64, remain: u64 },
    #[error("unknown compression method {0}")]
    Method(u16),
    #[error("cannot decode ({method}): {problem}")]
    Undecodable { method: &'static str, problem: String },
    #[error("does not decode to an offload bundle")]
    NotABundle,
    /// What a compressed bundle decodes to ends inside its table.
    #[error("the entry table is truncated")]
    DecodedTruncated,
}

impl From<super::TableError> for BundleProblem {
    fn from(e: super::TableError) -> BundleProblem {
        match e {
            super::TableError::Truncated => BundleProblem::Truncated,
            super::TableError::Lie(e) => BundleProblem::Lie(e),
        }
    }
}

fn read_bundle(
    at: u64,
    table: &[u8],
    headers: &BTreeMap<u64, Vec<u8>>,
    end: u64,
    code: &mut GpuCode,
) -> Result<u64, BundleProblem> {
    let available = (end - at).min(table.len() as u64) as usize;
    let entries = super::bundle_table(&table[..available])?;
    let limit = end - at;
    let mut len = 32 + entries.iter().map(|e| 24 + e.id.len() as u64).sum::<u64>();
    for entry in &entries {
        match entry.offset.checked_add(entry.size).filter(|e| *e <= limit) {
            Some(e) => len = len.max(e),
            None => code.unreadable(format!("entry `{}`: its code object lies past the end of the bundle", entry.id)),
        }
    }
    let header = |entry: &super::BundleEntry| -> Option<&[u8]> {
        let off = at.checked_add(entry.offset)?;
        (entry.offset.checked_add(64)? <= limit).then(|| headers.get(&off).map(Vec::as_slice)).flatten()
    };
    record_entries(&entries, header, code);
    Ok(len)
}

/// One compressed bundle, read up to the range's `end`: returns its length and a description
/// (`CCOB v3 zstd`).
fn read_ccob(ccob: &Ccob, end: u64, code: &mut GpuCode) -> Result<(u64, String), BundleProblem> {
    let h = ccob.fields()?;
    let (version, method, header, total) = (h.version, h.method, h.header_len(), h.total);
    let remaining = end - ccob.at;
    let len = match total {
        Some(t) if t < header as u64 || t > remaining => {
            return Err(BundleProblem::PastEnd { claims: t, remain: remaining });
        }
        Some(t) => t,
        None => remaining, // v1 has no total size: it runs to the end of the range
    };
    let method_name = match method {
        0 => "zlib",
        1 => "zstd",
        m => return Err(BundleProblem::Method(m)),
    };
    let undecodable = |problem: String| BundleProblem::Undecodable { method: method_name, problem };
    if let Some(e) = &ccob.error {
        return Err(undecodable(e.to_string()));
    }
    if ccob.input_end > end && total.is_none() {
        return Err(undecodable("the stream runs past the end".into()));
    }
    if !ccob.decoded.starts_with(BUNDLE_MAGIC) {
        return Err(BundleProblem::NotABundle);
    }
    let table = match super::bundle_table(&ccob.decoded) {
        Err(super::TableError::Truncated) => return Err(BundleProblem::DecodedTruncated),
        read => read?,
    };
    let decoded = &ccob.decoded;
    let header_at = |entry: &super::BundleEntry| {
        ccob.headers.get(&entry.offset).map(Vec::as_slice).or_else(|| decoded.get(entry.offset as usize..)?.get(..64))
    };
    record_entries(&table, header_at, code);
    Ok((len, format!("CCOB v{version} {method_name}")))
}

/// Count the entries of a bundle table into `code`: targets, and the code object version of
/// every entry whose payload header `header` gives.
fn record_entries<'a>(
    table: &[super::BundleEntry],
    header: impl Fn(&super::BundleEntry) -> Option<&'a [u8]>,
    code: &mut GpuCode,
) {
    let mut this_bundle = Vec::new();
    for entry in table {
        if entry.id.starts_with("host-") {
            continue;
        }
        // The code object's own header, when it is an AMDGPU one: its version, and its target
        // when the id names none.
        let amdgpu = header(entry)
            .filter(|payload| ElfIdent::parse(payload).is_some_and(|i| i.machine == EM_AMDGPU))
            .and_then(gpu_header_fields)
            .map(|(flags, os_abi, abi_version)| amdgpu_target(flags, os_abi, abi_version));
        let target = match (bundle_target(&entry.id), &amdgpu) {
            (Some(target), _) => TargetId::from_code(target),
            (None, Some((target, _))) => {
                code.notes.push(format!("entry id `{}` names no target: {target} read from its code object", entry.id));
                target.clone()
            }
            (None, None) => {
                code.notes.push(format!("entry id `{}` has no target", entry.id));
                continue;
            }
        };
        code.objects += 1;
        code.target_bytes.entry(target.clone()).or_default().add(entry.size);
        this_bundle.push(target.clone());
        code.targets.push(target);
        if let Some((_, Some(cov))) = amdgpu {
            code.code_object_versions.push(cov);
        }
    }
    code.bundle_targets.push(this_bundle);
}

/// The target an offload bundle entry id names, in every form clang has written:
/// `<kind>-<triple>--<target id>` (an empty environment before the target, LLVM 12 and later,
/// `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`) and `<kind>-<arch>-<vendor>-<os>-<processor>`
/// (ROCm 4.x and earlier, `hip-amdgcn-amd-amdhsa-gfx1010`).
pub fn bundle_target(id: &str) -> Option<&str> {
    if let Some((_, target)) = id.split_once("--") {
        return Some(target).filter(|t| !t.is_empty());
    }
    let (_kind, triple_and_target) = id.split_once('-')?;
    let target = triple_and_target.splitn(4, '-').nth(3)?;
    Some(target).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle with a host entry and one gfx942 entry whose payload is a code object header.
    fn bundle() -> Vec<u8> {
        let id_host = b"host-x86_64-unknown-linux-gnu-";
        let id = b"hipv4-amdgcn-amd-amdhsa--gfx942";
        let mut out = BUNDLE_MAGIC.to_vec();
        out.extend(2u64.to_le_bytes());
        let table = 32 + 24 + id_host.len() + 24 + id.len();
        out.extend(0u64.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend((id_host.len() as u64).to_le_bytes());
        out.extend(id_host);
        out.extend((table as u64).to_le_bytes());
        out.extend(64u64.to_le_bytes());
        out.extend((id.len() as u64).to_le_bytes());
        out.extend(id);
        let mut object = vec![0u8; 64];
        object[..4].copy_from_slice(b"\x7fELF");
        object[4] = 2;
        object[5] = 1;
        object[7] = 64;
        object[8] = 4;
        object[18..20].copy_from_slice(&224u16.to_le_bytes());
        object[48..52].copy_from_slice(&0x54cu32.to_le_bytes());
        out.extend(object);
        out
    }

    /// A bundle of `n` gfx942 entries, each with its own code object header after the table.
    fn bundle_of(n: usize) -> Vec<u8> {
        let id = b"hipv4-amdgcn-amd-amdhsa--gfx942";
        let table = 32 + n * (24 + id.len());
        let mut out = BUNDLE_MAGIC.to_vec();
        out.extend((n as u64).to_le_bytes());
        for i in 0..n {
            out.extend(((table + 64 * i) as u64).to_le_bytes());
            out.extend(64u64.to_le_bytes());
            out.extend((id.len() as u64).to_le_bytes());
            out.extend(id);
        }
        let object = &bundle()[bundle().len() - 64..];
        for _ in 0..n {
            out.extend(object);
        }
        out
    }

    #[test]
    fn a_table_larger_than_the_first_take_is_read_in_one_chunk_and_in_many() {
        // 22 KB of table: taken in doubling steps from 4 KiB within one chunk.
        let mut data = vec![7u8; 100];
        data.extend(bundle_of(400));
        let mut whole = GpuCode::new("x", super::super::Container::HipFatbin);
        Hits::of(&data, Patterns::HOST).blob(0, data.len() as u64, &mut whole);
        assert_eq!(whole.objects, 400);
        for size in [data.len(), 5000, 4096, 333] {
            let mut scanner = Scanner::new(Patterns::HOST);
            for chunk in data.chunks(size) {
                scanner.feed(chunk);
            }
            let mut code = GpuCode::new("x", super::super::Container::HipFatbin);
            scanner.finish().blob(0, data.len() as u64, &mut code);
            assert_eq!((code.objects, &code.targets, &code.notes), (400, &whole.targets, &whole.notes), "{size}");
        }
    }

    #[test]
    fn chunks_of_any_size_find_what_one_chunk_finds() {
        let mut data = vec![7u8; 1000];
        data.extend(bundle());
        data.extend(vec![9u8; 300]);
        data.extend(bundle());
        let mut whole = GpuCode::new("x", super::super::Container::HipFatbin);
        Hits::of(&data, Patterns::HOST).blob(0, data.len() as u64, &mut whole);
        assert_eq!(whole.objects, 2);
        assert_eq!(whole.code_object_versions, [6, 6]);
        for size in [1, 3, 7, 24, 100, 4096] {
            let mut scanner = Scanner::new(Patterns::HOST);
            for chunk in data.chunks(size) {
                scanner.feed(chunk);
            }
            let mut code = GpuCode::new("x", super::super::Container::HipFatbin);
            scanner.finish().blob(0, data.len() as u64, &mut code);
            assert_eq!(
                (code.objects, &code.targets, &code.notes),
                (whole.objects, &whole.targets, &whole.notes),
                "{size}"
            );
            assert_eq!(code.code_object_versions, whole.code_object_versions, "{size}");
        }
        // A range that ends inside the second bundle truncates it, as a reader of those bytes sees.
        let mut cut = GpuCode::new("x", super::super::Container::HipFatbin);
        Hits::of(&data, Patterns::HOST).blob(0, data.len() as u64 - 10, &mut cut);
        assert_eq!(cut.objects, 2);
        assert_eq!(cut.code_object_versions, [6], "the second header lies past the end");
    }
}
