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
    #[error("{0} exists and was not written by wheelfix (it is not empty and has no {marker}); it is left as it is: remove it or choose another output directory", marker = DIR_MARKER)]
    NotOurs(String),
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
                // The same bytes are already there (another run on the same input wrote them,
                // outputs being deterministic): nothing to replace, and nothing lost.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && same_content(&self.path, &self.dest) => {
                    let _ = std::fs::remove_file(&self.path);
                }
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

/// Whether two files hold the same bytes.
fn same_content(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(mut fa), Ok(mut fb)) = (File::open(a), File::open(b)) else { return false };
    match (fa.metadata(), fb.metadata()) {
        (Ok(ma), Ok(mb)) if ma.len() == mb.len() => {}
        _ => return false,
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let (Ok(na), Ok(nb)) = (fa.read(&mut ba), fb.read(&mut bb)) else { return false };
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

/// A directory built in a temporary place beside `dest` and swapped in whole when complete
/// (`wheelfix index`); removed on every exit path otherwise.
pub struct TempDir {
    path: PathBuf,
    dest: PathBuf,
    /// The directory opened and locked, which marks it as in use.
    _lock: File,
    done: bool,
}

/// The file that marks a directory as written by wheelfix (so that a later run may replace it).
pub const DIR_MARKER: &str = ".wheelfix-output";

impl TempDir {
    pub fn create(dest: &Path) -> Result<TempDir, OutputError> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = parent_dir(dest);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        std::fs::create_dir_all(dir).map_err(|source| OutputError::Io { path: dir.display().to_string(), source })?;
        remove_leftovers(dir, &name);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.wheelfix-{}-{n}.part", std::process::id()));
            let made = register(&path, || {
                std::fs::DirBuilder::new().mode(0o777).create(&path)?;
                let lock = File::open(&path)?;
                lock_exclusive(&lock)?;
                std::fs::write(
                    path.join(DIR_MARKER),
                    b"written by wheelfix; a later run may replace this directory\n",
                )?;
                Ok(lock)
            });
            match made {
                Ok(lock) => return Ok(TempDir { path, dest: dest.to_path_buf(), _lock: lock, done: false }),
                Err(OutputError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Swap the finished directory in. An existing destination is replaced only when it is
    /// empty or a directory an earlier run wrote (it holds [`DIR_MARKER`]).
    pub fn commit(mut self) -> Result<PathBuf, OutputError> {
        let io_err = |source| OutputError::Io { path: self.dest.display().to_string(), source };
        let old = parent_dir(&self.dest).join(format!(
            ".{}.wheelfix-old-{}.part",
            self.dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            std::process::id()
        ));
        let replacing = self.dest.exists();
        if replacing {
            if !may_replace_dir(&self.dest) {
                return Err(OutputError::NotOurs(self.dest.display().to_string()));
            }
            std::fs::rename(&self.dest, &old).map_err(io_err)?;
        }
        if let Err(e) = std::fs::rename(&self.path, &self.dest) {
            if replacing {
                let _ = std::fs::rename(&old, &self.dest);
            }
            return Err(io_err(e));
        }
        self.done = true;
        unregister(&self.path);
        if replacing {
            let _ = std::fs::remove_dir_all(&old);
        }
        sync_dir(parent_dir(&self.dest));
        Ok(self.dest.clone())
    }
}

/// A directory wheelfix may replace: empty, or marked as written by an earlier run.
pub fn may_replace_dir(dir: &Path) -> bool {
    dir.join(DIR_MARKER).is_file() || std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.path);
            unregister(&self.path);
        }
    }
}

/// Remove the temporary files (and directories) of killed runs for the destination `name` in
/// `dir`: those whose lock nobody holds.
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
            remove_path(&path);
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
    // The system call itself, not glibc's wrapper (glibc 2.28+): the binary then runs on any
    // glibc from 2.17 on (kernels before 3.15 answer ENOSYS, handled below).
    // SAFETY: two NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from_c.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
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
