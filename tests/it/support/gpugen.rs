//! Test fixtures: GPU code containers — AMDGPU code object headers, clang offload bundles,
//! compressed bundles (CCOB v1–v3, zlib and zstd), kpack archives, NVIDIA cubins and fatbins.

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
    let ids: Vec<String> = entries.iter().map(|(t, _)| format!("hipv4-amdgcn-amd-amdhsa--{t}")).collect();
    bundle_with_ids(&ids, entries)
}

/// A bundle whose entry ids are in the form of ROCm 4.x and earlier: `hip-amdgcn-amd-amdhsa-gfx906`
/// (one dash before the processor; an empty target makes an id that names none).
pub fn bundle_old_ids(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let ids: Vec<String> = entries.iter().map(|(t, _)| format!("hip-amdgcn-amd-amdhsa-{t}")).collect();
    bundle_with_ids(&ids, entries)
}

fn bundle_with_ids(entry_ids: &[String], entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut ids: Vec<String> = vec!["host-x86_64-unknown-linux-gnu-".into()];
    ids.extend(entry_ids.iter().cloned());
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

/// [`host_with_fatbin`] with one HIP wrapper per bundle in `.hipFatBinSegment` (magic HIPF,
/// version 1; the pointers left to relocations, as in a shared object): what `split` needs.
pub fn host_with_wrapped_fatbin(module: &str, fatbin: Vec<u8>, bundles: usize) -> Vec<u8> {
    let mut wrappers = Vec::new();
    for _ in 0..bundles {
        wrappers.extend(0x4849_5046u32.to_le_bytes());
        wrappers.extend(1u32.to_le_bytes());
        wrappers.extend([0u8; 16]);
    }
    let sections = vec![section(".hip_fatbin", 1, fatbin), section(".hipFatBinSegment", 1, wrappers)];
    ElfSpec { sections, ..ElfSpec::extension(module) }.build()
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
    pub fn uint(n: u64) -> Vec<u8> {
        let mut out = vec![0xcf];
        out.extend(n.to_be_bytes());
        out
    }
}

/// An uncompressed kpack archive (`compression_scheme: none`) of `(key, target, code object)`
/// entries, each code object a blob of its own.
pub fn kpack_archive_of(group: &str, entries: &[(&str, &str, Vec<u8>)]) -> Vec<u8> {
    let mut blobs = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    for (_, _, code) in entries {
        blobs.push(mp::map(&[("offset", mp::uint(16 + body.len() as u64)), ("size", mp::uint(code.len() as u64))]));
        body.extend(code);
    }
    let mut keys: Vec<&str> = entries.iter().map(|e| e.0).collect();
    keys.dedup();
    let per_key: Vec<(&str, Vec<u8>)> = keys
        .iter()
        .map(|key| {
            let targets: Vec<(&str, Vec<u8>)> = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.0 == *key)
                .map(|(i, (_, target, code))| {
                    let entry = mp::map(&[
                        ("type", mp::str("hsaco")),
                        ("ordinal", mp::uint(i as u64)),
                        ("original_size", mp::uint(code.len() as u64)),
                    ]);
                    (*target, entry)
                })
                .collect();
            (*key, mp::map(&targets))
        })
        .collect();
    let mut arches: Vec<&str> = entries.iter().map(|e| e.1).collect();
    arches.sort_unstable();
    arches.dedup();
    let toc = mp::map(&[
        ("format_version", vec![1]),
        ("group_name", mp::str(group)),
        ("gfx_arch_family", mp::str(arches[0])),
        ("gfx_arches", mp::array(&arches.iter().map(|a| mp::str(a)).collect::<Vec<_>>())),
        ("compression_scheme", mp::str("none")),
        ("blobs", mp::array(&blobs)),
        ("toc", mp::map(&per_key)),
    ]);
    let mut out = b"KPAK".to_vec();
    out.extend(1u32.to_le_bytes());
    out.extend((16 + body.len() as u64).to_le_bytes());
    out.extend(body);
    out.extend(toc);
    out
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
    nv_fatbin_of(&sms.iter().map(|sm| (2, *sm)).collect::<Vec<_>>())
}

