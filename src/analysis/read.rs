//! Reading members within the memory budget ([`super::budget`]).
//!
//! A member small enough for its share of the budget is inflated whole in one call (libdeflate,
//! the fastest way). A larger one streams past in chunks, once: hashed as it goes, scanned for
//! device-code containers ([`crate::gpu::scan`]), and, for an ELF file, with only the byte
//! ranges its facts need kept ([`crate::elf::ranges`]). When a range the facts need had already
//! passed before anything announced it, another pass keeps exactly the ranges the first one
//! learned about; a file never needs more than a few.

use sha2::{Digest, Sha256};

use super::budget::{MemoryBudget, Permit};
use super::copy::HoledCopy;
use crate::elf::ranges::{HeaderLayout, Range, Segments, needed_ranges};
use crate::elf::view::{FileView, Kept};
use crate::gpu::scan::{Hits, Patterns, Scanner};
use crate::wheel::record::HashAlgorithm;
use crate::wheel::{Member, MemberDigest, Wheel, WheelError};
use crate::zip::blocks::BlockMarks;
use crate::zip::{Buffer, ParallelInflate};

/// Bytes of one streamed chunk.
const CHUNK: usize = 1 << 20;
/// What a stream takes besides the ranges it keeps: its chunk, the compressed input buffer,
/// the decoder's window and the scanner's state.
const STREAM_COST: u64 = 2 << 20;
/// The most of a file's first read-only segment kept on speculation.
const PREFIX_CAP: u64 = 64 << 20;
/// The prefix kept on speculation when the code shares the first segment with the tables (one
/// read-execute segment from offset 0, as aarch64 linkers lay it out): the tables then lie at
/// its very start, and larger ones cost a second pass rather than tens of MB held.
const SHARED_SEGMENT_PREFIX: u64 = 8 << 20;
/// Bytes before the section header table kept for the section names (linkers put them there).
const NAMES_WINDOW: u64 = 64 << 10;
/// Bytes kept on each side of a section names table recognised by its content.
const NAMES_AROUND: u64 = 16 << 10;
/// The first bytes of an ELF file, always kept: headers, interpreter, notes.
const HEAD_KEEP: u64 = 64 << 10;
/// More passes than this over one member mean its headers keep announcing new ranges.
const MAX_PASSES: usize = 4;

/// Whether a member is read whole: its compressed and inflated bytes fit its worker's share.
pub fn reads_whole(member: &Member, budget: &MemoryBudget) -> bool {
    let share = budget.total() / (2 * rayon::current_num_threads() as u64).max(2);
    member.size.saturating_add(member.compressed_size) <= share.max(1 << 20)
}

/// A member inflated whole, with the budget it takes.
pub fn whole<'b>(wheel: &Wheel, member: &Member, budget: &'b MemoryBudget) -> Result<(Buffer, Permit<'b>), WheelError> {
    let permit = budget.take(member.size.saturating_add(member.compressed_size));
    Ok((wheel.archive.read(member)?, permit))
}

/// [`whole`], with where its deflate blocks start when `marking` (for a copy kept for `thin`).
pub fn whole_marking<'b>(
    wheel: &Wheel,
    member: &Member,
    budget: &'b MemoryBudget,
    marking: bool,
) -> Result<(Buffer, Option<BlockMarks>, Permit<'b>), WheelError> {
    if !marking {
        let (data, permit) = whole(wheel, member, budget)?;
        return Ok((data, None, permit));
    }
    let permit = budget.take(member.size.saturating_add(member.compressed_size));
    let (data, marks) = wheel.archive.zip.read_marking(member)?;
    Ok((data, marks, permit))
}

/// sha256 and the RECORD row's other algorithm, fed as the bytes pass.
pub struct Digester {
    sha256: Sha256,
    other: Option<crate::wheel::record::Hasher>,
}

impl Digester {
    pub fn new(other: Option<HashAlgorithm>) -> Digester {
        Digester { sha256: Sha256::new(), other: other.map(HashAlgorithm::hasher) }
    }

    pub fn update(&mut self, data: &[u8]) {
        self.sha256.update(data);
        if let Some(h) = &mut self.other {
            h.update(data);
        }
    }

    pub fn finish(self) -> MemberDigest {
        MemberDigest { sha256: self.sha256.finalize().into(), other: self.other.map(|h| h.finish()) }
    }

