//! Analysis: from an opened wheel to plain facts about its members, its host binaries and the
//! libraries they need — everything the verdict and the reports are computed from.
//!
//! One pass over the archive, parallel across members: each member is read at most once
//! (its first bytes when that is enough to classify it, else inflated whole), hashed against
//! RECORD when asked, and parsed if it is an ELF file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use rayon::prelude::*;

use crate::elf::gpu::{self, GpuCode};
use crate::elf::{ELF_MAGIC, ElfFacts};
use crate::exclude::ExcludeList;
use crate::libsearch::{ElfKind, LibrarySearch, ObjectPaths, expand_origin};
use crate::platform::{Arch, Libc, machine_name};
use crate::policy::verdict::{Binary, ExternalLib, Verdict, VerdictInput};
use crate::policy::{Policies, PolicySet};
use crate::progress::Progress;
use crate::wheel::{MemberDigest, RecordFinding, RecordProblem, Wheel, WheelError};

/// Settings of an analysis, shared by every wheel of a run.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    pub policies: Policies,
    pub exclude: ExcludeList,
    pub search: LibrarySearch,
    /// Check every member's hash against RECORD while reading.
    pub verify_hashes: bool,
    /// Hash the members whose RECORD row cannot be written again as it is (the writing
    /// commands need a true RECORD).
    pub hash_for_record: bool,
    pub disable_isa_check: bool,
    /// A `--plat` the user asked for: a musllinux tag there counts as a claim (see
    /// [`Policies::for_platform`]).
    pub requested_plat: Option<String>,
    /// Any difference between RECORD and the archive fails the wheel (`--strict-record`).
    pub strict_record: bool,
}

impl AnalyzeOptions {
    pub fn new(policies: Policies, exclude: ExcludeList, search: LibrarySearch) -> Self {
        AnalyzeOptions {
            policies,
            exclude,
            search,
            verify_hashes: false,
            hash_for_record: false,
            disable_isa_check: false,
            requested_plat: None,
            strict_record: false,
        }
    }
}

/// A note about one file: why it was skipped or what is odd about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Note {
    pub file: String,
    pub message: String,
}

/// A host binary of the wheel's platform.
#[derive(Debug, Clone)]
pub struct HostBinary {
    pub path: String,
    pub facts: ElfFacts,
    pub is_extension: bool,
}

/// Every fact the verdict and the reports need about one wheel.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Architecture of the wheel (from its tags, else from its first host binary).
    pub arch: Option<Arch>,
    pub libc: Libc,
    pub binaries: Vec<HostBinary>,
    /// Every host ELF file parsed, by member path.
    pub elf_members: Vec<(String, ElfFacts)>,
    /// Device code, per member that carries some, in archive order.
    pub gpu: Vec<GpuCode>,
    pub notes: Vec<Note>,
    pub external: BTreeMap<String, ExternalLib>,
    pub policy_set: Option<PolicySet>,
    pub verdict: Option<Verdict>,
    pub disable_isa_check: bool,
    /// Why no policy was applied although the wheel has host binaries (a Windows or macOS
    /// wheel, an Android wheel, or binaries only for architectures no policy covers).
    pub unaudited: Option<String>,
    /// Host binaries by format, GPU code objects not counted.
    pub binary_formats: BinaryFormats,
    /// The sha256 of every member that was hashed, by member index.
    pub digests: Vec<Option<[u8; 32]>>,
    /// Where RECORD and the archive disagree: the wheel's own findings, plus hash mismatches
    /// found while reading.
    pub record_findings: Vec<RecordFinding>,
    /// Every member's hash was checked against RECORD (all rows checkable, all matched or
    /// reported).
    pub hashes_checked: bool,
}

/// How many host binaries of each executable format a wheel holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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

impl Analysis {
    /// No host binary of any format: a pure wheel as far as platform tags go.
    pub fn is_pure(&self) -> bool {
        self.binaries.is_empty() && self.unaudited.is_none() && self.binary_formats.total() == 0
    }

    pub fn verdict_input(&self) -> VerdictInput<'_> {
        VerdictInput {
            binaries: self
                .binaries
                .iter()
                .map(|b| Binary { path: &b.path, facts: &b.facts, is_extension: b.is_extension })
                .collect(),
            external: &self.external,
            disable_isa_check: self.disable_isa_check,
        }
    }
}

