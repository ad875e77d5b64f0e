//! Test fixtures: GPU code containers — AMDGPU code object headers, clang offload bundles,
//! compressed bundles (CCOB v1–v3, zlib and zstd), kpack archives, NVIDIA cubins and fatbins.

#![allow(dead_code)]

use std::io::Write;

use super::elfgen::{ElfSpec, RawSection};

/// `e_flags` mach values. Ex) gfx942 = 0x4c
pub const GFX90A: u32 = 0x3f;
pub const GFX942: u32 = 0x4c;
pub const GFX950: u32 = 0x4f;
pub const GFX1201: u32 = 0x4e;

/// A minimal AMDGPU code object: ELF64 header with e_machine 224, HSA OS ABI, the code object
/// version's ABI number (`cov - 2`) and `flags` (mach | feature bits).
pub fn amdgpu_object(flags: u32, cov: u8) -> Vec<u8> {
    ElfSpec {
        machine: 224,
        os_abi: 64,
        abi_version: cov - 2,
        flags,
        needed: vec![],
        imports: vec![],
        ..Default::default()
    }
    .build()
}

/// A cubin header for `sm` (ABI version 8 keeps the SM in the second byte of e_flags).
pub fn cubin(sm: u32) -> Vec<u8> {
    ElfSpec {
        machine: 190,
        os_abi: 51,
        abi_version: 8,
        flags: sm << 8,
        needed: vec![],
        imports: vec![],
        ..Default::default()
    }
    .build()
}

/// An uncompressed offload bundle: a host entry plus one code object per `(target id, object)`.
pub fn bundle(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut ids: Vec<String> = vec!["host-x86_64-unknown-linux-gnu-".into()];
    ids.extend(entries.iter().map(|(t, _)| format!("hipv4-amdgcn-amd-amdhsa--{t}")));
    let mut payloads: Vec<&[u8]> = vec![&[]];
    payloads.extend(entries.iter().map(|(_, o)| o.as_slice()));
    let table_len: usize = 32 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
    // HIP aligns code objects to 4096.
    let mut offsets = Vec::new();
    let mut at = table_len.div_ceil(4096) * 4096;
    for p in &payloads {
        offsets.push(if p.is_empty() { 0 } else { at });
        at += p.len().div_ceil(4096) * 4096;
    }
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend((ids.len() as u64).to_le_bytes());
    for ((id, p), off) in ids.iter().zip(&payloads).zip(&offsets) {
        out.extend((*off as u64).to_le_bytes());
        out.extend((p.len() as u64).to_le_bytes());
        out.extend((id.len() as u64).to_le_bytes());
        out.extend(id.as_bytes());
    }
    for (p, off) in payloads.iter().zip(&offsets) {
        if !p.is_empty() {
            out.resize(*off, 0);
            out.extend(*p);
        }
    }
    out
}

/// A bundle with one AMDGPU code object per target mach (code object version `cov`).
pub fn bundle_for(targets: &[(&str, u32)], cov: u8) -> Vec<u8> {
    let entries: Vec<(&str, Vec<u8>)> = targets.iter().map(|(t, mach)| (*t, amdgpu_object(*mach, cov))).collect();
    bundle(&entries)
}

/// A compressed bundle: `CCOB`, version, method (0 zlib, 1 zstd), then the version's header.
pub fn ccob(inner: &[u8], version: u16, zstd: bool) -> Vec<u8> {
    let payload = if zstd {
        zstd::encode_all(inner, 3).unwrap()
    } else {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(inner).unwrap();
        e.finish().unwrap()
    };
    ccob_raw(&payload, version, u16::from(zstd), inner.len() as u64, None)
}

/// A CCOB header over an already compressed payload; `total` overrides the total size field.
pub fn ccob_raw(payload: &[u8], version: u16, method: u16, uncompressed: u64, total: Option<u64>) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    match version {
        1 => {
            out.extend((uncompressed as u32).to_le_bytes());
            out.extend(0u64.to_le_bytes());
        }
        2 => {
            out.extend(total.unwrap_or(24 + payload.len() as u64).to_le_bytes()[..4].iter());
            out.extend((uncompressed as u32).to_le_bytes());
            out.extend(0u64.to_le_bytes());
        }
        _ => {
            out.extend(total.unwrap_or(32 + payload.len() as u64).to_le_bytes());
            out.extend(uncompressed.to_le_bytes());
            out.extend(0u64.to_le_bytes());
        }
    }
    out.extend(payload);
    out
}

