//! Release sets the release tests build: GPU wheels with real offload bundles in their host
//! binaries, pure wheels, and a gfx950 set marked `+rocm10.1.0`.

use std::path::{Path, PathBuf};

use super::gpugen::{GFX950, bundle_for, host_with_fatbin};
use super::wheelgen::WheelSpec;

pub fn gpu_wheel(name: &str, version: &str, targets: &[(&str, u32)], requires: &[&str]) -> WheelSpec {
    let module = format!("_{name}");
    let mut spec = WheelSpec::new(name, version, "cp312-cp312-manylinux_2_17_x86_64")
        .file(&format!("{name}/__init__.py"), "")
        .file(&format!("{name}/{module}.so"), host_with_fatbin(&module, bundle_for(targets, 6)));
    spec.wheel_tags = Some(vec!["cp312-cp312-manylinux_2_17_x86_64".into()]);
    spec.metadata = requires.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    spec
}

pub fn py3_wheel(name: &str, version: &str, requires: &[&str]) -> WheelSpec {
    let mut spec = WheelSpec::new(name, version, "py3-none-any").file(&format!("{name}/__init__.py"), "");
    spec.metadata = requires.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    spec.purelib = true;
    spec
}

/// A gfx950 set, already marked `+rocm10.1.0`, in `dir`.
pub fn gfx950_set(dir: &Path) -> Vec<PathBuf> {
    arch_set(dir, "gfx950", GFX950)
}

/// The same set for another GPU target (`flags`: its ELF machine flags), in `dir`.
pub fn arch_set(dir: &Path, target: &str, flags: u32) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    vec![
        gpu_wheel(
            "torch",
            "2.15.0a0+git31a77fc.rocm10.1.0",
            &[(target, flags)],
            &["triton==3.9.0+gitaad2a60d.rocm10.1.0"],
        )
        .write(dir),
        gpu_wheel("triton", "3.9.0+gitaad2a60d.rocm10.1.0", &[(target, flags)], &[]).write(dir),
        py3_wheel("nixl", "1.5.2+rocm10.1.0", &[]).write(dir),
    ]
}
