//! HIP fat binaries as readers other than wheelfix's see them: Debian's clang toolchain (its
//! bundler lists and unbundles), a stub HIP runtime that registers what a library's wrappers
//! point at in memory, and the loader's view of a library (its memory, by address).

use std::path::{Path, PathBuf};
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
        "no clang++-19 or newer with clang-offload-bundler: `apt-get install clang-19 clang-tools-19 lld-19` (scripts/test does)"
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
/// line per code object to `$STUB_LOG`: its entry id, size, an FNV-1a hash of its bytes and the
/// wrapper's offset from the binary's base (`w<hex>`).
///
/// A `HIPK` wrapper (kpack) is followed as the kpack runtime follows it, written here from its
/// documented behaviour: the MessagePack marker at the wrapper's pointer gives `kernel_name` and
/// `kpack_search_paths`; each path, relative to the binary's directory, has `@GFXARCH@` expanded
/// for each architecture of the agent (`$STUB_AGENT`, e.g. `gfx942:sramecc+:xnack-`, then its
/// generic processor `$STUB_GENERIC` if set) and each subset of its features, most specific
/// first; every archive that exists is opened, and for each architecture in order (and its
/// feature subsets) the first archive listing that architecture with the key
/// `<kernel_name>#<reserved1>` gives the code object (a zstd frame). Logged as
/// `hipv4-amdgcn-amd-amdhsa--<arch>`, like a bundle's entry; nothing found is logged as
/// `MISSING <key>`.
pub const STUB: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct wrapper { uint32_t magic, version; const unsigned char *binary; void *unused; };
static unsigned long long wrapper_offset(const void *w) {
    Dl_info info;
    return dladdr(w, &info) ? (unsigned long long)((const char *)w - (const char *)info.dli_fbase) : 0;
}
static uint64_t fnv(const unsigned char *b, uint64_t size) {
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t k = 0; k < size; k++) h = (h ^ b[k]) * 1099511628211ULL;
    return h;
}
static unsigned long long current_wrapper;
static void record(const unsigned char *b) {
    if (!getenv("STUB_LOG")) return;
    FILE *log = fopen(getenv("STUB_LOG"), "a");
    uint64_t count; memcpy(&count, b + 24, 8);
    const unsigned char *p = b + 32;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off, size, len; memcpy(&off, p, 8); memcpy(&size, p + 8, 8); memcpy(&len, p + 16, 8);
        uint64_t h = fnv(b + off, size);
        if (len < 5 || memcmp(p + 24, "host-", 5) != 0)
            fprintf(log, "%.*s %llu %016llx w%llx\n", (int)len, p + 24, (unsigned long long)size, (unsigned long long)h, current_wrapper);
        p += 24 + len;
    }
    fclose(log);
}
/* MessagePack, as much as markers and tables of contents use. */
enum { MP_MAP, MP_ARR, MP_STR, MP_INT, MP_BAD };
struct mp { int type; uint64_t n; const unsigned char *str; };
static uint64_t be(const unsigned char *p, int n) { uint64_t v = 0; for (int i = 0; i < n; i++) v = v << 8 | p[i]; return v; }
static struct mp mp_head(const unsigned char **p) {
    struct mp m = { MP_BAD, 0, 0 }; unsigned char t = *(*p)++;
    if (t <= 0x7f) { m.type = MP_INT; m.n = t; }
    else if ((t & 0xf0) == 0x80) { m.type = MP_MAP; m.n = t & 15; }
    else if ((t & 0xf0) == 0x90) { m.type = MP_ARR; m.n = t & 15; }
    else if ((t & 0xe0) == 0xa0) { m.type = MP_STR; m.n = t & 31; }
    else if (t >= 0xcc && t <= 0xcf) { int k = 1 << (t - 0xcc); m.type = MP_INT; m.n = be(*p, k); *p += k; }
    else if (t >= 0xd9 && t <= 0xdb) { int k = 1 << (t - 0xd9); m.type = MP_STR; m.n = be(*p, k); *p += k; }
    else if (t == 0xdc || t == 0xdd) { int k = t == 0xdc ? 2 : 4; m.type = MP_ARR; m.n = be(*p, k); *p += k; }
    else if (t == 0xde || t == 0xdf) { int k = t == 0xde ? 2 : 4; m.type = MP_MAP; m.n = be(*p, k); *p += k; }
    if (m.type == MP_STR) { m.str = *p; *p += m.n; }
    return m;
}
static void mp_skip(const unsigned char **p) {
    struct mp m = mp_head(p);
    if (m.type == MP_BAD) { fprintf(stderr, "stub: bad MessagePack\n"); exit(3); }
    uint64_t items = m.type == MP_MAP ? 2 * m.n : m.type == MP_ARR ? m.n : 0;
    for (uint64_t i = 0; i < items; i++) mp_skip(p);
}
/* The value of `key` in the map at `p`, or NULL. */
static const unsigned char *mp_get(const unsigned char *p, const char *key) {
    struct mp m = mp_head(&p);
    if (m.type != MP_MAP) return 0;
    for (uint64_t i = 0; i < m.n; i++) {
        struct mp k = mp_head(&p);
        if (k.type == MP_STR && k.n == strlen(key) && memcmp(k.str, key, k.n) == 0) return p;
        mp_skip(&p);
    }
    return 0;
}
static uint64_t mp_int(const unsigned char *p) { struct mp m = mp_head(&p); return m.n; }

