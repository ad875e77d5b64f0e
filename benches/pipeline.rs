//! `cargo bench`: times the pipeline stages on a wheel generated here (no downloads): 64 ELF
//! libraries of 4 MiB each (zero padding, so the wheel itself is small and the time goes to
//! inflating, hashing and parsing) plus 2,000 Python files. Prints the median of 5 runs per stage.
//! For comparisons with auditwheel on real wheels, see `benches/compare.py`.

#[path = "../tests/support/elfgen.rs"]
mod elfgen;
#[path = "../tests/support/wheelgen.rs"]
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
}
