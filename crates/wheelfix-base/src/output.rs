//! Output files: written to a temporary file beside their destination, renamed into place only
//! when complete, and removed on every exit path that can run.
//!
//! A temporary file is named `.<destination name>.wheelfix-<pid>-<n>.part` and holds an
//! exclusive `flock` for as long as its writer lives. A writer that was killed (`SIGKILL`,
//! power loss) leaves the file but not the lock, so the next run that writes the same
//! destination removes it; a live writer's file is locked and left alone. `SIGINT`, `SIGTERM`
//! and `SIGHUP` remove every temporary file of the process before it exits
//! ([`install_signal_cleanup`]). New files get `0666 & ~umask`, as pip and auditwheel give them.
//!
//! Why one file: the temporary files, their locks, the
//! registry the signal handler empties and the publishing of a set of outputs are one mechanism whose
//! invariants (nothing replaced that this run did not create, nothing left behind) hold only together.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::files::FileIdentity;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("cannot write {path}: its file name is {len} bytes, more than the {NAME_MAX} a file name may have; nothing was written", len = file_name_len(path))]
    NameTooLong { path: String },
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

/// An output renamed into another directory than the one it was made in.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not in the same directory")]
pub struct OtherDirectory(pub String);

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
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir()) {
        remove_marked_dir(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Where a file is (or would be), whatever the path's spelling: its directory's device and
/// inode (a bind mount of a directory, `in/../in/.` and a symlink are one place) and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OutputKey {
    Placed {
        dir: (u64, u64),
        name: std::ffi::OsString,
    },
    /// A directory that does not exist yet: its path.
    Unplaced(PathBuf),
}

impl OutputKey {
    pub fn of(path: &Path) -> OutputKey {
        let dir = parent_dir(path);
        let name = path.file_name().unwrap_or_default().to_os_string();
        match crate::files::identity(dir) {
            Some(dir) => OutputKey::Placed { dir, name },
            None => OutputKey::Unplaced(path.to_path_buf()),
        }
    }
}

/// Why one output of a run must not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collision {
    /// Other wheels of the run would be written to the same place (every one of them named).
    Shared { output: String, wheels: Vec<String> },
    /// It would replace another input of the run.
    ReplacesInput { output: String, input: String },
}

/// For the output of each input (`dests[i]` for `inputs[i]`; `None`: that wheel failed
/// before), the collision that forbids writing it, if any.
pub fn collisions(dests: &[Option<&Path>], inputs: &[PathBuf]) -> Vec<Option<Collision>> {
    let input_keys: Vec<OutputKey> = inputs.iter().map(|p| OutputKey::of(p)).collect();
    let mut by_dest: std::collections::BTreeMap<OutputKey, (&Path, Vec<usize>)> = Default::default();
    for (i, dest) in dests.iter().enumerate() {
        if let Some(dest) = dest {
            by_dest.entry(OutputKey::of(dest)).or_insert_with(|| (dest, Vec::new())).1.push(i);
        }
    }
    let mut found = vec![None; dests.len()];
    for (key, (dest, users)) in by_dest {
        let wheels: Vec<String> = users.iter().map(|&i| inputs[i].display().to_string()).collect();
        for &i in &users {
            let other_input = input_keys.iter().enumerate().find(|(j, input)| *j != i && **input == key);
            if users.len() > 1 {
                found[i] = Some(Collision::Shared { output: dest.display().to_string(), wheels: wheels.clone() });
            } else if let Some((j, _)) = other_input {
                found[i] = Some(Collision::ReplacesInput {
                    output: dest.display().to_string(),
                    input: inputs[j].display().to_string(),
                });
            }
        }
    }
    found
}

