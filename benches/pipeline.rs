//! `cargo bench`: times the pipeline stages on a wheel generated here (no downloads): 64 ELF
//! libraries of 4 MiB each (zero padding, so the wheel itself is small and the time goes to
//! inflating, hashing and parsing) plus 2,000 Python files. Prints the median of 5 runs per stage.
//! For comparisons with auditwheel on real wheels, see `benches/compare.py`.
//!
//! With `WHEELFIX_BENCH_LIB=path/to/lib.so` (torch's largest library, say), also what a moved
//! `.dynamic` costs `repair`'s patcher: the RPATH edit `repair` makes, on the library as it is
//! and on a copy whose spare `DT_NULL` entries are used up (as lld leaves them), which makes the
//! patcher move `.dynamic` into a new segment. Median of 3 each, and the ratio.

// The tests' builders; the bench uses a few of their functions (the ELF builder is the elf
// crate's fixtures, a dev-dependency feature).
use wheelfix::elf::fixtures as elfgen;
#[path = "../tests/it/support/wheelgen.rs"]
#[allow(dead_code)]
mod wheelgen;

use std::time::{Duration, Instant};

use wheelfix::analysis::AnalyzeOptions;
use wheelfix::analysis::linkage::LibrarySearch;
use wheelfix::exclude::ExcludeList;
use wheelfix::progress::NoProgress;
use wheelfix::settings::Settings;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = wheelgen::WheelSpec::new("benchpkg", "1.0", "cp312-cp312-linux_x86_64");
    for i in 0..64 {
        let elf = elfgen::ElfSpec { soname: Some(format!("lib{i}.so")), padding: 4 << 20, ..Default::default() }
            .needs_version("f", "libstdc++.so.6", "GLIBCXX_3.4.21");
        spec = spec.file(&format!("benchpkg/lib{i}.so"), elf.build());
    }
    for i in 0..2000 {
        spec = spec.file(&format!("benchpkg/mod{i}.py"), format!("X = {i}\n").repeat(20));
    }
    let wheel = spec.write(dir.path());
    let size = std::fs::metadata(&wheel).unwrap().len();
    let options =
        Settings::with_options(AnalyzeOptions::new(ExcludeList::new(true, &[]).unwrap(), LibrarySearch::default()));
    let mut verify = options.clone();
    verify.analyze.verify_hashes = true;
    verify.analyze.hash_for_record = true;
    println!("generated wheel: {} kB, 64 ELF members (256 MiB inflated), 2,000 .py files", size / 1_000);
    let show = time(5, || {
        wheelfix::show(&wheel, &options, &NoProgress).unwrap();
    });
    println!("show           median {show:?}");
    let verified = time(5, || {
        wheelfix::show(&wheel, &verify, &NoProgress).unwrap();
    });
    println!("show --verify  median {verified:?}");
    let out = dir.path().join("out");
    let retag = time(5, || {
        let batch = wheelfix::retag_batch(
            std::slice::from_ref(&wheel),
            &verify,
            &wheelfix::Destination::Directory(out.clone()),
            &NoProgress,
        );
        assert!(batch.results.iter().all(|r| r.is_ok()));
    });
    println!("retag          median {retag:?} ({:.2}x show)", retag.as_secs_f64() / show.as_secs_f64());
    if let Ok(lib) = std::env::var("WHEELFIX_BENCH_LIB") {
        moved_dynamic(std::path::Path::new(&lib));
    }
}

/// The patcher on `lib` with a spare dynamic entry and without one.
fn moved_dynamic(lib: &std::path::Path) {
    use wheelfix::elf::patch::{ElfEdit, InProcessPatcher, Patcher, RpathEdit};
    let data = std::fs::read(lib).unwrap();
    // The library without its RPATH/RUNPATH, which leaves a spare entry; and that spare used up.
    let spare = without_rpath(&data);
    let full = without_spare_entries(&spare);
    let edit = ElfEdit { rpath: RpathEdit::Set("$ORIGIN/../bench.libs".into()), ..Default::default() };
    let timed = |bytes: &[u8]| time(3, || drop(InProcessPatcher.patch(bytes, &edit).unwrap()));
    let (in_place, moved) = (timed(&spare), timed(&full));
    println!(
        "patch {} ({} MB): RPATH in a spare entry median {in_place:?}, .dynamic moved median {moved:?} ({:.2}x)",
        lib.display(),
        data.len() / 1_000_000,
        moved.as_secs_f64() / in_place.as_secs_f64()
    );
}

/// Where a 64-bit ELF file's dynamic array lies: (offset, size).
fn dynamic_array(data: &[u8]) -> (usize, usize) {
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
    let file = ElfFile64::<object::Endianness>::parse(data).unwrap();
    let endian = file.endian();
    file.elf_header()
        .sections(endian, data)
        .unwrap()
        .iter()
        .find(|s| s.sh_type(endian) == object::elf::SHT_DYNAMIC)
        .map(|s| (s.sh_offset(endian) as usize, s.sh_size(endian) as usize))
        .expect("a dynamic section")
}

/// A copy without DT_RPATH and DT_RUNPATH entries: the later entries move up, spare DT_NULLs
/// fill the end.
fn without_rpath(data: &[u8]) -> Vec<u8> {
    let (at, size) = dynamic_array(data);
    let entries: Vec<&[u8]> = data[at..at + size].chunks(16).collect();
    let tag = |e: &[u8]| u64::from_le_bytes(e[..8].try_into().unwrap());
    let kept: Vec<u8> = entries.iter().filter(|e| ![15, 29].contains(&tag(e))).flat_map(|e| e.to_vec()).collect();
    let mut out = data.to_vec();
    out[at..at + size].fill(0);
    out[at..at + kept.len()].copy_from_slice(&kept);
    out
}

/// A copy whose spare DT_NULL entries (all but the terminator) are DT_DEBUG entries, so that no
/// new tag fits in `.dynamic`.
fn without_spare_entries(data: &[u8]) -> Vec<u8> {
    let (at, size) = dynamic_array(data);
    let mut out = data.to_vec();
    let entries: Vec<usize> = (at..at + size).step_by(16).collect();
    let first_null = entries.iter().position(|&e| out[e..e + 8] == [0; 8]).expect("a DT_NULL");
    for &e in &entries[first_null..entries.len() - 1] {
        out[e..e + 8].copy_from_slice(&21u64.to_le_bytes());
    }
    out
}
