//! `split` on real HIP fat binaries (three translation units: a plain bundle with xnack
//! variants, a compressed one, one with a generic target; linked by lld and by GNU ld): the
//! host and device wheels are served from a local directory and installed by pip with an
//! extra, then read by readers that are not wheelfix's: a kpack reader written here in Python
//! from the documented format (`msgpack` and `zstandard` from PyPI) follows each wrapper to
//! its archive and gets the code object clang's bundler unbundles from the original; the stub
//! HIP runtime follows each `HIPK` wrapper as the kpack runtime does and the host code runs.
//! Each check also runs on an install without the device wheel, where it must fail.

use crate::support;
use wheelfix::gpu::TargetId;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::hip::{STUB, bundler_unbundle, bundles, library, load_with_stub, objects};
use support::python::{assert_true_record, run, system_python, tools_venv};
use support::wheelgen::WheelSpec;
use support::{read_member, stderr, stdout, wheelfix, wheelfix_env};
use wheelfix::check::{Finding, Severity};
use wheelfix::gpu::{Container, Count};
use wheelfix::report::split::SplitOutcome;

/// The release's version: a ROCm build's, with its local label.
const VERSION: &str = "1.0+rocm7.1.0";

/// Kernel database files (kpack's naming rules), with the target each is for; `None` stays in
/// the host wheel (no target); a family's directory goes to the family's own device wheel when
/// the split is per processor (`gfx11`, required by the gfx1100 wheel).
const DATABASES: &[(&str, Option<&str>)] = &[
    ("fatpkg/lib/rocblas/library/TensileLibrary_gfx942.co", Some("gfx942")),
    ("fatpkg/lib/rocblas/library/TensileLibrary_Type_HH_gfx90a-xnack+.dat", Some("gfx90a")),
    ("fatpkg/lib/rocblas/library/TensileLibrary_fallback.dat", None),
    ("fatpkg/lib/hipblaslt/library/gfx1100/Kernels.hsaco", Some("gfx1100")),
    ("fatpkg/share/miopen/db/gfx942130.kdb", Some("gfx942")),
    ("fatpkg/share/miopen/db/gfx90a6e.HIP.fdb.txt", Some("gfx90a")),
    ("fatpkg/lib/aotriton.images/amd-gfx11xx/flash/k.aks2", Some("gfx11")),
];

/// The binaries of the wheel, by member path: one per linker, one in a subdirectory.
const MEMBERS: &[(&str, &str)] = &[("fatpkg/libk-lld.so", "lld"), ("fatpkg/sub/libk-bfd.so", "bfd")];

/// A kpack reader from the documented format: for each `HIPK` wrapper of an installed binary,
/// the marker at its pointer (found through the `R_X86_64_RELATIVE` relocation of the pointer,
/// or the pointer itself), the archive its search path names for `arch`, and the code object of
/// `<kernel_name>#<reserved1>` for `arch` in it. Prints per wrapper: its index, the sha256 of
/// the code object (or MISSING and why), and the architectures the archive lists.
const READER: &str = r#"
import hashlib, json, os, struct, sys
import msgpack, zstandard

path, arch = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
shoff, = struct.unpack_from('<Q', data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3a)
def section(i):
    return struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize)
names = section(shstrndx)
def name(s):
    start = names[4] + s[0]
    return data[start:data.index(b'\0', start)].decode()
sections = {name(s): s for s in map(section, range(shnum))}
phoff, = struct.unpack_from('<Q', data, 0x20)
phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
loads = [struct.unpack_from('<IIQQQQQQ', data, phoff + i * phentsize) for i in range(phnum)]
def file_offset(address):
    for p_type, _, offset, vaddr, _, filesz, _, _ in loads:
        if p_type == 1 and vaddr <= address < vaddr + filesz:
            return offset + address - vaddr
    raise SystemExit(f'address {address:#x} is not in the file')
relative = {}
for s in sections.values():
    if s[1] == 4:  # SHT_RELA
        for k in range(s[5] // 24):
            r_offset, r_info, r_addend = struct.unpack_from('<QQq', data, s[4] + 24 * k)
            if r_info & 0xffffffff == 8:  # R_X86_64_RELATIVE
                relative[r_offset] = r_addend
segment = sections['.hipFatBinSegment']
out = []
for i in range(segment[5] // 24):
    magic, version, pointer, reserved = struct.unpack_from('<IIQQ', data, segment[4] + 24 * i)
    assert magic == 0x4B504948, f'wrapper {i}: magic {magic:#x}'
    pointer = pointer or relative[segment[3] + 24 * i + 8]
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data[file_offset(pointer):file_offset(pointer) + 65536])
    marker = next(unpacker)
    key = f"{marker['kernel_name']}#{reserved}"
    found = None
    for pattern in marker['kpack_search_paths']:
        archive = os.path.join(os.path.dirname(path), pattern.replace('@GFXARCH@', arch))
        if not os.path.exists(archive):
            continue
        blob = open(archive, 'rb').read()
        assert blob[:4] == b'KPAK' and struct.unpack_from('<I', blob, 4)[0] == 1
        toc = msgpack.unpackb(blob[struct.unpack_from('<Q', blob, 8)[0]:], raw=False)
        assert toc['compression_scheme'] == 'zstd-per-kernel'
        entry = toc['toc'].get(key, {}).get(arch)
        if entry is None:
            continue
        at = toc['zstd_offset']
        count, = struct.unpack_from('<I', blob, at)
        at += 4
        for _ in range(entry['ordinal']):
            at += 4 + struct.unpack_from('<I', blob, at)[0]
        size, = struct.unpack_from('<I', blob, at)
        code = zstandard.ZstdDecompressor().decompress(blob[at + 4:at + 4 + size])
        assert len(code) == entry['original_size']
        found = (hashlib.sha256(code).hexdigest(), sorted(toc['gfx_arches']))
        break
    out.append([i, key, found[0] if found else 'MISSING', found[1] if found else []])
print(json.dumps(out))
"#;

/// The marker as ROCm's design reads it (rocm_kpack's `read_kpack_ref_marker`): the section
/// named `.rocm_kpack_ref`, its bytes exactly one MessagePack map. Prints it as JSON, or null
/// when the binary has no such section; fails on extra bytes.
const ROCM_MARKER_READER: &str = r#"
import json, struct, sys
import msgpack

data = open(sys.argv[1], 'rb').read()
shoff, = struct.unpack_from('<Q', data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3a)
headers = [struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize) for i in range(shnum)]
names = headers[shstrndx]
def name(h):
    start = names[4] + h[0]
    return data[start:data.index(b'\0', start)].decode()
# TheRock's splitter takes a binary with a `.hip_fatbin` that has file bytes for device code.
assert not any(name(h) == '.hip_fatbin' and h[1] != 8 for h in headers), 'TheRock would split it again'
found = [h for h in headers if name(h) == '.rocm_kpack_ref']
if not found:
    print('null')
else:
    h = found[0]
    assert h[2] & 2, 'SHF_ALLOC'
    print(json.dumps(msgpack.unpackb(data[h[4]:h[4] + h[5]], raw=False)))
"#;

/// The tools venv, with the reader's packages.
fn reader_python() -> PathBuf {
    let python = tools_venv().join("bin/python");
    let ok = Command::new(&python).args(["-c", "import msgpack, zstandard"]).status().is_ok_and(|s| s.success());
    assert!(ok, "the tools venv lacks msgpack and zstandard");
    python
}

/// What the reader finds in an installed binary for `arch`.
fn read_installed(binary: &Path, arch: &str) -> Vec<(String, String, Vec<String>)> {
    let out = run(Command::new(reader_python()).args(["-c", READER]).arg(binary).arg(arch));
    let rows: Vec<serde_json::Value> = serde_json::from_str(out.trim()).unwrap();
    rows.iter()
        .map(|r| {
            let arches = r[3].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
            (r[1].as_str().unwrap().to_string(), r[2].as_str().unwrap().to_string(), arches)
        })
        .collect()
}

