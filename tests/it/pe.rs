//! Windows fat binaries: HIP DLLs built by clang for `x86_64-pc-windows-msvc` (the few HIP
//! runtime entry points defined in the source, linked by lld-link), wrapped in `win_amd64`
//! wheels. `show` reads them given as files; `thin` rewrites their `.hip_fat` bundles in place,
//! and LLVM's own COFF tools read the result back: the same sections and base relocations, the
//! bundle clang's bundler lists holding the kept code objects byte for byte, every byte outside
//! the bundle the original's.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::python::run;
use support::wheelgen::WheelSpec;
use support::{read_member, stderr, stdout, wheelfix};

/// The HIP runtime's entry points a DLL's registration code calls, defined so that it links
/// with `-nostdlib`.
const RUNTIME: &str = r#"
#include <stddef.h>
#define __global__ __attribute__((global))
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
struct dim3 { unsigned x, y, z; __host__ __device__ dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
typedef struct ihipStream_t *hipStream_t;
extern "C" {
int hipLaunchKernel(const void *, dim3, dim3, void **, size_t, hipStream_t) { return 0; }
int __hipPushCallConfiguration(dim3, dim3, size_t = 0, hipStream_t = 0) { return 0; }
int __hipPopCallConfiguration(dim3 *, dim3 *, size_t *, hipStream_t *) { return 0; }
void **__hipRegisterFatBinary(const void *) { return 0; }
void __hipRegisterFunction(void **, const void *, char *, const char *, unsigned, void *, void *, void *, void *, int *) {}
void __hipUnregisterFatBinary(void **) {}
int atexit(void (*)(void)) { return 0; }
}
"#;

/// LLVM's tool `tool` of the release clang came from (`llvm-objdump-19`).
fn llvm(tool: &str) -> String {
    format!("{tool}-19")
}

/// A HIP DLL with `kernels` kernels for `arches` (`--offload-arch` values), built by clang-19.
fn hip_dll(dir: &Path, name: &str, arches: &[&str], kernels: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut source = RUNTIME.to_string();
    for k in 0..kernels {
        source.push_str(&format!(
            "__global__ void k{k}(float *x, int n) {{ for (int i = 0; i < n; ++i) x[i] = x[i] * {k}.5f + x[(i + {k}) % n]; }}\n"
        ));
    }
    source.push_str("extern \"C\" int answer(void) { return 42; }\n");
    let src = dir.join(format!("{name}.hip"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("{name}.dll"));
    let mut clang = Command::new("clang++-19");
    clang.args(["-x", "hip", "--target=x86_64-pc-windows-msvc", "-nogpulib", "-nogpuinc"]);
    for a in arches {
        clang.arg(format!("--offload-arch={a}"));
    }
    clang.args(["-fuse-ld=lld", "-shared", "-nostdlib", "-Wl,/noentry", "-o"]).arg(&out).arg(&src);
    run(&mut clang);
    out
}

/// A section's (file offset, raw size), as llvm-readobj reads the DLL.
fn section(dll: &Path, name: &str) -> (usize, usize) {
    let text = run(Command::new(llvm("llvm-readobj")).arg("--sections").arg(dll));
    let block = text.split("Section {").find(|b| b.contains(&format!("Name: {name} "))).expect("the section");
    let field = |key: &str| {
        let line = block.lines().find(|l| l.trim_start().starts_with(key)).unwrap();
        let value = line.split(':').nth(1).unwrap().trim();
        match value.strip_prefix("0x") {
            Some(hex) => usize::from_str_radix(hex, 16).unwrap(),
            None => value.parse().unwrap(),
        }
    };
    (field("PointerToRawData:"), field("RawDataSize:"))
}

/// `llvm-objdump -h` without its first lines (which name the file).
fn section_table(dll: &Path) -> String {
    let text = run(Command::new(llvm("llvm-objdump")).arg("-h").arg(dll));
    text.lines().skip(2).collect::<Vec<_>>().join("\n")
}

fn base_relocations(dll: &Path) -> String {
    let text = run(Command::new(llvm("llvm-readobj")).arg("--coff-basereloc").arg(dll));
    text.lines().skip_while(|l| !l.contains("BaseReloc")).collect::<Vec<_>>().join("\n")
}

/// The bundle in a DLL's `.hip_fat`, as llvm-objcopy dumps the section.
fn hip_fat(dir: &Path, dll: &Path) -> Vec<u8> {
    let dumped = dir.join("hip_fat.bin");
    run(Command::new(llvm("llvm-objcopy"))
        .arg(format!("--dump-section=.hip_fat={}", dumped.display()))
        .arg(dll)
        .arg(dir.join("objcopy-out.dll")));
    std::fs::read(dumped).unwrap()
}

#[test]
fn show_reads_a_clang_built_hip_dll_given_as_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dll = hip_dll(d, "k", &["gfx942", "gfx1100"], 2);
    let out = wheelfix(d, &["show", dll.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("k.dll (installed files: 1 PE)"), "{text}");
    assert!(text.contains("no manylinux or musllinux analysis applies") && text.contains("win_amd64"), "{text}");
    assert!(text.contains("GPU code: gfx942, gfx1100"), "{text}");
    assert!(text.contains("k.dll  pe-hip-fatbin (2 code objects)"), "{text}");
}

#[test]
fn thin_rewrites_a_windows_fat_wheels_bundles_in_place_as_llvm_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = hip_dll(&d.join("src"), "big", &["gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx1100"], 300);
    let small = hip_dll(&d.join("src"), "small", &["gfx942", "gfx1201"], 1);
    let members = [("winpkg/big.dll", big), ("winpkg/small.dll", small)];
    let mut spec = WheelSpec::new("winpkg", "1.0+rocm7.1.0", "cp312-cp312-win_amd64").file("winpkg/__init__.py", "");
    for (name, path) in &members {
        spec = spec.file(name, std::fs::read(path).unwrap());
    }
    let wheel = spec.write(&d.join("in"));
    let (_, bundler) = support::hip::toolchain();
    eprintln!("bundler: {bundler}");

    for keep in ["gfx942", "gfx90a:xnack+"] {
        let out_dir = format!("out-{}", keep.replace(':', "_"));
        // small.dll has no gfx90a code: it keeps none (asked for with --allow-missing).
        let out =
            wheelfix(d, &["thin", "--allow-missing", "--gpu-target", keep, "-w", &out_dir, wheel.to_str().unwrap()]);
        assert!(out.status.success(), "{keep}: {}", stderr(&out));
        let thinned = d.join(&out_dir).join(wheel.file_name().unwrap());
        support::python::assert_true_record(&thinned);
        for (member, original) in &members {
            let work = d.join(format!("read-{}", keep.replace(':', "_")));
            std::fs::create_dir_all(&work).unwrap();
            let after = work.join("after.dll");
            std::fs::write(&after, read_member(&thinned, member)).unwrap();
            // The layout as LLVM reads it: the same sections, the same base relocations.
            assert_eq!(section_table(original), section_table(&after), "{keep}: {member}");
            assert_eq!(base_relocations(original), base_relocations(&after), "{keep}: {member}");
            // The bundle holds the kept code objects, each the original's bytes.
            let before_fat = hip_fat(&work, original);
            let after_fat = hip_fat(&work, &after);
            let ids_before = support::hip::bundler_list(&work, &before_fat);
            let ids_after = support::hip::bundler_list(&work, &after_fat);
            let kept: Vec<&String> = ids_before
                .iter()
                .filter(|id| {
                    id.starts_with("host-") || {
                        let target = id.rsplit("--").next().unwrap();
                        match keep {
                            "gfx90a:xnack+" => target == "gfx90a:xnack+",
                            other => target == other,
                        }
                    }
                })
                .collect();
            assert!(!kept.is_empty() && kept.len() < ids_before.len(), "{keep}: {member}: {ids_before:?}");
            assert_eq!(ids_after.iter().collect::<Vec<_>>(), kept, "{keep}: {member}");
            for id in kept.iter().filter(|id| !id.starts_with("host-")) {
                assert_eq!(
                    support::hip::bundler_unbundle(&work, &after_fat, id),
                    support::hip::bundler_unbundle(&work, &before_fat, id),
                    "{keep}: {member}: {id}"
                );
            }
            // Every byte outside the section's raw data is the original's; inside, past the
            // thinned bundle, zeros.
            let (a, b) = (std::fs::read(original).unwrap(), std::fs::read(&after).unwrap());
            assert_eq!(a.len(), b.len());
            let (start, size) = section(original, ".hip_fat");
            assert_eq!(a[..start], b[..start], "{keep}: {member}: before .hip_fat");
            assert_eq!(a[start + size..], b[start + size..], "{keep}: {member}: after .hip_fat");
            let used =
                support::hip::bundle_spans(&b[start..start + size]).iter().map(|(at, len)| at + len).max().unwrap();
            assert!(b[start + used..start + size].iter().all(|&x| x == 0), "{keep}: {member}: padding");
        }
        // What wheelfix reads of its own output agrees.
        let report = support::show_report(d, &thinned, &[]);
        let want: Vec<String> = match keep {
            "gfx942" => vec!["gfx942".into()],
            _ => vec!["gfx90a".into()],
        };
        assert_eq!(report.gpu_targets, want, "{keep}");
    }
}

/// A DLL built by clang from C `source`, linked against `libs` (import libraries).
fn c_dll(dir: &Path, name: &str, source: &str, libs: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("{name}.dll"));
    run(Command::new("clang-19")
        .args(["--target=x86_64-pc-windows-msvc", "-fuse-ld=lld", "-shared", "-nostdlib", "-Wl,/noentry", "-o"])
        .arg(&out)
        .arg(&src)
        .args(libs.iter().map(|l| dir.join(l))));
    out
}