    /// The digest of bytes held whole.
    pub fn of(data: &[u8], other: Option<HashAlgorithm>) -> MemberDigest {
        let mut d = Digester::new(other);
        d.update(data);
        d.finish()
    }
}

/// Learns, from what was kept so far, which ranges to keep next.
pub trait Learn {
    /// `seen`: the bytes of the file streamed so far. Returns new ranges to keep.
    fn learn(&mut self, kept: &Kept, seen: u64) -> Vec<Range>;

    /// Ranges to keep recognised in the bytes themselves, before [`Learn::learn`] sees them.
    fn look(&mut self, _pos: u64, _chunk: &[u8]) -> Vec<Range> {
        Vec::new()
    }
}

/// Keeps the ranges it was given and learns nothing.
pub struct Fixed;

impl Learn for Fixed {
    fn learn(&mut self, _: &Kept, _: u64) -> Vec<Range> {
        Vec::new()
    }
}

/// One streaming pass: what to keep, scan and hash.
pub struct Pass<'a, 'c> {
    pub keep: Vec<Range>,
    pub learn: &'a mut dyn Learn,
    pub scanner: Option<&'a mut Scanner>,
    pub digester: Option<&'a mut Digester>,
    /// Where every byte is also written (a copy kept for the writer, which also gets where
    /// the member's deflate blocks start).
    pub copy: Option<&'a mut HoledCopy<'c>>,
    /// Inflate on several threads ([`ZipReader::stream_with`](crate::zip::ZipReader::stream_with)).
    pub parallel: Option<&'a ParallelInflate>,
}

/// Members at least this large are hashed on a thread of their own beside the inflate
/// ([`crate::parallel::beside`]) when the pool has more than one thread: one such member can
/// take longer than all the others together, and its hash would otherwise follow each chunk.
const HASH_BESIDE_MIN: u64 = 64 << 20;
/// Chunks waiting for that thread.
const HASH_BESIDE_DEPTH: usize = 2;
/// What a hash beside takes: the chunks waiting, the one it hashes.
const HASH_BESIDE_COST: u64 = (HASH_BESIDE_DEPTH as u64 + 1) * CHUNK as u64;

/// Whether a member streamed and hashed is hashed beside its inflate.
fn hashes_beside(member: &Member) -> bool {
    member.size >= HASH_BESIDE_MIN && rayon::current_num_threads() > 1
}

/// Stream a member once, keeping what the pass asks for.
pub fn stream(wheel: &Wheel, member: &Member, pass: Pass<'_, '_>) -> Result<Kept, WheelError> {
    match pass.digester {
        Some(digester) if hashes_beside(member) => {
            // The GPU scan goes beside too: on the inflating thread, which bounds the pass, its
            // search for magics took a tenth of a large library's time; beside, the hash
            // leaves most of a core free.
            let mut scanner = pass.scanner;
            let pass = Pass { digester: None, scanner: None, ..pass };
            crate::parallel::beside(
                HASH_BESIDE_DEPTH,
                |bytes| {
                    digester.update(bytes);
                    if let Some(s) = scanner.as_deref_mut() {
                        s.feed(bytes);
                    }
                },
                |handoff| stream_hashing(wheel, member, pass, &mut |chunk, len| handoff.pass(chunk, len)),
            )
        }
        _ => stream_hashing(wheel, member, pass, &mut |chunk, _| chunk),
    }
}

/// [`stream`], each chunk given to `hand_over` once the pass is done with it (a hash beside the
/// inflate), which gives back the buffer to fill next.
fn stream_hashing(
    wheel: &Wheel,
    member: &Member,
    pass: Pass<'_, '_>,
    hand_over: &mut dyn FnMut(Vec<u8>, usize) -> Vec<u8>,
) -> Result<Kept, WheelError> {
    use std::io::Read;
    let Pass { keep: mut wanted, learn, mut scanner, mut digester, mut copy, parallel } = pass;
    let mut kept = Kept::new(member.size);
    let mut reader = match copy {
        Some(_) => wheel.archive.zip.stream_marking(member)?,
        None => wheel.archive.zip.stream_with(member, parallel)?,
    };
    let mut chunk = vec![0u8; CHUNK.min(member.size.max(1) as usize)];
    let mut pos = 0u64;
    loop {
        // Fill the chunk: learning works on whole chunks, and few large calls are cheaper.
        let mut len = 0;
        while len < chunk.len() {
            let n = reader.read(&mut chunk[len..]).map_err(|e| stream_error(member, &e))?;
            if n == 0 {
                break;
            }
            len += n;
        }
        if len == 0 {
            break;
        }
        let data = &chunk[..len];
        if let Some(d) = digester.as_deref_mut() {
            d.update(data);
        }
        if let Some(s) = scanner.as_deref_mut() {
            s.feed(data);
        }
        if let Some(c) = copy.as_deref_mut() {
            std::io::Write::write_all(c, data).map_err(|e| stream_error(member, &e))?;
            // What the copy leaves out needs no block marks: inflated without stopping.
            reader.set_quiet(c.holes_from(pos + len as u64));
        }
        let seen_here = learn.look(pos, data);
        wanted.extend(seen_here);
        keep_chunk(&mut wanted, learn, pos, data, &mut kept);
        pos += len as u64;
        wanted.retain(|(o, s)| o.saturating_add(*s) > pos);
        chunk = hand_over(chunk, len);
    }
    if let Some(c) = copy {
        c.set_marks(reader.take_marks());
    }
    Ok(kept)
}

