//! An installed environment, read where pip put it: the distributions of a `site-packages`
//! directory (each `*.dist-info`: its metadata, the files its RECORD says it owns, how it was
//! installed) and the host binaries among those files, read from disk with the readers `show`
//! uses for wheel members. A file is read by position, a few ranges and a chunk at a time, so
//! memory does not grow with its size (an installed rocBLAS is several GB).
//!
//! Why one file: the distributions and the files they own are read together (which
//! distribution owns a binary, how its files resolve from where they lie), and every reader of
//! an installed file (ELF host, device code, PE) shares the same bounded positional reads.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::elf::ElfFacts;
use crate::elf::view::Kept;
use crate::gpu::{self, GpuCode, scan::Hits};
use crate::wheel::metadata::CoreMetadata;
use crate::wheel::requirement::Requirement;

/// One installed distribution.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Distribution {
    /// Normalised project name. Ex) `rocm-demo`
    pub name: String,
    pub version: String,
    /// Its `.dist-info` directory, relative to site-packages.
    pub dist_info: String,
    /// Where it came from (`direct_url.json`'s `url`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_url: Option<String>,
    /// The tool that installed it (`INSTALLER`). Ex) `pip`, `uv`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer: Option<String>,
    /// The index its release is published in, as its METADATA records it
    /// (`Project-URL: Package index`, `--index-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// A variant wheel's label (PEP 825: its `variant.json`), when it was installed from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The files its RECORD names inside site-packages, relative to it.
    #[serde(skip)]
    pub files: Vec<String>,
    #[serde(skip)]
    pub provides_extra: Vec<String>,
    #[serde(skip)]
    pub requires_dist: Vec<Requirement>,
}

/// A `site-packages` directory and what is installed in it.
#[derive(Debug)]
pub struct Site {
    pub root: PathBuf,
    pub distributions: Vec<Distribution>,
    /// Distributions that could not be read: (dist-info directory, why).
    pub unreadable: Vec<(String, String)>,
    /// How packages get into it.
    pub installer: InstallerFacts,
}

/// How packages get into an environment: what a fix that installs runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InstallerFacts {
    /// The virtual environment `site-packages` belongs to (the directory of its `pyvenv.cfg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub venv: Option<PathBuf>,
    /// Its Python: the virtual environment's `bin/python`, or the Python given as the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PathBuf>,
    /// pip is installed in it.
    pub has_pip: bool,
    /// uv made it (`uv = …` in `pyvenv.cfg`), or installed what is in it.
    pub made_by_uv: bool,
    /// uv, where the PATH doctor ran with finds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uv: Option<PathBuf>,
}

impl InstallerFacts {
    /// What `root` (a real `site-packages` path) and its distributions say: its virtual
    /// environment (`root` is `<venv>/lib/pythonX.Y/site-packages`), pip among them, uv's mark.
    fn of(root: &Path, distributions: &[Distribution]) -> InstallerFacts {
        let venv = root.ancestors().skip(1).take(3).find(|d| d.join("pyvenv.cfg").is_file()).map(Path::to_path_buf);
        let cfg = venv.as_ref().and_then(|v| crate::files::read_text_bounded(&v.join("pyvenv.cfg"), 1 << 16).ok());
        let uv_cfg = cfg.is_some_and(|c| c.lines().any(|l| l.split('=').next().is_some_and(|k| k.trim() == "uv")));
        let by_uv = distributions.iter().filter(|d| d.installer.as_deref() == Some("uv")).count();
        let python = venv.as_ref().map(|v| v.join("bin/python")).filter(|p| p.exists());
        InstallerFacts {
            venv,
            python,
            has_pip: distributions.iter().any(|d| d.name == "pip"),
            made_by_uv: uv_cfg || (by_uv > 0 && by_uv * 2 >= distributions.len()),
            uv: None,
        }
    }
}

