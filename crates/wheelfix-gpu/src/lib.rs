//! GPU code in wheels: AMDGPU and NVIDIA code objects, clang offload bundles (plain and
//! compressed), HIP fat binaries inside host libraries, and kpack-split device code.
//!
//! Layouts: `../shared/reference/gpu-code-formats.md` (LLVM's `OffloadBundler.cpp`,
//! `AMDGPUUsage.rst`, ROCm's rocm-kpack). Every reader here is bounded: a lying header yields a
//! note, never a panic or an unbounded allocation.
//!
//! Why one file: the containers' types, the
//! processor table (LLVM's `EF_AMDGPU_MACH` values, a long flat list) and the host-binary reader
//! that finds `.hip_fatbin` and `.nv_fatbin` sections.

use serde::{Deserialize, Serialize};

pub use targets::TargetId;

/// Keep the largest of `spares` (by `size`), largest first, as many as fit in `most` bytes: the
/// buffers and decoders kept for reuse, where a large one saves the most page faults.
pub(crate) fn keep_largest<T>(spares: &mut Vec<T>, size: impl Fn(&T) -> usize, most: usize) {
    spares.sort_by_key(|s| std::cmp::Reverse(size(s)));
    let mut held = 0;
    spares.retain(|s| {
        held += size(s);
        held <= most
    });
}

pub mod aks2;
pub mod bundle;
pub mod bundle_read;
pub mod codec;
pub mod compressors;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod kpack;
pub mod kpack_read;
pub mod pe;
pub mod positional;
pub mod resolve;
pub mod rewrite;
pub mod scan;
pub mod targets;

use wheelfix_base::le;
use wheelfix_base::platform::{EM_AMDGPU, EM_CUDA};
use wheelfix_elf::ElfFacts;
use wheelfix_elf::header::{ElfIdent, gpu_header_fields};
use wheelfix_elf::view::FileView;

/// `__CLANG_OFFLOAD_BUNDLE__`
pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Compressed offload bundle.
pub const CCOB_MAGIC: &[u8] = b"CCOB";
/// kpack archive of split device code.
pub const KPAK_MAGIC: &[u8] = b"KPAK";
/// LLVM OffloadBinary (new offload driver).
pub const OFFLOAD_BINARY_MAGIC: &[u8] = &[0x10, 0xff, 0x10, 0xad];
/// NVIDIA fatbin container, little-endian `0xBA55ED50`.
pub const NV_FATBIN_MAGIC: &[u8] = &[0x50, 0xed, 0x55, 0xba];
/// AOTriton kernel storage v2.
pub const AKS2_MAGIC: &[u8] = b"AKS2";

/// The most a compressed bundle may decode to while we read it.
pub const MAX_DECODED: usize = 64 << 20;

/// What kind of device-code container a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Container {
    /// A standalone AMDGPU ELF code object (`.co`, `.hsaco`).
    AmdgpuElf,
    /// An uncompressed clang offload bundle file.
    OffloadBundle,
    /// A compressed offload bundle file (`CCOB`).
    CompressedOffloadBundle,
    /// A host binary whose `.hip_fatbin` section holds bundles.
    HipFatbin,
    /// A host binary whose device code was moved out by kpack (`.rocm_kpack_ref`).
    KpackSplit,
    /// A kpack archive (`KPAK`) of device code.
    KpackArchive,
    /// An LLVM OffloadBinary.
    OffloadBinary,
    /// An NVIDIA cubin.
    Cubin,
    /// A host binary with an NVIDIA `.nv_fatbin` section.
    NvFatbin,
    /// Complete AMDGPU code objects embedded in a host binary's data, with no bundle around them.
    EmbeddedCodeObject,
    /// Offload bundles in a host binary's data sections, outside `.hip_fatbin` (loaded by
    /// pointer: tensorflow-rocm's generated kernels in `.rodata`).
    BundleInData,
    /// An AOTriton kernel archive (`AKS2`): an xz stream of code objects.
    AotritonArchive,
    /// A Windows PE/COFF binary whose `.hip_fat` section holds bundles.
    PeHipFatbin,
}

impl Container {
    /// Whether its device code lies in offload bundles (what `thin` rewrites).
    pub fn holds_bundles(self) -> bool {
        matches!(
            self,
            Container::HipFatbin
                | Container::OffloadBundle
                | Container::CompressedOffloadBundle
                | Container::BundleInData
                | Container::PeHipFatbin
        )
    }
}

/// The device code found in one member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCode {
    pub file: String,
    pub container: Container,
    /// Full target IDs, sorted. Ex) `gfx942:sramecc+:xnack-`, `sm_90`
    pub targets: Vec<TargetId>,
    /// AMDGPU code object versions seen (`4` = code object V4), sorted.
    pub code_object_versions: Vec<u32>,
    /// Code objects counted (bundle entries without the host entry).
    pub objects: usize,
    /// Code objects and their uncompressed bytes, by full target id, where a container says
    /// how large each is (offload bundle entries): what `thin` to one target keeps of this file.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub target_bytes: std::collections::BTreeMap<TargetId, Count>,
    /// Human details: container versions and compression, kpack references, problems.
    pub notes: Vec<String>,
    /// Where a kpack-split binary looks for its device code (`.rocm_kpack_ref`), relative to its
    /// directory. Ex) `../.kpack/foo_lib_@GFXARCH@.kpack`
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kpack_search_paths: Vec<String>,
    /// Bundles that cannot be read (a lying header, a stream that does not decode), each also a
    /// note: a file `thin` must not rewrite.
    #[serde(skip)]
    pub bundle_problems: Vec<String>,
    /// Where `thin` rewrites the bundles in place, [start, end): each bundle in an ELF file's
    /// data ([`Container::BundleInData`]), a PE file's `.hip_fat` raw data
    /// ([`Container::PeHipFatbin`]).
    #[serde(skip)]
    pub bundle_spans: Vec<(u64, u64)>,
    /// A kpack-split binary: its kernel name and how many HIP wrappers it has (each looks up
    /// `<kernel_name>#<index>` in an archive).
    #[serde(skip)]
    pub kpack_kernel: Option<(String, usize)>,
    /// A kpack archive: the target ids each key of its table of contents has a code object for.
    #[serde(skip)]
    pub kpack_toc: std::collections::BTreeMap<String, Vec<TargetId>>,
    /// A kpack-split binary whose wrappers or markers the runtime could not use (each also a
    /// note): that code fails to load.
    #[serde(skip)]
    pub kpack_marker_problems: Vec<String>,
    /// The target IDs of each offload bundle read, in the order read: a binary runs on a GPU
    /// only where every bundle (each a translation unit's kernels) has code for it.
    #[serde(skip)]
    pub bundle_targets: Vec<Vec<TargetId>>,
}

