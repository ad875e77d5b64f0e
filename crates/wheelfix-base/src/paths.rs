//! Paths inside an archive or an install tree: `/`-separated and relative to its top.

/// `dir/name`, or `name` when `dir` is the top directory (empty): a path inside a wheel or
/// site-packages.
pub fn join_path(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// Normalise `a/b/../c` → `a/c`; `None` when the path climbs above the root.
pub fn normalize_path(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}