/// Why an installed directory, distribution or file cannot be read (the caller names the
/// distribution or file).
#[derive(Debug, thiserror::Error)]
pub enum InstalledError {
    /// A directory that cannot be resolved or listed. Ex) `/venv/lib: Permission denied`
    #[error("{}: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("METADATA: {0}")]
    MetadataRead(std::io::Error),
    #[error("METADATA: {0}")]
    Metadata(#[from] crate::wheel::metadata::MetadataError),
    /// RECORD cannot be read: it is missing, not a file, or larger than any RECORD.
    #[error("RECORD: {0}")]
    RecordRead(std::io::Error),
    #[error("RECORD: {0}")]
    Record(String),
    /// The file cannot be opened (or is not a regular file), or its size read.
    #[error("{0}")]
    Open(std::io::Error),
    /// Its bytes cannot be read.
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    #[error("{0}")]
    Elf(#[from] crate::elf::ElfError),
}

/// The most of a METADATA, RECORD or small text file read.
const TEXT_MAX: u64 = 64 << 20;

impl Site {
    /// The distributions installed in `root`, sorted by name.
    pub fn read(root: &Path) -> Result<Site, InstalledError> {
        // The real path: the runtime resolves archives from the real paths of binaries.
        let dir_error = |source| InstalledError::Dir { path: root.to_path_buf(), source };
        let root = &root.canonicalize().map_err(dir_error)?;
        let entries = std::fs::read_dir(root).map_err(dir_error)?;
        let mut dist_infos: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".dist-info"))
            .collect();
        dist_infos.sort();
        let mut site = Site {
            root: root.to_path_buf(),
            distributions: Vec::new(),
            unreadable: Vec::new(),
            installer: InstallerFacts::default(),
        };
        for dist_info in dist_infos {
            match read_distribution(root, &dist_info) {
                Ok(d) => site.distributions.push(d),
                Err(e) => site.unreadable.push((dist_info, e.to_string())),
            }
        }
        site.distributions.sort_by(|a, b| a.name.cmp(&b.name));
        site.installer = InstallerFacts::of(root, &site.distributions);
        Ok(site)
    }

    /// The distribution that owns `path` (relative to site-packages), if one does.
    pub fn owner(&self, path: &str) -> Option<&Distribution> {
        self.distributions.iter().find(|d| d.files.binary_search_by(|f| f.as_str().cmp(path)).is_ok())
    }
}

fn read_distribution(root: &Path, dist_info: &str) -> Result<Distribution, InstalledError> {
    let dir = root.join(dist_info);
    let text = |name: &str| crate::files::read_text_bounded(&dir.join(name), TEXT_MAX);
    let metadata = text("METADATA").map_err(InstalledError::MetadataRead)?;
    let metadata = CoreMetadata::parse(&metadata)?;
    let record = crate::files::read_bounded(&dir.join("RECORD"), TEXT_MAX).map_err(InstalledError::RecordRead)?;
    let record = crate::wheel::record::Record::parse(&record).map_err(|e| InstalledError::Record(e.to_string()))?;
    let mut files: Vec<String> = record.rows().filter_map(|r| crate::wheel::normalize_path(r.path)).collect();
    files.sort();
    files.dedup();
    let direct_url = text("direct_url.json")
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("url").and_then(|u| u.as_str()).map(String::from));
    Ok(Distribution {
        name: metadata.package.to_string(),
        version: metadata.version.to_string(),
        dist_info: dist_info.to_string(),
        direct_url,
        installer: text("INSTALLER").ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()),
        index_url: metadata.index_url().map(str::to_string),
        variant: text(crate::wheel::variant::DIST_INFO_FILE).ok().map(|t| variant_label(&t)),
        files,
        provides_extra: metadata.provides_extra,
        requires_dist: metadata.requires_dist,
    })
}

