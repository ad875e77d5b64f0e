//! `wheelfix lddtree`: the dependency tree of one ELF file, or of one member of a wheel, as the
//! loader resolves it, with the directory each library was found in and why that directory was
//! searched (whose RPATH or RUNPATH, which environment variable, the system's list).
//!
//! The search order is the one [`super::linkage`] follows (glibc's loader). A wheel member's
//! `$ORIGIN` entries are resolved among the wheel's own files, at their install paths; a library
//! already found keeps its first resolution for the whole tree, as in a process.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::linkage::{LibrarySearch, expand_origin, is_origin_relative, normalize};
use crate::elf::ElfFacts;
use crate::elf::header::ElfIdent;

/// One library of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct Library {
    /// Where it resolved: a file on this machine, or `wheel:<install path>` for a wheel member.
    pub path: Option<String>,
    /// The directory it was found in.
    pub found_in: Option<String>,
    /// Why that directory was searched. Ex) `RUNPATH of pkg/_ext.so`, `LD_LIBRARY_PATH`, `system`
    pub source: Option<String>,
    /// Its own DT_NEEDED entries, in order.
    pub needed: Vec<String>,
}

/// The whole tree: the root's facts and every library reached from it.
#[derive(Debug, Clone, Serialize)]
pub struct Tree {
    pub file: String,
    pub interpreter: Option<String>,
    pub rpath: Vec<String>,
    pub runpath: Vec<String>,
    pub needed: Vec<String>,
    /// Soname → where it resolved, once per soname.
    pub libs: BTreeMap<String, Library>,
}

/// The files of a wheel, by install path, for a member's tree.
pub struct WheelFiles<'a> {
    pub by_install_path: HashMap<String, &'a ElfFacts>,
}

/// A search directory: in the wheel (an install path) or on this machine.
#[derive(Debug, Clone)]
enum Dir {
    Wheel(String),
    Disk(PathBuf),
}

/// One loaded object: its facts and its search entries, `$ORIGIN` expanded.
struct Object {
    facts: ElfFacts,
    rpath: Vec<Dir>,
    runpath: Vec<Dir>,
    display: String,
}

fn object(facts: ElfFacts, origin: &Dir, display: String) -> Object {
    let expand = |entries: &[String]| -> Vec<Dir> {
        entries
            .iter()
            .filter_map(|e| match origin {
                Dir::Wheel(dir) if is_origin_relative(e) => normalize(&expand_origin(e, dir)).map(Dir::Wheel),
                Dir::Disk(dir) => Some(Dir::Disk(PathBuf::from(expand_origin(e, &dir.display().to_string())))),
                Dir::Wheel(_) => Some(Dir::Disk(PathBuf::from(e))),
            })
            .collect()
    };
    Object { rpath: expand(&facts.rpath), runpath: expand(&facts.runpath), facts, display }
}

fn parent(path: &str) -> String {
    path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default()
}

/// The tree of a file on disk.
pub fn of_file(path: &Path, search: &LibrarySearch) -> Result<Tree, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let facts = ElfFacts::parse(&data).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf())).unwrap_or_default();
    let root = object(facts, &Dir::Disk(dir), path.display().to_string());
    Ok(build(root, path.display().to_string(), search, None))
}

/// The tree of a wheel member, installed at `install_path`.
pub fn of_member(install_path: &str, facts: &ElfFacts, files: &WheelFiles<'_>, search: &LibrarySearch) -> Tree {
    let root = object(facts.clone(), &Dir::Wheel(parent(install_path)), install_path.to_string());
    build(root, install_path.to_string(), search, Some(files))
}