/// Stream a member from its start until every range of `ranges` has passed, keeping them in
/// `kept`; what follows the last one is never inflated.
/// Stream `member` as far as the last of `ranges` and keep them; returns how many bytes of it
/// were inflated.
fn stream_ranges(wheel: &Wheel, member: &Member, ranges: &[Range], kept: &mut Kept) -> Result<u64, WheelError> {
    use std::io::Read;
    let stop = ranges.iter().map(|(o, s)| o.saturating_add(*s)).max().unwrap_or(0).min(member.size);
    let mut reader = wheel.archive.zip.stream(member)?;
    let mut chunk = vec![0u8; CHUNK.min(stop.max(1) as usize)];
    let mut wanted = ranges.to_vec();
    let mut pos = 0u64;
    while pos < stop {
        let want = (chunk.len() as u64).min(stop - pos) as usize;
        let n = reader.read(&mut chunk[..want]).map_err(|e| stream_error(member, &e))?;
        if n == 0 {
            break;
        }
        keep_chunk(&mut wanted, &mut Fixed, pos, &chunk[..n], kept);
        pos += n as u64;
    }
    Ok(pos)
}

/// A stream's error as the archive's error naming the member (once).
fn stream_error(member: &Member, e: &std::io::Error) -> WheelError {
    let text = e.to_string();
    let prefix = format!("member `{}`: ", member.name);
    let message = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
    WheelError::Archive(crate::wheel::ArchiveError::Member { name: member.name.to_string(), message })
}

/// Keep the parts of one chunk that the wanted ranges cover, learning new ranges from them.
fn keep_chunk(wanted: &mut Vec<Range>, learn: &mut dyn Learn, pos: u64, data: &[u8], kept: &mut Kept) {
    let end = pos + data.len() as u64;
    let mut applied = 0;
    loop {
        for &(offset, size) in &wanted[applied..] {
            let (from, to) = (offset.max(pos), offset.saturating_add(size).min(end));
            if from < to {
                kept.insert(from, &data[(from - pos) as usize..(to - pos) as usize]);
            }
        }
        applied = wanted.len();
        let new = learn.learn(kept, end);
        if new.is_empty() {
            return;
        }
        // Ranges applied to earlier chunks stay in the list for later ones.
        let fresh: Vec<Range> = new.into_iter().filter(|r| r.1 > 0 && !wanted.contains(r)).collect();
        if fresh.is_empty() {
            return;
        }
        // Re-apply the list from the first new range on.
        wanted.extend(fresh);
    }
}

/// The first pass over an ELF file: learns from its headers where the ranges lie.
pub struct ElfLearner<'p> {
    prefix_cap: u64,
    layout: Option<HeaderLayout>,
    segments: Option<Segments>,
    dynamic_read: bool,
    /// The stream's permit, shrunk once the prefix to keep is known.
    permit: Option<(&'p Permit<'p>, u64)>,
}

impl<'p> ElfLearner<'p> {
    pub fn new(prefix_cap: u64) -> ElfLearner<'p> {
        ElfLearner { prefix_cap, layout: None, segments: None, dynamic_read: false, permit: None }
    }

    /// Give back what `permit` holds beyond `base` and the prefix, once that is known.
    pub fn shrinking(mut self, permit: &'p Permit<'p>, base: u64) -> ElfLearner<'p> {
        self.permit = Some((permit, base));
        self
    }

    /// What to keep from the start.
    pub fn first_ranges(len: u64) -> Vec<Range> {
        vec![(0, HEAD_KEEP.min(len))]
    }
}