/// A variant's label as its `variant.json` gives it (the one key of `variants`), or `?` when
/// the file names none.
fn variant_label(json: &str) -> String {
    let value: Option<serde_json::Value> = serde_json::from_str(json).ok();
    let label = value.as_ref().and_then(|v| v.get("variants")?.as_object()?.keys().next().cloned());
    label.unwrap_or_else(|| "?".to_string())
}

/// What a file on disk is, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A host ELF file (any machine but AMDGPU).
    HostElf,
    /// An AMDGPU code object, an offload bundle or a compressed one, a kpack archive.
    DeviceCode,
    /// A Windows (PE) or macOS (Mach-O) binary.
    Foreign(crate::elf::header::ForeignFormat),
    Other,
}

/// The kind of the file at `path` (a file that cannot be opened is `Other`). A PE signature
/// lies where the DOS header says, a few hundred bytes in: that much is read.
pub fn file_kind(path: &Path) -> FileKind {
    let mut head = [0u8; 512];
    let Ok(file) = crate::files::open_regular(path) else { return FileKind::Other };
    let n = read_up_to(&file, &mut head, 0);
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        let machine = head.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]])).unwrap_or(0);
        return if machine == crate::platform::EM_AMDGPU { FileKind::DeviceCode } else { FileKind::HostElf };
    }
    if gpu::is_container_magic(head) || head.starts_with(b"KPAK") {
        return FileKind::DeviceCode;
    }
    crate::elf::header::ForeignFormat::sniff(head).map_or(FileKind::Other, FileKind::Foreign)
}

fn read_up_to(file: &std::fs::File, buf: &mut [u8], at: u64) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n
}

/// A host binary read from disk: its ELF facts and the device code in it (`name` is how the
/// device code names the file, its path relative to site-packages).
pub fn read_binary(path: &Path, name: &str) -> Result<(ElfFacts, Vec<GpuCode>), InstalledError> {
    let file = crate::files::open_regular(path).map_err(InstalledError::Open)?;
    let len = file.metadata().map_err(InstalledError::Open)?.len();
    let read = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    let facts = ElfFacts::parse_by_ranges(len, &read)?;
    let hits = Hits::of_sections_read(&facts, len, &read).map_err(InstalledError::Read)?;
    // The ranges the device-code reader looks at itself (a kpack marker, the HIP wrappers).
    let mut kept = Kept::new(len);
    for (offset, size) in gpu::host_sections_read(&facts, &hits) {
        let size = size.min(len.saturating_sub(offset));
        let mut buf = vec![0u8; size as usize];
        if size > 0 && file.read_exact_at(&mut buf, offset).is_ok() {
            kept.insert(offset, &buf);
        }
    }
    let code = gpu::host_binary_view(name, &facts, &kept, &hits);
    Ok((facts, code))
}

/// A device-code file on disk (an AMDGPU or CUDA code object, an offload bundle, a compressed
/// one, a kpack or AOTriton archive): what it holds, read by position (the containers scanned
/// 4 MiB at a time, a kpack table of contents kept), so memory does not grow with its size.
pub fn read_device_file(path: &Path, name: &str) -> Result<Option<GpuCode>, InstalledError> {
    let file = crate::files::open_regular(path).map_err(InstalledError::Open)?;
    let len = file.metadata().map_err(InstalledError::Open)?.len();
    let mut head = vec![0u8; 4096.min(len) as usize];
    file.read_exact_at(&mut head, 0).map_err(InstalledError::Read)?;
    if head.starts_with(b"\x7fELF") {
        return Ok(gpu::code_object_from_header(name, &head));
    }
    let Some(patterns) = gpu::scan::Patterns::for_container(&head) else { return Ok(None) };
    let read = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    let hits = Hits::of_range_read(0, len, patterns, &read).map_err(InstalledError::Read)?;
    let mut kept = Kept::new(len);
    kept.insert(0, &head);
    let table = if head.starts_with(gpu::KPAK_MAGIC) {
        gpu::kpack_toc_range(&head, len).map(|(start, end)| (start, end - start))
    } else if head.starts_with(gpu::AKS2_MAGIC) {
        Some((0, len.min(gpu::aks2::KEEP)))
    } else {
        None
    };
    if let Some((offset, size)) = table.filter(|(_, size)| *size <= TEXT_MAX) {
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, offset).map_err(InstalledError::Read)?;
        kept.insert(offset, &buf);
    }
    Ok(gpu::container_view(name, &kept, &hits))
}

