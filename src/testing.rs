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