impl GpuCode {
    /// No device code found yet in `file`, a container of `kind`.
    pub fn new(file: &str, container: Container) -> Self {
        GpuCode {
            file: file.to_string(),
            container,
            targets: Vec::new(),
            code_object_versions: Vec::new(),
            objects: 0,
            target_bytes: Default::default(),
            notes: Vec::new(),
            kpack_search_paths: Vec::new(),
            bundle_problems: Vec::new(),
            bundle_spans: Vec::new(),
            kpack_kernel: None,
            kpack_toc: Default::default(),
            kpack_marker_problems: Vec::new(),
            bundle_targets: Vec::new(),
        }
    }

    fn finish(mut self) -> Self {
        self.targets.sort();
        self.targets.dedup();
        self.code_object_versions.sort();
        self.code_object_versions.dedup();
        self.notes.dedup();
        self
    }

    /// A bundle of this file cannot be read: a note, and a reason `thin` refuses the file.
    pub(crate) fn unreadable(&mut self, problem: String) {
        self.notes.push(problem.clone());
        self.bundle_problems.push(problem);
    }

    /// Whether this is a GPU runtime's own library ([`targets::is_runtime_library`]): its
    /// built-in kernels run the runtime, so they are never the package's device code.
    pub fn is_runtime_code(&self) -> bool {
        targets::is_runtime_library(&self.file)
    }

    /// A kpack-split binary's marker as the runtime starts from it, the binary at `path` (under
    /// the root its archives' paths are relative to); a binary without a marker has no kernel
    /// name and no search paths, and finds nothing.
    pub fn kpack_lookup<'a>(&'a self, path: &'a str) -> resolve::Lookup<'a> {
        let kernel_name = self.kpack_kernel.as_ref().map_or("", |(name, _)| name.as_str());
        resolve::Lookup { binary: path, kernel_name, search_paths: &self.kpack_search_paths }
    }

    /// Its targets' processors, without feature settings. Ex) `gfx90a:xnack+` → `gfx90a`
    pub fn base_targets(&self) -> impl Iterator<Item = &str> {
        self.targets.iter().map(TargetId::processor)
    }

    /// Whether it holds AMD device code a package runs: AMDGPU targets (not NVIDIA's), or a
    /// kpack-split binary's moved-out code; never a GPU runtime's own kernels.
    pub fn is_package_amd_code(&self) -> bool {
        !self.is_runtime_code() && (self.kpack_kernel.is_some() || self.targets.iter().any(TargetId::is_amdgpu))
    }
}

/// Uncompressed bytes of bundled code objects by processor (features folded in), across files
/// (a GPU runtime's own library apart, [`GpuCode::is_runtime_code`]):
/// what `thin --gpu-target` keeps or drops. Ex) {`gfx942`: 41 MB, `gfx950`: 43 MB}
pub fn device_bytes(gpu: &[GpuCode]) -> std::collections::BTreeMap<String, u64> {
    let mut bytes = std::collections::BTreeMap::new();
    for (target, n) in gpu.iter().filter(|g| !g.is_runtime_code()).flat_map(|g| &g.target_bytes) {
        *bytes.entry(target.processor().to_string()).or_default() += n.bytes;
    }
    bytes
}

/// Code objects and their uncompressed bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub objects: usize,
    pub bytes: u64,
}

impl Count {
    pub fn add(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes += bytes;
    }

    /// Add counts by target into `into`. Ex) two files' kept code objects, summed
    pub fn sum_into(
        into: &mut std::collections::BTreeMap<TargetId, Count>,
        from: impl IntoIterator<Item = (TargetId, Count)>,
    ) {
        for (target, count) in from {
            let total = into.entry(target).or_default();
            total.objects += count.objects;
            total.bytes += count.bytes;
        }
    }
}

/// Whether the first bytes of a member announce a device-code container that is not ELF.
pub fn is_container_magic(head: &[u8]) -> bool {
    [BUNDLE_MAGIC, CCOB_MAGIC, KPAK_MAGIC, OFFLOAD_BINARY_MAGIC, NV_FATBIN_MAGIC, AKS2_MAGIC]
        .iter()
        .any(|m| head.starts_with(m))
}

/// A GPU ELF (AMDGPU or CUDA) needs only its header: this decodes a standalone code object.
pub fn code_object_from_header(file: &str, head: &[u8]) -> Option<GpuCode> {
    let machine = ElfIdent::parse(head)?.machine;
    let (flags, os_abi, abi_version) = gpu_header_fields(head)?;
    let mut code = match machine {
        EM_AMDGPU => {
            let mut code = GpuCode::new(file, Container::AmdgpuElf);
            let (target, cov) = amdgpu_target(flags, os_abi, abi_version);
            code.targets.push(target);
            code.code_object_versions.extend(cov);
            code
        }
        EM_CUDA => {
            let mut code = GpuCode::new(file, Container::Cubin);
            code.targets.push(cuda_target(flags, abi_version));
            code
        }
        _ => return None,
    };
    code.objects = 1;
    Some(code.finish())
}

/// The target ID and code object version of an AMDGPU ELF header.
pub fn amdgpu_target(flags: u32, os_abi: u8, abi_version: u8) -> (TargetId, Option<u32>) {
    const ELFOSABI_AMDGPU_HSA: u8 = 64;
    let mach = flags & 0xff;
    let name = mach_name(mach).map(str::to_string).unwrap_or_else(|| format!("mach0x{mach:02x}"));
    let cov = (os_abi == ELFOSABI_AMDGPU_HSA).then(|| u32::from(abi_version) + 2);
    let mut features: Vec<String> = Vec::new();
    match cov {
        Some(2) if flags & 0x01 != 0 => features.push("xnack+".into()),
        Some(2) => {}
        Some(3) => {
            if flags & 0x200 != 0 {
                features.push("sramecc+".into());
            }
            if flags & 0x100 != 0 {
                features.push("xnack+".into());
            }
        }
        Some(_) => {
            match flags & 0xc00 {
                0x800 => features.push("sramecc-".into()),
                0xc00 => features.push("sramecc+".into()),
                _ => {}
            }
            match flags & 0x300 {
                0x200 => features.push("xnack-".into()),
                0x300 => features.push("xnack+".into()),
                _ => {}
            }
        }
        None => {}
    }
    let target = std::iter::once(name).chain(features).collect::<Vec<_>>().join(":");
    (TargetId::from_code(target), cov)
}

