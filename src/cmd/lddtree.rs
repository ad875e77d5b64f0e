//! `lddtree`: the dependency tree of an ELF file, or of the host binaries of a wheel or of an
//! installed directory.

use std::path::{Path, PathBuf};

use super::Output;
use crate::policy::judgement::Claims;
use crate::settings::{Flags, Settings};
use crate::wheel::Wheel;
use crate::{analysis, elf, progress};

/// `lddtree`'s request.
#[derive(Debug, Clone)]
pub struct LddtreeRequest {
    /// An ELF file, or a wheel.
    pub file: PathBuf,
    /// The wheel member to show (default: every host binary).
    pub member: Option<String>,
    /// `--ldpaths`.
    pub ldpaths: Option<String>,
    pub json: bool,
}

/// Run `lddtree`: exit 1 when a library is not found or the file cannot be read. Only the
/// library search matters here, which no configuration key sets: no file is read.
pub fn run(request: &LddtreeRequest) -> Output {
    let flags = Flags { ldpaths: request.ldpaths.clone(), ..Flags::default() };
    let settings = match Settings::resolve(&flags, &super::no_config()) {
        Ok(settings) => settings,
        Err(e) => return Output::usage(e),
    };
    match lddtree(&request.file, request.member.as_deref(), &settings) {
        Ok(trees) => {
            let stdout = if request.json {
                crate::report::release::lddtree_json(&trees)
            } else {
                crate::report::release::lddtree_text(&trees)
            };
            let missing = trees.iter().flat_map(|t| t.libs.values()).filter(|l| l.path.is_none()).count();
            Output { stdout, stderr: Vec::new(), code: u8::from(missing > 0) }
        }
        Err(e) => Output::failure(e),
    }
}

/// `lddtree`: the dependency tree of a file, or of the host binaries of a wheel (`member`: only
/// that one).
pub fn lddtree(
    path: &Path,
    member: Option<&str>,
    settings: &Settings,
) -> Result<Vec<analysis::lddtree::Tree>, LddtreeError> {
    let search = &settings.analyze.search;
    if path.is_dir() {
        return of_directory(path, member, search);
    }
    let is_wheel = path.extension().is_some_and(|e| e == "whl");
    if !is_wheel {
        if member.is_some() {
            return Err(LddtreeError::MemberOfFile(path.to_path_buf()));
        }
        use crate::elf::header::ForeignFormat;
        use analysis::installed::{FileKind, file_kind};
        if file_kind(path) == FileKind::Foreign(ForeignFormat::Pe) {
            return Ok(vec![analysis::lddtree::of_pe_file(path)?]);
        }
        return Ok(vec![analysis::lddtree::of_file(path, search)?]);
    }
    let wheel = Wheel::open(path)?;
    let mut analysis = analysis::scan(&wheel, &settings.analyze, &progress::NoProgress)?;
    // The binaries of a wheel no policy covers are set aside, as for every other command.
    settings.policies.select(&Claims::of(&wheel), &mut analysis, None);
    let binaries: Vec<(&str, &elf::ElfFacts)> = analysis.binaries.iter().map(|b| analysis.binary(b)).collect();
    let files = analysis::lddtree::WheelFiles {
        by_install_path: binaries.iter().filter_map(|(p, f)| wheel.install_path(p).map(|i| (i, *f))).collect(),
    };
    let Some(m) = member else {
        let order: Vec<String> = binaries.iter().filter_map(|(p, _)| wheel.install_path(p)).collect();
        return Ok(analysis::lddtree::of_wheel(&files, &order, search));
    };
    let found: Vec<_> = binaries.iter().filter(|(p, _)| *p == m).collect();
    if found.is_empty() {
        return Err(LddtreeError::NoSuchBinary { wheel: wheel.filename.to_string(), member: m.to_string() });
    }
    Ok(found
        .into_iter()
        .map(|(p, f)| {
            let install = wheel.install_path(p).unwrap_or_else(|| p.to_string());
            analysis::lddtree::of_member(&install, f, &files, search)
        })
        .collect())
}

/// The trees of the host ELF files under an installed directory (`member`: only the one at that
/// path relative to it), each resolved from where it lies, as the loader would.
fn of_directory(
    dir: &Path,
    member: Option<&str>,
    search: &analysis::linkage::LibrarySearch,
) -> Result<Vec<analysis::lddtree::Tree>, LddtreeError> {
    use analysis::installed::{FileKind, file_kind, files_under};
    let files: Vec<(String, PathBuf)> = files_under(dir)?
        .into_iter()
        .filter(|(name, _)| member.is_none_or(|m| m == name))
        .filter(|(_, path)| file_kind(path) == FileKind::HostElf)
        .collect();
    if let Some(m) = member.filter(|_| files.is_empty()) {
        return Err(LddtreeError::NoSuchFile { dir: dir.to_path_buf(), member: m.to_string() });
    }
    let trees = crate::parallel::map(&files, |(_, path)| analysis::lddtree::of_file(path, search));
    Ok(trees.into_iter().collect::<Result<_, _>>()?)
}

/// Why `lddtree` shows no tree.
#[derive(Debug, thiserror::Error)]
pub enum LddtreeError {
    #[error("{}: a member can only be named inside a wheel or a directory", .0.display())]
    MemberOfFile(PathBuf),
    #[error("{wheel}: `{member}` is not an ELF host binary of the wheel")]
    NoSuchBinary { wheel: String, member: String },
    #[error("{}: `{member}` is not a host ELF file under it", dir.display())]
    NoSuchFile { dir: PathBuf, member: String },
    #[error(transparent)]
    File(#[from] analysis::lddtree::FileError),
    #[error(transparent)]
    Wheel(#[from] crate::wheel::WheelError),
    #[error(transparent)]
    Installed(#[from] analysis::installed::InstalledError),
}
