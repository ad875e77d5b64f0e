//! HIP fat binaries as readers other than wheelfix's see them: Debian's clang toolchain (its
//! bundler lists and unbundles), a stub HIP runtime that registers what a library's wrappers
//! point at in memory, and the loader's view of a library (its memory, by address).

use std::path::Path;
use std::process::Command;

use super::python::{run, system_python};

/// The newest clang with HIP support and its bundler: (clang++, clang-offload-bundler).
pub fn toolchain() -> (String, String) {
    for v in ["22", "21", "20", "19"] {
        let (clang, bundler) = (format!("clang++-{v}"), format!("clang-offload-bundler-{v}"));
        let found = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
        if found(&clang) && found(&bundler) {
            return (clang, bundler);
        }
    }
    panic!(
        "no clang++-19 or newer with clang-offload-bundler: `apt-get install clang-19 clang-tools-19 lld-19` (.ci/run does)"
    );
}

/// Where the bundles of a `.hip_fatbin` lie, as (offset, length): each its own length as its
/// header or table says (clang-19's bundler reads a compressed bundle to the end of its input).
pub fn bundle_spans(fatbin: &[u8]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < fatbin.len() {
        let rest = &fatbin[at..];
        if rest.starts_with(b"CCOB") {
            let version = u16::from_le_bytes([rest[4], rest[5]]);
            let total = match version {
                2 => u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize,
                3 => u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize,
                v => panic!("CCOB v{v}"),
            };
            found.push((at, total));
            at += total;
        } else if rest.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") {
            let count = u64::from_le_bytes(rest[24..32].try_into().unwrap()) as usize;
            let (mut end, mut p) = (0, 32);
            for _ in 0..count {
                let f = |i: usize| u64::from_le_bytes(rest[p + i * 8..p + i * 8 + 8].try_into().unwrap()) as usize;
                end = end.max(f(0) + f(1));
                p += 24 + f(2);
            }
            found.push((at, end.max(p)));
            at += end.max(p);
        } else {
            at += 1;
        }
    }
    found
}

/// What clang's bundler lists in a bundle, sorted.
pub fn bundler_list(dir: &Path, bundle: &[u8]) -> Vec<String> {
    let (_, bundler) = toolchain();
    let input = dir.join("bundle.bin");
    std::fs::write(&input, bundle).unwrap();
    let out = run(Command::new(bundler).args(["--list", "--type=o"]).arg(format!("--input={}", input.display())));
    let mut ids: Vec<String> = out.lines().map(str::to_string).collect();
    ids.sort();
    ids
}

/// One target's code object, as clang's bundler unbundles it.
pub fn bundler_unbundle(dir: &Path, bundle: &[u8], id: &str) -> Vec<u8> {
    let (_, bundler) = toolchain();
    let (input, output) = (dir.join("unbundle.bin"), dir.join("unbundled.o"));
    std::fs::write(&input, bundle).unwrap();
    run(Command::new(bundler)
        .args(["--unbundle", "--type=o"])
        .arg(format!("--input={}", input.display()))
        .arg(format!("--output={}", output.display()))
        .arg(format!("--targets={id}")));
    std::fs::read(output).unwrap()
}