struct archive { unsigned char *data; size_t len; const unsigned char *toc; };
static struct archive archives[64]; static int narchives;
static void open_archive(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END); long len = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(len);
    if (fread(data, 1, len, f) != (size_t)len || memcmp(data, "KPAK", 4) != 0) { fclose(f); free(data); return; }
    fclose(f);
    for (int i = 0; i < narchives; i++) if (archives[i].len == (size_t)len && memcmp(archives[i].data, data, len) == 0) { free(data); return; }
    uint64_t toc; memcpy(&toc, data + 8, 8);
    archives[narchives++] = (struct archive){ data, (size_t)len, data + toc };
}
static int archive_has_arch(const struct archive *a, const char *arch) {
    const unsigned char *p = mp_get(a->toc, "gfx_arches");
    if (!p) return 0;
    struct mp m = mp_head(&p);
    for (uint64_t i = 0; i < m.n; i++) { struct mp s = mp_head(&p); if (s.n == strlen(arch) && memcmp(s.str, arch, s.n) == 0) return 1; }
    return 0;
}
/* The code object of `key` for `arch` in an archive, decompressed; NULL if it holds none. */
static unsigned char *archive_get(const struct archive *a, const char *key, const char *arch, uint64_t *size) {
    const unsigned char *toc = mp_get(a->toc, "toc");
    if (!toc) return 0;
    const unsigned char *per = mp_get(toc, key);
    if (!per) return 0;
    const unsigned char *e = mp_get(per, arch);
    if (!e) return 0;
    uint64_t ordinal = mp_int(mp_get(e, "ordinal")); *size = mp_int(mp_get(e, "original_size"));
    const unsigned char *z = a->data + mp_int(mp_get(a->toc, "zstd_offset"));
    uint32_t count; memcpy(&count, z, 4); z += 4;
    if (ordinal >= count) return 0;
    for (uint64_t i = 0; i < ordinal; i++) { uint32_t n; memcpy(&n, z, 4); z += 4 + n; }
    uint32_t n; memcpy(&n, z, 4);
    unsigned char *out = malloc(*size + 1);
    size_t (*zstd)(void *, size_t, const void *, size_t) = dlsym(dlopen("libzstd.so.1", RTLD_NOW), "ZSTD_decompress");
    if (zstd(out, *size, z + 4, n) != *size) { fprintf(stderr, "stub: bad zstd frame\n"); exit(3); }
    return out;
}
/* Each subset of the features of `isa` (processor[:feature...]), most specific first. */
static int compatible(const char *isa, char out[][64]) {
    char proc[64], feats[8][16]; int nf = 0;
    const char *colon = strchr(isa, ':');
    size_t plen = colon ? (size_t)(colon - isa) : strlen(isa);
    memcpy(proc, isa, plen); proc[plen] = 0;
    while (colon && nf < 8) {
        const char *next = strchr(colon + 1, ':');
        size_t l = next ? (size_t)(next - colon - 1) : strlen(colon + 1);
        memcpy(feats[nf], colon + 1, l); feats[nf][l] = 0; nf++; colon = next;
    }
    int count = 0;
    for (int k = nf; k >= 0; k--)
        for (unsigned mask = (1u << nf); mask-- > 0;) {
            if (__builtin_popcount(mask) != k) continue;
            char *o = out[count++]; strcpy(o, proc);
            for (int i = 0; i < nf; i++) if (mask & (1u << (nf - 1 - i))) { strcat(o, ":"); strcat(o, feats[i]); }
        }
    return count;
}
static void follow_hipk(const struct wrapper *w) {
    const unsigned char *marker = w->binary;
    const unsigned char *name = mp_get(marker, "kernel_name");
    const unsigned char *paths = mp_get(marker, "kpack_search_paths");
    if (!name || !paths) { fprintf(stderr, "stub: bad kpack marker\n"); exit(3); }
    struct mp kn = mp_head(&name);
    char key[4096]; snprintf(key, sizeof key, "%.*s#%llu", (int)kn.n, kn.str, (unsigned long long)(uintptr_t)w->unused);
    Dl_info info; dladdr(w, &info);
    char dir[4096]; snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/'); if (slash) *slash = 0; else strcpy(dir, ".");
    const char *arches[2] = { getenv("STUB_AGENT"), getenv("STUB_GENERIC") };
    struct mp list = mp_head(&paths);
    narchives = 0;
    for (uint64_t i = 0; i < list.n; i++) {
        struct mp path = mp_head(&paths);
        char pattern[4096]; snprintf(pattern, sizeof pattern, "%s/%.*s", dir, (int)path.n, path.str);
        char *at = strstr(pattern, "@GFXARCH@");
        if (!at) { open_archive(pattern); continue; }
        for (int a = 0; a < 2; a++) {
            if (!arches[a]) continue;
            char targets[256][64]; int n = compatible(arches[a], targets);
            for (int t = 0; t < n; t++) {
                char expanded[4096]; snprintf(expanded, sizeof expanded, "%.*s%s%s", (int)(at - pattern), pattern, targets[t], at + 9);
                open_archive(expanded);
            }
        }
    }
    FILE *log = fopen(getenv("STUB_LOG"), "a");
    for (int a = 0; a < 2; a++) {
        if (!arches[a]) continue;
        char targets[256][64]; int n = compatible(arches[a], targets);
        for (int t = 0; t < n; t++)
            for (int k = 0; k < narchives; k++) {
                if (!archive_has_arch(&archives[k], targets[t])) continue;
                uint64_t size; unsigned char *co = archive_get(&archives[k], key, targets[t], &size);
                if (!co) continue;
                fprintf(log, "hipv4-amdgcn-amd-amdhsa--%s %llu %016llx w%llx\n", targets[t], (unsigned long long)size, (unsigned long long)fnv(co, size), current_wrapper);
                free(co); fclose(log); return;
            }
    }
    fprintf(log, "MISSING %s w%llx\n", key, current_wrapper);
    fclose(log);
}
void **__hipRegisterFatBinary(const struct wrapper *w) {
    const unsigned char *b = w->binary;
    current_wrapper = wrapper_offset(w);
    if (w->magic == 0x4B504948) {
        if (getenv("STUB_LOG")) follow_hipk(w);
    } else if (memcmp(b, "CCOB", 4) == 0) {
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

/// A kernel whose code object holds a 64 kB table: dropping one frees many pages.
pub const KERNEL: &str = r#"
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **args, unsigned long shm, hipStream_t s);
__device__ int TABLE[16384] = {VALUE, 1, 2, 3};
__global__ void KERNEL(int *x) { x[0] += TABLE[x[1]]; }
extern "C" int HOST(void) { return VALUE; }
"#;

/// (name, offload arches, flags): a plain bundle, a compressed one, and one with a generic target.
pub const UNITS: &[(&str, &[&str], &[&str])] = &[
    ("plain", &["gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx1100"], &[]),
    ("compressed", &["gfx942", "gfx1100", "gfx90a"], &["--offload-compress"]),
    ("generic", &["gfx11-generic", "gfx942"], &["-mcode-object-version=6"]),
];

/// The units' objects (the first defines `host_value`, which returns 42).
pub fn objects(dir: &Path) -> Vec<PathBuf> {
    let (clang, _) = toolchain();
    let src = dir.join("k.hip");
    std::fs::write(&src, KERNEL).unwrap();
    let mut objects = Vec::new();
    for (i, (name, arches, flags)) in UNITS.iter().enumerate() {
        let object = dir.join(format!("{name}.o"));
        let host = if i == 0 { "host_value".to_string() } else { format!("host_{name}") };
        run(Command::new(&clang)
            .args(["-x", "hip", "-nogpulib", "-nogpuinc", "-fPIC", "-O1", "-c", "-Wno-unused-command-line-argument"])
            .args([format!("-DKERNEL=kernel_{name}"), format!("-DTABLE=table_{name}"), format!("-DHOST={host}")])
            .arg(format!("-DVALUE={}", 42 + i))
            .args(arches.iter().map(|a| format!("--offload-arch={a}")))
            .args(*flags)
            .arg(&src)
            .arg("-o")
            .arg(&object));
        objects.push(object);
    }
    objects
}

/// A shared library of the units, linked by `linker` (`bfd`, `lld`, or `bfd-noseparate`: GNU ld
/// with `-z noseparate-code`, as old toolchains linked, `.hip_fatbin` in the code's segment).
pub fn library(dir: &Path, objects: &[PathBuf], linker: &str) -> PathBuf {
    let (clang, _) = toolchain();
    let lib = dir.join(format!("libk-{linker}.so"));
    let mut cmd = Command::new(clang);
    match linker.split_once('-') {
        Some((ld, "noseparate")) => cmd.arg(format!("-fuse-ld={ld}")).arg("-Wl,-z,noseparate-code"),
        _ => cmd.arg(format!("-fuse-ld={linker}")),
    };
    run(cmd.arg("-shared").args(objects).arg("-o").arg(&lib));
    lib
}