impl Learn for ElfLearner<'_> {
    /// The section names table, wherever it lies: unstripped libraries put the symbol tables
    /// (tens of MB) between it and the section headers, beyond the window kept before those.
    /// Its own name is in it.
    fn look(&mut self, pos: u64, chunk: &[u8]) -> Vec<Range> {
        memchr::memmem::find_iter(chunk, b"\0.shstrtab\0")
            .map(|at| {
                let at = pos + at as u64;
                let start = at.saturating_sub(NAMES_AROUND);
                (start, at - start + NAMES_AROUND)
            })
            .collect()
    }

    fn learn(&mut self, kept: &Kept, _seen: u64) -> Vec<Range> {
        let mut out = Vec::new();
        if self.layout.is_none() {
            let Some(layout) = kept.get(0, 64.min(kept_len(kept))).ok().and_then(HeaderLayout::parse) else {
                return out;
            };
            out.push(layout.program_headers);
            if let Some((offset, size)) = layout.section_headers {
                out.push((offset, size));
                let names = offset.saturating_sub(NAMES_WINDOW);
                out.push((names, offset - names));
            }
            self.layout = Some(layout);
        }
        let layout = self.layout.expect("set above");
        if self.segments.is_none() {
            let (offset, size) = layout.program_headers;
            let Some(headers) = kept.get(offset, size).ok().and_then(|b| layout.program_headers(b)) else {
                return out;
            };
            let segments = Segments::of(&headers);
            out.extend(&segments.ranges);
            let prefix = segments.first_code.unwrap_or(SHARED_SEGMENT_PREFIX).min(self.prefix_cap).min(kept_len(kept));
            out.push((0, prefix));
            if let Some((permit, base)) = self.permit {
                permit.shrink_to(base + prefix);
            }
            self.segments = Some(segments);
        }
        let segments = self.segments.as_ref().expect("set above");
        if !self.dynamic_read
            && let Some((offset, size)) = segments.dynamic
            && let Ok(bytes) = kept.get(offset, size)
        {
            self.dynamic_read = true;
            out.extend(segments.dynamic_tables(bytes, &layout, 16 << 20));
        }
        out
    }
}

fn kept_len(kept: &Kept) -> u64 {
    FileView::len(kept)
}

/// What the first pass over a large member should keep and scan.
pub enum FirstPass {
    /// An ELF file's facts, and the containers of device code in it.
    Elf,
    /// An ELF file's facts only.
    ElfFactsOnly,
    Container(Patterns),
    /// A PE binary with device code: scanned, and these ranges kept (a kpack marker).
    Pe(Vec<Range>),
    /// Only hashed.
    Nothing,
}

/// A large member streamed: the ranges kept, the containers found, the digest when asked.
pub struct Streamed<'b> {
    pub kept: Kept,
    pub hits: Hits,
    pub digest: Option<MemberDigest>,
    pub passes: usize,
    _permit: Permit<'b>,
}

/// The first pass over a member too large to read whole.
pub fn first_pass<'b>(
    wheel: &Wheel,
    member: &Member,
    what: FirstPass,
    hash: Option<Option<HashAlgorithm>>,
    budget: &'b MemoryBudget,
    parallel: Option<&ParallelInflate>,
    copy: Option<&mut HoledCopy<'_>>,
) -> Result<Streamed<'b>, WheelError> {
    let prefix_cap = PREFIX_CAP.min(budget.total() / 3);
    let base = STREAM_COST + 2 * HEAD_KEEP;
    let elf = matches!(what, FirstPass::Elf | FirstPass::ElfFactsOnly);
    let cost = if elf { base + prefix_cap } else { STREAM_COST };
    let beside = if hash.is_some() && hashes_beside(member) { HASH_BESIDE_COST } else { 0 };
    let beside = beside + copy.as_ref().map_or(0, |c| c.memory());
    let permit = budget.take(cost + beside);
    // Several threads for a member large enough to split, when their buffers are free now
    // (else it streams as every other member does).
    let parallel = parallel.filter(|p| p.wants(member));
    let parallel_permit = parallel.and_then(|p| budget.try_take(p.memory()));
    let parallel = parallel.filter(|_| parallel_permit.is_some());
    let (keep, mut learn, patterns): (Vec<Range>, Box<dyn Learn + '_>, Option<Patterns>) = match what {
        FirstPass::Elf | FirstPass::ElfFactsOnly => (
            ElfLearner::first_ranges(member.size),
            Box::new(ElfLearner::new(prefix_cap).shrinking(&permit, base + beside)),
            matches!(what, FirstPass::Elf).then_some(Patterns::HOST),
        ),
        FirstPass::Container(p) => (vec![(0, 64.min(member.size))], Box::new(ContainerLearner), Some(p)),
        FirstPass::Pe(ranges) => {
            let keep = ranges.into_iter().filter(|&(o, s)| o.saturating_add(s) <= member.size).collect();
            (keep, Box::new(Fixed), Some(Patterns::PE))
        }
        FirstPass::Nothing => (Vec::new(), Box::new(Fixed), None),
    };
    let mut scanner = patterns.map(Scanner::new);
    let mut digester = hash.map(Digester::new);
    let kept = stream(
        wheel,
        member,
        Pass { keep, learn: learn.as_mut(), scanner: scanner.as_mut(), digester: digester.as_mut(), copy, parallel },
    )?;
    drop(learn);
    drop(parallel_permit);
    Ok(Streamed {
        kept,
        hits: scanner.map(Scanner::finish).unwrap_or_default(),
        digest: digester.map(Digester::finish),
        passes: 1,
        _permit: permit,
    })
}