/// The first bytes of a member, enough to recognise what it is (a PE file's signature lies
/// at the offset its DOS header gives, within the first few hundred bytes).
const HEAD: usize = 512;

/// Read, hash and parse every member, then derive the wheel's facts.
pub fn analyze(wheel: &Wheel, options: &AnalyzeOptions, progress: &dyn Progress) -> Result<Analysis, WheelError> {
    // Largest members first: on a wheel dominated by one huge library the other cores work
    // through the rest meanwhile, instead of waiting for it at the end.
    let members = wheel.archive.members();
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(members[i].compressed_size));
    let mut scans: Vec<Scanned> = order
        .par_iter()
        .with_max_len(1)
        .map(|&index| {
            let result = scan_member(wheel, index, options);
            progress.advance(members[index].compressed_size);
            result
        })
        .collect::<Result<_, WheelError>>()?;
    // Back to archive order, so everything downstream is deterministic.
    scans.sort_by_key(|s| s.index);

    let mut notes = Vec::new();
    let mut elf_members = Vec::new();
    let mut gpu_code = Vec::new();
    let mut digests = vec![None; members.len()];
    let mut record_findings = wheel.record_findings.clone();
    let mut formats = BinaryFormats::default();
    for scanned in scans {
        let path = &members[scanned.index].name;
        digests[scanned.index] = scanned.digest;
        record_findings.extend(scanned.finding);
        match scanned.format {
            Some(Format::Pe) => formats.pe += 1,
            Some(Format::MachO) => formats.mach_o += 1,
            None => {}
        }
        if let Some(facts) = scanned.elf {
            formats.elf += 1;
            elf_members.push((path.to_string(), facts));
        }
        if let Some(code) = scanned.gpu {
            gpu_code.push(code);
        }
        if let Some(message) = scanned.note {
            notes.push(Note { file: path.to_string(), message });
        }
    }
    record_findings.sort();
    let hashes_checked = options.verify_hashes
        && !record_findings.iter().any(|f| {
            matches!(f.problem, RecordProblem::NoHash | RecordProblem::UnverifiableHash | RecordProblem::NotInRecord)
        });

    let claimed: Vec<String> = wheel.filename.platform_tags.clone();
    let host: Vec<&(String, ElfFacts)> = elf_members.iter().filter(|(_, f)| !f.is_gpu_code()).collect();
    let arch =
        claimed.iter().find_map(|t| Arch::from_platform_tag(t)).or_else(|| host.iter().find_map(|(_, f)| f.arch()));
    let libc = claimed
        .iter()
        .find_map(|t| Libc::from_platform_tag(t))
        .or_else(|| host.iter().find_map(|(_, f)| f.libc()))
        .or_else(|| host.iter().find_map(|(path, _)| libc_from_file_name(path)))
        .unwrap_or(Libc::Glibc);

    let mut binaries = Vec::new();
    for (path, facts) in host {
        let elf_arch = facts.arch();
        let elf_libc = facts.libc().or_else(|| libc_from_file_name(path));
        if elf_arch.is_none() {
            notes.push(Note {
                file: path.clone(),
                message: format!("ignored: {} is an architecture no policy covers", machine_name(facts.machine)),
            });
        } else if elf_arch != arch {
            let want = arch.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into());
            notes.push(Note {
                file: path.clone(),
                message: format!(
                    "ignored: built for {}, the wheel is for {want}",
                    elf_arch.map(|a| a.to_string()).unwrap_or_default()
                ),
            });
        } else if elf_libc.is_some_and(|l| l != libc && !(libc == Libc::Android && l == Libc::Musl)) {
            notes.push(Note {
                file: path.clone(),
                message: format!("ignored: linked against {:?}, the wheel is for {libc:?}", elf_libc.unwrap()),
            });
        } else {
            let is_extension = is_python_extension(path, facts);
            binaries.push(HostBinary { path: path.clone(), facts: facts.clone(), is_extension });
        }
    }

    let mut analysis = Analysis {
        arch,
        libc,
        binaries,
        elf_members,
        gpu: gpu_code,
        notes,
        external: BTreeMap::new(),
        policy_set: None,
        verdict: None,
        disable_isa_check: options.disable_isa_check,
        unaudited: None,
        binary_formats: formats,
        digests,
        record_findings,
        hashes_checked,
    };
    let foreign_elf = analysis.elf_members.iter().any(|(_, f)| !f.is_gpu_code());
    // Android wheels keep their own `android_<api>_<abi>` tag: its policy is the one with the
    // highest API level not above the tag's (auditwheel's rule).
    let android_tag = claimed.iter().find(|t| t.starts_with("android_"));
    let os = claimed.iter().map(|t| crate::platform::Os::of_tag(t)).find(|o| *o != crate::platform::Os::Any);
    let set = match (arch, android_tag, os) {
        (_, _, Some(os)) if !os.has_policies() => None,
        (Some(arch), Some(tag), _) => options.policies.for_android(arch, tag),
        (Some(arch), None, _) => {
            let wheel_tags = wheel.wheel_info.platform_tags();
            let mut claims: Vec<&str> = claimed.iter().chain(&wheel_tags).map(String::as_str).collect();
            claims.extend(options.requested_plat.as_deref());
            Some(options.policies.for_platform(arch, libc, &claims))
        }
        (None, _, _) => None,
    };
    if let Some(os) = os.filter(|o| !o.has_policies()) {
        if analysis.binary_formats.total() > 0 {
            analysis.unaudited = Some(format!("{} wheel: no manylinux/musllinux policy applies", os.name()));
        }
        analysis.binaries.clear();
    } else if android_tag.is_some() && set.is_none() && !analysis.binaries.is_empty() {
        analysis.unaudited = Some("an Android wheel whose tag names no API level an android policy covers".into());
        analysis.binaries.clear();
    } else if analysis.binaries.is_empty() && (foreign_elf || analysis.binary_formats.total() > 0) {
        let tag = claimed.iter().find(|t| *t != "any").cloned().unwrap_or_else(|| "any".into());
        let formats = &analysis.binary_formats;
        analysis.unaudited = Some(if formats.pe + formats.mach_o > 0 && !foreign_elf {
            format!(
                "the binaries of this `{tag}` wheel are PE or Mach-O files, which no manylinux or musllinux policy covers"
            )
        } else {
            format!("no manylinux or musllinux policy covers the binaries of this `{tag}` wheel")
        });
    }
    if let (Some(set), false) = (set, analysis.binaries.is_empty()) {
        analysis.external = find_external_libs(wheel, &analysis, &set, options);
        let verdict = Verdict::compute(&set, &analysis.verdict_input());
        analysis.verdict = Some(verdict);
        analysis.policy_set = Some(set);
    }
    analysis.notes.sort();
    Ok(analysis)
}

