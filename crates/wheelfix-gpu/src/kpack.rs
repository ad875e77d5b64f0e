//! Where a kpack-split binary finds its device code. kpack moves a host binary's offload
//! bundles into per-architecture archives and leaves a `.rocm_kpack_ref` marker naming them:
//! search paths relative to the binary's directory, with `@GFXARCH@` standing for the GPU
//! processor the runtime loads code for (`../.kpack/blas_lib_@GFXARCH@.kpack` →
//! `../.kpack/blas_lib_gfx942.kpack`). An archive that is not installed there makes the first
//! kernel launch fail, after an install that succeeded.

/// The placeholder the runtime replaces with the processor name.
pub const GFXARCH: &str = "@GFXARCH@";

/// The install paths (relative to site-packages) a binary installed at `binary` searches for
/// its archive for `arch`, in order; a path that climbs above site-packages is left out (no
/// wheel can install it). Ex) (`p/lib/_k.so`, [`../.kpack/k_@GFXARCH@.kpack`], `gfx942`) →
/// [`p/.kpack/k_gfx942.kpack`]
pub fn archive_paths(binary: &str, search_paths: &[String], arch: &str) -> Vec<String> {
    let dir = binary.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    search_paths
        .iter()
        .map(|pattern| pattern.replace(GFXARCH, arch))
        .filter(|relative| !relative.starts_with('/'))
        .filter_map(|relative| wheelfix_base::paths::normalize_path(&wheelfix_base::paths::join_path(dir, &relative)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_paths_resolve_against_the_binarys_directory() {
        let paths = vec!["../.kpack/k_@GFXARCH@.kpack".to_string(), "/opt/rocm/.kpack/x.kpack".into()];
        assert_eq!(archive_paths("p/lib/_k.so", &paths, "gfx942"), ["p/.kpack/k_gfx942.kpack"]);
        assert!(archive_paths("_k.so", &paths, "gfx942").is_empty(), "above site-packages");
        assert_eq!(archive_paths("a/b.so", &["./k.kpack".into()], "gfx950"), ["a/k.kpack"]);
    }
}