/// `EF_AMDGPU_MACH` → processor name (LLVM main; generic targets included; and gfx940, gfx941,
/// which LLVM 20 dropped and ROCm 6 wheels still ship). The one table of processors: what is
/// not here is not a processor wheelfix accepts.
pub fn mach_name(mach: u32) -> Option<&'static str> {
    const TABLE: &[(u32, &str)] = &[
        (0x20, "gfx600"),
        (0x21, "gfx601"),
        (0x22, "gfx700"),
        (0x23, "gfx701"),
        (0x24, "gfx702"),
        (0x25, "gfx703"),
        (0x26, "gfx704"),
        (0x28, "gfx801"),
        (0x29, "gfx802"),
        (0x2a, "gfx803"),
        (0x2b, "gfx810"),
        (0x2c, "gfx900"),
        (0x2d, "gfx902"),
        (0x2e, "gfx904"),
        (0x2f, "gfx906"),
        (0x30, "gfx908"),
        (0x31, "gfx909"),
        (0x32, "gfx90c"),
        (0x33, "gfx1010"),
        (0x34, "gfx1011"),
        (0x35, "gfx1012"),
        (0x36, "gfx1030"),
        (0x37, "gfx1031"),
        (0x38, "gfx1032"),
        (0x39, "gfx1033"),
        (0x3a, "gfx602"),
        (0x3b, "gfx705"),
        (0x3c, "gfx805"),
        (0x3d, "gfx1035"),
        (0x3e, "gfx1034"),
        (0x3f, "gfx90a"),
        (0x40, "gfx940"),
        (0x41, "gfx1100"),
        (0x42, "gfx1013"),
        (0x43, "gfx1150"),
        (0x44, "gfx1103"),
        (0x45, "gfx1036"),
        (0x46, "gfx1101"),
        (0x47, "gfx1102"),
        (0x48, "gfx1200"),
        (0x49, "gfx1250"),
        (0x4a, "gfx1151"),
        (0x4b, "gfx941"),
        (0x4c, "gfx942"),
        (0x4e, "gfx1201"),
        (0x4f, "gfx950"),
        (0x50, "gfx1310"),
        (0x51, "gfx9-generic"),
        (0x52, "gfx10-1-generic"),
        (0x53, "gfx10-3-generic"),
        (0x54, "gfx11-generic"),
        (0x55, "gfx1152"),
        (0x57, "gfx1154"),
        (0x58, "gfx1153"),
        (0x59, "gfx12-generic"),
        (0x5a, "gfx1251"),
        (0x5b, "gfx12-5-generic"),
        (0x5c, "gfx1172"),
        (0x5d, "gfx1170"),
        (0x5e, "gfx1171"),
        (0x5f, "gfx9-4-generic"),
        (0x62, "gfx11-7-generic"),
        (0x63, "gfx13-generic"),
    ];
    TABLE.iter().find(|(m, _)| *m == mach).map(|(_, n)| *n)
}

/// `sm_XX` of a cubin: the SM number sits in the low byte of `e_flags` for ABI version 7 and in
/// the second byte for the newer ABI version 8.
fn cuda_target(flags: u32, abi_version: u8) -> TargetId {
    let sm = if abi_version >= 8 { (flags & 0xff00) >> 8 } else { flags & 0xff };
    TargetId::from_code(format!("sm_{sm}"))
}

/// Device code in a member held whole that is not ELF (bundle, CCOB, kpack archive,
/// OffloadBinary, fatbin).
pub fn container_file(file: &str, data: &[u8]) -> Option<GpuCode> {
    let patterns = scan::Patterns::for_container(data)?;
    container_view(file, data, &scan::Hits::of(data, patterns))
}

/// Device code in a member that is not ELF, from a view of its bytes and the containers found
/// in them (scanned with [`scan::Patterns::for_container`]).
pub fn container_view<V: FileView + ?Sized>(file: &str, view: &V, hits: &scan::Hits) -> Option<GpuCode> {
    let len = view.len();
    let head = view.get(0, (BUNDLE_MAGIC.len() as u64).min(len)).ok()?;
    let mut code = if head.starts_with(BUNDLE_MAGIC) {
        let mut code = GpuCode::new(file, Container::OffloadBundle);
        hits.blob(0, len, &mut code);
        code
    } else if head.starts_with(CCOB_MAGIC) {
        let mut code = GpuCode::new(file, Container::CompressedOffloadBundle);
        hits.blob(0, len, &mut code);
        code
    } else if head.starts_with(KPAK_MAGIC) {
        kpack_archive(file, view)
    } else if head.starts_with(OFFLOAD_BINARY_MAGIC) {
        let mut code = GpuCode::new(file, Container::OffloadBinary);
        hits.arch_values(0, len, &mut code);
        code
    } else if head.starts_with(NV_FATBIN_MAGIC) {
        let mut code = GpuCode::new(file, Container::NvFatbin);
        hits.nv_fatbins(0, len, &mut code);
        code
    } else if head.starts_with(AKS2_MAGIC) {
        aks2::archive(file, view)
    } else {
        return None;
    };
    code.notes.sort();
    Some(code.finish())
}

/// Device code embedded in a host binary held whole.
pub fn host_binary(file: &str, facts: &ElfFacts, data: &[u8]) -> Vec<GpuCode> {
    host_binary_view(file, facts, data, &scan::Hits::of_sections(data, facts))
}

