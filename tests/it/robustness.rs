//! Hostile input: thousands of deterministic random corruptions of real-shaped ELF files, GPU
//! containers and wheels. Every reader must return (an error or a note), never panic.

use crate::support;

use support::elfgen::ElfSpec;
use support::gpugen::*;
use support::wheelgen::WheelSpec;
use wheelfix::elf::ElfFacts;
use wheelfix::elf::patch::{ElfEdit, InProcessPatcher, Patcher, RpathEdit};
use wheelfix::gpu;

/// xorshift64*: a fixed sequence, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A copy of `data` with a few bytes overwritten, often with extreme values, or truncated.
    fn corrupt(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = data.to_vec();
        match self.next() % 4 {
            0 => out.truncate((self.next() % data.len() as u64) as usize),
            _ => {
                for _ in 0..1 + self.next() % 8 {
                    let at = (self.next() % out.len() as u64) as usize;
                    let value: [u8; 8] = match self.next() % 3 {
                        0 => [0xff; 8],
                        1 => [0; 8],
                        _ => self.next().to_le_bytes(),
                    };
                    let len = (1 + self.next() % 8) as usize;
                    for (i, b) in value.iter().take(len).enumerate() {
                        if let Some(slot) = out.get_mut(at + i) {
                            *slot = *b;
                        }
                    }
                }
            }
        }
        out
    }
}

#[test]
fn corrupted_elf_files_and_gpu_containers_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let host = host_with_fatbin("_k", bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6));
    let compressed = host_with_fatbin("_c", ccob(&bundle_for(&[("gfx942", GFX942)], 5), 3, true));
    let seeds: Vec<Vec<u8>> = vec![
        ElfSpec::extension("m").needs_version("f", "libstdc++.so.6", "GLIBCXX_3.4.21").build(),
        ElfSpec {
            x86_isa_needed: Some(4),
            interpreter: Some("/lib64/ld-linux-x86-64.so.2".into()),
            ..ElfSpec::extension("n")
        }
        .build(),
        host,
        compressed,
        host_with_embedded("_e", &[amdgpu_object(GFX942, 5), amdgpu_object(GFX950, 6)], 20),
    ];
    let containers: Vec<Vec<u8>> = vec![
        bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6),
        ccob(&bundle_for(&[("gfx942", GFX942)], 6), 2, false),
        ccob(&bundle_for(&[("gfx942", GFX942)], 6), 3, true),
        kpack_archive(&["gfx942", "gfx950"]),
        aks2(&[("a", amdgpu_object(GFX942, 5)), ("b", amdgpu_object(GFX950, 6)), ("c", Vec::new())]),
        bundle_old_ids(&[("gfx906", amdgpu_object(0x2f, 4)), ("", amdgpu_object(0x30, 4))]),
    ];
    let pe_files: Vec<Vec<u8>> = vec![
        pe_dll(&[(".hip_fat", bundle_for(&[("gfx942", GFX942)], 6))]),
        pe_dll(&[(".text", vec![0xc3; 32]), (".nv_fatb", nv_fatbin(&[80]))]),
        // TheRock's split DLL: its marker and HIPK wrappers are read from the file.
        pe_dll(&[
            (".hip_fat", Vec::new()),
            (".hipFatB", [b"HIPK".to_vec(), vec![0u8; 20]].concat()),
            (
                ".kpackrf",
                mp::map(&[
                    ("kpack_search_paths", mp::array(&[mp::str("../.kpack/x_@GFXARCH@.kpack")])),
                    ("kernel_name", mp::str("x.dll")),
                ]),
            ),
        ]),
    ];
    let edit = ElfEdit {
        replace_needed: [("libc.so.6".to_string(), "libc-0a1b2c3d.so.6".to_string())].into(),
        rpath: RpathEdit::Set("$ORIGIN/../x.libs".into()),
        ..Default::default()
    };
    // The seeds themselves read as what they are: the corruptions below start from real shapes.
    for seed in &seeds {
        ElfFacts::parse(seed).expect("an uncorrupted seed parses");
    }
    for seed in &containers[..3] {
        let code = gpu::container_file("x.bin", seed).expect("an uncorrupted container is device code");
        assert!(!code.targets.is_empty(), "{code:?}");
    }
    let (mut parsed, mut refused, mut patched) = (0, 0, 0);
    for round in 0..1500 {
        for seed in &seeds {
            let bad = rng.corrupt(seed);
            match ElfFacts::parse(&bad) {
                Ok(facts) => {
                    parsed += 1;
                    let _ = gpu::host_binary("x.so", &facts, &bad);
                }
                Err(e) => {
                    refused += 1;
                    assert!(!e.to_string().is_empty(), "an error says what is wrong");
                }
            }
            let _ = gpu::code_object_from_header("x.co", &bad[..bad.len().min(64)]);
            if round % 10 == 0
                && let Ok(out) = InProcessPatcher.patch(&bad, &edit)
            {
                // What the patcher returns is an ELF file a reader accepts.
                ElfFacts::parse(&out).expect("a patched file parses");
                patched += 1;
            }
        }
        for seed in &containers {
            let _ = gpu::container_file("x.bin", &rng.corrupt(seed));
        }
        for seed in &pe_files {
            let bad = rng.corrupt(seed);
            let sections = gpu::pe::device_sections(&bad);
            let hits = gpu::scan::Hits::of(&bad, gpu::scan::Patterns::PE);
            let _ = gpu::pe::binary("x.dll", &sections, bad.len() as u64, &hits, &bad[..]);
        }
    }
    // Both outcomes happened, many times: the loop tested readers, not only one branch.
    assert!(parsed > 500 && refused > 500 && patched > 10, "parsed {parsed}, refused {refused}, patched {patched}");
}

#[test]
fn corrupted_wheels_fail_cleanly() {
    let mut rng = Rng(42);
    let dir = tempfile::tempdir().unwrap();
    let good = WheelSpec::new("fuzz", "1.0", "cp312-cp312-linux_x86_64")
        .file("fuzz/_m.so", ElfSpec::extension("_m").build())
        .file("fuzz/__init__.py", "x = 1\n")
        .write(dir.path());
    let bytes = std::fs::read(&good).unwrap();
    let options = wheelfix::settings::Settings::with_options(wheelfix::analysis::AnalyzeOptions::new(
        wheelfix::exclude::ExcludeList::new(true, &[]).unwrap(),
        wheelfix::analysis::linkage::LibrarySearch::default(),
    ));
    let mut verify = options.clone();
    verify.analyze.verify_hashes = true;
    let path = dir.path().join("fuzz-1.0-cp312-cp312-linux_x86_64.whl");
    assert_eq!(good, path);
    let clean = wheelfix::show(&path, &verify, &wheelfix::progress::NoProgress).expect("the uncorrupted wheel reads");
    assert_eq!((clean.host_binaries, clean.record.len()), (1, 0), "{clean:?}");
    let (mut read, mut failed) = (0, 0);
    for _ in 0..400 {
        std::fs::write(&path, rng.corrupt(&bytes)).unwrap();
        for settings in [&options, &verify] {
            match wheelfix::show(&path, settings, &wheelfix::progress::NoProgress) {
                Ok(report) => {
                    read += 1;
                    assert_eq!(report.wheel, "fuzz-1.0-cp312-cp312-linux_x86_64.whl");
                }
                Err(e) => {
                    failed += 1;
                    let message = e.to_string();
                    assert!(!message.trim().is_empty(), "an error says what is wrong");
                }
            }
        }
    }
    // Corruption is read as far as it can be, or refused with a reason; both happen.
    assert!(read > 5 && failed > 100, "read {read}, failed {failed}");
}
