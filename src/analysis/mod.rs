//! Analysis: from an opened wheel to plain facts about its members, its host binaries and the
//! libraries they need. No policy here: the policies judge these facts ([`crate::policy`]); the
//! libraries are resolved by the rules of the family that judges the wheel
//! ([`linkage::LinkageRules`]).
//!
//! [`scan`] reads every member once, in parallel (its first bytes when that is enough to
//! classify it, else inflated whole), hashes it against RECORD when asked, and parses it if it is
//! an ELF file; [`linkage::resolve`] then finds what the host binaries need, inside the wheel
//! and on this machine.
//!
//! Why one file: the one scan of every member (sniffing, inflating in memory or
//! streamed, hashing, ELF parsing, bundle copies) and the facts it produces, which every command
//! reads.

pub mod budget;
pub mod copy;
pub mod databases;
pub mod installed;
pub mod lddtree;
pub mod linkage;
pub mod machine;
pub mod read;
pub mod site;
pub mod vendor;

use std::collections::BTreeMap;

use crate::elf::ElfFacts;
use crate::elf::header::{ElfIdent, ForeignFormat};
use crate::exclude::ExcludeList;
use crate::gpu::{self, GpuCode};
use crate::platform::{Arch, Libc, machine_name};
use crate::progress::Progress;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{Member, MemberDigest, RecordFinding, RecordProblem, Wheel, WheelError};
use crate::zip::blocks::BlockMarks;
pub use copy::{BundledCopy, CopyRoom};
use linkage::{ExternalLib, LibrarySearch};

/// What an analysis reads and where it looks for libraries, shared by every wheel of a run.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    pub exclude: ExcludeList,
    pub search: LibrarySearch,
    /// Check every member's hash against RECORD while reading.
    pub verify_hashes: bool,
    /// Hash the members whose RECORD row cannot be written again as it is (the writing
    /// commands need a true RECORD).
    pub hash_for_record: bool,
    /// The bytes in flight, shared by every wheel and member of a run.
    pub memory: std::sync::Arc<budget::MemoryBudget>,
    /// Look for device code inside host binaries (offload bundles, fatbins, embedded code
    /// objects): what `show`, `check` and `thin` report; `retag` and `repair` decide nothing
    /// by it, and skip the scan of every byte of every library.
    pub device_code: bool,
    /// Keep an inflated copy of every file with offload bundles (`thin` rewrites them: so each
    /// is inflated once, not once more to write it).
    pub keep_bundled_copies: Option<CopyRoom>,
    /// Inflate one large member on several threads (its bytes taken from `memory`, and only
    /// when they are free); `None`, the default: every member in one stream. Opt-in
    /// (`WHEELFIX_PARALLEL_INFLATE_MIN`): on two cores rapidgzip's decoder does not pay (its own
    /// admission test picks one stream, at a cost), so it waits for wider machines to prove it.
    pub parallel_inflate: Option<crate::zip::ParallelInflate>,
}

impl AnalyzeOptions {
    pub fn new(exclude: ExcludeList, search: LibrarySearch) -> Self {
        AnalyzeOptions {
            exclude,
            search,
            verify_hashes: false,
            hash_for_record: false,
            device_code: true,
            memory: std::sync::Arc::new(budget::MemoryBudget::new(budget::DEFAULT_SHOW)),
            keep_bundled_copies: None,
            parallel_inflate: None,
        }
    }
}

/// A note about one file: why it was skipped or what is odd about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Note {
    pub file: String,
    pub message: String,
}

/// One host ELF file of the wheel (any architecture; device code is not host code).
#[derive(Debug, Clone)]
pub struct ElfMember {
    pub path: String,
    pub facts: ElfFacts,
}

/// A host binary the policies judge: an ELF file of the wheel's own platform.
#[derive(Debug, Clone, Copy)]
pub struct HostBinary {
    /// Index into [`Analysis::elf`].
    pub elf: usize,
    pub is_extension: bool,
}

