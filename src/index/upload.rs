//! `index --upload-dir`: one directory of files to upload beside the wheels at `--base-url`,
//! shared by every site that links there (one per architecture, say), that never loses a file
//! another site still links.
//!
//! A manifest in the directory (`.wheelfix-upload.json`) records each file wheelfix put there,
//! its sha256 and the sites (by their absolute path) that link it. A run for one site adds the
//! files it links, keeps identical ones, replaces a file of another content only when no other
//! site links it (and says so), refuses when one does, and removes the files only it linked
//! and no longer does. A file it did not put there is never replaced. Runs take turns on a lock
//! file; every file is placed under a temporary name and renamed into place.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The manifest's name inside the upload directory.
pub const MANIFEST: &str = ".wheelfix-upload.json";
const LOCK: &str = ".wheelfix-upload.lock";

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("--upload-dir {dir}: {source}")]
    Io { dir: String, source: io::Error },
    #[error("--upload-dir {dir}: its manifest {MANIFEST} is unreadable ({message}); move it away to start afresh")]
    Manifest { dir: String, message: String },
    #[error(
        "--upload-dir {dir}: {name} is linked by {} with other bytes (sha256 {theirs}, this run's {ours}); it is left as it is and nothing was written. One file name can hold one content: for a build per architecture (the same names, other device code), give each index its own upload directory and base URL (Ex: --upload-dir up/gfx942 --base-url https://host/dl/gfx942/)",
        sites.join(", ")
    )]
    LinkedElsewhere { dir: String, name: String, sites: Vec<String>, theirs: String, ours: String },
    #[error(
        "--upload-dir {dir}: {name} exists with other bytes and was not put there by wheelfix; it is left as it is and nothing was written"
    )]
    NotOurs { dir: String, name: String },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    files: BTreeMap<String, ManifestEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ManifestEntry {
    sha256: String,
    sites: BTreeSet<String>,
}

/// Where an uploaded file's bytes come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file to link (or copy): a wheel.
    File(PathBuf),
    /// Bytes to write: a `.metadata` sidecar.
    Bytes(Vec<u8>),
}

/// One file a site links.
#[derive(Debug, Clone)]
pub struct Upload {
    pub name: String,
    /// Hex.
    pub sha256: String,
    pub source: Source,
}

/// An upload directory, locked for this run, with what the run will do to it.
pub struct UploadDir {
    dir: PathBuf,
    _lock: File,
    manifest: Manifest,
    site: String,
    add: Vec<Upload>,
    replace: Vec<Upload>,
    /// (name, the sha256 it was placed with): checked again before it goes.
    remove: Vec<(String, String)>,
    /// What a user should know: files replaced, removed, adopted.
    pub notes: Vec<String>,
}