/// Remove a directory wheelfix wrote, its [`DIR_MARKER`] last: a run killed halfway through
/// leaves a directory still marked (or empty), which the next run recognises and removes, never
/// an unmarked one that it must leave alone.
fn remove_marked_dir(dir: &Path) {
    // A link at a temporary name is removed as a link: what it points at is not ours.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        let _ = std::fs::remove_file(dir);
        return;
    }
    // On a signal the run's other threads go on for a moment, and may still rename a finished
    // file into the directory: it is emptied again until nothing but the marker is left.
    for _ in 0..100 {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut removed_any = false;
        for entry in entries.flatten() {
            if entry.file_name() == DIR_MARKER {
                continue;
            }
            removed_any = true;
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        if !removed_any {
            let _ = std::fs::remove_file(dir.join(DIR_MARKER));
            if std::fs::remove_dir(dir).is_ok() {
                return;
            }
            // Something arrived after the marker went: mark it again, so that it stays ours.
            let _ =
                std::fs::write(dir.join(DIR_MARKER), b"written by wheelfix; a later run may replace this directory\n");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
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
        check_name_length(dest)?;
        let dir = parent_dir(dest);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        remove_leftovers(dir, &name, Leftover::File);
        let (path, lock) = create_temporary(dir, &name, |path| {
            let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o666).open(path)?;
            lock_exclusive(&file)?;
            Ok(file)
        })?;
        Ok(TempOutput { path, dest: dest.to_path_buf(), lock, done: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Make the file become `dest` instead, in the same directory (the output's name became
    /// known after the file was started), first removing what killed runs left for it.
    pub fn retarget(&mut self, dest: &Path) -> Result<(), OutputError> {
        check_name_length(dest)?;
        if parent_dir(dest) != parent_dir(&self.dest) {
            return Err(self.io_err(io::Error::other(OtherDirectory(dest.display().to_string()))));
        }
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        remove_leftovers(parent_dir(dest), &name, Leftover::File);
        self.dest = dest.to_path_buf();
        Ok(())
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

/// Move a set of finished files (`(staged, destination)`, each pair in one directory's file
/// system) into place together: first every destination is checked (an existing file with the
/// same bytes is an earlier run's identical output, left as it is; any other existing file is
/// refused, and then nothing moves); then each is renamed without replacing. A failure or a
/// signal part-way removes what this call had moved, so the set appears whole or not at all.
/// Returns the destinations.
pub fn publish_set(files: &[(PathBuf, PathBuf)]) -> Result<Vec<PathBuf>, OutputError> {
    let mut moving = Vec::new();
    for (staged, dest) in files {
        if std::fs::symlink_metadata(dest).is_ok() {
            if !same_content(staged, dest) {
                return Err(OutputError::Exists(dest.display().to_string()));
            }
            continue;
        }
        moving.push((staged, dest));
    }
    let mut moved: Vec<&PathBuf> = Vec::new();
    let undo = |moved: &[&PathBuf]| {
        for dest in moved {
            let _ = std::fs::remove_file(dest);
            unregister(dest);
        }
    };
    for (staged, dest) in moving {
        // Registered before the rename: a signal from here on removes it with the rest.
        let renamed = register(dest, || rename_no_replace(staged, dest));
        match renamed {
            Ok(()) => moved.push(dest),
            Err(e) => {
                undo(&moved);
                return Err(e);
            }
        }
    }
    for dest in &moved {
        unregister(dest);
    }
    for dir in files.iter().map(|(_, d)| parent_dir(d)).collect::<BTreeSet<_>>() {
        sync_dir(dir);
    }
    Ok(files.iter().map(|(_, d)| d.clone()).collect())
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
    /// A directory to fill and later swap in at `dest`. A `dest` that is a symbolic link
    /// (`current -> releases/v1`) is published through: the directory it points at is what
    /// the new one replaces, and the link stays as it is.
    pub fn create(dest: &Path) -> Result<TempDir, OutputError> {
        use std::os::unix::fs::DirBuilderExt;
        let dest = &through_links(dest)?;
        let dir = parent_dir(dest);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        std::fs::create_dir_all(dir).map_err(|source| OutputError::Io { path: dir.display().to_string(), source })?;
        remove_leftovers(dir, &name, Leftover::Directory);
        let (path, lock) = create_temporary(dir, &name, |path| {
            std::fs::DirBuilder::new().mode(0o777).create(path)?;
            let lock = File::open(path)?;
            lock_exclusive(&lock)?;
            std::fs::write(path.join(DIR_MARKER), b"written by wheelfix; a later run may replace this directory\n")?;
            Ok(lock)
        })?;
        Ok(TempDir { path, dest: dest.to_path_buf(), _lock: lock, done: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Swap the finished directory in, in one step: an existing destination (only one an
    /// earlier run wrote, or an empty one) trades places with it (`renameat2(RENAME_EXCHANGE)`),
    /// so that at every moment the destination holds the old site or the new one, and the old
    /// one is then removed from the temporary name. A file system that cannot exchange gets two
    /// renames instead, the old site kept under a marked name until the new one is in place.
    pub fn commit(mut self) -> Result<PathBuf, OutputError> {
        let io_err = |source| OutputError::Io { path: self.dest.display().to_string(), source };
        let replacing = std::fs::symlink_metadata(&self.dest).is_ok();
        if replacing {
            if !std::fs::metadata(&self.dest).is_ok_and(|m| m.is_dir()) || !may_replace_dir(&self.dest) {
                return Err(OutputError::NotOurs(self.dest.display().to_string()));
            }
            match rename_exchange(&self.path, &self.dest) {
                Ok(()) => {
                    // The old site now lies at the temporary name, which is ours to remove.
                    self.done = true;
                    unregister(&self.path);
                    remove_marked_dir(&self.path);
                    sync_dir(parent_dir(&self.dest));
                    return Ok(self.dest.clone());
                }
                Err(e) if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)) => {
                    return Err(io_err(e));
                }
                Err(_) => {}
            }
            // No exchange here: the old site moves to a marked name first (a later run removes
            // it if this one dies in between), then the new one takes its place.
            let name = self.dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let old = parent_dir(&self.dest).join(temp_name(&name));
            std::fs::rename(&self.dest, &old).map_err(io_err)?;
            if let Err(e) = std::fs::rename(&self.path, &self.dest) {
                let _ = std::fs::rename(&old, &self.dest);
                return Err(io_err(e));
            }
            remove_marked_dir(&old);
        } else {
            rename_no_replace(&self.path, &self.dest).map_err(io_err)?;
        }
        self.done = true;
        unregister(&self.path);
        sync_dir(parent_dir(&self.dest));
        Ok(self.dest.clone())
    }
}

/// What a destination that is a symbolic link points at, followed to its end (a destination
/// that is no link is itself). A link that leads nowhere is an error naming it.
fn through_links(dest: &Path) -> Result<PathBuf, OutputError> {
    let is_link = std::fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(dest.to_path_buf());
    }
    dest.canonicalize().map_err(|source| OutputError::Io {
        path: format!("{} (a symbolic link that cannot be followed to a directory)", dest.display()),
        source,
    })
}

/// A directory wheelfix may replace: empty, or marked as written by an earlier run.
pub fn may_replace_dir(dir: &Path) -> bool {
    dir.join(DIR_MARKER).is_file() || std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.done {
            remove_marked_dir(&self.path);
            unregister(&self.path);
        }
    }
}

/// The longest file name most file systems take.
pub const NAME_MAX: usize = 255;

/// The one limit a name meets when it becomes a file: the file name's length (PEP 508 sets
/// none on a project name, and a wheel's tags may make its file name long).
fn check_name_length(dest: &Path) -> Result<(), OutputError> {
    let len = file_name_len(&dest.to_string_lossy());
    if len > NAME_MAX { Err(OutputError::NameTooLong { path: dest.display().to_string() }) } else { Ok(()) }
}

fn file_name_len(path: &str) -> usize {
    Path::new(path).file_name().map_or(0, |n| n.len())
}

/// The stem of every temporary name for the destination `name`: `.<name>`, or, for a name so
/// long that the suffix would not fit, its start and a hash of the whole (a 250-byte wheel name
/// that `wheel tags` writes must still be writable).
fn temp_stem(name: &str) -> String {
    // `.wheelfix-<pid>-<n>.part`: at most 10 + 10 + 1 + 20 + 5 bytes.
    const SUFFIX: usize = 46;
    if 1 + name.len() + SUFFIX <= NAME_MAX {
        return format!(".{name}");
    }
    use sha2::Digest;
    let hash = crate::digest::hex(&sha2::Sha256::digest(name.as_bytes())[..4]);
    let mut keep = NAME_MAX - SUFFIX - 1 - 1 - hash.len();
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!(".{}~{hash}", &name[..keep])
}

/// Make a temporary file or directory for the destination `name` in `dir` with `make`, under a
/// fresh name (trying the next one while a name exists), registered for removal on a signal.
pub fn create_temporary<T>(
    dir: &Path,
    name: &str,
    make: impl Fn(&Path) -> io::Result<T>,
) -> Result<(PathBuf, T), OutputError> {
    loop {
        let path = dir.join(temp_name(name));
        match register(&path, || make(&path)) {
            Ok(made) => return Ok((path, made)),
            Err(OutputError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A fresh temporary name for the destination `name`.
fn temp_name(name: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}.wheelfix-{}-{n}.part", temp_stem(name), std::process::id())
}

/// What a leftover of a killed run is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leftover {
    /// A temporary output file: a regular file.
    File,
    /// A temporary site: a directory holding [`DIR_MARKER`].
    Directory,
}

/// Remove what killed runs left for the destination `name` in `dir`: entries named exactly as
/// this process would name them, of the kind it makes (a regular file, or a directory that
/// holds [`DIR_MARKER`] or nothing), whose process is gone and whose lock nobody holds. Anything else, a
/// directory tree that only looks like one included, is left alone.
fn remove_leftovers(dir: &Path, name: &str, kind: Leftover) {
    let prefix = format!("{}.wheelfix-", temp_stem(name));
    for file_name in leftover_candidates(dir) {
        let Some(rest) = file_name.strip_prefix(&prefix) else { continue };
        let Some((pid, n)) = rest.strip_suffix(".part").and_then(|r| r.split_once('-')) else { continue };
        let (Ok(pid), true) = (pid.parse::<u32>(), !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let path = dir.join(&file_name);
        let Ok(metadata) = std::fs::symlink_metadata(&path) else { continue };
        let ours = match kind {
            Leftover::File => metadata.file_type().is_file(),
            // Marked, or empty (a run killed before it wrote its marker).
            Leftover::Directory => {
                metadata.file_type().is_dir()
                    && (std::fs::symlink_metadata(path.join(DIR_MARKER)).is_ok_and(|m| m.file_type().is_file())
                        || std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none()))
            }
        };
        if !ours {
            continue;
        }
        if let Ok(file) = File::open(&path)
            && try_lock_exclusive(&file)
        {
            remove_path(&path);
        }
    }
}

/// The names in `dir` that look like temporary files of some run (`….wheelfix-….part`), read
/// once per directory and process: a batch writing four thousand wheels into one directory must
/// not list it four thousand times.
fn leftover_candidates(dir: &Path) -> Vec<String> {
    static SEEN: Mutex<Option<std::collections::HashMap<PathBuf, Vec<String>>>> = Mutex::new(None);
    let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let map = seen.get_or_insert_with(Default::default);
    map.entry(key)
        .or_insert_with(|| {
            let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with('.') && n.contains(".wheelfix-") && n.ends_with(".part"))
                .collect()
        })
        .clone()
}

/// Whether a process of that id exists (one of another user counts).
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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

/// Take an exclusive lock on an open file without waiting; `false` when another process holds
/// one. The lock lasts as long as the file is open.
pub fn try_lock(file: &File) -> bool {
    try_lock_exclusive(file)
}

/// `rename` that fails with `AlreadyExists` instead of replacing `to`.
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    match renameat2(from, to, libc::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        // The file system cannot do it atomically: a hard link fails on an existing name too.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        Err(e) => Err(e),
    }
}

/// Swap two paths in one step (`renameat2(RENAME_EXCHANGE)`).
pub fn rename_exchange(a: &Path, b: &Path) -> io::Result<()> {
    renameat2(a, b, libc::RENAME_EXCHANGE)
}

/// The `renameat2` system call itself, not glibc's wrapper (glibc 2.28+): the binary then runs
/// on any glibc from 2.17 on (kernels before 3.15 answer ENOSYS, which callers handle).
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (from_c, to_c) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::syscall(libc::SYS_renameat2, libc::AT_FDCWD, from_c.as_ptr(), libc::AT_FDCWD, to_c.as_ptr(), flags)
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Make a rename durable: sync the directory that holds the new name.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_outputs_in_one_place_and_an_output_over_another_input_are_collisions() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("out")).unwrap();
        let inputs = [d.join("a.whl"), d.join("b.whl"), d.join("c.whl")];
        // `out/./x.whl` and `out/x.whl` are one place; `c`'s output is `b`'s input.
        let (x1, x2, b) = (d.join("out/./x.whl"), d.join("out/x.whl"), d.join("b.whl"));
        let found = collisions(&[Some(&x1), Some(&x2), Some(&b)], &inputs);
        for shared in &found[..2] {
            let Some(Collision::Shared { wheels, .. }) = shared else { panic!("{found:?}") };
            assert_eq!(wheels.len(), 2);
        }
        assert!(matches!(&found[2], Some(Collision::ReplacesInput { input, .. }) if input.ends_with("b.whl")));
        // A wheel that failed before has no output; the others are free.
        let y = d.join("out/y.whl");
        assert_eq!(collisions(&[None, Some(&y), None], &inputs), [None, None, None]);
    }
}