/// How many host binaries of each executable format a wheel holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BinaryFormats {
    pub elf: usize,
    pub pe: usize,
    #[serde(rename = "mach-o")]
    pub mach_o: usize,
}

impl BinaryFormats {
    pub fn total(&self) -> usize {
        self.elf + self.pe + self.mach_o
    }
}

/// Every fact the verdict and the reports are computed from.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Architecture of the wheel (from its tags, else from its first host binary).
    pub arch: Option<Arch>,
    pub libc: Libc,
    /// Every host ELF file parsed, in archive order.
    pub elf: Vec<ElfMember>,
    /// The host binaries of the wheel's platform, in archive order.
    pub binaries: Vec<HostBinary>,
    /// Device code, per member that carries some, in archive order.
    pub gpu: Vec<GpuCode>,
    pub notes: Vec<Note>,
    /// Host binaries by format, GPU code objects not counted.
    pub binary_formats: BinaryFormats,
    /// The sha256 of every member that was hashed, by member index.
    pub digests: Vec<Option<[u8; 32]>>,
    /// Where RECORD and the archive disagree: the wheel's own findings, plus hash mismatches
    /// found while reading.
    pub record_findings: crate::wheel::RecordFindings,
    /// Every member's hash was checked against RECORD (all rows checkable, all matched or
    /// reported).
    pub hashes_checked: bool,
    /// The libraries the host binaries need, resolved (filled by [`linkage::resolve`]).
    pub external: BTreeMap<String, ExternalLib>,
    /// Inflated copies of the files with offload bundles, by member path, when asked
    /// ([`AnalyzeOptions::keep_bundled_copies`]): not facts, the bytes the writer rewrites.
    pub bundled_copies: BTreeMap<String, std::sync::Arc<BundledCopy>>,
}

impl Analysis {
    /// Path and facts of a host binary.
    pub fn binary(&self, binary: &HostBinary) -> (&str, &ElfFacts) {
        let member = &self.elf[binary.elf];
        (&member.path, &member.facts)
    }

    /// Nothing found yet: the start of an analysis of files that are not a wheel's members
    /// ([`installed::analyse_files`]).
    pub fn empty() -> Analysis {
        Analysis {
            arch: None,
            libc: Libc::Glibc,
            elf: Vec::new(),
            binaries: Vec::new(),
            gpu: Vec::new(),
            notes: Vec::new(),
            binary_formats: BinaryFormats::default(),
            digests: Vec::new(),
            record_findings: Default::default(),
            hashes_checked: false,
            external: BTreeMap::new(),
            bundled_copies: BTreeMap::new(),
        }
    }

    /// Pure Python: no host binary and no device code.
    pub fn has_no_code(&self) -> bool {
        self.elf.is_empty() && self.gpu.is_empty()
    }

    /// Every host binary is static (no interpreter, nothing needed): nothing in the wheel says
    /// which libc it is for, so a claimed tag of either family cannot be disproved (go-task-bin's
    /// static executables run on Alpine and on glibc systems alike).
    pub fn libc_unsaid(&self) -> bool {
        !self.binaries.is_empty()
            && self.binaries.iter().all(|b| {
                let facts = &self.elf[b.elf].facts;
                facts.interpreter.is_none() && facts.needed.is_empty() && facts.libc().is_none()
            })
    }

    /// The processors the wheel's own device code is for: base target names across files,
    /// unique, in the order people read them (`gfx908` before `gfx1100`; see
    /// [`crate::gpu::targets::natural_order`]). The one rule of coverage: a GPU runtime's
    /// own library (ROCr's blit kernels, for thirty-odd processors) never counts, so no page,
    /// index or check claims a GPU for it. Ex) [`gfx942`, `gfx950`]
    pub fn gpu_targets(&self) -> Vec<String> {
        let targets: std::collections::BTreeSet<&str> =
            self.gpu.iter().filter(|g| !g.is_runtime_code()).flat_map(|g| g.base_targets()).collect();
        crate::gpu::targets::natural_order(targets).into_iter().map(str::to_string).collect()
    }
}