/// A stub HIP runtime: `__hipRegisterFatBinary` parses the bundle its wrapper points at, in
/// memory (decompressing a compressed one with the system's libzstd or libz), and appends one
/// line per code object to `$STUB_LOG`: its entry id, size and an FNV-1a hash of its bytes.
pub const STUB: &str = r#"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct wrapper { uint32_t magic, version; const unsigned char *binary; void *unused; };
static void record(const unsigned char *b) {
    if (!getenv("STUB_LOG")) return;
    FILE *log = fopen(getenv("STUB_LOG"), "a");
    uint64_t count; memcpy(&count, b + 24, 8);
    const unsigned char *p = b + 32;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off, size, len; memcpy(&off, p, 8); memcpy(&size, p + 8, 8); memcpy(&len, p + 16, 8);
        uint64_t h = 1469598103934665603ULL;
        for (uint64_t k = 0; k < size; k++) h = (h ^ b[off + k]) * 1099511628211ULL;
        if (len < 5 || memcmp(p + 24, "host-", 5) != 0)
            fprintf(log, "%.*s %llu %016llx\n", (int)len, p + 24, (unsigned long long)size, (unsigned long long)h);
        p += 24 + len;
    }
    fclose(log);
}
void **__hipRegisterFatBinary(const struct wrapper *w) {
    const unsigned char *b = w->binary;
    if (memcmp(b, "CCOB", 4) == 0) {
        uint16_t version, method; memcpy(&version, b + 4, 2); memcpy(&method, b + 6, 2);
        uint64_t total = 0, size = 0; size_t header = version == 3 ? 32 : 24;
        if (version == 3) { memcpy(&total, b + 8, 8); memcpy(&size, b + 16, 8); }
        else { uint32_t t, s; memcpy(&t, b + 8, 4); memcpy(&s, b + 12, 4); total = t; size = s; }
        unsigned char *out = malloc(size);
        if (method == 1) {
            size_t (*zstd)(void *, size_t, const void *, size_t) = dlsym(dlopen("libzstd.so.1", RTLD_NOW), "ZSTD_decompress");
            if (zstd(out, size, b + header, total - header) != size) { fprintf(stderr, "stub: bad zstd\n"); exit(3); }
        } else {
            int (*unz)(unsigned char *, unsigned long *, const unsigned char *, unsigned long) = dlsym(dlopen("libz.so.1", RTLD_NOW), "uncompress");
            unsigned long n = size;
            if (unz(out, &n, b + header, total - header) != 0 || n != size) { fprintf(stderr, "stub: bad zlib\n"); exit(3); }
        }
        record(out);
        free(out);
    } else {
        record(b);
    }
    static void *handle;
    return &handle;
}
void __hipRegisterFunction(void **m, const void *f, char *d, const char *n, int t, void *a, void *b, void *c, void *e, int *s) {}
void __hipRegisterVar(void **m, void *v, char *h, const char *d, int e, size_t s, int c, int g) {}
void __hipUnregisterFatBinary(void **m) {}
int hipLaunchKernel(const void *f, void *g, void *b, void **a, size_t s, void *st) { return 0; }
int __hipPushCallConfiguration(void *g, void *b, size_t s, void *st) { return 0; }
int __hipPopCallConfiguration(void *g, void *b, size_t *s, void *st) { return 0; }
"#;

pub const LOAD: &str = "import ctypes, sys\nctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\nlib = ctypes.CDLL(sys.argv[2])\nprint(lib.host_value())\n";

/// Load `library` with the stub runtime: what the stub registered, sorted, and `host_value()`.
pub fn load_with_stub(dir: &Path, stub: &Path, library: &Path) -> (Vec<String>, String) {
    let log = dir.join("stub.log");
    let _ = std::fs::remove_file(&log);
    let value = run(Command::new(system_python()).args(["-c", LOAD]).arg(stub).arg(library).env("STUB_LOG", &log));
    let mut lines: Vec<String> =
        std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
    lines.sort();
    (lines, value.trim().to_string())
}

/// A library's memory as the loader maps it: each `PT_LOAD` at its address, its file bytes and
/// then zeros up to its memory size. Addresses between segments are not mapped.
pub struct Memory {
    loads: Vec<(u64, Vec<u8>)>,
}

impl Memory {
    pub fn of(library: &[u8]) -> Memory {
        use object::{Object, ObjectSegment};
        let file = object::File::parse(library).unwrap();
        let loads = file
            .segments()
            .map(|s| {
                let mut bytes = s.data().unwrap().to_vec();
                bytes.resize(s.size() as usize, 0);
                (s.address(), bytes)
            })
            .collect();
        Memory { loads }
    }

    /// The bytes at [address, address + len), if all of them are mapped.
    pub fn read(&self, address: u64, len: usize) -> Option<&[u8]> {
        let (start, bytes) = self.loads.iter().find(|(a, b)| *a <= address && address < a + b.len() as u64)?;
        let at = (address - start) as usize;
        bytes.get(at..at + len)
    }

