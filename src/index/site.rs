//! `wheelfix site`: several architecture indexes (each written by `index`) gathered into one
//! directory to publish, `public/<name>/` per index, with a landing page at its root. The
//! indexes are read, never changed: their files are hard-linked (or copied) into a directory
//! built beside the destination and swapped in whole, as `index` does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::output::DIR_MARKER;

#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("{0} is not an index written by `wheelfix index` (it has no release.json): run `wheelfix index -o {0} …`")]
    NotAnIndex(String),
    #[error("two indexes are named {0}: each becomes `<output>/{0}/`, so their directory names must differ")]
    SameName(String),
    #[error("no such directory: {0}")]
    Missing(String),
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error(
        "the output directory {output} {relation} the input {input}: site never changes its inputs, so it must be written elsewhere"
    )]
    Overlap { output: String, input: String, relation: &'static str },
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
}

impl SiteError {
    pub fn is_usage(&self) -> bool {
        matches!(self, SiteError::SameName(_) | SiteError::Missing(_) | SiteError::Overlap { .. })
    }
}

/// The largest `release.json` read: a page of tens of thousands of files is a few MB.
const RELEASE_JSON_MAX: u64 = 64 << 20;

/// One index of the site: its directory and the name it gets (its directory's name).
pub struct Member {
    pub dir: PathBuf,
    pub name: String,
    /// Its `release.json`, as `index` wrote it.
    pub release_json: Vec<u8>,
}

/// The indexes, read: each has a `release.json`, and their names differ.
pub fn members(dirs: &[PathBuf], output: &Path) -> Result<Vec<Member>, SiteError> {
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(SiteError::Missing(dir.display().to_string()));
        }
        let name = super::resolved(dir).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !names.insert(name.clone()) {
            return Err(SiteError::SameName(name));
        }
        let json = dir.join("release.json");
        // A page's data is small; a FIFO or a device behind the name is an error, not a hang.
        let release_json = match crate::files::read_bounded(&json, RELEASE_JSON_MAX) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SiteError::NotAnIndex(dir.display().to_string()));
            }
            Err(source) => return Err(SiteError::Read { path: json.display().to_string(), source }),
        };
        out.push(Member { dir: dir.clone(), name, release_json });
    }
    super::refuse_overlap(dirs, output).map_err(|e| match e {
        super::IndexError::Overlap { output, input, relation } => SiteError::Overlap { output, input, relation },
        other => SiteError::Missing(other.to_string()),
    })?;
    Ok(out)
}

/// Write the site: every member's files under `<output>/<name>/` except those `pages` replaces,
/// then `pages` ((path relative to the output, bytes): the landing page, each index's page
/// rendered for its new place).
pub fn build(members: &[Member], output: &Path, pages: &[(PathBuf, Vec<u8>)]) -> Result<Built, SiteError> {
    use std::os::unix::fs::MetadataExt;
    let temp = crate::output::TempDir::create(output)?;
    let replaced: BTreeSet<&Path> = pages.iter().map(|(p, _)| p.as_path()).collect();
    let mut left_out = Vec::new();
    for m in members {
        let root = std::fs::metadata(&m.dir)
            .map_err(|source| SiteError::Read { path: m.dir.display().to_string(), source })?;
        let mut walk = Walk {
            device: root.dev(),
            seen: BTreeSet::from([(root.dev(), root.ino())]),
            replaced: &replaced,
            left_out: &mut left_out,
        };
        walk.copy_tree(&m.dir, &temp.path().join(&m.name), Path::new(&m.name))?;
    }
    for (path, bytes) in pages {
        let target = temp.path().join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| SiteError::Write { path: parent.display().to_string(), source })?;
        }
        wheelfix_base::files::write_new_file(&target, bytes)
            .map_err(|source| SiteError::Write { path: target.display().to_string(), source })?;
    }
    Ok(Built { output: temp.commit()?, left_out })
}

/// What `site` wrote, and what of the indexes it did not publish.
pub struct Built {
    pub output: PathBuf,
    /// Entries of an index that are not regular files or directories inside it (symbolic
    /// links, devices, FIFOs, other file systems), each with why. Ex) `gfx942/leak: a symbolic link`
    pub left_out: Vec<String>,
}

/// A walk of one index: only what lies inside it is published, each directory once.
struct Walk<'a> {
    /// The index's file system: a mount inside it is not the index.
    device: u64,
    /// Directories walked, by device and inode.
    seen: BTreeSet<(u64, u64)>,
    replaced: &'a BTreeSet<&'a Path>,
    left_out: &'a mut Vec<String>,
}

impl Walk<'_> {
    /// Link (or copy) the regular files under `from` into `to`; `rel` is `to` relative to the
    /// site's root, for `replaced`. The marker of a wheelfix output directory stays behind, and
    /// nothing is followed out of the index: links are never followed.
    fn copy_tree(&mut self, from: &Path, to: &Path, rel: &Path) -> Result<(), SiteError> {
        use std::os::unix::fs::MetadataExt;
        std::fs::create_dir_all(to).map_err(|source| SiteError::Write { path: to.display().to_string(), source })?;
        let read = |source| SiteError::Read { path: from.display().to_string(), source };
        let mut entries: Vec<_> = std::fs::read_dir(from).map_err(read)?.collect::<Result<_, _>>().map_err(read)?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            let (source, target, rel) = (entry.path(), to.join(&name), rel.join(&name));
            if name == DIR_MARKER || self.replaced.contains(rel.as_path()) {
                continue;
            }
            // Not followed: a link's own metadata.
            let meta = std::fs::symlink_metadata(&source)
                .map_err(|e| SiteError::Read { path: source.display().to_string(), source: e })?;
            let kind = meta.file_type();
            let why = if kind.is_symlink() {
                Some("a symbolic link (only regular files inside the index are published)")
            } else if meta.dev() != self.device {
                Some("on another file system than the index")
            } else if !kind.is_dir() && !kind.is_file() {
                Some("not a regular file or directory")
            } else if kind.is_dir() && !self.seen.insert((meta.dev(), meta.ino())) {
                Some("a directory already published")
            } else {
                None
            };
            if let Some(why) = why {
                self.left_out.push(format!("{}: {why}", rel.display()));
                continue;
            }
            if kind.is_dir() {
                self.copy_tree(&source, &target, &rel)?;
            } else {
                wheelfix_base::files::link_or_copy(&source, &target)
                    .map_err(|source| SiteError::Write { path: target.display().to_string(), source })?;
            }
        }
        Ok(())
    }
}