/// The first bytes of a member, enough to recognise what it is (a PE file's signature lies
/// at the offset its DOS header gives, within the first few hundred bytes).
const HEAD: usize = 512;

/// Read, hash and parse every member, then derive the wheel's facts. Libraries are resolved
/// later, once the policies that apply are known ([`linkage::resolve`]).
pub fn scan(wheel: &Wheel, options: &AnalyzeOptions, progress: &dyn Progress) -> Result<Analysis, WheelError> {
    let members = wheel.archive.members();
    let sizes: Vec<u64> = members.iter().map(|m| m.compressed_size).collect();
    let scans = crate::parallel::largest_first(
        &sizes,
        |index| scan_member(wheel, index, options, true),
        |index| progress.advance(sizes[index]),
    )?;

    let mut notes = Vec::new();
    let mut elf = Vec::new();
    let mut gpu_code = Vec::new();
    let mut digests = vec![None; members.len()];
    let mut record_findings = wheel.record_findings.clone().builder();
    let mut formats = BinaryFormats::default();
    let mut bundled_copies = BTreeMap::new();
    for scanned in scans {
        let path = &members[scanned.index as usize].name;
        digests[scanned.index as usize] = scanned.digest;
        if let Some(f) = scanned.finding {
            record_findings.push(*f);
        }
        match scanned.format {
            Some(ForeignFormat::Pe) => formats.pe += 1,
            Some(ForeignFormat::MachO) => formats.mach_o += 1,
            None => {}
        }
        if let Some(facts) = scanned.elf {
            formats.elf += 1;
            for f in crate::elf::lint::loadability(&facts) {
                notes.push(Note {
                    file: path.to_string(),
                    message: format!("not loadable ({}): {}", f.rule, f.message),
                });
            }
            elf.push(ElfMember { path: path.to_string(), facts: *facts });
        }
        gpu_code.extend(scanned.gpu);
        if let Some(copy) = scanned.copy {
            bundled_copies.insert(path.to_string(), std::sync::Arc::new(copy));
        }
        if let Some(message) = scanned.note {
            notes.push(Note { file: path.to_string(), message: message.into() });
        }
    }
    let record_findings = record_findings.finish();
    let hashes_checked = options.verify_hashes
        && ![RecordProblem::NoHash, RecordProblem::UnverifiableHash, RecordProblem::NotInRecord]
            .into_iter()
            .any(|p| record_findings.has(p));

    let claimed = &wheel.filename.platform_tags;
    let arch = claimed.iter().find_map(PlatformTag::arch).or_else(|| elf.iter().find_map(|m| m.facts.arch()));
    let libc = claimed
        .iter()
        .find_map(PlatformTag::libc)
        .or_else(|| elf.iter().find_map(|m| m.facts.libc()))
        .or_else(|| elf.iter().find_map(|m| libc_from_file_name(&m.path)))
        .unwrap_or(Libc::Glibc);

    let binaries = host_binaries(&elf, arch, libc, &mut notes);
    let mut analysis = Analysis {
        arch,
        libc,
        elf,
        binaries,
        gpu: gpu_code,
        notes,
        binary_formats: formats,
        digests,
        record_findings,
        hashes_checked,
        external: BTreeMap::new(),
        bundled_copies,
    };
    analysis.notes.sort();
    Ok(analysis)
}

/// The ELF files of the wheel's own platform (its architecture and libc); a note for each
/// other one.
pub(crate) fn host_binaries(
    elf: &[ElfMember],
    arch: Option<Arch>,
    libc: Libc,
    notes: &mut Vec<Note>,
) -> Vec<HostBinary> {
    let mut binaries = Vec::new();
    for (index, member) in elf.iter().enumerate() {
        let (path, facts) = (&member.path, &member.facts);
        let elf_arch = facts.arch();
        let elf_libc = facts.libc().or_else(|| libc_from_file_name(path));
        let problem = if elf_arch.is_none() {
            Some(format!("ignored: {} is an architecture no policy covers", machine_name(facts.machine)))
        } else if elf_arch != arch {
            let want = arch.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into());
            let have = elf_arch.map(|a| a.to_string()).unwrap_or_default();
            Some(format!("ignored: built for {have}, the wheel is for {want}"))
        } else {
            elf_libc
                .filter(|l| *l != libc && !(libc == Libc::Android && *l == Libc::Musl))
                .map(|other| format!("ignored: linked against {}, the wheel is for {}", other.as_str(), libc.as_str()))
        };
        match problem {
            Some(message) => notes.push(Note { file: path.clone(), message }),
            None => binaries.push(HostBinary { elf: index, is_extension: is_python_extension(path, facts) }),
        }
    }
    binaries
}