/// Learns a kpack archive's table of contents from its header.
struct ContainerLearner;

impl Learn for ContainerLearner {
    fn learn(&mut self, kept: &Kept, _seen: u64) -> Vec<Range> {
        let len = kept_len(kept);
        match kept.get(0, 16.min(len)) {
            Ok(head) if head.starts_with(crate::gpu::KPAK_MAGIC) => crate::gpu::kpack_toc_range(head, len)
                .map(|(start, end)| vec![(start, end - start)])
                .unwrap_or_default(),
            // An AOTriton archive's directory and first headers lie at the start of its stream.
            Ok(head) if head.starts_with(crate::gpu::AKS2_MAGIC) => {
                vec![(0, len.min(crate::gpu::aks2::KEEP))]
            }
            _ => Vec::new(),
        }
    }
}

impl<'b> Streamed<'b> {
    /// Another pass keeping exactly the ranges the ELF headers kept so far name, and `extra`
    /// (a range a reader asked for that was not kept). `None` after too many passes.
    pub fn again(
        self,
        wheel: &Wheel,
        member: &Member,
        extra: &[Range],
        budget: &'b MemoryBudget,
    ) -> Result<Option<Streamed<'b>>, WheelError> {
        if self.passes >= MAX_PASSES {
            return Ok(None);
        }
        crate::debug!(
            "member `{}`: streamed again (pass {}) for {} range(s) the first pass did not keep, first at {}",
            member.name,
            self.passes + 1,
            extra.len(),
            extra.first().map_or(0, |r| r.0)
        );
        // The member streams past again only as far as the last range missing (its size and CRC
        // were checked by the first pass), which is often a few MB into a file of a GB. Of what
        // the first pass kept (a prefix, what it learned), the ranges the facts read that lie past
        // that point are taken from it (the section headers at the end, often); the stream gives
        // the others and the missing ones.
        let Streamed { kept: first, hits, digest, passes, _permit: held } = self;
        let stop = extra.iter().map(|(o, s)| o.saturating_add(*s)).max().unwrap_or(0);
        let mut kept = Kept::new(member.size);
        let mut wanted: Vec<Range> = Vec::new();
        for (offset, len) in needed_ranges(&first) {
            match first.get(offset, len) {
                Ok(bytes) if offset >= stop => kept.insert(offset, bytes),
                _ => wanted.push((offset, len)),
            }
        }
        drop(first);
        wanted.extend_from_slice(extra);
        let size: u64 = wanted.iter().map(|(_, s)| (*s).min(member.size)).sum::<u64>() + kept.kept_bytes();
        // One permit at a time (the budget's rule): what stays, the stream and the new ranges.
        drop(held);
        let permit = budget.take(size + STREAM_COST);
        let inflated = stream_ranges(wheel, member, &wanted, &mut kept)?;
        crate::debug!("member `{}`: pass {} inflated {inflated} of its {} bytes", member.name, passes + 1, member.size);
        permit.shrink_to(size);
        Ok(Some(Streamed { kept, hits, digest, passes: passes + 1, _permit: permit }))
    }
}