/// The device code of an installed PE file (a `.dll`, `.pyd`): its device sections from its
/// headers, their bundles scanned where they lie, a split binary's marker and wrappers read
/// (as [`gpu::pe::binary`] reads them in a wheel). `None` without device sections.
pub fn read_pe_file(path: &Path, name: &str) -> Result<Option<GpuCode>, InstalledError> {
    let file = crate::files::open_regular(path).map_err(InstalledError::Open)?;
    let len = file.metadata().map_err(InstalledError::Open)?.len();
    let mut head = vec![0u8; (gpu::pe::HEAD as u64).min(len) as usize];
    file.read_exact_at(&mut head, 0).map_err(InstalledError::Read)?;
    let sections = gpu::pe::device_sections(&head);
    if sections.is_empty() {
        return Ok(None);
    }
    let read = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    // One scan over the device sections (a `.hip_fat` and an `.nv_fatb` lie side by side).
    let in_file = sections
        .iter()
        .filter(|s| s.name.starts_with(".hip_fat") || s.name.starts_with(".nv_fatb"))
        .filter_map(|s| Some((s.offset, s.offset.checked_add(s.size).filter(|end| *end <= len)?)));
    let span =
        in_file.fold(None, |span: Option<(u64, u64)>, (a, b)| Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b)))));
    let hits = match span {
        Some((start, end)) => {
            Hits::of_range_read(start, end, gpu::scan::Patterns::HOST, &read).map_err(InstalledError::Read)?
        }
        None => Hits::default(),
    };
    let mut kept = Kept::new(len);
    for (offset, size) in gpu::pe::sections_read(&sections) {
        let size = size.min(len.saturating_sub(offset));
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, offset).map_err(InstalledError::Read)?;
        kept.insert(offset, &buf);
    }
    Ok(gpu::pe::binary(name, &sections, len, &hits, &kept))
}

/// Every regular file under `dir` (symlinks not followed: the files they name are listed
/// where they lie), as (path relative to `dir`, path), sorted by path.
pub fn files_under(dir: &Path) -> Result<Vec<(String, PathBuf)>, InstalledError> {
    let mut found = Vec::new();
    let mut pending = vec![(String::new(), dir.to_path_buf())];
    while let Some((prefix, at)) = pending.pop() {
        let dir_error = |source| InstalledError::Dir { path: at.clone(), source };
        let entries = std::fs::read_dir(&at).map_err(dir_error)?;
        for entry in entries {
            let entry = entry.map_err(dir_error)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push((rel, entry.path())),
                Ok(t) if t.is_file() => found.push((rel, entry.path())),
                _ => {}
            }
        }
    }
    found.sort();
    Ok(found)
}

/// A kpack archive on disk, read back whole as the runtime would (every frame decoded).
pub fn read_archive(path: &Path) -> gpu::kpack_read::ArchiveRead {
    let opened = crate::files::open_regular(path).and_then(|f| f.metadata().map(|m| (f, m.len())));
    match opened {
        Ok((file, len)) => gpu::kpack_read::read_archive(&|buf, at| file.read_exact_at(buf, at), len),
        Err(e) => gpu::kpack_read::ArchiveRead {
            problems: vec![gpu::kpack_read::ArchiveProblem::Io(e.to_string())],
            ..Default::default()
        },
    }
}