/// What one member turned out to be. Compact (the rare findings boxed): a wheel may have
/// hundreds of thousands of members, and all of these are held until the scan ends.
struct Scanned {
    index: u32,
    /// A host binary's facts.
    elf: Option<Box<ElfFacts>>,
    /// A PE or Mach-O binary.
    format: Option<ForeignFormat>,
    /// Device code it carries (a host binary may carry more than one kind).
    gpu: Vec<GpuCode>,
    /// Something odd about it, for the report.
    note: Option<Box<str>>,
    /// Its sha256, when it was hashed.
    digest: Option<[u8; 32]>,
    /// A hash that does not match RECORD.
    finding: Option<Box<RecordFinding>>,
    /// Its inflated copy, when it holds offload bundles and copies are kept.
    copy: Option<BundledCopy>,
}

/// What a member's first bytes say it is, as far as the scan cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A host ELF file: its facts are parsed.
    HostElf,
    /// A GPU code object: its header says all.
    GpuElf,
    /// ELF magic, too short to tell more.
    TruncatedElf,
    /// A device-code container that is not ELF.
    Container,
    /// A Windows binary with a device-code section.
    PeDeviceCode,
    /// Anything else (a PE or Mach-O binary is only counted).
    Other,
}

impl Kind {
    fn of(head: &[u8]) -> Kind {
        match ElfIdent::parse(head) {
            Some(ident) if ident.is_gpu() => Kind::GpuElf,
            Some(_) => Kind::HostElf,
            None if head.starts_with(crate::elf::header::ELF_MAGIC) => Kind::TruncatedElf,
            None if gpu::is_container_magic(head) => Kind::Container,
            None => Kind::Other,
        }
    }

    fn needs_content(self) -> bool {
        matches!(self, Kind::HostElf | Kind::TruncatedElf | Kind::Container | Kind::PeDeviceCode)
    }
}

/// The ELF facts of one member, read as [`scan`] reads members (within the memory budget, large
/// ones streamed), without hashing: a library another wheel provides. `None`: not an ELF file.
pub fn member_elf_facts(wheel: &Wheel, index: usize, options: &AnalyzeOptions) -> Result<Option<ElfFacts>, WheelError> {
    Ok(scan_member(wheel, index, options, false)?.elf.map(|facts| *facts))
}

