//! Output files: written to a temporary file beside their destination, renamed into place only
//! when complete, and removed on every exit path that can run.
//!
//! A temporary file is named `.<destination name>.wheelfix-<pid>-<n>.part` and holds an
//! exclusive `flock` for as long as its writer lives. A writer that was killed (`SIGKILL`,
//! power loss) leaves the file but not the lock, so the next run that writes the same
//! destination removes it; a live writer's file is locked and left alone. `SIGINT`, `SIGTERM`
//! and `SIGHUP` remove every temporary file of the process before it exits
//! ([`install_signal_cleanup`]). New files get `0666 & ~umask`, as pip and auditwheel give them.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::zip::FileIdentity;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{0} already exists and is not this wheel's input; it is left as it is")]
    Exists(String),
    #[error(
        "the input {0} was replaced or removed while it was being processed (another run on the same file?); nothing was written"
    )]
    InputChanged(String),
    #[error("the process is exiting on a signal")]
    Terminating,
}

/// How a finished output takes its place.
#[derive(Debug, Clone, Copy)]
pub enum Commit {
    /// Replace whatever is at the destination (`-w DIR`: an earlier run's output).
    Replace,
    /// Never replace an existing file (`--in-place` under a new name).
    NoClobber,
    /// Replace the destination only while it is still this input (`--in-place`, same name).
    ReplaceInput(FileIdentity),
}

/// Paths of this process's temporary files and directories, for the signal handler.
struct Registry {
    paths: BTreeSet<PathBuf>,
    terminating: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { paths: BTreeSet::new(), terminating: false });
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove every registered temporary path, then exit with `128 + signal`, on SIGINT, SIGTERM
/// and SIGHUP. Call once, from the binary.
pub fn install_signal_cleanup() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let mut registry = registry();
            registry.terminating = true;
            for path in std::mem::take(&mut registry.paths) {
                remove_path(&path);
            }
            std::process::exit(128 + signal);
        }
    });
}

fn remove_path(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Register a temporary path made by `make` so that a signal removes it; refused once the
/// process is exiting.
pub fn register<T>(path: &Path, make: impl FnOnce() -> io::Result<T>) -> Result<T, OutputError> {
    let mut registry = registry();
    if registry.terminating {
        return Err(OutputError::Terminating);
    }
    let made = make().map_err(|source| OutputError::Io { path: path.display().to_string(), source })?;
    registry.paths.insert(path.to_path_buf());
    Ok(made)
}

pub fn unregister(path: &Path) {
    registry().paths.remove(path);
}

/// The directory a path lies in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// A temporary file that becomes `dest` on [`TempOutput::commit`], and disappears otherwise.
pub struct TempOutput {
    path: PathBuf,
    dest: PathBuf,
    /// Holds the lock that marks the file as in use.
    lock: File,
    done: bool,
}

impl TempOutput {
    /// Create the temporary file for `dest`, first removing what killed runs left for it.
    pub fn create(dest: &Path) -> Result<TempOutput, OutputError> {
        let dir = parent_dir(dest);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        remove_leftovers(dir, &name);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.wheelfix-{}-{n}.part", std::process::id()));
            let made = register(&path, || {
                let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o666).open(&path)?;
                lock_exclusive(&file)?;
                Ok(file)
            });
            match made {
                Ok(lock) => return Ok(TempOutput { path, dest: dest.to_path_buf(), lock, done: false }),
                Err(OutputError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle for writing (it shares the lock).
    pub fn file(&self) -> Result<File, OutputError> {
        self.lock.try_clone().map_err(|e| self.io_err(e))
    }

    fn io_err(&self, source: io::Error) -> OutputError {
        OutputError::Io { path: self.dest.display().to_string(), source }
    }

    /// Give the output these permission bits instead of `0666 & ~umask` (`--in-place` keeps
    /// the input's).
    pub fn set_mode(&self, mode: u32) -> Result<(), OutputError> {
        use std::os::unix::fs::PermissionsExt;
        self.lock.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| self.io_err(e))
    }

    /// Flush to disk and move into place.
    pub fn commit(mut self, how: Commit) -> Result<PathBuf, OutputError> {
        self.lock.sync_all().map_err(|e| self.io_err(e))?;
        match how {
            Commit::Replace => std::fs::rename(&self.path, &self.dest).map_err(|e| self.io_err(e))?,
            Commit::ReplaceInput(identity) => {
                if FileIdentity::at(&self.dest).ok() != Some(identity) {
                    return Err(OutputError::InputChanged(self.dest.display().to_string()));
                }
                std::fs::rename(&self.path, &self.dest).map_err(|e| self.io_err(e))?;
            }
            Commit::NoClobber => match rename_no_replace(&self.path, &self.dest) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(OutputError::Exists(self.dest.display().to_string()));
                }
                Err(e) => return Err(self.io_err(e)),
            },
        }
        self.done = true;
        unregister(&self.path);
        sync_dir(parent_dir(&self.dest));
        Ok(self.dest.clone())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
            unregister(&self.path);
        }
    }
}

/// Remove the temporary files of killed runs for the destination `name` in `dir`: those whose
/// lock nobody holds.
fn remove_leftovers(dir: &Path, name: &str) {
    let prefix = format!(".{name}.wheelfix-");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else { continue };
        if !(file_name.starts_with(&prefix) && file_name.ends_with(".part")) {
            continue;
        }
        let path = entry.path();
        if let Ok(file) = File::open(&path)
            && try_lock_exclusive(&file)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn lock_exclusive(file: &File) -> io::Result<()> {
    // SAFETY: flock on a descriptor this process owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn try_lock_exclusive(file: &File) -> bool {
    lock_exclusive(file).is_ok()
}

/// `rename` that fails with `AlreadyExists` instead of replacing `to`.
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (from_c, to_c) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(libc::AT_FDCWD, from_c.as_ptr(), libc::AT_FDCWD, to_c.as_ptr(), libc::RENAME_NOREPLACE)
    };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        // The file system cannot do it atomically: a hard link fails on an existing name too.
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(err),
    }
}

/// Make a rename durable: sync the directory that holds the new name.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