/// A host binary of the environment.
#[derive(Debug)]
pub struct InstalledBinary {
    /// Relative to site-packages. Ex) `torch/lib/libtorch_hip.so`
    pub path: String,
    /// Its real path relative to site-packages, symbolic links followed: where the runtime
    /// resolves its kpack search paths from (its path, when the real one leaves site-packages).
    pub real_path: String,
    /// Its distribution (an index into [`Site::distributions`]); `None`: no RECORD names it.
    pub owner: Option<usize>,
    pub facts: ElfFacts,
    pub gpu: Vec<GpuCode>,
    /// Libraries of its tree the loader finds nowhere (soname, who needs it).
    pub unfound: Vec<(String, String)>,
}

/// A kpack archive some GPU's code is looked for in.
#[derive(Debug, Default)]
pub struct ArchiveFacts {
    /// Key → the target IDs it has a code object for (those whose frames decode).
    pub toc: gpu::resolve::Toc,
    /// What is wrong with it (a frame that does not decode to its table's size, …).
    pub problems: Vec<String>,
}

/// The facts of an installed environment that `doctor` judges.
#[derive(Debug)]
pub struct Environment {
    pub site: Site,
    pub binaries: Vec<InstalledBinary>,
    /// Archives looked for, by their path relative to site-packages: `None` when none is there.
    pub archives: std::collections::BTreeMap<String, Option<ArchiveFacts>>,
    /// Files that could not be read: (path, why).
    pub unreadable: Vec<(String, String)>,
    /// Every file name in the environment, to tell a library the loader misses from one that
    /// is nowhere: file name → paths.
    pub file_names: std::collections::BTreeMap<String, Vec<String>>,
}

/// Read everything `doctor` needs of `site`: every host binary its distributions own (in
/// parallel, largest first), the loader's view of each, and the kpack archives the binaries
/// would look for on `devices`.
pub fn examine(site: Site, devices: &[gpu::TargetId], search: &super::linkage::LibrarySearch) -> Environment {
    let mut owned: Vec<(String, Option<usize>)> = Vec::new();
    let mut file_names: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (i, d) in site.distributions.iter().enumerate() {
        for f in &d.files {
            owned.push((f.clone(), Some(i)));
            let name = f.rsplit('/').next().unwrap_or(f).to_string();
            file_names.entry(name).or_default().push(f.clone());
        }
    }
    // A shared library its distribution lists that cannot be opened as a file (gone, a FIFO,
    // a directory, no permission): nothing can be said of its code, which is said.
    let mut unreadable: Vec<(String, String)> = owned
        .iter()
        .filter(|(f, _)| is_library_name(f))
        .filter_map(|(f, _)| crate::files::open_regular(&site.root.join(f)).err().map(|e| (f.clone(), e.to_string())))
        .collect();
    let hosts: Vec<(String, Option<usize>, u64)> = owned
        .into_iter()
        .filter(|(f, _)| file_kind(&site.root.join(f)) == FileKind::HostElf)
        .map(|(f, o)| {
            let size = std::fs::metadata(site.root.join(&f)).map(|m| m.len()).unwrap_or(0);
            (f, o, size)
        })
        .collect();
    let sizes: Vec<u64> = hosts.iter().map(|h| h.2).collect();
    let read = crate::parallel::largest_first(
        &sizes,
        |i| -> Result<Result<InstalledBinary, (String, String)>, ()> {
            let (path, owner, _) = &hosts[i];
            let on_disk = site.root.join(path);
            Ok(match read_binary(&on_disk, path) {
                Ok((facts, gpu)) => {
                    let tree = super::lddtree::of_disk_facts(&on_disk, &facts, search);
                    let unfound = tree
                        .libs
                        .iter()
                        .filter(|(_, l)| l.path.is_none())
                        .map(|(soname, _)| {
                            let by = tree
                                .libs
                                .iter()
                                .find(|(_, l)| l.needed.contains(soname))
                                .map(|(s, _)| s.clone())
                                .unwrap_or_else(|| path.clone());
                            (soname.clone(), by)
                        })
                        .collect();
                    let real_path = real_path_under(&site.root, path);
                    Ok(InstalledBinary { path: path.clone(), real_path, owner: *owner, facts, gpu, unfound })
                }
                Err(e) => Err((path.clone(), e.to_string())),
            })
        },
        |_| {},
    )
    .unwrap_or_default();
    let mut binaries = Vec::new();
    for r in read {
        match r {
            Ok(b) => binaries.push(b),
            Err(e) => unreadable.push(e),
        }
    }
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    // The archives each split binary would look for, read once each.
    let mut wanted: std::collections::BTreeSet<String> = Default::default();
    for b in &binaries {
        for code in b.gpu.iter().filter(|c| c.kpack_kernel.is_some()) {
            let lookup = code.kpack_lookup(&b.real_path);
            for mode in devices.iter().flat_map(gpu::resolve::modes_of) {
                wanted.extend(lookup.archive_paths(&mode));
            }
        }
    }
    let wanted: Vec<String> = wanted.into_iter().collect();
    let archives = crate::parallel::map(&wanted, |path| {
        let on_disk = site.root.join(path);
        if !on_disk.is_file() {
            return (path.clone(), None);
        }
        let read = read_archive(&on_disk);
        let mut facts =
            ArchiveFacts { problems: read.problems.iter().map(|p| p.to_string()).collect(), ..Default::default() };
        for o in read.objects {
            facts.toc.entry(o.key).or_default().push(gpu::TargetId::from_code(o.target));
        }
        (path.clone(), Some(facts))
    })
    .into_iter()
    .collect();
    unreadable.sort();
    Environment { site, binaries, archives, unreadable, file_names }
}