/// Device code embedded in a host binary: `.hip_fatbin` (bundles or CCOBs) or kpack references,
/// `.nv_fatbin`, and code objects embedded in its data without a bundle (one entry for each
/// kind); from a view of the file and the containers found in it ([`scan::Patterns::HOST`]). A
/// section whose bytes the view lacks is read as far as the containers found in it go.
pub fn host_binary_view<V: FileView + ?Sized>(
    file: &str,
    facts: &ElfFacts,
    view: &V,
    hits: &scan::Hits,
) -> Vec<GpuCode> {
    // A section's range in the file; none for SHT_NOBITS or one past the end of the file.
    let section_range = |name: &str| -> Option<(u64, u64)> {
        let s = facts.section(name)?;
        let end = s.offset.checked_add(s.size)?;
        (s.has_file_bytes() && end <= view.len()).then_some((s.offset, end))
    };
    if let Some(reference) = facts.section(kpack::MARKER_SECTION) {
        return vec![kpack_referenced(file, facts, view, reference)];
    }
    if facts.sections.is_empty() {
        return sectionless_bundles(file, view.len(), hits).into_iter().collect();
    }
    let mut found = Vec::new();
    let fatbins = fatbins_in_data(file, facts, view.len(), hits);
    // A compacted file has one `.hip_fatbin` section per piece (`wheelfix_elf::layout`).
    let fatbin_pieces: Vec<(u64, u64)> = facts
        .sections_named(".hip_fatbin")
        .filter_map(|s| Some((s.offset, s.offset.checked_add(s.size)?)))
        .filter(|&(_, end)| end <= view.len())
        .collect();
    if section_range(".hip_fatbin").is_some() {
        let mut code = GpuCode::new(file, Container::HipFatbin);
        for &(start, end) in &fatbin_pieces {
            hits.blob(start, end, &mut code);
        }
        let split = fatbin_pieces.first().filter(|_| code.objects == 0).and_then(|&(start, end)| {
            let bytes = view.get(start, (end - start).min(kpack::MARKER_MAX)).ok()?;
            kpack::read_marker(bytes)
        });
        // `wheelfix split`'s layout: the bundles' space holds kpack markers, the wrappers are
        // HIPK. Either says so, so that a damaged first marker is reported, not taken for
        // a binary without device code.
        if split.is_some() || (code.objects == 0 && any_wrapper_hipk(facts, view)) {
            let mut code = GpuCode::new(file, Container::KpackSplit);
            code.notes.push("device code was split out by kpack: it lives in .kpack archives, not in this file".into());
            if let Some((kernel_name, search_paths)) = split {
                code.notes.push(format!("kernel name: {kernel_name}"));
                code.notes.push(format!("kpack search paths: {}", search_paths.join(", ")));
                code.kpack_search_paths = search_paths;
                code.kpack_kernel = Some((kernel_name, wrapper_count(facts)));
            }
            kpack_wrapper_problems(facts, view, &mut code);
            kpack_marker_problems(&fatbin_pieces, wrapper_count(facts), view, &mut code);
            found.push(code.finish());
            return found;
        }
        if code.objects == 0 && code.notes.is_empty() {
            code.notes.push("the .hip_fatbin section holds no offload bundle".into());
        }
        found.push(code.finish());
    } else if let Some(s) = facts.section(".hip_fatbin").filter(|s| s.has_file_bytes()) {
        // A header that puts the section past the end of the file: the loader would not find
        // this code either, and `thin` must not rewrite what it cannot place. Said, and what
        // the magic finds is listed.
        let mut code = GpuCode::new(file, Container::HipFatbin);
        let problem = format!(
            "the .hip_fatbin section header (offset {}, size {}) runs past the end of the file ({} bytes): the section cannot be read; the bundles listed were found by their magic",
            s.offset,
            s.size,
            view.len()
        );
        code.notes.push(problem.clone());
        code.bundle_problems.push(problem);
        hits.blob(past_the_file(s.offset, view.len()), view.len(), &mut code);
        found.push(code.finish());
    } else if let Some((start, end)) = section_range(".nv_fatbin") {
        let mut code = GpuCode::new(file, Container::NvFatbin);
        hits.nv_fatbins(start, end, &mut code);
        if let Some(more) = fatbins {
            code.objects += more.objects;
            code.targets.extend(more.targets);
            code.notes.extend(more.notes);
        }
        found.push(code.finish());
    } else if let Some(code) = fatbins {
        found.push(code);
    }
    let (bundles, bundled) = bundles_in_data(file, facts, view.len(), hits);
    found.extend(embedded_code_objects(file, facts, view.len(), hits, &bundled));
    found.extend(bundles);
    found
}

/// A host binary split by kpack with a `.rocm_kpack_ref` section: its marker (kernel name,
/// search paths) and whatever keeps the runtime from using it or its wrappers.
fn kpack_referenced<V: FileView + ?Sized>(
    file: &str,
    facts: &ElfFacts,
    view: &V,
    reference: &wheelfix_elf::SectionInfo,
) -> GpuCode {
    let mut code = GpuCode::new(file, Container::KpackSplit);
    code.notes.push("device code was split out by kpack: it lives in .kpack archives, not in this file".into());
    // The runtime reads at most a marker's worth at the wrapper's pointer, whatever the section
    // header claims (a header may claim more than any file holds).
    if let Ok(bytes) = view.get(reference.offset, reference.size.min(kpack::MARKER_MAX)) {
        match msgpack::parse(bytes) {
            Ok(value) => {
                if let Some(name) = value.get("kernel_name").and_then(|v| v.as_str()) {
                    code.notes.push(format!("kernel name: {name}"));
                    code.kpack_kernel = Some((name.to_string(), wrapper_count(facts)));
                }
                if let Some(paths) = value.get("kpack_search_paths").and_then(|v| v.as_array()) {
                    code.kpack_search_paths = paths.iter().filter_map(|p| p.as_str()).map(String::from).collect();
                    code.notes.push(format!("kpack search paths: {}", code.kpack_search_paths.join(", ")));
                }
            }
            Err(e) => code.notes.push(format!("unreadable .rocm_kpack_ref: {e}")),
        }
        // wheelfix's split leaves every marker in the sections that held the bundles
        // (`.rocm_kpack_moved`, or `.hip_fatbin` over which the first marker was named):
        // each is checked. Elsewhere (TheRock's), the one marker.
        let mut pieces: Vec<(u64, u64)> = spent_fatbins(facts)
            .filter_map(|s| Some((s.offset, s.offset.checked_add(s.size)?)))
            .filter(|&(_, end)| end <= view.len())
            .collect();
        let covered = pieces.iter().any(|&(a, b)| a <= reference.offset && reference.offset < b);
        if covered || facts.sections_named(kpack::MOVED_SECTION).next().is_some() {
            if !covered {
                pieces.push((reference.offset, reference.offset + bytes.len() as u64));
                pieces.sort_unstable();
            }
            kpack_marker_problems(&pieces, wrapper_count(facts), view, &mut code);
        } else if let Err(e) = kpack::usable_marker(bytes) {
            let problem = format!("a kpack marker the runtime cannot use: its .rocm_kpack_ref marker: {e}");
            code.notes.push(problem.clone());
            code.kpack_marker_problems.push(problem);
        }
    }
    kpack_wrapper_problems(facts, view, &mut code);
    code.finish()
}