/// An NVIDIA fatbin container of `(kind, sm)` entries: kind 2 a cubin, 1 PTX.
pub fn nv_fatbin_of(entries: &[(u16, u32)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (kind, sm) in entries {
        let payload = vec![0u8; 32];
        let mut e = Vec::new();
        e.extend(kind.to_le_bytes());
        e.extend(0x0101u16.to_le_bytes());
        e.extend(64u32.to_le_bytes()); // entry header size
        e.extend((payload.len() as u64).to_le_bytes());
        e.resize(0x1c, 0);
        e.extend(sm.to_le_bytes());
        e.resize(64, 0);
        e.extend(payload);
        body.extend(e);
    }
    let mut out = vec![0x50, 0xed, 0x55, 0xba];
    out.extend(1u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend((body.len() as u64).to_le_bytes());
    out.extend(body);
    out
}

/// A host extension whose `.rodata` holds `objects` back to back (each padded to 16 bytes) after
/// `fakes` bytes sequences that start like an ELF header but are none.
pub fn host_with_embedded(module: &str, objects: &[Vec<u8>], fakes: usize) -> Vec<u8> {
    let mut rodata = Vec::new();
    for i in 0..fakes {
        rodata.extend(b"\x7fELF\x02\x01\x01");
        rodata.extend(std::iter::repeat_n((i % 251) as u8, 57));
    }
    for object in objects {
        rodata.extend(object);
        rodata.resize(rodata.len().div_ceil(16) * 16, 0);
    }
    ElfSpec { sections: vec![section(".rodata", 1, rodata)], ..ElfSpec::extension(module) }.build()
}

/// A host shared object whose `.rodata` holds `bundles` at unaligned offsets, as tensorflow-rocm
/// keeps its generated kernels, between a string that names the bundle magic (as code that reads
/// bundles has) and, after them, one code object with no bundle around it (`lone`).
pub fn host_with_data_bundles(module: &str, bundles: &[Vec<u8>], lone: Vec<u8>) -> Vec<u8> {
    host_with_bundles_in(".rodata", module, bundles, lone)
}

/// [`host_with_data_bundles`] with the data in a section of another name (`.kernel`: HCC's).
pub fn host_with_bundles_in(section_name: &str, module: &str, bundles: &[Vec<u8>], lone: Vec<u8>) -> Vec<u8> {
    let mut rodata = b"some constant strings\0__CLANG_OFFLOAD_BUNDLE__\0not a table at all".to_vec();
    for bundle in bundles {
        rodata.extend(b"\0\0\0");
        rodata.extend(bundle);
    }
    rodata.extend(b"\0\0\0\0\0\0\0\0");
    rodata.extend(lone);
    ElfSpec { sections: vec![section(section_name, 1, rodata)], ..ElfSpec::extension(module) }.build()
}

/// An AOTriton kernel archive: `AKS2`, total size, kernel count, directory size, then an xz
/// stream of the directory (five u32 and a NUL-terminated name per kernel) and the images.
/// An empty image is a kernel that did not compile.
pub fn aks2(kernels: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut directory = Vec::new();
    let mut images = Vec::new();
    for (name, image) in kernels {
        for v in [1024u32, 256, images.len() as u32, image.len() as u32, name.len() as u32 + 1] {
            directory.extend(v.to_le_bytes());
        }
        directory.extend(name.as_bytes());
        directory.push(0);
        images.extend(image);
    }
    let mut out = b"AKS2".to_vec();
    out.extend(((directory.len() + images.len()) as u32).to_le_bytes());
    out.extend((kernels.len() as u32).to_le_bytes());
    out.extend((directory.len() as u32).to_le_bytes());
    out.extend(xz(&[directory, images].concat()));
    out
}

/// An xz stream of `data` (preset 6, as Python's lzma writes by default).
pub fn xz(data: &[u8]) -> Vec<u8> {
    let mut w = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

/// A PE32+ x86-64 DLL with the given sections (name of at most 8 bytes, raw data).
pub fn pe_dll(sections: &[(&str, Vec<u8>)]) -> Vec<u8> {
    const PE_AT: usize = 0x80;
    let mut out = vec![0u8; PE_AT];
    out[..2].copy_from_slice(b"MZ");
    out[0x3c..0x40].copy_from_slice(&(PE_AT as u32).to_le_bytes());
    out.extend(b"PE\0\0");
    // COFF header: machine, sections, time, symbols, count, optional header size, flags.
    out.extend(0x8664u16.to_le_bytes());
    out.extend((sections.len() as u16).to_le_bytes());
    out.extend([0u8; 12]);
    out.extend(240u16.to_le_bytes());
    out.extend(0x2022u16.to_le_bytes());
    // Optional header (PE32+): magic, then zeros but for the alignments and the directory count.
    let mut optional = vec![0u8; 240];
    optional[..2].copy_from_slice(&0x20bu16.to_le_bytes());
    optional[32..36].copy_from_slice(&0x1000u32.to_le_bytes()); // section alignment
    optional[36..40].copy_from_slice(&0x200u32.to_le_bytes()); // file alignment
    optional[108..112].copy_from_slice(&16u32.to_le_bytes()); // number of data directories
    out.extend(optional);
    let table_at = out.len();
    out.resize(table_at + 40 * sections.len(), 0);
    let mut raw_at = out.len().div_ceil(0x200) * 0x200;
    let mut raws = Vec::new();
    for (i, (name, data)) in sections.iter().enumerate() {
        let e = &mut out[table_at + 40 * i..table_at + 40 * (i + 1)];
        e[..name.len()].copy_from_slice(name.as_bytes());
        e[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        e[12..16].copy_from_slice(&(0x1000 * (i as u32 + 1)).to_le_bytes());
        let raw_size = data.len().div_ceil(0x200) * 0x200;
        e[16..20].copy_from_slice(&(raw_size as u32).to_le_bytes());
        e[20..24].copy_from_slice(&(raw_at as u32).to_le_bytes());
        e[36..40].copy_from_slice(&0x4000_0040u32.to_le_bytes()); // initialised data, readable
        raws.push((raw_at, data));
        raw_at += raw_size;
    }
    for (at, data) in raws {
        out.resize(at, 0);
        out.extend(data);
        out.resize(out.len().div_ceil(0x200) * 0x200, 0);
    }
    out
}

/// Bytes that deflate compresses about 3:1, as machine code does: words and numbers.
pub fn compressible(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 32);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let word: &[u8] = [&b"mov "[..], b"add ", b"s_load ", b"v_mac ", b"ret\n"][(state % 5) as usize];
        out.extend_from_slice(word);
        out.extend_from_slice(format!("{} ", (state >> 20) % 7000).as_bytes());
    }
    out.truncate(len);
    out
}

/// A host library of 3 MB of host code and three bundles of four 600 KB code objects each
/// (gfx90a, gfx1100, gfx942, gfx908), about 10 MB: large enough to stream and to copy deflate
/// blocks from.
pub fn big_fat_library() -> Vec<u8> {
    let object = |mach: u32, seed: u64| {
        let mut o = amdgpu_object(mach, 5);
        o.extend(compressible(600_000, seed));
        o
    };
    let mut fatbin = Vec::new();
    for b in 0..3u64 {
        let entries = [
            ("gfx90a", object(0x3f, 10 * b + 1)),
            ("gfx1100", object(0x41, 10 * b + 2)),
            ("gfx942", object(0x4c, 10 * b + 3)),
            ("gfx908", object(0x30, 10 * b + 4)),
        ];
        fatbin.extend(bundle(&entries));
        fatbin.resize(fatbin.len().next_multiple_of(4096), 0);
    }
    ElfSpec {
        sections: vec![section(".rodata", 1, compressible(3 << 20, 99)), section(".hip_fatbin", 1, fatbin)],
        ..ElfSpec::extension("big")
    }
    .build()
}
