//! Input files opened as wheelfix opens them: only regular files, and never blocking on the
//! open (a FIFO named `x.whl` is an error, not a hang).

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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
