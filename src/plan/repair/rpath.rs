//! Step 4: the DT_RPATH that lets a wheel file find the vendored copies from where it is
//! installed.

use std::path::Path;

use crate::analysis::linkage::{expand_origin, is_origin_relative, normalize};
use crate::elf::ElfFacts;

/// DT_RPATH for a wheel file installed at `installed` (relative to site-packages) that needs
/// vendored libraries: its `$ORIGIN` entries that stay inside the wheel, then
/// `$ORIGIN/<relative path to the libs dir>`. Absolute entries go.
pub fn rpath_for(installed: &str, facts: &ElfFacts, libs_dir: &str) -> String {
    let dir = Path::new(installed).parent().unwrap_or(Path::new(""));
    let mut entries: Vec<String> = Vec::new();
    for entry in facts.rpath.iter().chain(&facts.runpath) {
        if !is_origin_relative(entry) {
            continue;
        }
        let expanded = expand_origin(entry, &dir.display().to_string());
        if normalize(&expanded).is_some() && !entries.contains(entry) {
            entries.push(entry.clone());
        }
    }
    let relative = relative_path(dir, Path::new(libs_dir));
    let own = if relative.is_empty() { "$ORIGIN".to_string() } else { format!("$ORIGIN/{relative}") };
    if !entries.contains(&own) {
        entries.push(own);
    }
    entries.join(":")
}

/// `from` → `to`, both relative to the wheel root. Ex) `pkg/sub` → `pkg.libs` = `../../pkg.libs`
pub fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_to_the_libs_dir() {
        assert_eq!(relative_path(Path::new("pkg/sub"), Path::new("pkg.libs")), "../../pkg.libs");
        assert_eq!(relative_path(Path::new(""), Path::new("pkg.libs")), "pkg.libs");
        assert_eq!(relative_path(Path::new("pkg.libs"), Path::new("pkg.libs")), "");
    }
}