#[test]
fn lddtree_names_the_dlls_a_dll_imports_found_beside_it_windows_or_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // KERNEL32's import library, as llvm-dlltool writes it from a .def file.
    std::fs::write(d.join("k32.def"), "LIBRARY KERNEL32.dll\nEXPORTS\nGetTickCount\n").unwrap();
    run(Command::new(llvm("llvm-dlltool"))
        .args(["-m", "i386:x86-64", "-d"])
        .arg(d.join("k32.def"))
        .arg("-l")
        .arg(d.join("kernel32.lib")));
    c_dll(d, "Dep", "__declspec(dllexport) int dep_fn(void) { return 1; }\n", &[]);
    c_dll(d, "gone", "__declspec(dllexport) int gone_fn(void) { return 2; }\n", &[]);
    c_dll(d, "vend", "__declspec(dllexport) int vend_fn(void) { return 3; }\n", &[]);
    let top = c_dll(
        d,
        "top",
        "__declspec(dllimport) int dep_fn(void);\n__declspec(dllimport) int gone_fn(void);\n__declspec(dllimport) int vend_fn(void);\n__declspec(dllimport) unsigned long GetTickCount(void);\n__declspec(dllexport) int top_fn(void) { return dep_fn() + gone_fn() + vend_fn() + (int)GetTickCount(); }\n",
        &["Dep.lib", "gone.lib", "vend.lib", "kernel32.lib"],
    );
    std::fs::remove_file(d.join("gone.dll")).unwrap();
    // delvewheel's layout: a vendored DLL in `<name>.libs` beside the package.
    std::fs::create_dir_all(d.join("pkg.libs")).unwrap();
    std::fs::rename(d.join("vend.dll"), d.join("pkg.libs/vend.dll")).unwrap();
    // Found without case, as Windows finds it.
    std::fs::rename(d.join("Dep.dll"), d.join("dep.dll")).unwrap();
    let out = wheelfix(d, &["lddtree", top.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "gone.dll is missing: {}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "Dep.dll => {} (the DLL's directory)",
            d.canonicalize().unwrap().join("dep.dll").display()
        )),
        "{text}"
    );
    assert!(text.contains("gone.dll => not found"), "{text}");
    assert!(text.contains("pkg.libs/vend.dll (a .libs directory (delvewheel's, added by the package))"), "{text}");
    assert!(text.contains("KERNEL32.dll => windows:KERNEL32.dll (Windows)"), "{text}");
    // llvm-readobj agrees on what it imports.
    let listed = run(Command::new(llvm("llvm-readobj")).arg("--coff-imports").arg(&top));
    for dll in ["Dep.dll", "gone.dll", "vend.dll", "KERNEL32.dll"] {
        assert!(listed.contains(&format!("Name: {dll}")), "{listed}");
    }
}