/// Read one member as far as needed: its first bytes tell whether it is ELF, PE, Mach-O or a
/// device-code container; only those are read on, and every member that must be hashed (all of
/// them, when hashes are verified). Small members are inflated whole; large ones stream past
/// within the memory budget ([`read`]).
fn scan_member(wheel: &Wheel, index: usize, options: &AnalyzeOptions, hashing: bool) -> Result<Scanned, WheelError> {
    let archive = &wheel.archive;
    let member = &archive.members()[index];
    let mut scanned = Scanned {
        index: index as u32,
        elf: None,
        format: None,
        gpu: Vec::new(),
        note: None,
        digest: None,
        finding: None,
        copy: None,
    };
    if member.is_dir() {
        return Ok(scanned);
    }
    let hash = hashing
        && !wheel.is_record_file(&member.name)
        && (options.verify_hashes || (options.hash_for_record && !wheel.row_is_reusable(member)));
    let budget = &*options.memory;
    let whole = read::reads_whole(member, budget);
    // A copy kept for `thin` notes where the member's deflate blocks start, as it is inflated.
    let marking = options.keep_bundled_copies.is_some();
    let mut data = None;
    if hash && whole {
        data = Some(read::whole_marking(wheel, member, budget, marking)?);
    }
    let head = match &data {
        Some((bytes, _, _)) => bytes[..bytes.len().min(HEAD)].to_vec(),
        None => archive.peek(member, HEAD)?,
    };
    let sniffed = sniff(wheel, member, &head, data.as_ref().map(|(bytes, _, _)| &bytes[..]), &mut scanned)?;
    if sniffed.kind.needs_content() && data.is_none() && whole {
        data = Some(read::whole_marking(wheel, member, budget, marking)?);
    }
    let at = MemberScan { wheel, member, options, hash };
    match data {
        Some((bytes, mut marks, _permit)) => scan_in_memory(&at, sniffed, &bytes, marks.take(), scanned),
        None if !sniffed.kind.needs_content() && !hash => Ok(scanned),
        None => scan_streamed(&at, sniffed, &head, scanned),
    }
}

/// What a member's first bytes say it is, with the PE sections that hold device code. A GPU
/// code object's header says everything reported (into `scanned`); a PE or Mach-O binary is
/// named.
struct Sniffed {
    kind: Kind,
    pe_sections: Vec<gpu::pe::DeviceSection>,
}

fn sniff(
    wheel: &Wheel,
    member: &Member,
    head: &[u8],
    whole: Option<&[u8]>,
    scanned: &mut Scanned,
) -> Result<Sniffed, WheelError> {
    let mut kind = Kind::of(head);
    let mut pe_sections = Vec::new();
    if kind == Kind::GpuElf {
        // Device code: the header says everything we report; never a host binary.
        match gpu::code_object_from_header(&member.name, head) {
            Some(code) => scanned.gpu = vec![code],
            None => scanned.note = Some("skipped: a GPU ELF file too short to read its header".into()),
        }
    } else if kind == Kind::Other {
        scanned.format = ForeignFormat::sniff(head);
        if scanned.format == Some(ForeignFormat::Pe) {
            // Its section table says whether it carries device code, and where.
            pe_sections = match whole {
                Some(bytes) => gpu::pe::device_sections(&bytes[..bytes.len().min(gpu::pe::HEAD)]),
                None => gpu::pe::device_sections(&wheel.archive.peek(member, gpu::pe::HEAD)?),
            };
            if !pe_sections.is_empty() {
                kind = Kind::PeDeviceCode;
            }
        }
    }
    Ok(Sniffed { kind, pe_sections })
}

/// The member being scanned, and whether it is hashed.
struct MemberScan<'a> {
    wheel: &'a Wheel,
    member: &'a Member,
    options: &'a AnalyzeOptions,
    hash: bool,
}

/// A member inflated whole: hashed, read, and copied for `thin` when it holds bundles.
fn scan_in_memory(
    at: &MemberScan,
    sniffed: Sniffed,
    bytes: &[u8],
    marks: Option<crate::zip::blocks::BlockMarks>,
    mut scanned: Scanned,
) -> Result<Scanned, WheelError> {
    let MemberScan { wheel, member, options, hash } = *at;
    if hash {
        let algorithm = wheel.extra_algorithm(member);
        record_digest(wheel, member, read::Digester::of(bytes, algorithm), options, &mut scanned);
    }
    if sniffed.kind == Kind::PeDeviceCode {
        let hits = gpu::scan::Hits::of(bytes, gpu::scan::Patterns::PE);
        scanned.gpu.extend(gpu::pe::binary(&member.name, &sniffed.pe_sections, bytes.len() as u64, &hits, bytes));
        return Ok(scanned);
    }
    let mut scanned = read_whole_member(&member.name, sniffed.kind, bytes, scanned, options.device_code)?;
    if let Some(room) = options.keep_bundled_copies.as_ref().filter(|_| has_bundles(&scanned.gpu))
        && room.take(member.size)
    {
        scanned.copy = Some(copy_of(room, bytes, marks).map_err(|e| copy_error(member, &e))?);
    }
    Ok(scanned)
}