/// What one member turned out to be.
struct Scanned {
    index: usize,
    /// A host binary's facts.
    elf: Option<ElfFacts>,
    /// A PE or Mach-O binary.
    format: Option<Format>,
    /// Device code it carries.
    gpu: Option<GpuCode>,
    /// Something odd about it, for the report.
    note: Option<String>,
    /// Its sha256, when it was hashed.
    digest: Option<[u8; 32]>,
    /// A hash that does not match RECORD.
    finding: Option<RecordFinding>,
}

/// Executable formats other than ELF that a wheel may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Pe,
    MachO,
}

/// Read one member as far as needed: its first bytes tell whether it is ELF, PE, Mach-O or a
/// device-code container; only those are inflated whole, and every member that must be
/// hashed (all of them, when hashes are verified).
fn scan_member(wheel: &Wheel, index: usize, options: &AnalyzeOptions) -> Result<Scanned, WheelError> {
    let archive = &wheel.archive;
    let member = &archive.members()[index];
    let mut scanned = Scanned { index, elf: None, format: None, gpu: None, note: None, digest: None, finding: None };
    if member.is_dir() {
        return Ok(scanned);
    }
    let hash = !wheel.is_record_file(&member.name)
        && (options.verify_hashes || (options.hash_for_record && !wheel.row_is_reusable(member)));
    let mut data = None;
    if hash {
        let bytes = archive.read(member)?;
        let digest = digest(&bytes, wheel.extra_algorithm(member));
        if options.verify_hashes {
            scanned.finding = wheel.check_digest(member, &digest);
        }
        scanned.digest = Some(digest.sha256);
        data = Some(bytes);
    }
    let head = match &data {
        Some(bytes) => bytes[..bytes.len().min(HEAD)].to_vec(),
        None => archive.peek(member, HEAD)?,
    };
    if head.starts_with(ELF_MAGIC) {
        if is_gpu_machine(&head) {
            // Device code: the header says everything we report; never a host binary.
            match gpu::code_object_from_header(&member.name, &head) {
                Some(code) => scanned.gpu = Some(code),
                None => scanned.note = Some("skipped: a GPU ELF file too short to read its header".into()),
            }
            return Ok(scanned);
        }
        let data = match data {
            Some(d) => d,
            None => archive.read(member)?,
        };
        // A broken host binary leaves the tag unknowable: the wheel fails.
        let facts = ElfFacts::parse(&data)
            .map_err(|e| WheelError::BadElf { path: member.name.to_string(), message: e.to_string() })?;
        scanned.gpu = gpu::host_binary(&member.name, &facts, &data);
        scanned.elf = Some(facts);
        return Ok(scanned);
    }
    scanned.format = executable_format(&head);
    if gpu::is_container_magic(&head) {
        let data = match data {
            Some(d) => d,
            None => archive.read(member)?,
        };
        scanned.gpu = gpu::container_file(&member.name, &data);
    }
    Ok(scanned)
}

