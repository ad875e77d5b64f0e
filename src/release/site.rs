//! `wheelfix site`: several architecture indexes (each written by `index`) gathered into one
//! directory to publish, `public/<name>/` per index, with a landing page at its root. The
//! indexes are read, never changed: their files are hard-linked (or copied) into a directory
//! built beside the destination and swapped in whole, as `index` does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::wheel::output::DIR_MARKER;

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
    Output(#[from] crate::wheel::output::OutputError),
}

impl SiteError {
    pub fn is_usage(&self) -> bool {
        matches!(self, SiteError::SameName(_) | SiteError::Missing(_) | SiteError::Overlap { .. })
    }
}

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
        let name =
            super::index::resolved(dir).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !names.insert(name.clone()) {
            return Err(SiteError::SameName(name));
        }
        let json = dir.join("release.json");
        let release_json = match std::fs::read(&json) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SiteError::NotAnIndex(dir.display().to_string()));
            }
            Err(source) => return Err(SiteError::Read { path: json.display().to_string(), source }),
        };
        out.push(Member { dir: dir.clone(), name, release_json });
    }
    super::index::refuse_overlap(dirs, output).map_err(|e| match e {
        super::index::IndexError::Overlap { output, input, relation } => SiteError::Overlap { output, input, relation },
        other => SiteError::Missing(other.to_string()),
    })?;
    Ok(out)
}

/// Write the site: every member's files under `<output>/<name>/` except those `pages` replaces,
/// then `pages` ((path relative to the output, bytes): the landing page, each index's page
/// rendered for its new place).
pub fn build(members: &[Member], output: &Path, pages: &[(PathBuf, Vec<u8>)]) -> Result<PathBuf, SiteError> {
    let temp = crate::wheel::output::TempDir::create(output)?;
    let replaced: BTreeSet<&Path> = pages.iter().map(|(p, _)| p.as_path()).collect();
    for m in members {
        copy_tree(&m.dir, &temp.path().join(&m.name), Path::new(&m.name), &replaced)?;
    }
    for (path, bytes) in pages {
        let target = temp.path().join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| SiteError::Write { path: parent.display().to_string(), source })?;
        }
        super::write_new_file(&target, bytes)
            .map_err(|source| SiteError::Write { path: target.display().to_string(), source })?;
    }
    Ok(temp.commit()?)
}

/// Link (or copy) the files under `from` into `to`; `rel` is `to` relative to the site's root,
/// for `replaced`. The marker of a wheelfix output directory stays behind.
fn copy_tree(from: &Path, to: &Path, rel: &Path, replaced: &BTreeSet<&Path>) -> Result<(), SiteError> {
    std::fs::create_dir_all(to).map_err(|source| SiteError::Write { path: to.display().to_string(), source })?;
    let read = |source| SiteError::Read { path: from.display().to_string(), source };
    let mut entries: Vec<_> = std::fs::read_dir(from).map_err(read)?.collect::<Result<_, _>>().map_err(read)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let (source, target, rel) = (entry.path(), to.join(&name), rel.join(&name));
        if name == DIR_MARKER || replaced.contains(rel.as_path()) {
            continue;
        }
        let kind = std::fs::metadata(&source)
            .map_err(|e| SiteError::Read { path: source.display().to_string(), source: e })?;
        if kind.is_dir() {
            copy_tree(&source, &target, &rel, replaced)?;
        } else {
            super::link_or_copy(&source, &target)
                .map_err(|source| SiteError::Write { path: target.display().to_string(), source })?;
        }
    }
    Ok(())
}
