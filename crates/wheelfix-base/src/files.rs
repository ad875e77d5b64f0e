//! Files as wheelfix opens and makes them. Inputs: only regular files, never blocking on the open (a FIFO
//! named `x.whl` is an error, not a hang), every read bounded by the size the file had when it
//! was opened (`/dev/zero` behind a wheel's name is never read forever), and directory walks
//! that visit each directory once, by device and inode (a `loop -> .` symlink is walked once).
//!
//! New names for existing files ([`link_or_copy`]) and new files ([`write_new_file`]) never
//! replace one: the name must not exist.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Open a file for reading only if it is a regular file. The open itself never blocks: it is
/// made non-blocking, and anything but a regular file is refused before a byte is read.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, not_regular(&metadata)));
    }
    Ok(file)
}

/// What a file that is not a regular file is, for the error.
fn not_regular(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = metadata.file_type();
    let what = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    format!("{what}, not a regular file")
}

/// A new name for an existing file: a hard link (no copy of a multi-GB wheel), or a copy where
/// links cannot be made (another file system). Never opens an existing file for writing: the
/// new name must not exist.
pub fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            let source = open_regular(from)?;
            let len = source.metadata()?.len();
            let mut target = std::fs::OpenOptions::new().write(true).create_new(true).open(to)?;
            let copied = std::io::copy(&mut std::io::Read::take(source, len), &mut target);
            if copied.is_err() {
                drop(target);
                let _ = std::fs::remove_file(to);
            }
            copied.map(|_| ())
        }
    }
}

/// Write a new file (it must not exist yet).
pub fn write_new_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(data)
}

/// The identity of a file at a moment: a rename or a rewrite in between shows up as a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    pub mtime_ns: i128,
}

impl FileIdentity {
    pub fn of(metadata: &std::fs::Metadata) -> Self {
        FileIdentity {
            dev: metadata.dev(),
            ino: metadata.ino(),
            len: metadata.len(),
            mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec()),
        }
    }

    /// The identity of the file now at `path` (following symlinks).
    pub fn at(path: &Path) -> io::Result<Self> {
        std::fs::metadata(path).map(|m| Self::of(&m))
    }
}

/// The whole content of a regular file, refused when it is larger than `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let len = file.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max} a file of this kind may have"),
        ));
    }
    let mut data = Vec::with_capacity(len as usize);
    // The size at open bounds the read, whatever the file does meanwhile.
    file.take(len).read_to_end(&mut data)?;
    Ok(data)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not valid UTF-8"))
}

/// Every file under `inputs` (directories are walked, each once by device and inode; files are
/// taken as they are) whose name ends in one of `suffixes`, sorted. Files that are not regular
/// are listed too, so that opening them gives the error that names them.
pub fn collect_files(inputs: &[PathBuf], suffixes: &[&str]) -> Vec<PathBuf> {
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut out = Vec::new();
    for input in inputs {
        walk(input, suffixes, &mut seen, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

fn walk(path: &Path, suffixes: &[&str], seen: &mut HashSet<(u64, u64)>, out: &mut Vec<PathBuf>) {
    let Ok(metadata) = std::fs::metadata(path) else {
        // A dangling symlink, or a path that is gone: named by the consumer if it matches.
        if matches_suffix(path, suffixes) {
            out.push(path.to_path_buf());
        }
        return;
    };
    if metadata.is_dir() {
        if !seen.insert((metadata.dev(), metadata.ino())) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else { return };
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children {
            walk(&child, suffixes, seen, out);
        }
    } else if matches_suffix(path, suffixes) {
        out.push(path.to_path_buf());
    }
}

fn matches_suffix(path: &Path, suffixes: &[&str]) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| suffixes.iter().any(|s| n.ends_with(s)))
}

/// The inputs that do not exist (a usage error: `check nonexistent/`).
pub fn missing(inputs: &[PathBuf]) -> Vec<&PathBuf> {
    inputs.iter().filter(|p| std::fs::symlink_metadata(p).is_err()).collect()
}

/// Whether two paths name one file or directory (by device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    matches!((identity(a), identity(b)), (Some(a), Some(b)) if a == b)
}

/// The device and inode of a path (following symlinks): what decides whether two paths are one
/// file or one directory, whatever their spelling (bind mounts, `in/../in/.`).
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A name that stands for one entry directly in a directory: not empty, not `.` or `..`, no
/// `/`, no NUL, no control character, at most 255 bytes. Ex) `torch-2.9.0-….whl`; not `../x`
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.whl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = open_regular(&fifo).unwrap_err().to_string();
        assert!(err.contains("a FIFO"), "{err}");
        let err = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err().to_string();
        assert!(err.contains("a device"), "{err}");
        std::fs::write(dir.path().join("big"), vec![0u8; 100]).unwrap();
        assert!(read_bounded(&dir.path().join("big"), 99).is_err());
        assert_eq!(read_bounded(&dir.path().join("big"), 100).unwrap().len(), 100);
    }

    #[test]
    fn symlink_loops_are_walked_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("a")).unwrap();
        std::fs::write(d.join("a/k-1.0-py3-none-any.whl"), b"x").unwrap();
        std::os::unix::fs::symlink(".", d.join("a/loop")).unwrap();
        std::os::unix::fs::symlink("..", d.join("a/up")).unwrap();
        let files = collect_files(&[d.join("a")], &[".whl"]);
        assert_eq!(files, [d.join("a/k-1.0-py3-none-any.whl")]);
        assert!(missing(&[d.join("nope")]).len() == 1);
    }
}