/// Where to look for the bundles of a device-code section whose header runs past the end of a
/// file of `len` bytes: from its offset, or from the start when that is past the end too.
pub(crate) fn past_the_file(offset: u64, len: u64) -> u64 {
    if offset < len { offset } else { 0 }
}

/// The data sections of a host binary where device code may lie outside its own sections: not
/// code, not `.hip_fatbin` or `.nv_fatbin`, with bytes in the file: (start, end, name).
fn data_sections(facts: &ElfFacts, len: u64, min_size: u64) -> impl Iterator<Item = (u64, u64, &str)> {
    const SHF_EXECINSTR: u64 = 4;
    facts.sections.iter().filter_map(move |s| {
        let end = s.offset.saturating_add(s.size);
        let device_section = matches!(s.name.as_str(), ".hip_fatbin" | ".nv_fatbin");
        let skip =
            !s.has_file_bytes() || s.flags & SHF_EXECINSTR != 0 || device_section || end > len || s.size < min_size;
        (!skip).then_some((s.offset, end, s.name.as_str()))
    })
}

/// Offload bundles in the data sections of a host binary (outside `.hip_fatbin`), each
/// validated by its table ([`scan::Hits::bundles_in_data`]): one [`GpuCode`] for those `thin`
/// rewrites where they lie (loaded by pointer, each parsed by its table), another for those in
/// `.kernel`, HCC's section (ROCm 2 and earlier), left as they are: HCC's runtime finds them
/// itself, and whether a bundle grown shorter would still be found is not known here.
/// Also every bundle's [start, end), sorted.
fn bundles_in_data(file: &str, facts: &ElfFacts, len: u64, hits: &scan::Hits) -> (Vec<GpuCode>, Vec<(u64, u64)>) {
    let (mut found, mut all) = (Vec::new(), Vec::new());
    for hcc in [false, true] {
        let mut code = GpuCode::new(file, Container::BundleInData);
        let (mut places, mut spans) = (Vec::new(), Vec::new());
        for (start, end, name) in data_sections(facts, len, 32).filter(|(_, _, name)| (*name == ".kernel") == hcc) {
            let here = hits.bundles_in_data(start, end, &mut code);
            if !here.is_empty() {
                places.push(format!("{} in `{name}`", here.len()));
                spans.extend(here);
            }
        }
        if spans.is_empty() {
            continue;
        }
        all.extend(&spans);
        code.notes.push(format!("offload bundles outside .hip_fatbin: {}", places.join(", ")));
        if hcc {
            code.notes.push("`.kernel` is HCC's (ROCm 2 and earlier), whose runtime finds these bundles itself: `thin` leaves them as they are".into());
        } else {
            spans.sort_unstable();
            code.bundle_spans = spans;
        }
        found.push(code.finish());
    }
    all.sort_unstable();
    (found, all)
}

/// A host binary without a section header table (stripped of it; it still loads): offload
/// bundles found in it by their magic are listed, and the file is said to be unanalysable for
/// `thin` and `split`, which refuse it rather than copy it fat or cut what they cannot place.
fn sectionless_bundles(file: &str, len: u64, hits: &scan::Hits) -> Option<GpuCode> {
    let mut code = GpuCode::new(file, Container::HipFatbin);
    hits.blob(0, len, &mut code);
    if code.objects == 0 && code.bundle_problems.is_empty() {
        return None;
    }
    code.unreadable(format!(
        "the file has no section header table: its {} code objects were found by their bundles' magic, and without `.hip_fatbin` and `.hipFatBinSegment` nothing says which wrapper owns which bundle; `thin` and `split` cannot rewrite it",
        code.objects
    ));
    Some(code.finish())
}

/// NVIDIA fatbins in the data of a host binary outside `.nv_fatbin` (CUPTI keeps its kernels in
/// `.rodata`, bitsandbytes its PTX in `__nv_relfatbin`), each validated by its header.
fn fatbins_in_data(file: &str, facts: &ElfFacts, len: u64, hits: &scan::Hits) -> Option<GpuCode> {
    let mut code = GpuCode::new(file, Container::NvFatbin);
    let mut places: Vec<String> = Vec::new();
    for (start, end, name) in data_sections(facts, len, 32) {
        let n = hits.nv_fatbins_in_data(start, end, &mut code);
        if n > 0 {
            places.push(format!("{n} in `{name}`"));
        }
    }
    if code.objects == 0 {
        return None;
    }
    code.notes.push(format!("fatbins outside .nv_fatbin: {}", places.join(", ")));
    Some(code.finish())
}

/// Whole AMDGPU code objects inside the data sections of a host binary (not in its code, not in
/// a bundle, whose table counts them), each validated by its header. `bundled`: the bundles
/// found in the data, sorted.
fn embedded_code_objects(
    file: &str,
    facts: &ElfFacts,
    len: u64,
    hits: &scan::Hits,
    bundled: &[(u64, u64)],
) -> Option<GpuCode> {
    let mut code = GpuCode::new(file, Container::EmbeddedCodeObject);
    let mut rejected = 0;
    for (start, end, _) in data_sections(facts, len, 64) {
        rejected += hits.code_objects(start, end, bundled, &mut code);
    }
    if code.objects == 0 {
        return None;
    }
    if rejected > 0 {
        code.notes.push(format!(
            "{} in the data: no code object, ignored",
            wheelfix_base::log::plural(rejected, "ELF magic")
        ));
    }
    code.notes.push(format!("{} embedded without a bundle", wheelfix_base::log::plural(code.objects, "code object")));
    Some(code.finish())
}