/// sha256 of a member's content, and the digest in its RECORD row's algorithm when that is
/// another one.
fn digest(data: &[u8], extra: Option<crate::wheel::record::HashAlgorithm>) -> MemberDigest {
    use sha2::{Digest, Sha256};
    let other = extra.map(|algorithm| {
        let mut hasher = algorithm.hasher();
        hasher.update(data);
        hasher.finish()
    });
    MemberDigest { sha256: Sha256::digest(data).into(), other }
}

/// PE (`MZ` with a `PE\0\0` signature where the DOS header points) or Mach-O (thin, 32/64-bit,
/// either byte order, or a fat file with a plausible architecture count).
fn executable_format(head: &[u8]) -> Option<Format> {
    if head.starts_with(b"MZ")
        && let Some(at) = head.get(0x3c..0x40).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
        && head.get(at..at + 4) == Some(b"PE\0\0")
    {
        return Some(Format::Pe);
    }
    let magic = head.get(..4)?;
    let thin = [[0xfe, 0xed, 0xfa, 0xce], [0xfe, 0xed, 0xfa, 0xcf], [0xce, 0xfa, 0xed, 0xfe], [0xcf, 0xfa, 0xed, 0xfe]];
    if thin.iter().any(|m| magic == m) {
        return Some(Format::MachO);
    }
    // `0xcafebabe` is also a Java class file, whose next word (a version) is far above the
    // handful of architectures a fat Mach-O file holds.
    if magic == [0xca, 0xfe, 0xba, 0xbe] || magic == [0xca, 0xfe, 0xba, 0xbf] {
        let count = u32::from_be_bytes(head.get(4..8)?.try_into().ok()?);
        return (1..=16).contains(&count).then_some(Format::MachO);
    }
    None
}