/// A member too large to inflate whole: one streaming pass that hashes it, keeps what its
/// reader needs, and copies it for `thin` (the copy dropped again, its space freed, when it
/// holds no bundles).
fn scan_streamed(at: &MemberScan, sniffed: Sniffed, head: &[u8], mut scanned: Scanned) -> Result<Scanned, WheelError> {
    let MemberScan { wheel, member, options, hash } = *at;
    let kind = sniffed.kind;
    let budget = &*options.memory;
    let first = match kind {
        Kind::HostElf if !options.device_code => read::FirstPass::ElfFactsOnly,
        Kind::HostElf => read::FirstPass::Elf,
        Kind::Container => read::FirstPass::Container(gpu::scan::Patterns::for_container(head).expect("a container")),
        Kind::PeDeviceCode => read::FirstPass::Pe(gpu::pe::sections_read(&sniffed.pe_sections)),
        _ => read::FirstPass::Nothing,
    };
    let room = options.keep_bundled_copies.as_ref().filter(|_| matches!(kind, Kind::HostElf | Kind::Container));
    let room = room.filter(|room| room.take(member.size));
    let mut copy = match room {
        Some(room) => Some(room.start(member.size).map_err(|e| copy_error(member, &e))?),
        None => None,
    };
    let streamed = read::first_pass(
        wheel,
        member,
        first,
        hash.then_some(wheel.extra_algorithm(member)),
        budget,
        options.parallel_inflate.as_ref(),
        copy.as_mut(),
    )?;
    if let Some(digest) = &streamed.digest {
        record_digest(wheel, member, digest.clone(), options, &mut scanned);
    }
    match kind {
        Kind::HostElf => {
            let (facts, code) = streamed_elf(wheel, member, streamed, options.device_code, budget)?;
            scanned.gpu = code;
            scanned.elf = Some(Box::new(facts));
        }
        Kind::Container => scanned.gpu.extend(gpu::container_view(&member.name, &streamed.kept, &streamed.hits)),
        Kind::PeDeviceCode => {
            let view = &streamed.kept;
            scanned.gpu.extend(gpu::pe::binary(&member.name, &sniffed.pe_sections, member.size, &streamed.hits, view));
        }
        _ => {}
    }
    match (copy, room) {
        (Some(copy), _) if has_bundles(&scanned.gpu) => {
            let copy = copy.finish().map_err(|e| copy_error(member, &e))?;
            crate::debug!("{}: copy kept, {} bytes left out (dropped payloads)", member.name, copy.holes.bytes());
            scanned.copy = Some(copy);
        }
        (_, Some(room)) => room.give_back(member.size),
        _ => {}
    }
    Ok(scanned)
}

/// Whether device code found in a file is in offload bundles (what `thin` rewrites).
fn has_bundles(gpu: &[GpuCode]) -> bool {
    gpu.iter().any(|g| g.container.holds_bundles())
}

/// An unlinked copy of `data` in `room`, with where its deflate blocks start.
fn copy_of(room: &CopyRoom, data: &[u8], marks: Option<BlockMarks>) -> std::io::Result<BundledCopy> {
    use std::io::Write;
    let mut copy = room.start(data.len() as u64)?;
    copy.write_all(data)?;
    copy.set_marks(marks);
    copy.finish()
}

fn copy_error(member: &Member, e: &std::io::Error) -> WheelError {
    WheelError::Archive(crate::wheel::ArchiveError::Member {
        name: member.name.to_string(),
        message: format!("cannot keep an inflated copy: {e}"),
    })
}

/// Note a member's digest, and check it against RECORD when hashes are verified.
fn record_digest(
    wheel: &Wheel,
    member: &Member,
    digest: MemberDigest,
    options: &AnalyzeOptions,
    scanned: &mut Scanned,
) {
    if options.verify_hashes {
        scanned.finding = wheel.check_digest(member, &digest).map(Box::new);
    }
    scanned.digest = Some(digest.sha256);
}