fn build(root: Object, file: String, search: &LibrarySearch, wheel: Option<&WheelFiles<'_>>) -> Tree {
    let want = root.facts.ident();
    let mut tree = Tree {
        file,
        interpreter: root.facts.interpreter.clone(),
        rpath: root.facts.rpath.clone(),
        runpath: root.facts.runpath.clone(),
        needed: root.facts.needed.clone(),
        libs: BTreeMap::new(),
    };
    let mut objects = vec![root];
    // Breadth first, as the loader loads: (object index, its loaders' indices).
    let mut queue: std::collections::VecDeque<(usize, Vec<usize>)> = [(0, Vec::new())].into();
    while let Some((index, loaders)) = queue.pop_front() {
        let dirs = directories(&objects, index, &loaders, search);
        let needed = objects[index].facts.needed.clone();
        for soname in &needed {
            if tree.libs.contains_key(soname) || super::linkage::is_loader(soname) {
                continue;
            }
            let found =
                dirs.iter().find_map(|(dir, source)| locate(soname, dir, wheel, &want).map(|f| (f, dir, source)));
            let Some((found, dir, source)) = found else {
                tree.libs
                    .insert(soname.clone(), Library { path: None, found_in: None, source: None, needed: Vec::new() });
                continue;
            };
            let (display, found_in) = match dir {
                Dir::Wheel(d) => (format!("wheel:{}", join(d, soname)), format!("wheel:{d}")),
                Dir::Disk(d) => (d.join(soname).display().to_string(), d.display().to_string()),
            };
            let library = Library {
                path: Some(display.clone()),
                found_in: Some(found_in),
                source: Some(source.clone()),
                needed: found.0.needed.clone(),
            };
            tree.libs.insert(soname.clone(), library);
            objects.push(object(found.0, &found.1, display));
            let mut chain = loaders.clone();
            chain.push(index);
            queue.push_back((objects.len() - 1, chain));
        }
    }
    tree
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// The facts of `soname` in `dir` and its directory as an origin, if it is there and fits.
fn locate(soname: &str, dir: &Dir, wheel: Option<&WheelFiles<'_>>, want: &ElfIdent) -> Option<(ElfFacts, Dir)> {
    match dir {
        Dir::Wheel(d) => {
            let facts = wheel?.by_install_path.get(&join(d, soname))?;
            (facts.ident() == *want).then(|| ((*facts).clone(), Dir::Wheel(d.clone())))
        }
        Dir::Disk(d) => {
            let path = d.join(soname);
            if ElfIdent::of_file(&path).is_none_or(|k| k != *want) {
                return None;
            }
            let facts = ElfFacts::parse(&std::fs::read(&path).ok()?).ok()?;
            let real = path.canonicalize().ok()?;
            Some((facts, Dir::Disk(real.parent()?.to_path_buf())))
        }
    }
}

/// The loader's directories for a DT_NEEDED entry of `objects[index]`, each with its reason.
fn directories(objects: &[Object], index: usize, loaders: &[usize], search: &LibrarySearch) -> Vec<(Dir, String)> {
    let object = &objects[index];
    let mut dirs = Vec::new();
    if object.runpath.is_empty() {
        dirs.extend(object.rpath.iter().map(|d| (d.clone(), format!("RPATH of {}", object.display))));
        for &l in loaders.iter().rev() {
            let loader = &objects[l];
            if loader.runpath.is_empty() {
                dirs.extend(loader.rpath.iter().map(|d| (d.clone(), format!("RPATH of {}", loader.display))));
            }
        }
    }
    dirs.extend(search.extra_dirs.iter().map(|d| (Dir::Disk(d.clone()), "AUDITWHEEL_LD_LIBRARY_PATH".to_string())));
    dirs.extend(search.env_dirs.iter().map(|d| (Dir::Disk(d.clone()), "LD_LIBRARY_PATH".to_string())));
    dirs.extend(object.runpath.iter().map(|d| (d.clone(), format!("RUNPATH of {}", object.display))));
    dirs.extend(search.system_dirs.iter().map(|d| (Dir::Disk(d.clone()), "system".to_string())));
    dirs
}

impl Tree {
    /// The tree as indented text: each library under the first object that needed it.
    pub fn to_text(&self) -> String {
        let mut out = self.file.clone();
        if let Some(interp) = &self.interpreter {
            out.push_str(&format!(" (interpreter {interp})"));
        }
        out.push('\n');
        let mut shown = std::collections::HashSet::new();
        self.write_children(&self.needed, 1, &mut shown, &mut out);
        out
    }

    fn write_children(
        &self,
        needed: &[String],
        depth: usize,
        shown: &mut std::collections::HashSet<String>,
        out: &mut String,
    ) {
        for soname in needed {
            let indent = "    ".repeat(depth);
            let Some(lib) = self.libs.get(soname) else {
                out.push_str(&format!("{indent}{soname} (the loader)\n"));
                continue;
            };
            if !shown.insert(soname.clone()) {
                out.push_str(&format!("{indent}{soname} (already loaded)\n"));
                continue;
            }
            match (&lib.path, &lib.source) {
                (Some(path), Some(source)) => out.push_str(&format!("{indent}{soname} => {path} ({source})\n")),
                _ => out.push_str(&format!("{indent}{soname} => not found\n")),
            }
            self.write_children(&lib.needed, depth + 1, shown, out);
        }
    }
}