/// A host shared object (x86-64 extension `module`) with a `.hip_fatbin` section.
pub fn host_with_fatbin(module: &str, fatbin: Vec<u8>) -> Vec<u8> {
    ElfSpec { sections: vec![section(".hip_fatbin", 1, fatbin)], ..ElfSpec::extension(module) }.build()
}

pub fn section(name: &str, kind: u32, data: Vec<u8>) -> RawSection {
    RawSection { name: name.into(), kind, data, nobits_size: 0 }
}

/// MessagePack encoding of a few shapes, for kpack fixtures.
pub mod mp {
    pub fn str(s: &str) -> Vec<u8> {
        let mut out = if s.len() < 32 { vec![0xa0 | s.len() as u8] } else { vec![0xd9, s.len() as u8] };
        out.extend(s.as_bytes());
        out
    }
    pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0x90 | items.len() as u8];
        for i in items {
            out.extend(i);
        }
        out
    }
    pub fn map(pairs: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = vec![0x80 | pairs.len() as u8];
        for (k, v) in pairs {
            out.extend(str(k));
            out.extend(v);
        }
        out
    }
}

/// A kpack archive for `arches` with one binary.
pub fn kpack_archive(arches: &[&str]) -> Vec<u8> {
    let per_arch: Vec<(&str, Vec<u8>)> =
        arches.iter().map(|a| (*a, mp::map(&[("type", mp::str("hsaco")), ("ordinal", vec![0])]))).collect();
    let toc = mp::map(&[
        ("format_version", vec![1]),
        ("gfx_arch_family", mp::str("gfx94X")),
        ("gfx_arches", mp::array(&arches.iter().map(|a| mp::str(a)).collect::<Vec<_>>())),
        ("compression_scheme", mp::str("none")),
        ("toc", mp::map(&[("lib/libfoo.so", mp::map(&per_arch))])),
    ]);
    let mut out = b"KPAK".to_vec();
    out.extend(1u32.to_le_bytes());
    out.extend(64u64.to_le_bytes());
    out.resize(64, 0);
    out.extend(toc);
    out
}

/// A host binary whose device code kpack moved out: NOBITS `.hip_fatbin` and `.rocm_kpack_ref`.
pub fn kpack_split_host(module: &str) -> Vec<u8> {
    let reference = mp::map(&[
        ("kpack_search_paths", mp::array(&[mp::str("../.kpack/foo_lib_@GFXARCH@.kpack")])),
        ("kernel_name", mp::str("libfoo")),
    ]);
    let mut fatbin = section(".hip_fatbin", 8, Vec::new());
    fatbin.nobits_size = 1 << 20;
    ElfSpec { sections: vec![fatbin, section(".rocm_kpack_ref", 1, reference)], ..ElfSpec::extension(module) }.build()
}

/// An NVIDIA fatbin container with a cubin entry per SM.
pub fn nv_fatbin(sms: &[u32]) -> Vec<u8> {
    let mut entries = Vec::new();
    for sm in sms {
        let payload = vec![0u8; 32];
        let mut e = Vec::new();
        e.extend(2u16.to_le_bytes()); // kind: cubin
        e.extend(0x0101u16.to_le_bytes());
        e.extend(64u32.to_le_bytes()); // entry header size
        e.extend((payload.len() as u64).to_le_bytes());
        e.resize(0x1c, 0);
        e.extend(sm.to_le_bytes());
        e.resize(64, 0);
        e.extend(payload);
        entries.extend(e);
    }
    let mut out = vec![0x50, 0xed, 0x55, 0xba];
    out.extend(1u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend((entries.len() as u64).to_le_bytes());
    out.extend(entries);
    out
}