/// `e_machine` of an ELF header names a GPU (AMDGPU or CUDA).
fn is_gpu_machine(data: &[u8]) -> bool {
    let Some(bytes) = data.get(18..20) else { return false };
    let machine = if data.get(5) == Some(&2) {
        u16::from_be_bytes([bytes[0], bytes[1]])
    } else {
        u16::from_le_bytes([bytes[0], bytes[1]])
    };
    matches!(machine, crate::platform::EM_AMDGPU | crate::platform::EM_CUDA)
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

/// Where a member lands relative to site-packages: `.data/platlib` and `.data/purelib` are
/// installed at the root; other `.data` categories land elsewhere (`None`).
pub(crate) fn install_path(wheel: &Wheel, member: &str) -> Option<String> {
    let data_dir = format!("{}.data/", wheel.dist_info.trim_end_matches(".dist-info"));
    match member.strip_prefix(&data_dir) {
        None => Some(member.to_string()),
        Some(rest) => rest.strip_prefix("platlib/").or_else(|| rest.strip_prefix("purelib/")).map(str::to_string),
    }
}

/// Normalise `a/b/../c` → `a/c`; `None` when the path climbs above the root.
pub(crate) fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn is_loader(soname: &str) -> bool {
    soname.starts_with("ld-linux")
        || soname.starts_with("ld64.so.")
        || soname.starts_with("ld-musl-")
        || soname == "ld.so.1"
}

/// `libpython3.12.so.1.0`, `libpython2.7m.so`
pub fn is_libpython(soname: &str) -> bool {
    let Some(rest) = soname.strip_prefix("libpython") else {
        return false;
    };
    let Some((version, tail)) = rest.split_once(".so") else {
        return false;
    };
    let version = version.strip_suffix('m').unwrap_or(version);
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    version.split_once('.').is_some_and(|(a, b)| numeric(a) && numeric(b))
        && (tail.is_empty() || tail.strip_prefix('.').is_some_and(|t| t.split('.').all(numeric)))
}

/// Resolve each binary's DT_NEEDED entries inside the wheel, as the loader would through its
/// `$ORIGIN` RPATH/RUNPATH (inheriting the loaders' RPATH), and describe everything that is not
/// found there: resolved on this machine, excluded, or missing — with the closure of what those
/// libraries need in turn.
fn find_external_libs(
    wheel: &Wheel,
    analysis: &Analysis,
    set: &PolicySet,
    options: &AnalyzeOptions,
) -> BTreeMap<String, ExternalLib> {
    // Host binaries by install path.
    let installed: HashMap<String, usize> = analysis
        .binaries
        .iter()
        .enumerate()
        .filter_map(|(i, b)| install_path(wheel, &b.path).map(|p| (p, i)))
        .collect();
    let kind_of = |f: &ElfFacts| ElfKind { is_64: f.is_64, little_endian: f.little_endian, machine: f.machine };

    // Each binary's $ORIGIN-relative search directories inside the wheel.
    struct Paths {
        rpath: Vec<String>,
        runpath: Vec<String>,
    }
    let wheel_dirs = |entries: &[String], origin: &str| -> Vec<String> {
        entries
            .iter()
            .filter(|e| e.contains("$ORIGIN") || e.contains("${ORIGIN}"))
            .filter_map(|e| normalize(&expand_origin(e, origin)))
            .collect()
    };
    let paths: Vec<Paths> = analysis
        .binaries
        .iter()
        .map(|b| {
            let origin = install_path(wheel, &b.path)
                .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default());
            match origin {
                Some(o) => Paths { rpath: wheel_dirs(&b.facts.rpath, &o), runpath: wheel_dirs(&b.facts.runpath, &o) },
                None => Paths { rpath: Vec::new(), runpath: Vec::new() },
            }
        })
        .collect();

    // Fixpoint: resolving a dependency inside the wheel makes its loader's RPATH available to it.
    let n = analysis.binaries.len();
    let mut loaders: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    let mut resolved: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); n];
    loop {
        let mut changed = false;
        for i in 0..n {
            let facts = &analysis.binaries[i].facts;
            let mut dirs: Vec<&String> = Vec::new();
            if paths[i].runpath.is_empty() {
                dirs.extend(&paths[i].rpath);
                let mut stack: Vec<usize> = loaders[i].iter().copied().collect();
                let mut seen = BTreeSet::new();
                while let Some(l) = stack.pop() {
                    if !seen.insert(l) {
                        continue;
                    }
                    if paths[l].runpath.is_empty() {
                        dirs.extend(&paths[l].rpath);
                    }
                    stack.extend(loaders[l].iter().copied());
                }
            }
            dirs.extend(&paths[i].runpath);
            for soname in &facts.needed {
                if resolved[i].contains_key(soname) {
                    continue;
                }
                let hit = dirs.iter().find_map(|d| {
                    let candidate = if d.is_empty() { soname.clone() } else { format!("{d}/{soname}") };
                    installed
                        .get(&candidate)
                        .copied()
                        .filter(|&j| kind_of(&analysis.binaries[j].facts) == kind_of(facts))
                });
                if let Some(j) = hit {
                    resolved[i].insert(soname.clone(), j);
                    changed |= loaders[j].insert(i);
                }
            }
        }
        if !changed {
            break;
        }
    }

    // Everything not resolved inside the wheel is external.
    let mut external: BTreeMap<String, ExternalLib> = BTreeMap::new();
    let mut queue: Vec<(String, ObjectPaths)> = Vec::new();
    let always_whitelisted = &set.policies[0].lib_whitelist;
    for (i, binary) in analysis.binaries.iter().enumerate() {
        // On Android the interpreter provides libpython (auditwheel's android rule); every musl
        // system provides musl's C library, under either name its loader answers to.
        let provided = |s: &str| {
            is_loader(s)
                || (set.libc == Libc::Android && is_libpython(s))
                || (set.libc == Libc::Musl && crate::platform::is_musl_libc(s))
        };
        for soname in binary.facts.needed.iter().filter(|s| !resolved[i].contains_key(*s) && !provided(s)) {
            let lib = external
                .entry(soname.clone())
                .or_insert_with(|| ExternalLib { soname: soname.clone(), ..Default::default() });
            lib.direct = true;
            lib.needed_by.insert(binary.path.clone());
            if lib.path.is_some() || lib.excluded.is_some() || lib.libpython {
                continue;
            }
            // System search: absolute RPATH/RUNPATH entries of the binary and its loaders.
            let absolute = |entries: &[String]| -> Vec<PathBuf> {
                entries.iter().filter(|e| e.starts_with('/')).map(PathBuf::from).collect()
            };
            let object = ObjectPaths { rpath: absolute(&binary.facts.rpath), runpath: absolute(&binary.facts.runpath) };
            let loader_paths: Vec<ObjectPaths> = loaders[i]
                .iter()
                .map(|&l| ObjectPaths {
                    rpath: absolute(&analysis.binaries[l].facts.rpath),
                    runpath: absolute(&analysis.binaries[l].facts.runpath),
                })
                .collect();
            let dirs = options.search.directories(&object, &loader_paths.iter().collect::<Vec<_>>());
            describe_external(lib, &dirs, kind_of(&binary.facts), options, always_whitelisted, &mut queue);
        }
    }

    // The closure: what vendored libraries need in turn (not through whitelisted ones).
    let want = analysis.binaries.first().map(|b| kind_of(&b.facts));
    while let Some((parent, parent_paths)) = queue.pop() {
        let Some(want) = want else { break };
        let needs = external.get(&parent).map(|l| l.needs.clone()).unwrap_or_default();
        for soname in needs.iter().filter(|s| !is_loader(s)) {
            if let Some(lib) = external.get_mut(soname) {
                lib.needed_by.insert(parent.clone());
                continue;
            }
            let mut lib = ExternalLib { soname: soname.clone(), ..Default::default() };
            lib.needed_by.insert(parent.clone());
            let dirs = options.search.directories(&parent_paths, &[]);
            describe_external(&mut lib, &dirs, want, options, always_whitelisted, &mut queue);
            external.insert(soname.clone(), lib);
        }
    }
    external
}