/// A shared library's file name: `x.so`, `libx.so.1.2`.
fn is_library_name(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so") || name.contains(".so.")
}

/// Installed files read as `show` reads a wheel's members, each named by its path relative to
/// the directory shown (`files`: name, path on disk): host binaries' facts and device code,
/// device-code files, PE and Mach-O binaries counted. Nothing is hashed (no RECORD is
/// compared). A binary's `$ORIGIN` search paths are also given as the absolute directories
/// they name on disk, each right after its own, so that libraries beside the files shown but
/// outside them resolve where the loader would find them.
pub fn analyse_files(files: &[(String, PathBuf)]) -> super::Analysis {
    use crate::elf::header::ForeignFormat;
    enum Read {
        Host(Box<ElfFacts>, Vec<GpuCode>),
        Device(Option<Box<GpuCode>>),
        Pe(Option<Box<GpuCode>>),
        MachO,
        Other,
        Failed(String),
    }
    let sizes: Vec<u64> = files.iter().map(|(_, p)| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).collect();
    let read = crate::parallel::largest_first(
        &sizes,
        |i| -> Result<Read, ()> {
            let (name, path) = &files[i];
            Ok(match file_kind(path) {
                FileKind::HostElf => match read_binary(path, name) {
                    Ok((mut facts, code)) => {
                        let dir = path.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
                        if let Some(dir) = dir {
                            facts.rpath = with_origin_expanded(&facts.rpath, &dir);
                            facts.runpath = with_origin_expanded(&facts.runpath, &dir);
                        }
                        Read::Host(Box::new(facts), code)
                    }
                    Err(e) => Read::Failed(e.to_string()),
                },
                FileKind::DeviceCode => read_device_file(path, name)
                    .map_or_else(|e| Read::Failed(e.to_string()), |c| Read::Device(c.map(Box::new))),
                FileKind::Foreign(ForeignFormat::Pe) => {
                    read_pe_file(path, name).map_or_else(|e| Read::Failed(e.to_string()), |c| Read::Pe(c.map(Box::new)))
                }
                FileKind::Foreign(ForeignFormat::MachO) => Read::MachO,
                FileKind::Other => Read::Other,
            })
        },
        |_| {},
    )
    .unwrap_or_default();
    let mut analysis = super::Analysis::empty();
    for ((name, _), read) in files.iter().zip(read) {
        let note = |message: String| super::Note { file: name.clone(), message };
        match read {
            Read::Host(facts, code) => {
                analysis.binary_formats.elf += 1;
                for f in crate::elf::lint::loadability(&facts) {
                    analysis.notes.push(note(format!("not loadable ({}): {}", f.rule, f.message)));
                }
                analysis.elf.push(super::ElfMember { path: name.clone(), facts: *facts });
                analysis.gpu.extend(code);
            }
            Read::Device(code) => analysis.gpu.extend(code.map(|c| *c)),
            Read::Pe(code) => {
                analysis.binary_formats.pe += 1;
                analysis.gpu.extend(code.map(|c| *c));
            }
            Read::MachO => analysis.binary_formats.mach_o += 1,
            Read::Other => {}
            Read::Failed(why) => analysis.notes.push(note(format!("skipped: {why}"))),
        }
    }
    analysis.arch = analysis.elf.iter().find_map(|m| m.facts.arch());
    analysis.libc = analysis.elf.iter().find_map(|m| m.facts.libc()).unwrap_or(crate::platform::Libc::Glibc);
    analysis.binaries = super::host_binaries(&analysis.elf, analysis.arch, analysis.libc, &mut analysis.notes);
    analysis.notes.sort();
    analysis
}