/// A standalone AMDGPU code object's target and version from its header, when the header is one:
/// 64-bit little-endian ELF, e_machine 224, a relocatable or shared object, a known processor, and
/// header tables that end within `room` bytes. Returns the target, the code object version and
/// the object's length (the end of its last header table).
pub fn embedded_object(header: &[u8], room: u64) -> Option<(TargetId, Option<u32>, u64)> {
    let u16_at = |at: usize| le::u16_at(header, at).map(u64::from);
    let u64_at = |at: usize| le::u64_at(header, at);
    let ident = ElfIdent::parse(header)?;
    if !ident.is_64 || !ident.little_endian || ident.machine != EM_AMDGPU || header.len() < 64 {
        return None;
    }
    let (e_type, ehsize) = (u16_at(16)?, u16_at(52)?);
    let (phoff, phentsize, phnum) = (u64_at(32)?, u16_at(54)?, u16_at(56)?);
    let (shoff, shentsize, shnum) = (u64_at(40)?, u16_at(58)?, u16_at(60)?);
    let tables_fit = (phnum == 0 || phentsize == 56) && (shnum == 0 || shentsize == 64);
    if !matches!(e_type, 1 | 3) || ehsize != 64 || !tables_fit {
        return None;
    }
    let length = phoff.checked_add(phnum * 56)?.max(shoff.checked_add(shnum * 64)?).max(64);
    let (flags, os_abi, abi_version) = gpu_header_fields(header)?;
    if length > room || mach_name(flags & 0xff).is_none() {
        return None;
    }
    let (target, cov) = amdgpu_target(flags, os_abi, abi_version);
    Some((target, cov, length))
}

/// The most of a split host's `.hip_fatbin` pieces read to check every marker in them: split
/// leaves a marker and the zeros of the page it starts, so a compacted host's pieces are a few
/// pages each. A host left uncompacted (its zeros still in the file) has only its first marker
/// checked, and says so.
pub const MARKERS_READ_MAX: u64 = 16 << 20;

/// Whether a wrapper of the host's `.hipFatBinSegment` (as far as the view holds it) is `HIPK`.
fn any_wrapper_hipk<V: FileView + ?Sized>(facts: &ElfFacts, view: &V) -> bool {
    let Some(s) = facts.section(".hipFatBinSegment").filter(|s| s.has_file_bytes()) else { return false };
    view.get(s.offset, wrappers_len(s))
        .is_ok_and(|b| b.chunks_exact(kpack::WRAPPER_LEN as usize).any(|w| w[..4] == kpack::HIPK))
}

/// A kpack-split host whose wrappers are not all `HIPK`: a wrapper still `HIPF` points at
/// device code that is no longer there.
fn kpack_wrapper_problems<V: FileView + ?Sized>(facts: &ElfFacts, view: &V, code: &mut GpuCode) {
    let Some(s) = facts.section(".hipFatBinSegment").filter(|s| s.has_file_bytes()) else { return };
    let Ok(bytes) = view.get(s.offset, wrappers_len(s)) else { return };
    let wrappers = bytes.chunks_exact(kpack::WRAPPER_LEN as usize);
    let not_hipk: Vec<usize> = wrappers.enumerate().filter(|(_, w)| w[..4] != kpack::HIPK).map(|(i, _)| i).collect();
    if let Some(first) = not_hipk.first() {
        let problem = format!(
            "{} of its {} HIP wrappers are not HIPK (the first: wrapper {first}): the runtime looks for their device code in this file, where there is none",
            not_hipk.len(),
            bytes.len() / kpack::WRAPPER_LEN as usize,
        );
        code.notes.push(problem.clone());
        code.kpack_marker_problems.push(problem);
    }
}

/// Check every kpack marker `split` left in a host's `.hip_fatbin` pieces, as the runtime
/// reads the one each wrapper points at: a MessagePack map with a string `kernel_name` (the
/// same in all) and a non-empty array of non-empty strings `kpack_search_paths`; between them
/// only zeros; at least one (wrappers may share one).
fn kpack_marker_problems<V: FileView + ?Sized>(pieces: &[(u64, u64)], wrappers: usize, view: &V, code: &mut GpuCode) {
    let total: u64 = pieces.iter().map(|(a, b)| b - a).sum();
    if total > MARKERS_READ_MAX {
        code.notes.push(format!(
            "only the first kpack marker was checked: the .hip_fatbin pieces hold {total} bytes (the zeros split left were not taken out)"
        ));
        return;
    }
    let mut expected_name = code.kpack_kernel.as_ref().map(|(name, _)| name.clone());
    let mut problems = Vec::new();
    let mut markers = 0usize;
    for &(start, end) in pieces {
        let Ok(bytes) = view.get(start, end - start) else {
            problems.push(format!("the .hip_fatbin piece at {start} cannot be read"));
            continue;
        };
        let mut at = 0;
        while let Some(next) = bytes[at..].iter().position(|&b| b != 0) {
            at += next;
            let window = &bytes[at..bytes.len().min(at + kpack::MARKER_MAX as usize)];
            match kpack::usable_marker(window) {
                Ok((name, paths, len)) if expected_name.as_ref().is_none_or(|e| *e == name) => {
                    // The first marker was not usable: the kernel name and paths are this one's.
                    if expected_name.is_none() {
                        code.notes.push(format!("kernel name: {name}"));
                        code.kpack_search_paths = paths;
                        code.kpack_kernel = Some((name.clone(), wrappers));
                        expected_name = Some(name);
                    }
                    markers += 1;
                    at += len;
                }
                Ok((name, _, len)) => {
                    let expected = expected_name.as_deref().unwrap_or_default();
                    problems
                        .push(format!("the marker at {} names kernel `{name}`, not `{expected}`", start + at as u64));
                    at += len;
                }
                Err(e) => {
                    problems.push(format!("at {} of .hip_fatbin: {e}", start + at as u64));
                    // Past the bytes that are not a marker, to the next zeros.
                    at += bytes[at..].iter().position(|&b| b == 0).unwrap_or(bytes.len() - at);
                }
            }
        }
    }
    // Wrappers may share a marker (split points them all at the first bundle's).
    if wrappers > 0 && markers == 0 && problems.is_empty() {
        problems.push(format!("{wrappers} HIP wrappers, and no kpack marker in .hip_fatbin"));
    }
    for problem in problems.into_iter().take(10) {
        let problem = format!("a kpack marker the runtime cannot use: {problem}");
        code.notes.push(problem.clone());
        code.kpack_marker_problems.push(problem);
    }
}