    /// Every mapped range, as (address, bytes).
    pub fn loads(&self) -> &[(u64, Vec<u8>)] {
        &self.loads
    }
}

/// Every `.hip_fatbin` section of a library (a compacted one has one per piece): (address,
/// file bytes), in address order.
pub fn fatbin_pieces(library: &[u8]) -> Vec<(u64, Vec<u8>)> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(library).unwrap();
    let mut pieces: Vec<(u64, Vec<u8>)> = file
        .sections()
        .filter(|s| s.name() == Ok(".hip_fatbin"))
        .map(|s| (s.address(), s.data().unwrap().to_vec()))
        .collect();
    pieces.sort_by_key(|(a, _)| *a);
    assert!(!pieces.is_empty(), "no .hip_fatbin");
    pieces
}

/// The bundles of a library's `.hip_fatbin`, each cut to its own length.
pub fn bundles(library: &[u8]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    for (_, piece) in fatbin_pieces(library) {
        found.extend(bundle_spans(&piece).into_iter().map(|(at, len)| piece[at..at + len].to_vec()));
    }
    found
}

/// Each bundle's whole space in `thinned`: the bytes the original's bundle at the same address
/// had (its own length, as its header says), as far as the section piece that holds it runs
/// (a compacted file cuts the section where the freed pages left). A thinned compressed bundle
/// is shorter than its space, and clang 19's bundler reads one to the end of its input.
pub fn bundle_spaces(original: &[u8], thinned: &[u8]) -> Vec<Vec<u8>> {
    let pieces = fatbin_pieces(thinned);
    let mut found = Vec::new();
    for (address, piece) in fatbin_pieces(original) {
        for (at, len) in bundle_spans(&piece) {
            let start = address + at as u64;
            let (piece_at, bytes) = pieces
                .iter()
                .find(|(a, b)| *a <= start && start < a + b.len() as u64)
                .expect("every bundle stays in a section piece");
            let from = (start - piece_at) as usize;
            found.push(bytes[from..(from + len).min(bytes.len())].to_vec());
        }
    }
    found
}

/// What `eu-elflint --gnu-ld` (Debian's elfutils) reports, one line each, with program header
/// numbers left out (a split renumbers them).
pub fn elflint(path: &Path) -> Vec<String> {
    let out =
        Command::new("eu-elflint").arg("--gnu-ld").arg(path).output().expect("eu-elflint (apt-get install elfutils)");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty() && *l != "No errors")
        .map(|l| l.split(" program header entry ").next().unwrap_or(l).to_string())
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// What `readelf -lSdW` says on stderr (its warnings), and that it read the file.
pub fn readelf_warnings(path: &Path) -> String {
    let out = Command::new("readelf").arg("-lSdW").arg(path).output().expect("readelf (binutils)");
    assert!(out.status.success(), "readelf failed on {}", path.display());
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// Every address of `before`'s segments outside its `.hip_fatbin` reads the same in `after`
/// (the ELF and program headers aside, which a layout change rewrites).
pub fn assert_same_memory_outside_fatbin(before: &[u8], after: &[u8]) {
    let (old, new) = (Memory::of(before), Memory::of(after));
    let pieces = fatbin_pieces(before);
    let fatbin = pieces[0].0..pieces[0].0 + pieces[0].1.len() as u64;
    let headers = {
        use object::read::elf::{ElfFile64, FileHeader};
        let f = ElfFile64::<object::Endianness>::parse(before).unwrap();
        let h = f.elf_header();
        let e = f.endian();
        // Where the first segment maps the file's start (0 for a library, 0x400000 for a program
        // that is not position-independent).
        let base = old.loads()[0].0;
        base..base + h.e_phoff(e) + u64::from(h.e_phnum(e)) * u64::from(h.e_phentsize(e))
    };
    for (start, bytes) in old.loads() {
        for (i, byte) in bytes.iter().enumerate() {
            let address = start + i as u64;
            if fatbin.contains(&address) || headers.contains(&address) {
                continue;
            }
            assert_eq!(new.read(address, 1), Some(std::slice::from_ref(byte)), "address {address:#x}");
        }
    }
}