/// `args` run again on `wheel` with no room for inflated copies (`WHEELFIX_COPY_ROOM=0`) write
/// the same files, byte for byte, as `out` holds.
fn same_without_copies(d: &Path, args: &[&str], wheel: &Path, out: &Path) {
    let again = d.join(format!("{}-no-copies", out.file_name().unwrap().to_string_lossy()));
    let mut all = args.to_vec();
    all.extend(["-v", "-w", again.to_str().unwrap(), wheel.to_str().unwrap()]);
    let run = wheelfix_env(d, &all, &[("WHEELFIX_COPY_ROOM", "0")]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stderr(&run).contains("; 0 plain code objects taken as it streamed"), "{}", stderr(&run));
    let names = |dir: &Path| {
        let mut n: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        n.sort();
        n
    };
    assert_eq!(names(out), names(&again));
    for name in names(out) {
        assert!(
            std::fs::read(out.join(&name)).unwrap() == std::fs::read(again.join(&name)).unwrap(),
            "{name:?} differs"
        );
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// pip installs `requirement` from the directory `wheels` alone into a fresh target.
fn pip_install(dir: &Path, wheels: &Path, requirement: &str, name: &str) -> PathBuf {
    let site = dir.join(name);
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--find-links"])
        .arg(wheels)
        .arg("--target")
        .arg(&site)
        .arg(requirement));
    site
}

/// The `.kpack` files under a directory, relative to it, sorted.
fn archives_in(site: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![site.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "kpack") {
                found.push(path.strip_prefix(site).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// Load an installed binary with the stub runtime as an agent of `agent` (and `generic`).
fn load_as(dir: &Path, stub: &Path, binary: &Path, agent: &str, generic: Option<&str>) -> (Vec<String>, String) {
    let log = dir.join("stub.log");
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(system_python());
    cmd.args(["-c", support::hip::LOAD]).arg(stub).arg(binary).env("STUB_LOG", &log).env("STUB_AGENT", agent);
    if let Some(generic) = generic {
        cmd.env("STUB_GENERIC", generic);
    }
    let value = run(&mut cmd);
    // `MISSING <key> w<offset>` is compared by its wrapper alone.
    let line = |l: &str| match l.strip_prefix("MISSING ") {
        Some(rest) => format!("MISSING {}", rest.rsplit(' ').next().unwrap()),
        None => l.to_string(),
    };
    let mut lines: Vec<String> = std::fs::read_to_string(&log).unwrap_or_default().lines().map(line).collect();
    lines.sort();
    (lines, value.trim().to_string())
}

/// The original's registered code objects the runtime picks for an agent, per wrapper: the
/// first of `preferred` (target ids, most specific first) the wrapper's bundle has.
fn expected_for(original: &[String], preferred: &[&str]) -> Vec<String> {
    let wrapper = |line: &String| line.rsplit(' ').next().unwrap().to_string();
    let mut wrappers: Vec<String> = original.iter().map(wrapper).collect();
    wrappers.sort();
    wrappers.dedup();
    let mut out = Vec::new();
    for w in wrappers {
        let pick = preferred.iter().find_map(|id| {
            original.iter().find(|l| wrapper(l) == w && l.starts_with(&format!("hipv4-amdgcn-amd-amdhsa--{id} ")))
        });
        out.push(pick.cloned().unwrap_or_else(|| format!("MISSING {w}")));
    }
    out.sort();
    out
}

#[test]
fn a_split_set_installs_with_an_extra_and_loads_its_device_code_through_kpack() {
    let set = SplitSet::split_per_processor();
    set.metadata_pins_each_way();
    set.hosts_carry_markers_rocm_reads();
    set.check_names_what_a_set_lacks();
    set.release_pages_install_the_set();
    set.show_reads_the_split();
    set.installed_device_code_loads();
    set.metapackage_brings_the_archives();
    set.grouped_by_family();
    set.one_kpack_group_and_therock_layout();
    set.xnack_and_generic_targets_fall_back();
}

/// The fat wheel of the split tests (three units in two binaries, linked by lld and by GNU ld,
/// and kernel database files), split per processor into `out/`.
struct SplitSet {
    _dir: tempfile::TempDir,
    d: PathBuf,
    stub: PathBuf,
    objects: Vec<PathBuf>,
    wheel: PathBuf,
    /// Each binary: its member path, its bytes, and what the stub runtime registers from it.
    originals: Vec<(&'static str, Vec<u8>, Vec<String>)>,
    out_dir: PathBuf,
    /// The split's wheels, sorted: the host, then the gfx11 (family), gfx1100, gfx90a and gfx942
    /// device wheels.
    written: Vec<String>,
}

impl SplitSet {
    /// Build the fat wheel and split it per processor; the split's outputs are checked as
    /// they are listed, and again without room for copies (the same bytes).
    fn split_per_processor() -> SplitSet {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let stub = support::python::cc_shared(d, STUB, "libamdhip64.so", &["-ldl"]);
        let objects = objects(d);
        let mut spec = WheelSpec::new("fatpkg", VERSION, "py3-none-linux_x86_64").file("fatpkg/__init__.py", "");
        let mut originals = Vec::new();
        for (member, linker) in MEMBERS {
            let lib = library(d, &objects, linker);
            let bytes = std::fs::read(&lib).unwrap();
            let (registered, value) = load_with_stub(d, &stub, &lib);
            assert_eq!((registered.len(), value.as_str()), (9, "42"), "{member}: the untouched library");
            spec = spec.file(member, bytes.clone());
            originals.push((*member, bytes, registered));
        }
        for (i, (path, _)) in DATABASES.iter().enumerate() {
            spec = spec.file(path, vec![i as u8; 5000 + i]);
        }
        let wheel = spec.write(&d.join("in"));

        let out = wheelfix(d, &["split", "-v", "--all-targets", "-w", "out", wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        // Each wrapper's RELATIVE relocation was read, and points at the bundle split as its.
        for (member, _) in MEMBERS {
            let said = format!("{member}: 3 of 3 wrappers found pointing at their bundles;");
            assert!(stderr(&out).contains(&said), "{said}: {}", stderr(&out));
        }
        let out_dir = d.join("out");
        let mut written: Vec<String> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        written.sort();
        assert_eq!(
            written,
            [
                "fatpkg-1.0+rocm7.1.0-py3-none-linux_x86_64.whl",
                "fatpkg_device_gfx11-1.0+rocm7.1.0-py3-none-linux_x86_64.whl",
                "fatpkg_device_gfx1100-1.0+rocm7.1.0-py3-none-linux_x86_64.whl",
                "fatpkg_device_gfx90a-1.0+rocm7.1.0-py3-none-linux_x86_64.whl",
                "fatpkg_device_gfx942-1.0+rocm7.1.0-py3-none-linux_x86_64.whl",
            ],
            "{text}"
        );
        for name in &written {
            assert_true_record(&out_dir.join(name));
        }
        // The code objects were taken as the binaries streamed past (none was copied raw); with
        // no room for copies each binary is inflated again and its objects read from it, to the
        // same bytes.
        for (member, _) in MEMBERS {
            let said = format!("{member}: 3 of 3 wrappers found pointing at their bundles; ");
            let line = stderr(&out).lines().find(|l| l.contains(&said)).map(str::to_string).unwrap_or_default();
            assert!(!line.contains("; 0 plain code objects taken") && line.ends_with(", 0 read from it"), "{line}");
        }
        same_without_copies(d, &["split", "--all-targets"], &wheel, &out_dir);
        let d = d.to_path_buf();
        SplitSet { _dir: dir, d, stub, objects, wheel, originals, out_dir, written }
    }

    /// `check --json` of a set: its exit code, and its errors and kpack warnings (the others
    /// are of the versions: no `+rocm` label on this test's wheels).
    fn check(&self, set: &Path) -> (Option<i32>, Vec<Finding>) {
        let d = self.d.as_path();
        let out = wheelfix(d, &["check", "--json", set.to_str().unwrap()]);
        let report = support::check_document(&out);
        let errors =
            report.findings.iter().filter(|f| f.severity == Severity::Error || f.kind.name().starts_with("kpack-"));
        (out.status.code(), errors.cloned().collect::<Vec<_>>())
    }

    /// The host's extras pin each device wheel, and each device wheel pins the host.
    fn metadata_pins_each_way(&self) {
        let (out_dir, written) = (&self.out_dir, &self.written[..]);
        let host = out_dir.join(&written[0]);
        let metadata = String::from_utf8(read_member(&host, "fatpkg-1.0+rocm7.1.0.dist-info/METADATA")).unwrap();
        for group in ["gfx90a", "gfx942", "gfx1100"] {
            assert!(metadata.contains(&format!("Provides-Extra: device-{group}\n")), "{metadata}");
            assert!(
                metadata.contains(&format!(
                    "Requires-Dist: fatpkg-device-{group}==1.0+rocm7.1.0; extra == \"device-{group}\"\n"
                )),
                "{metadata}"
            );
            assert!(
                metadata.contains(&format!(
                    "Requires-Dist: fatpkg-device-{group}==1.0+rocm7.1.0; extra == \"device-all\"\n"
                ))
            );
        }
        let device_metadata = |i: usize, project: &str| {
            let path = format!("{project}-1.0+rocm7.1.0.dist-info/METADATA");
            String::from_utf8(read_member(&out_dir.join(&written[i]), &path)).unwrap()
        };
        let device = device_metadata(4, "fatpkg_device_gfx942");
        assert!(device.contains("Requires-Dist: fatpkg==1.0+rocm7.1.0\n"), "{device:?}");
        assert!(!device.contains("gfx11"), "{device:?}");
        // TheRock's packaging chain: the family directory's files (`amd-gfx11xx/`) are a wheel of
        // their own, which the gfx1100 wheel requires and the gfx1100 extra brings too.
        let gfx1100 = device_metadata(2, "fatpkg_device_gfx1100");
        assert!(gfx1100.contains("Requires-Dist: fatpkg-device-gfx11==1.0+rocm7.1.0\n"), "{gfx1100}");
        let family = device_metadata(1, "fatpkg_device_gfx11");
        assert!(family.contains("Requires-Dist: fatpkg==1.0+rocm7.1.0\n"), "{family}");
        for line in [
            "Requires-Dist: fatpkg-device-gfx11==1.0+rocm7.1.0; extra == \"device-gfx1100\"\n",
            "Requires-Dist: fatpkg-device-gfx11==1.0+rocm7.1.0; extra == \"device-all\"\n",
        ] {
            assert!(metadata.contains(line), "{line}{metadata}");
        }
        assert_eq!(metadata.matches("Provides-Extra: device-gfx1100\n").count(), 1, "{metadata}");
        assert!(!metadata.contains("Provides-Extra: device-gfx11\n"), "no extra of the family alone: {metadata}");
    }

    /// No device code stays in the hosts, and ROCm's marker reader finds each marker.
    fn hosts_carry_markers_rocm_reads(&self) {
        let host = self.out_dir.join(&self.written[0]);
        let (d, originals) = (self.d.as_path(), &self.originals[..]);
        // No device code stays in the host: its binaries install smaller than the originals, and
        // readelf and eu-elflint say nothing of them they did not say of the originals.
        for (member, bytes, _) in originals {
            let split = read_member(&host, member);
            assert!(split.len() + 40 * 4096 < bytes.len(), "{member}: {} of {} bytes", split.len(), bytes.len());
            // Not in any section (split renames the `.hip_fatbin` it emptied): nowhere in the file.
            let left = |magic: &[u8]| split.windows(magic.len()).any(|w| w == magic);
            assert!(!left(b"__CLANG_OFFLOAD_BUNDLE__") && !left(b"CCOB"), "{member}: an offload bundle is left");
            let (old_path, new_path) = (d.join("original.so"), d.join("split.so"));
            std::fs::write(&old_path, bytes).unwrap();
            std::fs::write(&new_path, &split).unwrap();
            assert_eq!(support::hip::readelf_warnings(&new_path), "", "{member}");
            let before = support::hip::elflint(&old_path);
            let new: Vec<String> =
                support::hip::elflint(&new_path).into_iter().filter(|l| !before.contains(l)).collect();
            assert!(new.is_empty(), "{member}: eu-elflint says more than of the original: {new:?}");
            // ROCm's tools find the marker by its section's name.
            let marker = run(Command::new(reader_python()).args(["-c", ROCM_MARKER_READER]).arg(&new_path));
            let marker: serde_json::Value = serde_json::from_str(marker.trim()).unwrap();
            assert!(marker["kernel_name"].as_str().is_some_and(|k| !k.is_empty()), "{member}: {marker}");
            let paths = marker["kpack_search_paths"].as_array().unwrap_or_else(|| panic!("{member}: {marker}"));
            assert!(paths.iter().all(|p| p.as_str().unwrap().contains("@GFXARCH@")), "{member}: {marker}");
            // GNU strip keeps the marker where ROCm's tools read it, and writes a file elflint passes.
            let stripped = d.join("stripped.so");
            let out = Command::new("strip").arg("-o").arg(&stripped).arg(&new_path).output().expect("strip (binutils)");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && said.is_empty(), "{member}: strip says {said}");
            let again = run(Command::new(reader_python()).args(["-c", ROCM_MARKER_READER]).arg(&stripped));
            assert_eq!(serde_json::from_str::<serde_json::Value>(again.trim()).unwrap(), marker, "{member}, stripped");
            let new: Vec<String> =
                support::hip::elflint(&stripped).into_iter().filter(|l| !before.contains(l)).collect();
            assert!(new.is_empty(), "{member}, stripped: eu-elflint says more than of the original: {new:?}");
        }
    }

    /// `check` of the set and of sets that lack or mismatch a device wheel.
    fn check_names_what_a_set_lacks(&self) {
        let (d, objects, out_dir, written) = (self.d.as_path(), &self.objects, &self.out_dir, &self.written[..]);
        let check = |set: &Path| self.check(set);
        // `check` on the set: nothing to say; without a device wheel, or with one split from
        // another build (one unit, one binary), it names the host, the binary and the target.
        // The third unit has no gfx90a code (nor had the fat build): with [device-gfx90a], its
        // wrapper finds nothing, in each binary, while it has code for the other processors. That,
        // a warning (the fat wheel is the same), and nothing else, is what check says.
        let (code, findings) = check(out_dir);
        let said: Vec<(&str, bool)> = findings
            .iter()
            .map(|f| {
                let m = f.message.as_str();
                (f.kind.name(), m.contains("1 of 3 wrappers") && m.contains("#2,") && m.contains("gfx90a"))
            })
            .collect();
        assert_eq!((code, said), (Some(0), vec![("kpack-kernel-not-built", true); 2]), "{findings:#?}");
        let other = WheelSpec::new("fatpkg", VERSION, "py3-none-linux_x86_64")
            .file("fatpkg/__init__.py", "")
            .file(MEMBERS[0].0, std::fs::read(library(d, &objects[..1], "lld")).unwrap())
            .write(&d.join("other-in"));
        let out = wheelfix(
            d,
            &["split", "--gpu-target", "gfx942", "--drop-other-targets", "-w", "other", other.to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let swap = d.join("other").join(&written[4]);
        for (set, swap) in [("no-gfx942", None), ("mismatched", Some(&swap)), ("only-other", Some(&swap))] {
            let set_dir = d.join(set);
            std::fs::create_dir_all(&set_dir).unwrap();
            let kept = |n: &&String| !n.contains("gfx942") && (set != "only-other" || !n.contains("device"));
            for name in written.iter().filter(kept) {
                std::fs::copy(out_dir.join(name), set_dir.join(name)).unwrap();
            }
            if let Some(swap) = &swap {
                std::fs::copy(swap, set_dir.join(swap.file_name().unwrap())).unwrap();
            }
            let (code, findings) = check(&set_dir);
            assert_eq!(code, Some(1), "{set}: {findings:#?}");
            let text = serde_json::to_string(&findings).unwrap();
            assert!(text.contains("gfx942"), "{set}: {text}");
            let kinds: Vec<&str> = findings.iter().map(|f| f.kind.name()).collect();
            if set == "only-other" {
                // Wrappers #1 and #2 have code for no processor in the whole set: lost, an error.
                let lost = findings.iter().find(|f| f.kind == "kpack-kernel-missing").expect(&text);
                assert!(lost.message.as_str().contains("2 of 3 wrappers"), "{text}");
            } else if swap.is_some() {
                // The other build's archive lacks wrappers that have code for other processors:
                // a warning, as a unit built for fewer targets would be; its other binary has no
                // archive: an error.
                assert!(
                    kinds.contains(&"kpack-kernel-not-built") && kinds.contains(&"kpack-unresolved"),
                    "{set}: {text}"
                );
                assert!(text.contains("fatpkg/libk-lld.so#1") && text.contains("fatpkg/sub/libk-bfd.so"), "{text}");
            }
        }
    }

    /// The release pages of the set, and their commands run as printed.
    fn release_pages_install_the_set(&self) {
        let (d, out_dir, written) = (self.d.as_path(), &self.out_dir, &self.written[..]);
        // A set with errors is indexed all the same (only --fail-on-check refuses), but `index`
        // and `site` say so on stderr rather than only on the page.
        let out = wheelfix(d, &["index", "-o", "site-bad", d.join("no-gfx942").to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("warning: check found") && stderr(&out).contains("error"), "{}", stderr(&out));
        let out = wheelfix(d, &["site", "-o", "public-bad", "site-bad"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("warning: check found") && stderr(&out).contains("site-bad"), "{}", stderr(&out));

        // The release page of the set: per GPU, the command with its extra and the device wheel's
        // size; the gfx942 command, run as printed, installs the host and the gfx942 device wheel.
        let out = wheelfix(d, &["index", "-o", "site", out_dir.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let page = support::release_page(&d.join("site/release.json"));
        let rows: Vec<(&str, &str)> = page.devices.iter().map(|r| (r.target.as_str(), r.install.as_str())).collect();
        assert_eq!(
            rows,
            [
                ("gfx90a", "fatpkg[device-gfx90a]==1.0+rocm7.1.0"),
                ("gfx942", "fatpkg[device-gfx942]==1.0+rocm7.1.0"),
                ("gfx1100", "fatpkg[device-gfx1100]==1.0+rocm7.1.0")
            ]
        );
        // With a selector beside the set, the page names one ROCm: the selector's own version
        // (`1.0`) is not one.
        let mut args = vec!["selector", "--name", "fatpkg-gpu", "-o", "selected"];
        let outputs: Vec<String> = written.iter().map(|n| out_dir.join(n).display().to_string()).collect();
        args.extend(outputs.iter().map(String::as_str));
        let out = wheelfix(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        // Served over HTTP, as people reach it; the commands are taken from Chromium's DOM.
        let server = support::http::Server::start(d);
        let selected_url = server.url("site-selected/");
        let out = wheelfix(
            d,
            &["index", "-o", "site-selected", "--site-url", &selected_url, out_dir.to_str().unwrap(), "selected"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let selected = support::release_page(&d.join("site-selected/release.json"));
        assert_eq!(selected.rocm, ["7.1.0"], "{selected:#?}");
        // `site` renders the same page under the landing page, whose command installs everything.
        let out = wheelfix(d, &["site", "-o", "public", "site"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let again = std::fs::read_to_string(d.join("public/site/release.html")).unwrap();
        assert!(again.contains("<tr data-target=\"gfx942\">"), "{again}");
        let landing = support::html_text(&std::fs::read_to_string(d.join("public/index.html")).unwrap());
        assert!(landing.contains("'fatpkg[device-all]==1.0+rocm7.1.0'"), "{landing}");
        let html = std::fs::read_to_string(d.join("site/release.html")).unwrap();
        let row = &html[html.find("<tr data-target=\"gfx942\">").expect("a gfx942 row")..];
        let row = &row[..row.find("</tr>").unwrap()];
        let cmd = &row[row.find("<code class=\"cmd\">").unwrap() + 18..];
        let command = support::html_text(&cmd[..cmd.find("</code>").unwrap()]);
        assert!(command.contains("'fatpkg[device-gfx942]==1.0+rocm7.1.0'"), "{command}");
        // Another index serves a newer fatpkg without the extras (as PyPI serves a same-named
        // project): the command, pinned exactly, still installs the release's.
        let shadow =
            WheelSpec::new("fatpkg", "2.0", "py3-none-any").file("fatpkg/__init__.py", "").write(&d.join("shadow"));
        assert!(shadow.exists());
        let venv = d.join("venv-page");
        run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
        let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap());
        let out = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .env("PATH", path)
            .env("VIRTUAL_ENV", &venv)
            .env("PIP_FIND_LINKS", d.join("shadow"))
            .current_dir(d)
            .output()
            .unwrap();
        assert!(out.status.success(), "`{command}`: {}", String::from_utf8_lossy(&out.stderr));
        let site_packages =
            std::fs::read_dir(venv.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
        assert_eq!(
            archives_in(&site_packages),
            ["fatpkg/.kpack/libk-lld.so_gfx942.kpack", "fatpkg/sub/.kpack/libk-bfd.so_gfx942.kpack"]
        );

        // With the selector, the page starts from the GPU: one pip and one uv command per GPU,
        // through the selector's extra. Each, run as printed while another source serves a newer
        // same-named release, installs the release with that GPU's device code and no other.
        let html = support::browser::dump_dom(&server.url("site-selected/release.html"));
        let row = &html[html.find("<tr data-gpu=\"gfx942\" id=\"gfx942\">").expect("a gfx942 GPU row")..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains("AMD Instinct MI300X"), "{row}");
        let command_of = |class: &str| {
            let at = row.find(&format!("<code class=\"cmd {class}\">")).unwrap() + 18 + class.len() + 1;
            support::html_text(&row[at..at + row[at..].find("</code>").unwrap()])
        };
        for (tool, command) in [("pip", command_of("pip")), ("uv", command_of("uv"))] {
            assert!(command.contains(&format!("{selected_url} ")), "{command}");
            assert!(command.contains("'fatpkg-gpu[device-gfx942]==1.0+rocm7.1.0'"), "{command}");
            let venv = d.join(format!("venv-gpu-{tool}"));
            run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
            let bin = format!("{}:{}", venv.join("bin").display(), support::python::tools_venv().join("bin").display());
            let out = Command::new("sh")
                .arg("-c")
                .arg(&command)
                .env("PATH", format!("{bin}:{}", std::env::var("PATH").unwrap()))
                .env("VIRTUAL_ENV", &venv)
                .env("PIP_FIND_LINKS", d.join("shadow"))
                .env("UV_FIND_LINKS", d.join("shadow"))
                .env("UV_NO_CACHE", "1")
                .current_dir(d)
                .output()
                .unwrap();
            assert!(out.status.success(), "{tool}: `{command}`: {}", String::from_utf8_lossy(&out.stderr));
            let site_packages =
                std::fs::read_dir(venv.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
            assert_eq!(
                archives_in(&site_packages),
                ["fatpkg/.kpack/libk-lld.so_gfx942.kpack", "fatpkg/sub/.kpack/libk-bfd.so_gfx942.kpack"],
                "{tool}"
            );
            assert!(site_packages.join("fatpkg-1.0+rocm7.1.0.dist-info").exists(), "{tool}: the release's own host");
        }
        let text = support::html_text(&html);
        assert!(text.contains("One project at a time"), "{text}");
        assert!(text.contains("no glibc promised · Python: any Python 3"), "{text}");
    }

    /// `show` reads the split host and device wheels.
    fn show_reads_the_split(&self) {
        let host = self.out_dir.join(&self.written[0]);
        let (d, originals, out_dir, written) =
            (self.d.as_path(), &self.originals[..], &self.out_dir, &self.written[..]);
        // wheelfix reads its own output: the host's binaries as split out, the device wheel's
        // archives with their targets.
        let report = support::show_report(d, &host, &[]);
        for (member, _, _) in originals {
            let gpu = report.gpu.iter().find(|g| g.file == **member).expect("listed");
            assert_eq!(gpu.container, Container::KpackSplit, "{gpu:?}");
            assert!(!serde_json::to_string(&report).unwrap().contains("not loadable"), "{report:?}");
            assert_eq!(
                gpu.kpack_search_paths[0],
                format!(".kpack/{}_@GFXARCH@.kpack", member.rsplit('/').next().unwrap())
            );
        }
        let report = support::show_report(d, &out_dir.join(&written[3]), &[]);
        let targets: Vec<&Vec<TargetId>> = report.gpu.iter().map(|g| &g.targets).collect();
        assert_eq!(targets.len(), 2, "{report:?}");
        for t in targets {
            assert_eq!(*t, ["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-"], "{report:?}");
        }
    }

    /// Installed with an extra, each wrapper's code object loads, and only that target's.
    fn installed_device_code_loads(&self) {
        let (d, stub, originals, out_dir) = (self.d.as_path(), &self.stub, &self.originals[..], &self.out_dir);
        let full = pip_install(d, out_dir, "fatpkg[device-gfx942]", "site-gfx942");
        assert_eq!(
            archives_in(&full),
            ["fatpkg/.kpack/libk-lld.so_gfx942.kpack", "fatpkg/sub/.kpack/libk-bfd.so_gfx942.kpack"],
            "the gfx942 archives and no other target's"
        );
        let host_only = pip_install(d, out_dir, "fatpkg", "site-host");
        assert!(archives_in(&host_only).is_empty());
        // The gfx942 database files are installed and no other target's; files of no target stay.
        for (i, (path, target)) in DATABASES.iter().enumerate() {
            let in_full = std::fs::read(full.join(path)).ok();
            let expected = matches!(target, None | Some("gfx942")).then(|| vec![i as u8; 5000 + i]);
            assert_eq!(in_full, expected, "{path} with [device-gfx942]");
            assert_eq!(host_only.join(path).exists(), target.is_none(), "{path} without a device wheel");
        }

        for (member, original, registered) in originals {
            let installed = full.join(member);
            // The reader gets, per wrapper, exactly what clang's bundler unbundles from the bundle
            // that wrapper pointed at, and the archive lists gfx942 alone.
            let found = read_installed(&installed, "gfx942");
            let bundles = bundles(original);
            assert_eq!(found.len(), bundles.len(), "{member}: one wrapper per bundle");
            for (i, (key, sha, arches)) in found.iter().enumerate() {
                assert_eq!(key, &format!("{member}#{i}"));
                let expected = sha256_hex(&bundler_unbundle(d, &bundles[i], "hipv4-amdgcn-amd-amdhsa--gfx942"));
                assert_eq!((sha, arches.as_slice()), (&expected, &["gfx942".to_string()][..]), "{member} wrapper {i}");
            }
            let missing = read_installed(&host_only.join(member), "gfx942");
            assert!(
                missing.iter().all(|(_, sha, _)| sha == "MISSING"),
                "{member}: without the device wheel: {missing:?}"
            );

            // The stub runtime registers, per wrapper, the original's gfx942 code object.
            let (lines, value) = load_as(d, stub, &installed, "gfx942:sramecc+:xnack-", Some("gfx9-4-generic"));
            assert_eq!(value, "42", "{member}: the host code runs");
            assert_eq!(lines, expected_for(registered, &["gfx942"]), "{member}");
            let (lines, value) = load_as(d, stub, &host_only.join(member), "gfx942", None);
            assert_eq!(value, "42");
            assert!(lines.iter().all(|l| l.starts_with("MISSING")), "{member}: without the device wheel: {lines:?}");
        }
    }

    /// A metapackage of the set brings a target's archives.
    fn metapackage_brings_the_archives(&self) {
        let (d, out_dir, written) = (self.d.as_path(), &self.out_dir, &self.written[..]);
        // A metapackage of the multi-architecture set: one extra per target, each requiring the
        // host with that target's extra; installed, it brings the gfx942 archives.
        let mut args = vec!["metapackage", "--name", "rocm-fat", "--rocm-version", "7.1.0", "-o", "meta"];
        args.extend(["--gpu-target", "gfx942", "--gpu-target", "gfx1100"]);
        let paths: Vec<String> = written.iter().map(|n| out_dir.join(n).display().to_string()).collect();
        args.extend(paths.iter().map(String::as_str));
        let out = wheelfix(d, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let meta = std::fs::read_dir(d.join("meta")).unwrap().next().unwrap().unwrap().path();
        let dist_info =
            format!("{}.dist-info/METADATA", meta.file_name().unwrap().to_str().unwrap().split("-py3").next().unwrap());
        let text = String::from_utf8(read_member(&meta, &dist_info)).unwrap();
        assert!(
            text.contains(&format!("Requires-Dist: fatpkg[device-gfx942]=={VERSION}; extra == \"device-gfx942\"\n")),
            "{text}"
        );
        assert!(!text.contains("fatpkg-device"), "device wheels come through the host's extra: {text}");
        let site = d.join("site-meta");
        run(Command::new(system_python())
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--find-links"])
            .arg(out_dir)
            .arg("--find-links")
            .arg(d.join("meta"))
            .arg("--target")
            .arg(&site)
            .arg("rocm-fat[device-gfx942]"));
        assert_eq!(
            archives_in(&site),
            ["fatpkg/.kpack/libk-lld.so_gfx942.kpack", "fatpkg/sub/.kpack/libk-bfd.so_gfx942.kpack"]
        );
    }

    /// Device wheels per family.
    fn grouped_by_family(&self) {
        let (d, stub, wheel, originals) = (self.d.as_path(), &self.stub, &self.wheel, &self.originals[..]);
        let check = |set: &Path| self.check(set);
        // Grouped by family: one device wheel for gfx9 (gfx90a and gfx942), one for gfx11; the
        // host keeps an extra per processor. Installed with [device-gfx942], the gfx942 code loads.
        let out =
            wheelfix(d, &["split", "--all-targets", "--group-by", "family", "-w", "family", wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        // Groups of several targets take copies of the captured frames: the same bytes again.
        same_without_copies(d, &["split", "--all-targets", "--group-by", "family"], wheel, &d.join("family"));
        let mut names: Vec<String> = std::fs::read_dir(d.join("family"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                format!("fatpkg-{VERSION}-py3-none-linux_x86_64.whl"),
                format!("fatpkg_device_gfx11-{VERSION}-py3-none-linux_x86_64.whl"),
                format!("fatpkg_device_gfx9-{VERSION}-py3-none-linux_x86_64.whl"),
            ]
        );
        let metadata = String::from_utf8(read_member(
            &d.join("family").join(&names[0]),
            &format!("fatpkg-{VERSION}.dist-info/METADATA"),
        ))
        .unwrap();
        for (extra, project) in
            [("gfx942", "gfx9"), ("gfx90a", "gfx9"), ("gfx9", "gfx9"), ("gfx1100", "gfx11"), ("gfx11", "gfx11")]
        {
            let line = format!("Requires-Dist: fatpkg-device-{project}=={VERSION}; extra == \"device-{extra}\"\n");
            assert!(metadata.contains(&line), "{line}{metadata}");
        }
        assert_eq!(metadata.matches("extra == \"device-all\"").count(), 2, "{metadata}");
        // The family directory's file goes with its family's wheel; check finds what it found in
        // the set split per processor (the third unit's missing gfx90a code), nothing more.
        let holds = |name: &str, path: &str| {
            let zip = zip::ZipArchive::new(std::fs::File::open(d.join("family").join(name)).unwrap()).unwrap();
            zip.file_names().any(|n| n.is_ok_and(|n| n == path))
        };
        let aks2 = "fatpkg/lib/aotriton.images/amd-gfx11xx/flash/k.aks2";
        assert!(holds(&names[1], aks2) && !holds(&names[0], aks2) && !holds(&names[2], aks2), "{aks2}");
        let (code, findings) = check(&d.join("family"));
        let kinds: Vec<&str> = findings.iter().map(|f| f.kind.name()).collect();
        assert_eq!((code, kinds), (Some(0), vec!["kpack-kernel-not-built"; 2]), "{findings:#?}");
        let family = pip_install(d, &d.join("family"), "fatpkg[device-gfx942]", "site-family");
        assert!(!family.join(aks2).exists(), "{aks2} installed with the gfx9 wheel");
        assert_eq!(
            archives_in(&family),
            [
                "fatpkg/.kpack/libk-lld.so_gfx90a.kpack",
                "fatpkg/.kpack/libk-lld.so_gfx942.kpack",
                "fatpkg/sub/.kpack/libk-bfd.so_gfx90a.kpack",
                "fatpkg/sub/.kpack/libk-bfd.so_gfx942.kpack"
            ]
        );
        let (member, _, registered) = &originals[0];
        let (lines, value) = load_as(d, stub, &family.join(member), "gfx942", None);
        assert_eq!((lines, value.as_str()), (expected_for(registered, &["gfx942"]), "42"));
    }

    /// One kpack archive per processor for the wheel (`--group`), and TheRock's layout (`--overlay-root`).
    fn one_kpack_group_and_therock_layout(&self) {
        let (d, stub, wheel, originals) = (self.d.as_path(), &self.stub, &self.wheel, &self.originals[..]);
        let check = |set: &Path| self.check(set);
        // One kpack group (`--group`, kpack's own layout): both binaries' code in one archive per
        // processor, in their common directory, each binary's marker naming it; the reader and the
        // stub runtime find every code object through it, as through an archive per binary.
        let out =
            wheelfix(d, &["split", "--all-targets", "--group", "fatpkg", "-w", "grouped", wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        same_without_copies(d, &["split", "--all-targets", "--group", "fatpkg"], wheel, &d.join("grouped"));
        let grouped = pip_install(d, &d.join("grouped"), "fatpkg[device-gfx942]", "site-grouped");
        assert_eq!(archives_in(&grouped), ["fatpkg/.kpack/fatpkg_gfx942.kpack"]);
        // Every wrapper's code object, keyed `<kernel name>#<i>`, through the shared archive; the
        // stub runtime registers them; `check` of the set says only what the build lacks.
        let every_object_found = |site: &Path, out: &str, kernel_name: &dyn Fn(&str) -> String| {
            for (member, original, registered) in originals {
                let found = read_installed(&site.join(member), "gfx942");
                let bundles = bundles(original);
                assert_eq!(found.len(), bundles.len(), "{member}: one wrapper per bundle");
                for (i, (key, sha, _)) in found.iter().enumerate() {
                    assert_eq!(key, &format!("{}#{i}", kernel_name(member)));
                    let expected = sha256_hex(&bundler_unbundle(d, &bundles[i], "hipv4-amdgcn-amd-amdhsa--gfx942"));
                    assert_eq!(sha, &expected, "{member} wrapper {i} through {out}'s archive");
                }
                let (lines, value) = load_as(d, stub, &site.join(member), "gfx942", None);
                assert_eq!((lines, value.as_str()), (expected_for(registered, &["gfx942"]), "42"), "{member}");
            }
            let (code, findings) = check(&d.join(out));
            let kinds: Vec<&str> = findings.iter().map(|f| f.kind.name()).collect();
            assert_eq!((code, kinds), (Some(0), vec!["kpack-kernel-not-built"; 2]), "{out}: {findings:#?}");
        };
        every_object_found(&grouped, "grouped", &|member| member.to_string());
        let bad = wheelfix(d, &["split", "--all-targets", "--group", "../up", "-w", "bad", wheel.to_str().unwrap()]);
        assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));

        // TheRock's layout (`--overlay-root`), as its splitter writes it: one archive per target id
        // in `<root>/.kpack/`, named after the project (`fatpkg_gfx942.kpack`); each binary's kernel
        // name and keys its path below the root; its search path climbing from its directory to the
        // root. The runtime's reader and the stub runtime find every code object through it.
        let args =
            ["split", "--all-targets", "--overlay-root", "fatpkg", "--device-name", "amd-{name}-device-{target}"];
        let out = wheelfix(d, &[&args[..], &["-w", "overlay", wheel.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(d.join("overlay/amd_fatpkg_device_gfx942-1.0+rocm7.1.0-py3-none-linux_x86_64.whl").exists());
        let overlay = pip_install(d, &d.join("overlay"), "fatpkg[device-gfx942]", "site-overlay");
        assert_eq!(archives_in(&overlay), ["fatpkg/.kpack/fatpkg_gfx942.kpack"]);
        for (member, _, _) in originals {
            let below = member.strip_prefix("fatpkg/").unwrap();
            let up = "../".repeat(below.matches('/').count());
            let marker = run(Command::new(reader_python()).args(["-c", ROCM_MARKER_READER]).arg(overlay.join(member)));
            let expected = serde_json::json!({
                "kernel_name": below,
                "kpack_search_paths": [format!("{up}.kpack/fatpkg_@GFXARCH@.kpack")],
            });
            assert_eq!(serde_json::from_str::<serde_json::Value>(marker.trim()).unwrap(), expected, "{member}");
        }
        every_object_found(&overlay, "overlay", &|member| member.strip_prefix("fatpkg/").unwrap().to_string());
        // Under an overlay root the archives are per target id, as TheRock writes them: the gfx90a
        // device wheel holds one archive per xnack mode (and one for the plain processor), each
        // listing its target id alone; the runtime, asking for the agent's target id and then its
        // processor, loads what the fat binary would have for each mode. `--archive-per processor`
        // gives one gfx90a archive.
        let overlay_gfx90a = pip_install(d, &d.join("overlay"), "fatpkg[device-gfx90a]", "site-overlay-gfx90a");
        let per_id = ["fatpkg/.kpack/fatpkg_gfx90a.kpack", "fatpkg/.kpack/fatpkg_gfx90a:xnack+.kpack"];
        assert_eq!(archives_in(&overlay_gfx90a), [&per_id[..], &["fatpkg/.kpack/fatpkg_gfx90a:xnack-.kpack"]].concat());
        // Each archive's header names it as TheRock's does: family and arches its target id.
        let header = "import msgpack, struct, sys\nb = open(sys.argv[1], 'rb').read()\nt = msgpack.unpackb(b[struct.unpack_from('<Q', b, 8)[0]:], raw=False)\nprint(t['gfx_arch_family'], *t['gfx_arches'])";
        for name in archives_in(&overlay_gfx90a) {
            let id = name.strip_prefix("fatpkg/.kpack/fatpkg_").unwrap().strip_suffix(".kpack").unwrap();
            let out = run(Command::new(reader_python()).args(["-c", header]).arg(overlay_gfx90a.join(&name)));
            assert_eq!(out.trim(), format!("{id} {id}"), "{name}");
        }
        for id in ["gfx90a:xnack+", "gfx90a:xnack-"] {
            for (member, _, _) in originals {
                let found = read_installed(&overlay_gfx90a.join(member), id);
                assert!(found.iter().any(|(_, sha, _)| sha != "MISSING"), "{member}: no {id} code found");
                for (key, sha, arches) in found.iter().filter(|(_, sha, _)| sha != "MISSING") {
                    assert_eq!(arches, &[id.to_string()], "{member} {key} {sha}: its archive lists {id} alone");
                }
            }
        }
        for (member, _, registered) in originals {
            for (agent, preferred) in [
                ("gfx90a:xnack+", ["gfx90a:xnack+", "gfx90a"]),
                ("gfx90a:xnack-", ["gfx90a:xnack-", "gfx90a"]),
                ("gfx90a:sramecc+:xnack-", ["gfx90a:xnack-", "gfx90a"]),
            ] {
                let (lines, _) = load_as(d, stub, &overlay_gfx90a.join(member), agent, None);
                assert_eq!(lines, expected_for(registered, &preferred), "{member} on {agent}, per target id");
            }
        }
        let args = ["split", "--all-targets", "--overlay-root", "fatpkg", "--archive-per", "processor"];
        let out = wheelfix(d, &[&args[..], &["-w", "overlay-per-processor", wheel.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let per_processor = pip_install(d, &d.join("overlay-per-processor"), "fatpkg[device-gfx90a]", "site-pp");
        assert_eq!(archives_in(&per_processor), ["fatpkg/.kpack/fatpkg_gfx90a.kpack"]);
        // A binary outside the root is refused, by name; a root that climbs out is a usage error.
        let outside = wheelfix(
            d,
            &["split", "--all-targets", "--overlay-root", "fatpkg/sub", "-w", "out", wheel.to_str().unwrap()],
        );
        assert_eq!(outside.status.code(), Some(1), "{}", stderr(&outside));
        assert!(stderr(&outside).contains("outside the overlay root `fatpkg/sub`"), "{}", stderr(&outside));
        let climbs =
            wheelfix(d, &["split", "--all-targets", "--overlay-root", "../x", "-w", "out", wheel.to_str().unwrap()]);
        assert_eq!(climbs.status.code(), Some(2), "{}", stderr(&climbs));
    }

    /// xnack variants and generic targets, as the runtime falls back.
    fn xnack_and_generic_targets_fall_back(&self) {
        let (d, stub, originals, out_dir) = (self.d.as_path(), &self.stub, &self.originals[..], &self.out_dir);
        // xnack variants and generic targets, as the runtime falls back.
        let gfx90a = pip_install(d, out_dir, "fatpkg[device-gfx90a]", "site-gfx90a");
        let gfx1100 = pip_install(d, out_dir, "fatpkg[device-gfx1100]", "site-gfx1100");
        for (member, _, registered) in originals {
            let (lines, _) = load_as(d, stub, &gfx90a.join(member), "gfx90a:xnack+", None);
            assert_eq!(lines, expected_for(registered, &["gfx90a:xnack+", "gfx90a"]), "{member} on gfx90a:xnack+");
            let (lines, _) = load_as(d, stub, &gfx90a.join(member), "gfx90a:xnack-", None);
            assert_eq!(lines, expected_for(registered, &["gfx90a:xnack-", "gfx90a"]), "{member} on gfx90a:xnack-");
            let (lines, _) = load_as(d, stub, &gfx1100.join(member), "gfx1100", Some("gfx11-generic"));
            assert_eq!(lines, expected_for(registered, &["gfx1100", "gfx11-generic"]), "{member} on gfx1100");
            assert!(!lines.iter().any(|l| l.starts_with("MISSING")), "{lines:?}");
        }
        // The gfx1100 extra brings the gfx11 family directory's files, through the family wheel.
        for (i, (path, target)) in DATABASES.iter().enumerate() {
            let expected = matches!(target, None | Some("gfx1100" | "gfx11")).then(|| vec![i as u8; 5000 + i]);
            assert_eq!(std::fs::read(gfx1100.join(path)).ok(), expected, "{path} with [device-gfx1100]");
        }
    }
}

#[test]
fn thin_prune_files_drops_other_targets_kernel_databases_and_show_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut spec = WheelSpec::new("fatpkg", VERSION, "py3-none-linux_x86_64").file("fatpkg/__init__.py", "");
    for (i, (path, _)) in DATABASES.iter().enumerate() {
        spec = spec.file(path, vec![i as u8; 5000 + i]);
    }
    let wheel = spec.write(&d.join("in"));
    let report = support::show_report(d, &wheel, &[]);
    let counts = &report.kernel_databases;
    assert_eq!(counts["gfx942"], Count { objects: 2, bytes: 5000 + 5004 }, "{report:?}");
    assert_eq!(counts["gfx90a"].objects, 2);
    assert_eq!(counts["gfx1100"].objects, 1);
    assert_eq!(counts.len(), 3, "{counts:?}");
    let text = stdout(&wheelfix(d, &["show", wheel.to_str().unwrap()]));
    assert!(text.contains("kernel databases: gfx90a"), "{text}");

    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "--prune-files", "-w", "out", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let thinned = d.join("out").join(wheel.file_name().unwrap());
    let record = assert_true_record(&thinned);
    for (path, target) in DATABASES {
        assert_eq!(record.contains(path), matches!(target, None | Some("gfx942")), "{path}: {record}");
    }
    // Without --prune-files, every file stays.
    let out = wheelfix(d, &["thin", "--gpu-target", "gfx942", "-w", "kept", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = assert_true_record(&d.join("kept").join(wheel.file_name().unwrap()));
    assert!(DATABASES.iter().all(|(path, _)| record.contains(path)));
}

#[test]
fn split_refuses_bundles_no_wrapper_points_at_and_names_the_file() {
    use support::gpugen::{GFX950, bundle_for, host_with_fatbin, host_with_wrapped_fatbin};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bundle = || bundle_for(&[("gfx950", GFX950)], 6);
    let cases = [
        ("nowrap", host_with_fatbin("_k", bundle()), "no .hipFatBinSegment wrappers"),
        ("twowrap", host_with_wrapped_fatbin("_k", bundle(), 2), "1 bundles but 2 wrappers"),
    ];
    for (name, lib, why) in cases {
        let wheel =
            WheelSpec::new(name, "1.0", "cp312-cp312-linux_x86_64").file(&format!("{name}/_k.so"), lib).write(d);
        let out = wheelfix(d, &["split", "--all-targets", "-w", name, wheel.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("cannot split `{name}/_k.so`")) && err.contains(why), "{err}");
        let left: Vec<_> = std::fs::read_dir(d.join(name)).map(|r| r.collect()).unwrap_or_default();
        assert!(left.is_empty(), "{name}: nothing is written");
    }
    // One good wheel beside a bad one is written.
    let good = WheelSpec::new("good", "1.0", "cp312-cp312-linux_x86_64")
        .file("good/_k.so", host_with_wrapped_fatbin("_k", bundle(), 1))
        .write(d);
    let bad = d.join("nowrap-1.0-cp312-cp312-linux_x86_64.whl");
    let out = wheelfix(d, &["split", "--all-targets", "-w", "both", bad.to_str().unwrap(), good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(d.join("both/good-1.0-cp312-cp312-linux_x86_64.whl").exists());
    assert!(d.join("both/good_device_gfx950-1.0-cp312-cp312-linux_x86_64.whl").exists());
    // Its bundle is smaller than a page, so nothing leaves the file; the marker still gets its
    // `.rocm_kpack_ref` section, and elflint says nothing of the host it did not of the original.
    let host = d.join("good.so");
    std::fs::write(&host, read_member(&d.join("both/good-1.0-cp312-cp312-linux_x86_64.whl"), "good/_k.so")).unwrap();
    let marker = run(Command::new(reader_python()).args(["-c", ROCM_MARKER_READER]).arg(&host));
    let marker: serde_json::Value = serde_json::from_str(marker.trim()).unwrap();
    assert_eq!(marker["kpack_search_paths"], serde_json::json!([".kpack/_k.so_@GFXARCH@.kpack"]), "{marker}");
    let original = d.join("good-original.so");
    std::fs::write(&original, read_member(&good, "good/_k.so")).unwrap();
    assert_eq!(support::hip::elflint(&host), support::hip::elflint(&original));
    // A binary in `.data/platlib/` installs at the root of site-packages: its archive does too.
    let py = support::python::python_tag();
    let data = WheelSpec::new("datapkg", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file("datapkg-1.0.data/platlib/datapkg/_k.so", host_with_wrapped_fatbin("_k", bundle(), 1))
        .write(d);
    let out = wheelfix(d, &["split", "--all-targets", "-w", "data", data.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let site = pip_install(d, &d.join("data"), "datapkg[device-gfx950]", "site-data");
    assert!(site.join("datapkg/_k.so").exists());
    assert_eq!(archives_in(&site), ["datapkg/.kpack/_k.so_gfx950.kpack"]);

    // TheRock's names, and a template that would name every device wheel alike.
    let g = good.to_str().unwrap();
    let out = wheelfix(d, &["split", "--all-targets", "--device-name", "amd-{name}-device-{target}", "-w", "amd", g]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(d.join("amd/amd_good_device_gfx950-1.0-cp312-cp312-linux_x86_64.whl").exists());
    let out = wheelfix(d, &["split", "--all-targets", "--device-name", "{name}-device", "-w", "same", g]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!d.join("same").exists());
    let out = wheelfix(d, &["split", "--gpu-target", "gfx950:xnack+", "-w", "feat", g]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // [tool.wheelfix] gives the targets, the names and the grouping; flags win over it.
    let project = d.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[tool.wheelfix]\ngpu-targets = [\"gfx950\"]\ndevice-name = \"amd-{name}-device-{target}\"\ngroup-by = \"family\"\ngroup = \"rocm\"\n",
    )
    .unwrap();
    let out = wheelfix(&project, &["split", "-w", "cfg", g]);
    assert!(out.status.success(), "{}", stderr(&out));
    let device = project.join("cfg/amd_good_device_gfx9-1.0-cp312-cp312-linux_x86_64.whl");
    let zip = zip::ZipArchive::new(std::fs::File::open(&device).unwrap()).unwrap();
    assert!(zip.file_names().any(|n| n.is_ok_and(|n| n == "good/.kpack/rocm_gfx950.kpack")), "the group's archive");
    let out = wheelfix(
        &project,
        &["split", "--group-by", "target", "--device-name", "{name}-gpu-{target}", "-w", "flags", g],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(project.join("flags/good_gpu_gfx950-1.0-cp312-cp312-linux_x86_64.whl").exists());
    std::fs::write(project.join("pyproject.toml"), "[tool.wheelfix]\ngroup = \"../up\"\n").unwrap();
    let out = wheelfix(&project, &["split", "--all-targets", "-w", "bad", g]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("group = \"../up\" in [tool.wheelfix]"), "{}", stderr(&out));
    std::fs::write(project.join("pyproject.toml"), "[tool.wheelfix]\ngroup-by = \"galaxy\"\n").unwrap();
    let out = wheelfix(&project, &["split", "--all-targets", "-w", "bad", g]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("group-by = \"galaxy\""), "{}", stderr(&out));
}

/// Deterministic bytes that do not compress: `len` of them from `seed` (xorshift).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A fat library whose code objects are large: one translation unit per size (MiB), each for
/// gfx942 and gfx1100, its device code carrying that many bytes of noise.
/// A library of one unit per size (MiB of noise in each code object); the units of the sizes in
/// `compressed` are compressed bundles (`--offload-compress`).
fn large_library(d: &Path, sizes: &[usize], compressed: &[usize]) -> PathBuf {
    let (clang, _) = support::hip::toolchain();
    let mut objects = Vec::new();
    for (i, mib) in sizes.iter().enumerate() {
        let blob = d.join(format!("noise{i}.bin"));
        std::fs::write(&blob, noise(mib << 20, 1 + i as u64)).unwrap();
        let src = d.join(format!("big{i}.hip"));
        // The noise is an array the kernel reads (C23 `#embed`), so that no linker drops it.
        let kernel = support::hip::KERNEL.replace("x[0] += TABLE[x[1]];", "x[0] += TABLE[x[1]] + NOISE[x[2]];");
        let text = format!(
            "#define __device__ __attribute__((device))\n__device__ const char NOISE[] = {{\n#embed \"{}\"\n}};\n{kernel}",
            blob.display()
        );
        std::fs::write(&src, text).unwrap();
        let object = d.join(format!("big{i}.o"));
        run(Command::new(&clang)
            .args(["-x", "hip", "-nogpulib", "-nogpuinc", "-fPIC", "-O1", "-c", "-Wno-unused-command-line-argument"])
            .args(["-Wno-c23-extensions", "--offload-arch=gfx942", "--offload-arch=gfx1100"])
            .args([format!("-DKERNEL=kernel_{i}"), format!("-DTABLE=table_{i}"), format!("-DHOST=host_{i}")])
            .arg(format!("-DVALUE={i}"))
            .args(compressed.contains(mib).then_some("--offload-compress"))
            .arg(&src)
            .arg("-o")
            .arg(&object));
        objects.push(object);
    }
    library(d, &objects, "lld")
}

/// Every member of the wheels extracted into one directory: what pip installs of them.
fn extract_all(wheels: &[PathBuf], into: &Path) {
    for wheel in wheels {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        zip.extract(into).unwrap();
    }
}

/// The wheels in a directory, sorted.
fn wheels_in(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    found.sort();
    found
}

#[test]
fn large_code_objects_come_out_whole_and_a_damaged_archive_is_never_published() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The 20 MiB unit is a compressed bundle: its objects come decoded, as a stream.
    let lib = large_library(d, &[7, 9, 20, 64], &[20]);
    let original = std::fs::read(&lib).unwrap();
    assert!(bundles(&original).iter().any(|b| b.starts_with(b"CCOB")), "a compressed bundle");
    // What clang's bundler gives of the original, per target: the SHA-256 of each code object.
    let mut expected: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for bundle in bundles(&original) {
        for arch in ["gfx942", "gfx1100"] {
            let object = bundler_unbundle(d, &bundle, &format!("hipv4-amdgcn-amd-amdhsa--{arch}"));
            assert!(object.len() > 7 << 20, "the fixture's code objects carry their noise");
            expected.entry(arch).or_default().push(sha256_hex(&object));
        }
    }
    for list in expected.values_mut() {
        list.sort();
    }
    let wheel = WheelSpec::new("bigpkg", VERSION, "py3-none-linux_x86_64")
        .file("bigpkg/__init__.py", "")
        .file("bigpkg/libbig.so", original.clone())
        .write(&d.join("in"));
    let w = wheel.to_str().unwrap();
    // Objects over 8 MiB are compressed as they stream past, or, with no room for a kept copy
    // (`WHEELFIX_COPY_ROOM=0`), as they are read again: the same bytes either way.
    for (name, args, room) in [
        ("all", vec!["--all-targets"], None),
        ("all-no-room", vec!["--all-targets"], Some("0")),
        ("one", vec!["--gpu-target", "gfx942", "--gpu-target", "gfx1100"], None),
        ("group", vec!["--all-targets", "--group", "rocm"], None),
        ("family", vec!["--all-targets", "--group-by", "family"], None),
        ("family-no-room", vec!["--all-targets", "--group-by", "family"], Some("0")),
    ] {
        let mut all = vec!["split"];
        all.extend(&args);
        all.extend(["-w", name, w]);
        let env: Vec<(&str, &str)> = room.map(|r| ("WHEELFIX_COPY_ROOM", r)).into_iter().collect();
        let out = wheelfix_env(d, &all, &env);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let installed = d.join(format!("{name}-site"));
        extract_all(&wheels_in(&d.join(name)), &installed);
        for (arch, want) in &expected {
            let mut got: Vec<String> =
                read_installed(&installed.join("bigpkg/libbig.so"), arch).into_iter().map(|(_, sha, _)| sha).collect();
            got.sort();
            assert_eq!(&got, want, "{name}: {arch}: the independent reader gets clang's code objects");
        }
        if let Some(kept) = name.strip_suffix("-no-room") {
            for wheel in wheels_in(&d.join(name)) {
                let same = std::fs::read(d.join(kept).join(wheel.file_name().unwrap())).unwrap();
                assert!(std::fs::read(&wheel).unwrap() == same, "{name}: {}", wheel.display());
            }
        }
        // wheelfix's own reader of the set finds nothing wrong either.
        let out = wheelfix(d, &["check", "--json", d.join(name).to_str().unwrap()]);
        let report = support::check_document(&out);
        let errors: Vec<&Finding> = report.findings.iter().filter(|f| f.severity == Severity::Error).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
    // An archive damaged in a published device wheel: `check` decodes it and says so.
    let damaged_set = d.join("all-damaged");
    std::fs::create_dir_all(&damaged_set).unwrap();
    for wheel in wheels_in(&d.join("all")) {
        let name = wheel.file_name().unwrap().to_owned();
        let dest = damaged_set.join(&name);
        if !name.to_string_lossy().contains("device_gfx1100") {
            std::fs::copy(&wheel, &dest).unwrap();
            continue;
        }
        copy_changing(&wheel, &dest, |name, bytes| {
            if name.ends_with(".kpack") {
                // The first frame's middle byte: header 64, count 4, length 4.
                let len = u32::from_le_bytes(bytes[68..72].try_into().unwrap()) as usize;
                bytes[72 + len / 2] ^= 0x5a;
            }
        });
    }
    let out = wheelfix(d, &["check", "--json", damaged_set.to_str().unwrap()]);
    let report = support::check_document(&out);
    let kinds: Vec<&str> = report.findings.iter().map(|f| f.kind.name()).collect();
    assert!(kinds.contains(&"kpack-archive-damaged"), "{kinds:?}");
    assert_eq!(out.status.code(), Some(1));

    // A frame damaged after it was written (the test hook) is caught by the proof: the wheel
    // fails, naming the binary, the wrapper and the processor, and `-w` holds nothing.
    let out = wheelfix_env(d, &["split", "--all-targets", "-w", "damaged", w], &[("WHEELFIX_TEST_DAMAGE_OUTPUT", "1")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("does not hold what was put into it") && said.contains("bigpkg/libbig.so#"), "{said}");
    let left: Vec<_> = std::fs::read_dir(d.join("damaged")).unwrap().collect();
    assert!(left.is_empty(), "a refused split leaves -w as it was: {left:?}");

    // SIGINT while the set is being written: -w is as it was (an earlier file untouched).
    let interrupted = d.join("interrupted");
    std::fs::create_dir_all(&interrupted).unwrap();
    std::fs::write(interrupted.join("earlier.txt"), "kept").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wheelfix"))
        .args(["split", "--all-targets", "-w", interrupted.to_str().unwrap(), w])
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the run's own directory in -w holds a file being written.
    let started = std::time::Instant::now();
    let writing = || {
        std::fs::read_dir(&interrupted)
            .unwrap()
            .flatten()
            .any(|e| e.path().is_dir() && std::fs::read_dir(e.path()).is_ok_and(|mut inner| inner.any(|f| f.is_ok())))
    };
    while !writing() && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    run(Command::new("kill").args(["-INT", &child.id().to_string()]));
    let status = child.wait().unwrap();
    let mut left: Vec<String> =
        std::fs::read_dir(&interrupted).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    left.sort();
    if status.code() == Some(130) {
        assert_eq!(left, ["earlier.txt"], "an interrupted split leaves -w as it was");
    } else {
        // It finished before the signal arrived: then the whole set is there.
        assert_eq!(status.code(), Some(0));
        assert_eq!(left.len(), 1 + 1 + 2, "{left:?}");
    }
}

/// The demo wheel shipped in `testdata/` (gfx942 and gfx950 code), copied into `dir`.
/// A copy of `wheel` at `dest` with its members changed by `change` (name, bytes); its RECORD
/// is left as it was (check reports it stale, a warning).
fn copy_changing(wheel: &Path, dest: &Path, change: impl Fn(&str, &mut Vec<u8>)) {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::fs::File::create(dest).unwrap());
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).unwrap();
        let name = member.name().unwrap().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut bytes).unwrap();
        change(&name, &mut bytes);
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        out.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut out, &bytes).unwrap();
    }
    out.finish().unwrap();
}

/// Where `needle` occurs in `haystack`.
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

#[test]
fn check_and_show_find_split_hosts_whose_wrappers_or_markers_the_runtime_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let objects = objects(d);
    let lib = std::fs::read(library(d, &objects, "lld")).unwrap();
    let wheel = WheelSpec::new("fatpkg", VERSION, "py3-none-linux_x86_64")
        .file("fatpkg/__init__.py", "")
        .file("fatpkg/libk.so", lib)
        .write(&d.join("in"));
    let out = wheelfix(d, &["split", "--all-targets", "-w", "clean", wheel.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let kinds = |set: &Path| -> Vec<String> {
        let out = wheelfix(d, &["check", "--json", set.to_str().unwrap()]);
        let report = support::check_document(&out);
        report.findings.iter().map(|f| f.kind.to_string()).collect()
    };
    assert!(!kinds(&d.join("clean")).contains(&"kpack-marker-unusable".to_string()), "the split as made is usable");
    let host_name = wheel.file_name().unwrap();
    // The three wrappers share one marker (the rest of `.hip_fatbin` leaves the file whole).
    let split_lib = read_member(&d.join("clean").join(host_name), "fatpkg/libk.so");
    assert_eq!((find_all(&split_lib, b"kernel_name").len(), find_all(&split_lib, b"HIPK").len()), (1, 3));
    // Each damage alone, to one wrapper or marker of the binary's three.
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 5] = [
        ("an integer for a marker", |b| {
            let at = find_all(b, b"kernel_name")[0] - 2;
            b[at] = 0x05;
        }),
        ("a truncated map", |b| {
            let at = find_all(b, b"kernel_name")[0] - 2;
            b[at] = 0x8f; // a map of 15 entries, of which it holds 2
        }),
        ("a marker cut short", |b| {
            let at = find_all(b, b"kpack_search_paths")[0] + "kpack_search_paths".len();
            assert_eq!(b[at + 1] & 0xe0, 0xa0, "one fixstr path");
            let len = (b[at + 1] & 0x1f) as usize;
            b[at + 2 + len - 4..at + 2 + len].fill(0);
        }),
        ("empty search paths", |b| {
            let at = find_all(b, b"kpack_search_paths")[0] + "kpack_search_paths".len();
            assert_eq!(b[at], 0x91, "one search path");
            b[at] = 0x90;
        }),
        ("a wrapper that is HIPF again", |b| {
            let at = *find_all(b, b"HIPK").last().unwrap();
            b[at..at + 4].copy_from_slice(b"FPIH");
        }),
    ];
    for (i, (what, damage)) in damages.into_iter().enumerate() {
        let set = d.join(format!("damaged-{i}"));
        std::fs::create_dir_all(&set).unwrap();
        for wheel in wheels_in(&d.join("clean")) {
            let dest = set.join(wheel.file_name().unwrap());
            if wheel.file_name().unwrap() != host_name {
                std::fs::copy(&wheel, &dest).unwrap();
                continue;
            }
            copy_changing(&wheel, &dest, |name, bytes| {
                if name == "fatpkg/libk.so" {
                    damage(bytes);
                }
            });
        }
        assert!(kinds(&set).contains(&"kpack-marker-unusable".to_string()), "{what}: {:?}", kinds(&set));
        let host = set.join(host_name);
        let out = wheelfix(d, &["show", host.to_str().unwrap()]);
        assert!(
            stdout(&out).contains("runtime cannot use") || stdout(&out).contains("not HIPK"),
            "{what}: {}",
            stdout(&out)
        );
    }
}

fn demo_in(dir: &Path) -> PathBuf {
    let name = "rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl";
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name), &path).unwrap();
    path
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn split_never_writes_over_what_it_did_not_make_and_refuses_targets_without_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = demo_in(&d.join("in"));
    let w = demo.to_str().unwrap();
    let before = std::fs::read(&demo).unwrap();
    // The host would replace its own input.
    let out = wheelfix(d, &["split", "--all-targets", "-w", "in", w]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("would replace the input itself"), "{}", stderr(&out));
    assert_eq!(files_in(&d.join("in")), ["rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl"]);
    assert!(std::fs::read(&demo).unwrap() == before, "the input is untouched");
    // A device project that is the host's own, after normalisation (`x-{target}` for the host
    // `x_gfx942`).
    let kernels = read_member(&demo, "rocm_demo/_kernels.cpython-312-x86_64-linux-gnu.so");
    let own = WheelSpec::new("x_gfx942", "1.0", "cp312-cp312-linux_x86_64")
        .file("x/_kernels.so", kernels)
        .write(&d.join("own-in"));
    let out =
        wheelfix(d, &["split", "--all-targets", "--device-name", "x-{target}", "-w", "own", own.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("the host's own project"), "{}", stderr(&out));
    assert!(!d.join("own").exists() || files_in(&d.join("own")).is_empty());
    // A binary whose name holds `@GFXARCH@`: its archive is named so that the runtime's
    // expansion of the marker's search path finds it.
    let gfxarch = WheelSpec::new("gx", "1.0+rocm7.1.0", "cp312-cp312-linux_x86_64")
        .file("gx/lib@GFXARCH@.so", read_member(&demo, "rocm_demo/_kernels.cpython-312-x86_64-linux-gnu.so"))
        .write(&d.join("gx-in"));
    let out = wheelfix(d, &["split", "--all-targets", "-w", "gx", gfxarch.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wheelfix(d, &["check", "--json", "gx"]);
    let report = support::check_document(&out);
    let kinds: Vec<&str> = report.findings.iter().map(|f| f.kind.name()).collect();
    assert!(!kinds.iter().any(|k| k.starts_with("kpack-")), "{kinds:?}");
    // A file in -w that this run did not write, under an output's name: refused, left as it is.
    std::fs::create_dir_all(d.join("taken")).unwrap();
    let squatter = d.join("taken/rocm_demo_device_gfx950-1.0.0-cp312-cp312-manylinux2014_x86_64.whl");
    std::fs::write(&squatter, "not a wheel of this run").unwrap();
    let out = wheelfix(d, &["split", "--all-targets", "-w", "taken", w]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&squatter).unwrap(), "not a wheel of this run");
    assert_eq!(files_in(&d.join("taken")), ["rocm_demo_device_gfx950-1.0.0-cp312-cp312-manylinux2014_x86_64.whl"]);
    // A disk that fills part-way (a file size limit: writes past 1 KiB fail with EFBIG, as
    // they would with ENOSPC): the wheel fails, naming itself, and -w is as it was.
    std::fs::create_dir_all(d.join("full")).unwrap();
    std::fs::write(d.join("full/keep.txt"), "an earlier file").unwrap();
    let out = std::process::Command::new("bash")
        .args(["-c", "ulimit -f 1; trap '' XFSZ; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .args(["split", "--all-targets", "-w", "full", w])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(w), "names the wheel: {}", stderr(&out));
    assert_eq!(files_in(&d.join("full")), ["keep.txt"], "{}", stderr(&out));
    // An earlier identical output is no conflict: the run is repeatable.
    for _ in 0..2 {
        let out = wheelfix(d, &["split", "--all-targets", "-w", "twice", w]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(files_in(&d.join("twice")).len(), 3);
    // Two inputs whose device wheels would share a file name: neither is written.
    let copy = demo_in(&d.join("again"));
    let out = wheelfix(d, &["split", "--all-targets", "-w", "both", w, copy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!d.join("both").exists() || files_in(&d.join("both")).is_empty());
    // Targets: one without code, a generic one without code, one named loosely.
    for (target, said) in [("gfx90a", "has nothing for gfx90a"), ("gfx9-4-generic", "has nothing for gfx9-4-generic")] {
        let out = wheelfix(d, &["split", "--gpu-target", target, "--drop-other-targets", "-w", "none", w]);
        assert_eq!(out.status.code(), Some(1), "{target}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{}", stderr(&out));
    }
    let out = wheelfix(d, &["split", "--gpu-target", "GFX942 ", "--gpu-target", "gfx950", "-w", "loose", w]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        files_in(&d.join("loose"))
            .contains(&"rocm_demo_device_gfx942-1.0.0-cp312-cp312-manylinux2014_x86_64.whl".to_string())
    );
    // Code that no device wheel takes is a refusal unless asked for.
    let out = wheelfix(d, &["split", "--gpu-target", "gfx942", "-w", "partial", w]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("gfx950 in rocm_demo/"), "{}", stderr(&out));
    // A split set split again: left as it is, nothing written.
    let out = wheelfix(
        d,
        &[
            "split",
            "--all-targets",
            "-w",
            "resplit",
            "twice/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl",
            "twice/rocm_demo_device_gfx942-1.0.0-cp312-cp312-manylinux2014_x86_64.whl",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("already split") && stdout(&out).contains("a device wheel"), "{}", stdout(&out));
    assert!(files_in(&d.join("resplit")).is_empty());
    // selector never takes an input's project (it would replace the input with a code-less wheel).
    let out = wheelfix(
        d,
        &[
            "selector",
            "--name",
            "rocm-demo",
            "-o",
            "twice",
            "twice/rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl",
            "twice/rocm_demo_device_gfx942-1.0.0-cp312-cp312-manylinux2014_x86_64.whl",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(files_in(&d.join("twice")).len(), 3);
}

/// `--require-devices`: the backwards-compatible host. `pip install <host>`, by name alone,
/// brings every device wheel it was split into, as the fat wheel held the code; the extras stay.
#[test]
fn a_host_that_requires_its_devices_installs_like_the_fat_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = demo_in(&d.join("in"));
    let out = wheelfix(d, &["split", "--all-targets", "--require-devices", "-w", "out", demo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let devices: Vec<String> = files_in(&d.join("out")).into_iter().filter(|n| n.contains("_device_")).collect();
    assert!(devices.len() >= 2, "{devices:?}");
    let host = d.join("out").join(demo.file_name().unwrap());
    let metadata = String::from_utf8(read_member(&host, "rocm_demo-1.0.0.dist-info/METADATA")).unwrap();
    for device in &devices {
        let project = device.split('-').next().unwrap().replace('_', "-");
        assert!(metadata.contains(&format!("Requires-Dist: {project}==1.0.0\n")), "{project}: {metadata}");
        assert!(metadata.contains(&format!("Requires-Dist: {project}==1.0.0; extra == ")), "{metadata}");
    }
    // pip, asked for the host by name from the split's wheels alone, takes every device wheel.
    let report = d.join("report.json");
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--dry-run", "--ignore-installed"])
        .args(["--no-index", "--only-binary=:all:", "--python-version", "3.12", "--platform", "manylinux2014_x86_64"])
        .arg("--target")
        .arg(d.join("t"))
        .arg("--find-links")
        .arg(d.join("out"))
        .arg("--report")
        .arg(&report)
        .arg("rocm_demo"));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let mut chosen: Vec<String> = value["install"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["download_info"]["url"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect();
    chosen.sort();
    let mut expected = devices.clone();
    expected.push(demo.file_name().unwrap().to_str().unwrap().to_string());
    expected.sort();
    assert_eq!(chosen, expected);
}

/// A fat wheel of `project` for one Python version, its library's device code for gfx942 and
/// gfx950 built with `cov` (the same `cov`, the same code objects).
fn python_build(dir: &Path, project: &str, python: &str, cov: u8) -> PathBuf {
    use support::gpugen::{GFX942, GFX950, bundle_for, host_with_wrapped_fatbin};
    let bundle = bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], cov);
    WheelSpec::new(project, "1.0+rocm7.0.2", &format!("{python}-{python}-manylinux_2_28_x86_64"))
        .file(&format!("{project}/libk.so"), host_with_wrapped_fatbin("_k", bundle, 1))
        .write(dir)
}

/// pip's choice of files for `requirement` from `dir` alone, for a CPython `version`.
fn pip_chooses(d: &Path, dir: &Path, version: &str, requirement: &str) -> Vec<String> {
    let report = d.join(format!("report-{version}.json"));
    run(Command::new(system_python())
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--dry-run", "--ignore-installed"])
        .args(["--no-index", "--only-binary=:all:", "--python-version", version, "--platform", "manylinux_2_28_x86_64"])
        .arg("--target")
        .arg(d.join("t"))
        .arg("--find-links")
        .arg(dir)
        .arg("--report")
        .arg(&report)
        .arg(requirement));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let mut chosen: Vec<String> = value["install"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["download_info"]["url"].as_str().unwrap().rsplit('/').next().unwrap().replace("%2B", "+"))
        .collect();
    chosen.sort();
    chosen
}

/// Split in one run, the fat wheels of two Python versions store each processor's device code
/// once: one `py3-none-<platform>` device wheel that both hosts' extras install, proven and
/// verified by check; where the code differs between the versions, each host keeps its own.
#[test]
fn device_code_the_python_versions_share_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut inputs = Vec::new();
    for python in ["cp311", "cp312"] {
        inputs.push(python_build(&d.join("in"), "same", python, 6));
    }
    inputs.push(python_build(&d.join("in"), "differ", "cp311", 6));
    inputs.push(python_build(&d.join("in"), "differ", "cp312", 7));
    let mut args = vec!["split", "--json", "--all-targets", "-w", "out"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Vec<SplitOutcome> = support::entries(&out, &["version"]);
    support::python::validate("split.schema.json", &out.stdout);

    let mut files = files_in(&d.join("out"));
    files.retain(|f| f.contains("_device_"));
    assert_eq!(
        files,
        [
            "differ_device_gfx942-1.0+rocm7.0.2-cp311-cp311-manylinux_2_28_x86_64.whl",
            "differ_device_gfx942-1.0+rocm7.0.2-cp312-cp312-manylinux_2_28_x86_64.whl",
            "differ_device_gfx950-1.0+rocm7.0.2-cp311-cp311-manylinux_2_28_x86_64.whl",
            "differ_device_gfx950-1.0+rocm7.0.2-cp312-cp312-manylinux_2_28_x86_64.whl",
            "same_device_gfx942-1.0+rocm7.0.2-py3-none-manylinux_2_28_x86_64.whl",
            "same_device_gfx950-1.0+rocm7.0.2-py3-none-manylinux_2_28_x86_64.whl",
        ]
    );
    for (i, wheel) in report.iter().enumerate() {
        let SplitOutcome::Written(wheel) = wheel else { panic!("every wheel is split: {wheel:?}") };
        for device in &wheel.devices {
            assert_eq!(device.shared, i < 2, "{device:?}");
            assert!(d.join(&device.wheel).exists(), "{device:?}");
        }
    }
    let shared = d.join("out/same_device_gfx942-1.0+rocm7.0.2-py3-none-manylinux_2_28_x86_64.whl");
    assert_true_record(&shared);
    let wheel_file =
        String::from_utf8(read_member(&shared, "same_device_gfx942-1.0+rocm7.0.2.dist-info/WHEEL")).unwrap();
    assert!(
        wheel_file.contains("Tag: py3-none-manylinux_2_28_x86_64\n") && !wheel_file.contains("cp31"),
        "{wheel_file}"
    );
    // Its archive is the bytes each host's own device wheel would have held.
    let alone = wheelfix(d, &["split", "--all-targets", "-w", "alone", inputs[1].to_str().unwrap()]);
    assert!(alone.status.success(), "{}", stderr(&alone));
    let own = d.join("alone/same_device_gfx942-1.0+rocm7.0.2-cp312-cp312-manylinux_2_28_x86_64.whl");
    let archive = "same/.kpack/libk.so_gfx942.kpack";
    assert_eq!(read_member(&shared, archive), read_member(&own, archive));

    // Every host's extra installs the one device wheel, for each Python version.
    for (version, python) in [("3.11", "cp311"), ("3.12", "cp312")] {
        assert_eq!(
            pip_chooses(d, &d.join("out"), version, "same[device-gfx942]"),
            [
                format!("same-1.0+rocm7.0.2-{python}-{python}-manylinux_2_28_x86_64.whl"),
                "same_device_gfx942-1.0+rocm7.0.2-py3-none-manylinux_2_28_x86_64.whl".to_string()
            ]
        );
    }
    let check = wheelfix(d, &["check", "out"]);
    assert!(check.status.success(), "{}", stdout(&check));
}

#[test]
fn device_wheels_require_what_device_requires_dist_names_for_their_processor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = demo_in(&d.join("in"));
    let kernels = read_member(&demo, "rocm_demo/_kernels.cpython-312-x86_64-linux-gnu.so");
    let fat = WheelSpec::new("gpupkg", "1.0", "py3-none-linux_x86_64")
        .file("gpupkg/__init__.py", "")
        .file("gpupkg/_kernels.so", kernels)
        .write(&d.join("in"));
    // The ROCm SDK's packages the device wheels are to require, as the index serves them.
    for project in ["rocm_sdk_device_gfx942", "rocm_sdk_core"] {
        WheelSpec::new(project, "7.1.0", "py3-none-any")
            .file(&format!("{project}/__init__.py"), "")
            .write(&d.join("index"));
    }
    let asked = [
        "--device-requires-dist",
        "rocm-sdk-device-@GFXARCH@==7.1.0",
        "--device-requires-dist",
        "rocm-sdk-core==7.1.0",
    ];
    let split = |group_by: &str, out: &str| {
        let args = ["split", "--all-targets", "--group-by", group_by, "-w", out, fat.to_str().unwrap()];
        let out = wheelfix(d, &[&args[..], &asked].concat());
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let requires = |project: &str, out: &str| -> Vec<String> {
        let wheel = d.join(out).join(format!("{project}-1.0-py3-none-linux_x86_64.whl"));
        let metadata = String::from_utf8(read_member(&wheel, &format!("{project}-1.0.dist-info/METADATA"))).unwrap();
        metadata.lines().filter_map(|l| l.strip_prefix("Requires-Dist: ")).map(str::to_string).collect()
    };
    split("target", "out");
    for target in ["gfx942", "gfx950"] {
        let expected =
            ["gpupkg==1.0".to_string(), format!("rocm-sdk-device-{target}==7.1.0"), "rocm-sdk-core==7.1.0".into()];
        assert_eq!(requires(&format!("gpupkg_device_{target}"), "out"), expected);
    }
    // Installed with [device-gfx942], pip brings what its device wheel requires.
    for wheel in wheels_in(&d.join("index")) {
        std::fs::copy(&wheel, d.join("out").join(wheel.file_name().unwrap())).unwrap();
    }
    let site = pip_install(d, &d.join("out"), "gpupkg[device-gfx942]", "site");
    assert!(site.join("rocm_sdk_device_gfx942").is_dir() && site.join("rocm_sdk_core").is_dir());
    assert_eq!(archives_in(&site), ["gpupkg/.kpack/_kernels.so_gfx942.kpack"]);
    // A device wheel of several processors (the gfx9 family's) gains only what names none.
    split("family", "family");
    assert_eq!(requires("gpupkg_device_gfx9", "family"), ["gpupkg==1.0", "rocm-sdk-core==7.1.0"]);
    // Not a requirement, or one by URL: a usage error, and nothing is written.
    for bad in ["not a requirement!", "x @ https://example.com/x.whl"] {
        let out =
            wheelfix(d, &["split", "--all-targets", "--device-requires-dist", bad, "-w", "bad", fat.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("device requirement `{bad}`")), "{}", stderr(&out));
        assert!(!d.join("bad").exists());
    }
}

#[test]
fn two_projects_whose_device_wheels_would_install_one_archive_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Two projects with binaries under one overlay root (`common/`), one kpack group.
    let mut args = vec!["split", "--all-targets", "--overlay-root", "common", "--group", "rocm", "-w", "out"];
    let wheels: Vec<PathBuf> = ["alpha", "beta"]
        .iter()
        .map(|p| {
            WheelSpec::new(p, "1.0", "py3-none-linux_x86_64")
                .file(&format!("common/_{p}.so"), support::envs::hip_extension(7))
                .write(&d.join("in"))
        })
        .collect();
    args.extend(wheels.iter().map(|w| w.to_str().unwrap()));
    let out = wheelfix(d, &args);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("would each install `common/.kpack/rocm_<target>.kpack`").count(), 2, "{err}");
    assert!(!d.join("out").exists() || std::fs::read_dir(d.join("out")).unwrap().next().is_none(), "nothing written");
    // One at a time, each its own group: both split.
    for (w, group) in wheels.iter().zip(["alpha", "beta"]) {
        let args = ["split", "--all-targets", "--overlay-root", "common", "--group", group, "-w", "out"];
        let out = wheelfix(d, &[&args[..], &[w.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = wheelfix(d, &["check", "out"]);
    assert!(!stdout(&out).contains("path-conflict"), "{}", stdout(&out));
}

/// A HIP extension with gfx90a code objects for XNACK on and off, and one for gfx942.
fn both_modes_extension() -> Vec<u8> {
    use support::gpugen::{GFX90A, GFX942, bundle_for, section};
    // e_flags: XNACK on 0x300, off 0x200; SRAMECC any 0x400.
    let fatbin = bundle_for(
        &[("gfx90a:xnack+", GFX90A | 0x700), ("gfx90a:xnack-", GFX90A | 0x600), ("gfx942", GFX942 | 0x500)],
        5,
    );
    let wrapper = [0x4849_5046u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
    let wrapper = [wrapper, vec![0u8; 16]].concat();
    support::elfgen::ElfSpec {
        sections: vec![section(".hip_fatbin", 1, fatbin), section(".hipFatBinSegment", 1, wrapper)],
        ..support::elfgen::ElfSpec::extension("_m")
    }
    .needs("libamdhip64.so.7")
    .build()
}

#[test]
fn per_target_id_archives_are_judged_by_their_content_and_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fat = WheelSpec::new("modes", "1.0+rocm7.1.0", "py3-none-linux_x86_64")
        .file("modes/_m.so", both_modes_extension())
        .write(&d.join("fat"));
    let args = ["split", "--all-targets", "--archive-per", "target-id", "-w", "set", fat.to_str().unwrap()];
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let kinds = |dir: &str| -> Vec<String> {
        let out = wheelfix(d, &["check", "--json", dir]);
        support::check_document(&out).kinds().iter().map(|k| k.to_string()).collect()
    };
    let clean = kinds("set");
    assert!(!clean.iter().any(|k| k.starts_with("kpack")), "{clean:?}");
    let device = d.join("set/modes_device_gfx90a-1.0+rocm7.1.0-py3-none-linux_x86_64.whl");
    let before = std::fs::read(&device).unwrap();
    // The two archives' names swapped: each holds the other mode's code.
    let rename = support::rename_member;
    rename(&device, "_m.so_gfx90a:xnack+.kpack", "_m.so_gfx90a:SWAP.kpack");
    rename(&device, "_m.so_gfx90a:xnack-.kpack", "_m.so_gfx90a:xnack+.kpack");
    rename(&device, "_m.so_gfx90a:SWAP.kpack", "_m.so_gfx90a:xnack-.kpack");
    let out = wheelfix(d, &["check", "set"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("is named for gfx90a:xnack+ but holds code for gfx90a:xnack-"), "{text}");
    assert!(text.contains("is named for gfx90a:xnack- but holds code for gfx90a:xnack+"), "{text}");
    // The XNACK-off archive missing: a gfx90a in the driver's default mode finds none.
    std::fs::write(&device, &before).unwrap();
    rename(&device, "_m.so_gfx90a:xnack-.kpack", "_m.so_gfx90a-gone.bin");
    let found = kinds("set");
    assert!(found.iter().any(|k| k == "kpack-mode-unserved"), "{found:?}");
}