impl UploadDir {
    /// Lock the directory (waiting for another run on it) and plan what `site` needs there:
    /// every conflict is found here, before anything is written.
    pub fn plan(dir: &Path, site: &Path, files: Vec<Upload>) -> Result<UploadDir, UploadError> {
        let io_err = |source| UploadError::Io { dir: dir.display().to_string(), source };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let lock = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join(LOCK));
        let lock = lock.map_err(io_err)?;
        // SAFETY: flock on a descriptor this process owns.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io_err(io::Error::last_os_error()));
        }
        let manifest = match crate::files::read_bounded(&dir.join(MANIFEST), 64 << 20) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| UploadError::Manifest { dir: dir.display().to_string(), message: e.to_string() })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Manifest::default(),
            Err(e) => return Err(UploadError::Manifest { dir: dir.display().to_string(), message: e.to_string() }),
        };
        let site = site.display().to_string();
        let (manifest, mut notes) = trusted_entries(dir, manifest);
        let mut plan = UploadDir {
            dir: dir.to_path_buf(),
            _lock: lock,
            manifest,
            site,
            add: Vec::new(),
            replace: Vec::new(),
            remove: Vec::new(),
            notes: Vec::new(),
        };
        plan.notes.append(&mut notes);
        let wanted: BTreeSet<String> = files.iter().map(|f| f.name.clone()).collect();
        for file in files {
            plan.place(file)?;
        }
        // Files only this site linked, and no longer links, go.
        let me = plan.site.clone();
        let mut stale = Vec::new();
        for (name, entry) in &mut plan.manifest.files {
            if wanted.contains(name) || !entry.sites.remove(&me) {
                continue;
            }
            if entry.sites.is_empty() {
                stale.push(name.clone());
            }
        }
        for name in stale {
            let entry = plan.manifest.files.remove(&name).expect("listed");
            match placed_by_us(&plan.dir, &name, &entry.sha256) {
                Ok(()) => {
                    plan.notes.push(format!("removed {name} from the upload directory: no index links it any more"));
                    plan.remove.push((name, entry.sha256));
                }
                Err(why) => plan
                    .notes
                    .push(format!("left {name} in the upload directory although no index links it any more: {why}")),
            }
        }
        Ok(plan)
    }

    fn place(&mut self, file: Upload) -> Result<(), UploadError> {
        let dir = self.dir.display().to_string();
        let path = self.dir.join(&file.name);
        let on_disk = std::fs::symlink_metadata(&path).is_ok();
        let me = self.site.clone();
        // The file there is the input itself (an earlier run linked it): whatever its bytes
        // now, it is what this run would put there.
        let same_file = match &file.source {
            Source::File(from) => on_disk && crate::files::identity(from) == crate::files::identity(&path),
            Source::Bytes(_) => false,
        };
        if same_file && let Some(entry) = self.manifest.files.get_mut(&file.name) {
            entry.sha256 = file.sha256;
            entry.sites.insert(me);
            return Ok(());
        }
        match self.manifest.files.get_mut(&file.name) {
            Some(entry) if on_disk && entry.sha256 == file.sha256 => {
                entry.sites.insert(me);
            }
            Some(entry) if on_disk => {
                // Replacing is removing: only a file still as this tool left it.
                if placed_by_us(&self.dir, &file.name, &entry.sha256).is_err() {
                    return Err(UploadError::NotOurs { dir, name: file.name });
                }
                let others: Vec<String> = entry.sites.iter().filter(|s| **s != me).cloned().collect();
                if !others.is_empty() {
                    return Err(UploadError::LinkedElsewhere {
                        dir,
                        name: file.name,
                        sites: others,
                        theirs: entry.sha256.clone(),
                        ours: file.sha256,
                    });
                }
                self.notes.push(format!(
                    "replaced {} in the upload directory (sha256 {} → {}): only this site linked it",
                    file.name,
                    &entry.sha256[..12.min(entry.sha256.len())],
                    &file.sha256[..12.min(file.sha256.len())]
                ));
                *entry = ManifestEntry { sha256: file.sha256.clone(), sites: [me].into() };
                self.replace.push(file);
            }
            _ if on_disk => {
                // Not ours: identical bytes are adopted, anything else is left alone.
                let theirs = crate::wheel::digest::file_sha256_hex(&path).unwrap_or_default();
                if theirs != file.sha256 {
                    return Err(UploadError::NotOurs { dir, name: file.name });
                }
                self.manifest.files.insert(file.name, ManifestEntry { sha256: file.sha256, sites: [me].into() });
            }
            _ => {
                self.manifest
                    .files
                    .insert(file.name.clone(), ManifestEntry { sha256: file.sha256.clone(), sites: [me].into() });
                self.add.push(file);
            }
        }
        Ok(())
    }

    /// Put the new files in place (each under a temporary name, renamed without replacing),
    /// replace this site's own earlier files, and write the manifest. Stale files stay until
    /// [`UploadDir::finish`], after the site that linked them was swapped out.
    pub fn apply(&mut self) -> Result<(), UploadError> {
        let io_err = |source| UploadError::Io { dir: self.dir.display().to_string(), source };
        for file in &self.add {
            let temp = self.staged(file).map_err(io_err)?;
            let placed = crate::output::rename_no_replace(&temp, &self.dir.join(&file.name));
            crate::output::unregister(&temp);
            if let Err(e) = placed {
                let _ = std::fs::remove_file(&temp);
                return Err(io_err(e));
            }
        }
        for file in &self.replace {
            let temp = self.staged(file).map_err(io_err)?;
            let placed = std::fs::rename(&temp, self.dir.join(&file.name));
            crate::output::unregister(&temp);
            if let Err(e) = placed {
                let _ = std::fs::remove_file(&temp);
                return Err(io_err(e));
            }
        }
        let text = serde_json::to_string_pretty(&self.manifest).expect("serialises") + "\n";
        let temp = self
            .staged(&Upload { name: MANIFEST.into(), sha256: String::new(), source: Source::Bytes(text.into_bytes()) })
            .map_err(io_err)?;
        let placed = std::fs::rename(&temp, self.dir.join(MANIFEST));
        crate::output::unregister(&temp);
        placed.map_err(io_err)?;
        crate::output::sync_dir(&self.dir);
        Ok(())
    }

    /// Remove the files no site links any more (each checked again: still a regular file of
    /// the bytes this tool placed).
    pub fn finish(self) {
        for (name, sha256) in &self.remove {
            if placed_by_us(&self.dir, name, sha256).is_ok() {
                let _ = std::fs::remove_file(self.dir.join(name));
            }
        }
    }

    /// The file's bytes under a fresh temporary name in the directory (removed by a signal).
    fn staged(&self, file: &Upload) -> io::Result<PathBuf> {
        let made = crate::output::create_temporary(&self.dir, &file.name, |temp| match &file.source {
            Source::File(from) => wheelfix_base::files::link_or_copy(from, temp),
            Source::Bytes(bytes) => wheelfix_base::files::write_new_file(temp, bytes),
        });
        made.map(|(temp, ())| temp).map_err(|e| io::Error::other(e.to_string()))
    }
}