/// The sections with file bytes where a wheelfix-split host's markers lie: its `.hip_fatbin`
/// pieces as `split` left them before it named them `.rocm_kpack_moved`, or those.
fn spent_fatbins(facts: &ElfFacts) -> impl Iterator<Item = &wheelfix_elf::SectionInfo> {
    facts.sections.iter().filter(|s| (s.name == ".hip_fatbin" || s.name == kpack::MOVED_SECTION) && s.has_file_bytes())
}

/// The bytes of a `.hipFatBinSegment` read: as its header says, up to [`MARKERS_READ_MAX`] (some
/// 700,000 wrappers, far more than any build has; a header may claim more than any file holds).
fn wrappers_len(section: &wheelfix_elf::SectionInfo) -> u64 {
    section.size.min(MARKERS_READ_MAX)
}

/// How many `__hip_fatbin_wrapper` records a host binary's `.hipFatBinSegment` holds.
fn wrapper_count(facts: &ElfFacts) -> usize {
    facts.section(".hipFatBinSegment").map_or(0, |s| (wrappers_len(s) / kpack::WRAPPER_LEN) as usize)
}

/// The sections [`host_binary_view`] reads from the view itself (not from the scan's hits):
/// `.rocm_kpack_ref`, and the start of a `.hip_fatbin` in which the scan found no bundle (where
/// `split` leaves its kpack marker): a binary streamed past is read again for them rather than
/// called empty.
pub fn host_sections_read(facts: &ElfFacts, hits: &scan::Hits) -> Vec<(u64, u64)> {
    let mut read: Vec<(u64, u64)> = facts
        .sections
        .iter()
        .filter(|s| s.name == kpack::MARKER_SECTION)
        .map(|s| (s.offset, s.size.min(kpack::MARKER_MAX)))
        .collect();
    let moved: Vec<(u64, u64)> = facts.sections_named(kpack::MOVED_SECTION).map(|s| (s.offset, s.size)).collect();
    if moved.iter().map(|p| p.1).sum::<u64>() <= MARKERS_READ_MAX {
        read.extend(moved);
    }
    if let Some(first) = facts.sections_named(".hip_fatbin").find(|s| s.has_file_bytes() && s.size > 0) {
        let mut found = GpuCode::new("", Container::HipFatbin);
        for s in facts.sections_named(".hip_fatbin").filter(|s| s.has_file_bytes()) {
            hits.blob(s.offset, s.offset.saturating_add(s.size), &mut found);
        }
        if found.objects == 0 {
            // Every piece when they are small enough to check each marker, else the first.
            let pieces: Vec<(u64, u64)> = facts
                .sections_named(".hip_fatbin")
                .filter(|s| s.has_file_bytes())
                .map(|s| (s.offset, s.size))
                .collect();
            if pieces.iter().map(|p| p.1).sum::<u64>() <= MARKERS_READ_MAX {
                read.extend(pieces);
            } else {
                read.push((first.offset, first.size.min(kpack::MARKER_MAX)));
            }
        }
    }
    // The wrappers of a split host, to check that each is HIPK.
    if let Some(s) = facts.section(".hipFatBinSegment").filter(|s| s.has_file_bytes())
        && !read.is_empty()
    {
        read.push((s.offset, wrappers_len(s)));
    }
    read.dedup();
    read
}

pub(crate) use bundle::{BundleEntry, TableError, bundle_table};

/// The most of a kpack archive's table of contents read.
pub const KPACK_TOC_MAX: u64 = 16 << 20;

/// Where a kpack archive's table of contents lies, from its 16-byte header: [offset, end).
pub fn kpack_toc_range(header: &[u8], len: u64) -> Option<(u64, u64)> {
    let toc = le::u64_at(header, 8)?;
    (toc >= 16 && toc < len).then(|| (toc, len.min(toc + KPACK_TOC_MAX)))
}

/// A kpack archive: `KPAK`, u32 version, u64 TOC offset; a MessagePack TOC naming the archs.
fn kpack_archive<V: FileView + ?Sized>(file: &str, view: &V) -> GpuCode {
    let mut code = GpuCode::new(file, Container::KpackArchive);
    let header = view.get(0, 16.min(view.len())).unwrap_or_default();
    let version = le::u32_at(header, 4);
    code.notes.push(format!("kpack archive version {}", version.map(|v| v.to_string()).unwrap_or_else(|| "?".into())));
    let Some((toc, end)) = kpack_toc_range(header, view.len()) else {
        code.notes.push("the table of contents lies past the end of the file".into());
        return code.finish();
    };
    let Ok(bytes) = view.get(toc, end - toc) else {
        code.notes.push("the table of contents was not read".into());
        return code.finish();
    };
    match msgpack::parse(bytes) {
        Ok(value) => {
            if let Some(arches) = value.get("gfx_arches").and_then(|v| v.as_array()) {
                code.targets.extend(arches.iter().filter_map(|a| a.as_str()).map(TargetId::from_code));
            }
            if let Some(toc) = value.get("toc").and_then(|v| v.as_map()) {
                code.objects = toc.iter().map(|(_, per_arch)| per_arch.as_map().map_or(0, |m| m.len())).sum();
                for (key, per_arch) in toc {
                    let targets = per_arch.as_map().unwrap_or_default().iter().filter_map(|(t, _)| t.as_str());
                    if let Some(key) = key.as_str() {
                        code.kpack_toc.insert(key.to_string(), targets.map(TargetId::from_code).collect());
                    }
                }
            }
            if let Some(scheme) = value.get("compression_scheme").and_then(|v| v.as_str()) {
                code.notes.push(format!("compression: {scheme}"));
            }
        }
        Err(e) => code.notes.push(format!("unreadable table of contents: {e}")),
    }
    code.finish()
}