/// The facts of a member held whole (of a host binary, its device code when `device_code`).
fn read_whole_member(
    name: &str,
    kind: Kind,
    data: &[u8],
    mut scanned: Scanned,
    device_code: bool,
) -> Result<Scanned, WheelError> {
    match kind {
        Kind::HostElf => {
            // A broken host binary leaves the tag unknowable: the wheel fails.
            let facts = ElfFacts::parse(data)
                .map_err(|e| WheelError::BadElf { path: name.to_string(), message: e.to_string() })?;
            if device_code {
                scanned.gpu = gpu::host_binary(name, &facts, data);
            }
            scanned.elf = Some(Box::new(facts));
        }
        Kind::TruncatedElf => {
            // Too short to say its machine: parsing it gives the error that names it.
            let error =
                ElfFacts::parse(data).err().map(|e| e.to_string()).unwrap_or_else(|| "a truncated ELF header".into());
            return Err(WheelError::BadElf { path: name.to_string(), message: error });
        }
        Kind::Container => scanned.gpu.extend(gpu::container_file(name, data)),
        Kind::GpuElf | Kind::Other | Kind::PeDeviceCode => {}
    }
    Ok(scanned)
}

/// The facts of a host ELF file that streamed past (and its device code when `device_code`):
/// parsed from the ranges kept, with more passes while a range they need was not kept, and the
/// member read whole as the last resort.
fn streamed_elf<'b>(
    wheel: &Wheel,
    member: &Member,
    mut streamed: read::Streamed<'b>,
    device_code: bool,
    budget: &'b budget::MemoryBudget,
) -> Result<(ElfFacts, Vec<GpuCode>), WheelError> {
    let bad = |e: crate::elf::ElfError| WheelError::BadElf { path: member.name.to_string(), message: e.to_string() };
    loop {
        let extra = match ElfFacts::parse_view(&streamed.kept) {
            Ok(facts) if !device_code => return Ok((facts, Vec::new())),
            Ok(facts) => {
                // The sections the device code reader reads from the file (a kpack marker).
                let missing: Vec<_> = gpu::host_sections_read(&facts, &streamed.hits)
                    .into_iter()
                    .filter(|(o, s)| !streamed.kept.contains(*o, *s))
                    .collect();
                if missing.is_empty() {
                    let code = gpu::host_binary_view(&member.name, &facts, &streamed.kept, &streamed.hits);
                    return Ok((facts, code));
                }
                missing
            }
            Err(crate::elf::ElfError::NotKept { offset, size }) => {
                vec![(offset, size)]
            }
            Err(e) => return Err(bad(e)),
        };
        streamed = match streamed.again(wheel, member, &extra, budget)? {
            Some(next) => next,
            None => {
                let (data, _permit) = read::whole(wheel, member, budget)?;
                let facts = ElfFacts::parse(&data).map_err(bad)?;
                let code = if device_code { gpu::host_binary(&member.name, &facts, &data) } else { Vec::new() };
                return Ok((facts, code));
            }
        };
    }
}

/// The libc an extension's platform suffix names. Ex) `_x.cpython-312-x86_64-linux-musl.so` → musl
fn libc_from_file_name(path: &str) -> Option<Libc> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if file.contains("-linux-musl") {
        Some(Libc::Musl)
    } else if file.contains("-linux-gnu") {
        Some(Libc::Glibc)
    } else {
        None
    }
}

/// auditwheel's test: a defined function `PyInit_<module>` (or `init<module>` for Python 2,
/// `_cffi_pypyinit_<module>` for PyPy), where the module is the file name up to its first dot.
fn is_python_extension(path: &str, facts: &ElfFacts) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let module = file.split('.').next().unwrap_or(file);
    facts.init_functions.iter().any(|f| {
        f.strip_prefix("PyInit_").or_else(|| f.strip_prefix("_cffi_pypyinit_")).or_else(|| f.strip_prefix("init"))
            == Some(module)
    })
}