/// `path` (under `root`, which is a real path) as its real path under `root`, symbolic links
/// followed; `path` itself when the real path leaves `root` or cannot be read.
fn real_path_under(root: &Path, path: &str) -> String {
    let real = root.join(path).canonicalize().ok();
    let under = real.as_deref().and_then(|r| r.strip_prefix(root).ok()).and_then(|r| r.to_str());
    under.map_or_else(|| path.to_string(), |r| r.replace(std::path::MAIN_SEPARATOR, "/"))
}

/// `a/b/../c` → `a/c`, as a directory's path and a relative path name it.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `entries` with each `$ORIGIN` entry followed by the absolute directory it names for a file
/// in `dir`.
fn with_origin_expanded(entries: &[String], dir: &Path) -> Vec<String> {
    let origin = dir.to_string_lossy();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        out.push(entry.clone());
        if super::linkage::is_origin_relative(entry) {
            let expanded = lexical(Path::new(&super::linkage::expand_origin(entry, &origin)));
            out.push(expanded.to_string_lossy().into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_lists_its_distributions_and_the_files_each_owns() {
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path().join("demo_pkg-1.0.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(info.join("METADATA"), "Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: 1.0\n").unwrap();
        std::fs::write(
            info.join("RECORD"),
            "demo_pkg/b.so,,\ndemo_pkg/a.py,sha256=x,1\n../../../bin/tool,,\ndemo_pkg-1.0.dist-info/RECORD,,\n",
        )
        .unwrap();
        std::fs::write(info.join("INSTALLER"), "pip\n").unwrap();
        std::fs::create_dir_all(dir.path().join("broken-2.dist-info")).unwrap();
        let site = Site::read(dir.path()).unwrap();
        assert_eq!(site.distributions.len(), 1);
        let d = &site.distributions[0];
        assert_eq!((d.name.as_str(), d.version.as_str(), d.installer.as_deref()), ("demo-pkg", "1.0", Some("pip")));
        assert_eq!(d.files, ["demo_pkg-1.0.dist-info/RECORD", "demo_pkg/a.py", "demo_pkg/b.so"]);
        assert_eq!(site.owner("demo_pkg/b.so").map(|d| d.name.as_str()), Some("demo-pkg"));
        assert!(site.owner("bin/tool").is_none(), "a path outside site-packages is no file of it");
        assert_eq!(site.unreadable.len(), 1, "{:?}", site.unreadable);
    }
}