/// Just enough MessagePack to read kpack tables of contents and references.
pub mod msgpack {
    /// A decoded value.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Nil,
        Bool(bool),
        Int(i64),
        Float(f64),
        Str(String),
        Bin(Vec<u8>),
        Array(Vec<Value>),
        Map(Vec<(Value, Value)>),
    }

    impl Value {
        pub fn get(&self, key: &str) -> Option<&Value> {
            self.as_map()?.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
        }
        pub fn as_str(&self) -> Option<&str> {
            if let Value::Str(s) = self { Some(s) } else { None }
        }
        pub fn as_array(&self) -> Option<&[Value]> {
            if let Value::Array(a) = self { Some(a) } else { None }
        }
        pub fn as_map(&self) -> Option<&[(Value, Value)]> {
            if let Value::Map(m) = self { Some(m) } else { None }
        }
    }

    /// Why bytes are not one MessagePack value.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
    pub enum MsgpackError {
        #[error("truncated MessagePack")]
        Truncated,
        #[error("MessagePack nested too deeply")]
        TooDeep,
        #[error("MessagePack length past the end")]
        LengthPastEnd,
        #[error("unsupported MessagePack type 0x{0:02x}")]
        Unsupported(u8),
    }

    /// Parse one value from the start of `data`.
    pub fn parse(data: &[u8]) -> Result<Value, MsgpackError> {
        parse_prefix(data).map(|(value, _)| value)
    }

    /// Parse one value from the start of `data`, and how many bytes it took.
    pub fn parse_prefix(data: &[u8]) -> Result<(Value, usize), MsgpackError> {
        let mut at = 0;
        let value = value(data, &mut at, 0)?;
        Ok((value, at))
    }

    fn take<'a>(data: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], MsgpackError> {
        let end = at.checked_add(n).filter(|e| *e <= data.len()).ok_or(MsgpackError::Truncated)?;
        let out = &data[*at..end];
        *at = end;
        Ok(out)
    }

    fn uint(data: &[u8], at: &mut usize, n: usize) -> Result<u64, MsgpackError> {
        Ok(take(data, at, n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn value(data: &[u8], at: &mut usize, depth: usize) -> Result<Value, MsgpackError> {
        if depth > 32 {
            return Err(MsgpackError::TooDeep);
        }
        let tag = take(data, at, 1)?[0];
        let seq = |data: &[u8], at: &mut usize, n: usize, pairs: bool| -> Result<Value, MsgpackError> {
            // Each element takes at least one byte: a count beyond the data is a lie.
            if n > data.len() - *at {
                return Err(MsgpackError::LengthPastEnd);
            }
            if pairs {
                let mut m = Vec::with_capacity(n);
                for _ in 0..n {
                    m.push((value(data, at, depth + 1)?, value(data, at, depth + 1)?));
                }
                Ok(Value::Map(m))
            } else {
                (0..n).map(|_| value(data, at, depth + 1)).collect::<Result<_, _>>().map(Value::Array)
            }
        };
        let string = |data: &[u8], at: &mut usize, n: usize| -> Result<Value, MsgpackError> {
            Ok(Value::Str(String::from_utf8_lossy(take(data, at, n)?).into_owned()))
        };
        match tag {
            0x00..=0x7f => Ok(Value::Int(i64::from(tag))),
            0x80..=0x8f => seq(data, at, usize::from(tag & 0x0f), true),
            0x90..=0x9f => seq(data, at, usize::from(tag & 0x0f), false),
            0xa0..=0xbf => string(data, at, usize::from(tag & 0x1f)),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Bool(false)),
            0xc3 => Ok(Value::Bool(true)),
            0xc4..=0xc6 => {
                let n = uint(data, at, 1 << (tag - 0xc4))? as usize;
                Ok(Value::Bin(take(data, at, n)?.to_vec()))
            }
            0xca => Ok(Value::Float(f64::from(f32::from_bits(uint(data, at, 4)? as u32)))),
            0xcb => Ok(Value::Float(f64::from_bits(uint(data, at, 8)?))),
            0xcc..=0xcf => Ok(Value::Int(uint(data, at, 1 << (tag - 0xcc))? as i64)),
            0xd0 => Ok(Value::Int(i64::from(take(data, at, 1)?[0] as i8))),
            0xd1 => Ok(Value::Int(i64::from(uint(data, at, 2)? as u16 as i16))),
            0xd2 => Ok(Value::Int(i64::from(uint(data, at, 4)? as u32 as i32))),
            0xd3 => Ok(Value::Int(uint(data, at, 8)? as i64)),
            0xd9..=0xdb => {
                let n = uint(data, at, 1 << (tag - 0xd9))? as usize;
                string(data, at, n)
            }
            0xdc | 0xdd => {
                let n = uint(data, at, if tag == 0xdc { 2 } else { 4 })? as usize;
                seq(data, at, n, false)
            }
            0xde | 0xdf => {
                let n = uint(data, at, if tag == 0xde { 2 } else { 4 })? as usize;
                seq(data, at, n, true)
            }
            0xe0..=0xff => Ok(Value::Int(i64::from(tag as i8))),
            other => Err(MsgpackError::Unsupported(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_ids_from_e_flags() {
        // V5 (abi version 3), gfx942, xnack any, sramecc any.
        assert_eq!(amdgpu_target(0x54c, 64, 3), (TargetId::from_code("gfx942"), Some(5)));
        assert_eq!(amdgpu_target(0x54f, 64, 4), (TargetId::from_code("gfx950"), Some(6)));
        // V4: sramecc on, xnack off.
        assert_eq!(amdgpu_target(0xc00 | 0x200 | 0x4c, 64, 2).0, "gfx942:sramecc+:xnack-");
        assert_eq!(amdgpu_target(0x300 | 0x3f, 64, 2).0, "gfx90a:xnack+");
        // V3: xnack on bit.
        assert_eq!(amdgpu_target(0x100 | 0x2f, 64, 1), (TargetId::from_code("gfx906:xnack+"), Some(3)));
        assert_eq!(amdgpu_target(0x51, 64, 4).0, "gfx9-generic");
        assert_eq!(amdgpu_target(0x7e, 64, 4).0, "mach0x7e");
        assert_eq!(cuda_target(0x5a, 7), "sm_90");
        assert_eq!(cuda_target(0x5a00, 8), "sm_90");
    }

    #[test]
    fn msgpack_reads_maps_strings_and_arrays() {
        // {"gfx_arches": ["gfx942", "gfx950"], "n": 300}
        let mut data = vec![0x82, 0xaa];
        data.extend(b"gfx_arches");
        data.extend([0x92, 0xa6]);
        data.extend(b"gfx942");
        data.push(0xa6);
        data.extend(b"gfx950");
        data.extend([0xa1, b'n', 0xcd, 0x01, 0x2c]);
        let v = msgpack::parse(&data).unwrap();
        let arches: Vec<&str> =
            v.get("gfx_arches").unwrap().as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
        assert_eq!(arches, ["gfx942", "gfx950"]);
        assert_eq!(v.get("n"), Some(&msgpack::Value::Int(300)));
        assert!(msgpack::parse(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err(), "huge counts are refused");
    }
}