/// The manifest's entries that may name a file this tool placed: plain names of files directly
/// in the directory, never the manifest or the lock. The manifest is data anyone could have
/// edited, so every other entry is dropped from it with a note, and its file left alone.
fn trusted_entries(dir: &Path, mut manifest: Manifest) -> (Manifest, Vec<String>) {
    let mut notes = Vec::new();
    manifest.files.retain(|name, _| {
        let plain = crate::files::is_plain_file_name(name) && name != MANIFEST && name != LOCK;
        if !plain {
            notes.push(format!(
                "{}: the manifest lists {name:?}, which is not a plain file name in the directory; the entry is dropped and nothing it names is touched",
                dir.display()
            ));
        }
        plain
    });
    (manifest, notes)
}

/// A file this tool placed and that is still as it left it: a regular file (not a link, not a
/// directory) directly in `dir` whose bytes have the recorded sha256.
fn placed_by_us(dir: &Path, name: &str, sha256: &str) -> Result<(), NotAsPlaced> {
    let path = dir.join(name);
    if !std::fs::symlink_metadata(&path)?.file_type().is_file() {
        return Err(NotAsPlaced::NotAFile);
    }
    let now = crate::wheel::digest::file_sha256_hex(&path)?;
    if now != sha256 {
        return Err(NotAsPlaced::Changed(now[..12.min(now.len())].to_string()));
    }
    Ok(())
}

/// Why a file of the upload directory is not as wheelfix placed it.
#[derive(Debug, thiserror::Error)]
enum NotAsPlaced {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("it is not a regular file")]
    NotAFile,
    #[error("its bytes changed since wheelfix placed it (sha256 {0} now)")]
    Changed(String),
}
