//! The wheels in `testdata/` are built by the project: this test rebuilds them and checks that
//! the committed bytes are what the builder makes. `WHEELFIX_BLESS=1` rewrites them.

use crate::support;

use std::path::Path;

use support::elfgen::{ElfSpec, RawSection};
use support::gpugen::{GFX942, GFX950, bundle_for};
use support::wheelgen::WheelSpec;

/// The demo wheel of the README and the guide: a ROCm extension mislabeled `manylinux2014` (it
/// needs GLIBCXX_3.4.21, so its true tag is `manylinux_2_24`), with device code for two GPUs in
/// one offload bundle and the HIP wrapper that registers it (so that `thin` and `split` work).
pub fn rocm_demo() -> WheelSpec {
    // One `__hip_fatbin_wrapper`: magic HIPF, version 1, its pointer left to a relocation.
    let mut wrapper = Vec::new();
    wrapper.extend(0x4849_5046u32.to_le_bytes());
    wrapper.extend(1u32.to_le_bytes());
    wrapper.extend([0u8; 16]);
    let kernels = ElfSpec {
        sections: vec![
            RawSection {
                name: ".hip_fatbin".into(),
                kind: 1,
                data: bundle_for(&[("gfx942", GFX942), ("gfx950", GFX950)], 6),
                nobits_size: 0,
            },
            RawSection { name: ".hipFatBinSegment".into(), kind: 1, data: wrapper, nobits_size: 0 },
        ],
        ..ElfSpec::extension("_kernels")
    }
    .needs_version(
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm",
        "libstdc++.so.6",
        "GLIBCXX_3.4.21",
    )
    .needs_version("__cxa_throw", "libstdc++.so.6", "CXXABI_1.3")
    .needs_version("memcpy", "libc.so.6", "GLIBC_2.14")
    .needs("libamdhip64.so.7")
    .needs("librocblas.so.5");
    let mut spec = WheelSpec::new("rocm_demo", "1.0.0", "cp312-cp312-manylinux2014_x86_64")
        .file("rocm_demo/__init__.py", "from rocm_demo._kernels import *  # noqa\n")
        .file("rocm_demo/_kernels.cpython-312-x86_64-linux-gnu.so", kernels.build());
    spec.wheel_tags = Some(vec!["cp312-cp312-linux_x86_64".into()]);
    spec
}

fn check_or_bless(spec: &WheelSpec) {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let built = tempfile::tempdir().unwrap();
    let fresh = std::fs::read(spec.write(built.path())).unwrap();
    let committed = testdata.join(spec.file_name());
    if std::env::var_os("WHEELFIX_BLESS").is_some() {
        std::fs::write(&committed, &fresh).unwrap();
        return;
    }
    let old = std::fs::read(&committed).unwrap_or_default();
    assert!(old == fresh, "{} is stale: run `WHEELFIX_BLESS=1 cargo test --test it testdata::`", committed.display());
}

#[test]
fn testdata_wheels_are_what_the_builder_makes() {
    check_or_bless(&rocm_demo());
}