/// Fill in where an external library comes from; queue it for the closure walk when its own
/// needs matter.
fn describe_external(
    lib: &mut ExternalLib,
    dirs: &[PathBuf],
    want: ElfKind,
    options: &AnalyzeOptions,
    always_whitelisted: &BTreeSet<String>,
    queue: &mut Vec<(String, ObjectPaths)>,
) {
    if is_libpython(&lib.soname) {
        lib.libpython = true;
        return;
    }
    if let Some(reason) = options.exclude.reason(&lib.soname, None) {
        lib.excluded = Some(reason);
        return;
    }
    lib.searched = dirs.iter().map(|d| d.display().to_string()).collect();
    let Some(path) = options.search.find(&lib.soname, dirs, &want) else {
        return;
    };
    let display = path.display().to_string();
    if let Some(reason) = options.exclude.reason(&lib.soname, Some(&display)) {
        lib.excluded = Some(reason);
        lib.path = Some(display);
        return;
    }
    lib.path = Some(display);
    if always_whitelisted.contains(&lib.soname) {
        return;
    }
    // Read the library's own facts: its needs, symbol versions and ISA level.
    let Ok(data) = std::fs::read(&path) else {
        return;
    };
    let Ok(facts) = ElfFacts::parse(&data) else {
        return;
    };
    lib.needs = facts.needed.clone();
    lib.version_needs = facts.version_needs.clone();
    lib.x86_isa_needed = facts.x86_isa_needed;
    let origin = path.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let expand = |entries: &[String]| entries.iter().map(|e| PathBuf::from(expand_origin(e, &origin))).collect();
    let own = ObjectPaths { rpath: expand(&facts.rpath), runpath: expand(&facts.runpath) };
    queue.push((lib.soname.clone(), own));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_libpython() {
        assert!(is_libpython("libpython3.12.so.1.0"));
        assert!(is_libpython("libpython2.7m.so"));
        assert!(!is_libpython("libpython3.so"));
        assert!(!is_libpython("libpythonx.so"));
    }

    #[test]
    fn normalizes_relative_paths() {
        assert_eq!(normalize("torch/lib/../_C").as_deref(), Some("torch/_C"));
        assert_eq!(normalize("a/../../b"), None);
    }
}
