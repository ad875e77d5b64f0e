//! Finding a needed library on this machine, in the order glibc's loader uses.
//!
//! For a DT_NEEDED entry of object O, `ld.so` searches: the DT_RPATH of O and of the objects that
//! loaded it (only when O has no DT_RUNPATH), `LD_LIBRARY_PATH`, O's own DT_RUNPATH, the
//! directories of `/etc/ld.so.conf` (the cache), then the default directories. auditwheel puts
//! RUNPATH before `LD_LIBRARY_PATH` and lets the top object's RUNPATH leak into indirect
//! dependencies (auditwheel #737); wheelfix follows the loader.

use std::path::{Path, PathBuf};

/// Where to look for libraries outside the wheel.
#[derive(Debug, Clone, Default)]
pub struct LibrarySearch {
    /// `LD_LIBRARY_PATH` (dropped when `--ldpaths` is given, as auditwheel does).
    pub env_dirs: Vec<PathBuf>,
    /// `/etc/ld.so.conf` directories then the defaults, or `--ldpaths`.
    pub system_dirs: Vec<PathBuf>,
}

/// The search path entries of one object, `$ORIGIN` already expanded.
#[derive(Debug, Clone, Default)]
pub struct ObjectPaths {
    pub rpath: Vec<PathBuf>,
    pub runpath: Vec<PathBuf>,
}

impl LibrarySearch {
    /// The machine's search path, or `--ldpaths A:B` in place of the system part.
    pub fn from_environment(ldpaths: Option<&str>) -> Self {
        match ldpaths {
            Some(paths) => LibrarySearch { env_dirs: Vec::new(), system_dirs: split_paths(paths) },
            None => {
                let env_dirs = std::env::var("LD_LIBRARY_PATH").map(|v| split_paths(&v)).unwrap_or_default();
                let mut system_dirs = Vec::new();
                read_ld_so_conf(Path::new("/etc/ld.so.conf"), &mut system_dirs, 0);
                for default in ["/lib64", "/usr/lib64", "/lib", "/usr/lib"] {
                    system_dirs.push(PathBuf::from(default));
                }
                dedup(&mut system_dirs);
                LibrarySearch { env_dirs, system_dirs }
            }
        }
    }

    /// The directories searched for a DT_NEEDED entry of `object`, whose loaders (nearest first)
    /// are `loaders`, in the loader's order.
    pub fn directories(&self, object: &ObjectPaths, loaders: &[&ObjectPaths]) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if object.runpath.is_empty() {
            dirs.extend(object.rpath.iter().cloned());
            for loader in loaders {
                if loader.runpath.is_empty() {
                    dirs.extend(loader.rpath.iter().cloned());
                }
            }
        }
        dirs.extend(self.env_dirs.iter().cloned());
        dirs.extend(object.runpath.iter().cloned());
        dirs.extend(self.system_dirs.iter().cloned());
        dedup(&mut dirs);
        dirs
    }

    /// The first `dir/soname` that exists and whose ELF header matches `want`
    /// (class, byte order, machine).
    pub fn find(&self, soname: &str, dirs: &[PathBuf], want: &ElfKind) -> Option<PathBuf> {
        dirs.iter().map(|d| d.join(soname)).find(|candidate| ElfKind::of_file(candidate).is_some_and(|k| k == *want))
    }
}

/// The part of an ELF header that decides whether a library can be loaded into a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfKind {
    pub is_64: bool,
    pub little_endian: bool,
    pub machine: u16,
}

impl ElfKind {
    pub fn of_file(path: &Path) -> Option<ElfKind> {
        use std::io::Read;
        let mut header = [0u8; 20];
        std::fs::File::open(path).ok()?.read_exact(&mut header).ok()?;
        if &header[..4] != crate::elf::ELF_MAGIC {
            return None;
        }
        let little_endian = header[5] != 2;
        let machine = if little_endian {
            u16::from_le_bytes([header[18], header[19]])
        } else {
            u16::from_be_bytes([header[18], header[19]])
        };
        Some(ElfKind { is_64: header[4] == 2, little_endian, machine })
    }
}

fn split_paths(value: &str) -> Vec<PathBuf> {
    value.split(':').filter(|p| !p.is_empty()).map(PathBuf::from).collect()
}

fn dedup(dirs: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
}

/// `/etc/ld.so.conf`: one directory per line, `include GLOB` lines, `#` comments.
fn read_ld_so_conf(path: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(pattern) = line.strip_prefix("include").filter(|r| r.starts_with([' ', '\t'])) {
            let pattern = pattern.trim();
            let pattern = if pattern.starts_with('/') {
                PathBuf::from(pattern)
            } else {
                path.parent().unwrap_or(Path::new("/")).join(pattern)
            };
            for file in glob_files(&pattern) {
                read_ld_so_conf(&file, out, depth + 1);
            }
        } else {
            out.push(PathBuf::from(line));
        }
    }
}

/// Files matching a glob whose wildcards are only in the last component (`/etc/ld.so.conf.d/*.conf`).
fn glob_files(pattern: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let Ok(matcher) = globset::Glob::new(name).map(|g| g.compile_matcher()) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_str().is_some_and(|n| matcher.is_match(n)))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `$ORIGIN` / `${ORIGIN}` replaced by `origin`; other entries as they are.
pub fn expand_origin(entry: &str, origin: &str) -> String {
    entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpath_of_loaders_only_without_runpath() {
        let search = LibrarySearch { env_dirs: vec!["/env".into()], system_dirs: vec!["/usr/lib".into()] };
        let object = ObjectPaths { rpath: vec!["/rpath".into()], runpath: vec![] };
        let loader = ObjectPaths { rpath: vec!["/loader".into()], runpath: vec![] };
        let dirs = search.directories(&object, &[&loader]);
        assert_eq!(dirs, [PathBuf::from("/rpath"), "/loader".into(), "/env".into(), "/usr/lib".into()]);

        let with_runpath = ObjectPaths { rpath: vec!["/ignored".into()], runpath: vec!["/runpath".into()] };
        let dirs = search.directories(&with_runpath, &[&loader]);
        assert_eq!(dirs, [PathBuf::from("/env"), "/runpath".into(), "/usr/lib".into()]);
    }

    #[test]
    fn reads_ld_so_conf_includes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("conf.d")).unwrap();
        std::fs::write(dir.path().join("conf.d/a.conf"), "/opt/a\n# comment\n").unwrap();
        std::fs::write(dir.path().join("conf.d/b.conf"), "/opt/b\n").unwrap();
        std::fs::write(dir.path().join("ld.so.conf"), "include conf.d/*.conf\n/opt/c # trailing\n").unwrap();
        let mut out = Vec::new();
        read_ld_so_conf(&dir.path().join("ld.so.conf"), &mut out, 0);
        assert_eq!(out, [PathBuf::from("/opt/a"), "/opt/b".into(), "/opt/c".into()]);
    }
}
