//! Facts made by hand, for the unit tests of the pure core (verdict, tags, plans): no file is
//! read or written.

use std::collections::BTreeMap;

use crate::analysis::linkage::ExternalLib;
use crate::analysis::{Analysis, BinaryFormats, ElfMember, HostBinary};
use crate::elf::{ElfFacts, UndefinedSymbol, VersionNeed};
use crate::platform::{Arch, EM_X86_64, Libc};
use crate::policy::Policies;
use crate::policy::judgement::Judged;

/// An x86-64 ELF file that needs these versioned symbols (`(library, version)`, one symbol each).
pub fn elf(needs: &[(&str, &str)]) -> ElfFacts {
    let mut version_needs: Vec<VersionNeed> = Vec::new();
    let mut undefined = Vec::new();
    for (i, (library, version)) in needs.iter().enumerate() {
        match version_needs.iter_mut().find(|v| v.file == *library) {
            Some(v) => v.versions.push(version.to_string()),
            None => version_needs.push(VersionNeed { file: library.to_string(), versions: vec![version.to_string()] }),
        }
        undefined.push(UndefinedSymbol {
            name: format!("sym{i}"),
            version: Some(version.to_string()),
            library: Some(library.to_string()),
            weak: false,
        });
    }
    let mut needed: Vec<String> = needs.iter().map(|(l, _)| l.to_string()).collect();
    needed.dedup();
    ElfFacts {
        is_64: true,
        little_endian: true,
        machine: EM_X86_64,
        elf_type: 3,
        needed,
        version_needs,
        undefined,
        ..ElfFacts::default()
    }
}

/// The facts of an x86-64 glibc wheel with these host binaries (`(path, facts)`, extensions
/// when the file name ends in `.so`) and external libraries.
pub fn analysis(binaries: Vec<(&str, ElfFacts)>, external: Vec<ExternalLib>) -> Analysis {
    let elf: Vec<ElfMember> =
        binaries.into_iter().map(|(path, facts)| ElfMember { path: path.to_string(), facts }).collect();
    Analysis {
        arch: Some(Arch::X86_64),
        libc: Libc::Glibc,
        binaries: (0..elf.len()).map(|i| HostBinary { elf: i, is_extension: elf[i].path.ends_with(".so") }).collect(),
        binary_formats: BinaryFormats { elf: elf.len(), ..Default::default() },
        elf,
        gpu: Vec::new(),
        notes: Vec::new(),
        digests: Vec::new(),
        record_findings: Default::default(),
        hashes_checked: false,
        external: external.into_iter().map(|l| (l.soname.clone(), l)).collect::<BTreeMap<_, _>>(),
        bundled_copies: BTreeMap::new(),
    }
}

/// An external library needed directly, found at `path` (or not found), needing these versions.
pub fn external(soname: &str, path: Option<&str>, versions: &[(&str, &str)]) -> ExternalLib {
    let facts = elf(versions);
    ExternalLib {
        soname: soname.to_string(),
        path: path.map(str::to_string),
        direct: true,
        needed_by: ["pkg/_core.so".to_string()].into(),
        version_needs: facts.version_needs,
        ..Default::default()
    }
}

/// The judgement of the embedded manylinux policies for x86-64.
pub fn judge(analysis: &Analysis) -> Judged {
    let set = Policies::embedded().for_platform(Arch::X86_64, Libc::Glibc, &[]);
    Judged::new(set, analysis, false)
}

/// A wheel of these members (a `.dist-info` with METADATA, WHEEL and a true RECORD added), in
/// a temporary directory that lives as long as the first value: the archive a plan reads the
/// member list and install paths of, whose facts a test makes by hand.
pub fn wheel(name: &str, members: &[(&str, &[u8])]) -> (tempfile::TempDir, crate::wheel::Wheel) {
    use sha2::Digest;
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let dist_info = format!("{name}-1.0.dist-info");
    let mut all: Vec<(String, Vec<u8>)> = members.iter().map(|(n, b)| (n.to_string(), b.to_vec())).collect();
    all.push((format!("{dist_info}/METADATA"), format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n").into()));
    all.push((
        format!("{dist_info}/WHEEL"),
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(),
    ));
    let mut record = String::new();
    for (member, bytes) in &all {
        let digest = crate::wheel::record::record_hash(&sha2::Sha256::digest(bytes));
        record.push_str(&format!("{member},{digest},{}\n", bytes.len()));
    }
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    all.push((format!("{dist_info}/RECORD"), record.into_bytes()));
    let path = dir.path().join(format!("{name}-1.0-py3-none-linux_x86_64.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    for (member, bytes) in &all {
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file(member.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    let wheel = crate::wheel::Wheel::open(&path).unwrap();
    (dir, wheel)
}

/// The facts of a host binary whose `.hip_fatbin` section (at `[0x1000, 0x1000 + len)`) holds
/// bundles, with its HIP wrappers in `.hipFatBinSegment`.
pub fn hip_host(len: u64) -> ElfFacts {
    use crate::elf::SectionInfo;
    let section = |name: &str, offset: u64, size: u64| SectionInfo {
        name: name.into(),
        kind: 1,
        flags: 2,
        offset,
        size,
        addr: offset,
    };
    ElfFacts {
        sections: vec![section(".hip_fatbin", 0x1000, len), section(".hipFatBinSegment", 0x1000 + len, 24)],
        ..elf(&[("libamdhip64.so.7", "hip_4.2")])
    }
}

/// The device code facts of a fat binary `file`: code objects of these target IDs (`size`
/// bytes each) in its offload bundles.
pub fn fat_code(file: &str, targets: &[(&str, u64)]) -> crate::gpu::GpuCode {
    let mut code = crate::gpu::GpuCode::new(file, crate::gpu::Container::HipFatbin);
    code.code_object_versions.push(5);
    for (target, size) in targets {
        let id = crate::gpu::TargetId::from_code(*target);
        code.targets.push(id.clone());
        code.target_bytes.entry(id).or_default().add(*size);
        code.objects += 1;
    }
    code
}
