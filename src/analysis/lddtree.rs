//! `wheelfix lddtree`: the dependency tree of one ELF file, or of one member of a wheel, as the
//! loader resolves it, with the directory each library was found in and why that directory was
//! searched (whose RPATH or RUNPATH, which environment variable, the system's list).
//!
//! The search order is the one [`super::linkage`] follows (glibc's loader). A wheel member's
//! `$ORIGIN` entries are resolved among the wheel's own files, at their install paths; a library
//! already found keeps its first resolution for the whole tree, as in a process.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::linkage::{LibrarySearch, expand_origin, is_origin_relative, normalize};
use crate::elf::ElfFacts;
use crate::elf::header::ElfIdent;

/// One library of the tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// One loaded object: what the loader reads of it (not its symbols: a tree of thousands of
/// libraries holds only this much of each), its search entries `$ORIGIN` expanded.
struct Object {
    needed: Vec<String>,
    ident: ElfIdent,
    rpath: Vec<Dir>,
    runpath: Vec<Dir>,
    display: String,
}

fn object(facts: &ElfFacts, origin: &Dir, display: String) -> Object {
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
    Object {
        needed: facts.needed.clone(),
        ident: facts.ident(),
        rpath: expand(&facts.rpath),
        runpath: expand(&facts.runpath),
        display,
    }
}

fn parent(path: &str) -> String {
    path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default()
}

/// The tree of a file on disk.
pub fn of_file(path: &Path, search: &LibrarySearch) -> Result<Tree, FileError> {
    let facts = facts_of_file(path).map_err(|problem| FileError { path: path.to_path_buf(), problem })?;
    Ok(of_disk_facts(path, &facts, search))
}

/// A file on disk whose ELF facts cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    pub problem: FactsError,
}

/// Why a file's ELF facts cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Elf(#[from] crate::elf::ElfError),
    #[error("{0}")]
    Pe(String),
}

/// Windows's own DLLs, and the API sets it resolves itself: found on every Windows machine.
/// The VC++ runtime Python ships (`vcruntime140.dll`, `vcruntime140_1.dll`) is counted with them.
fn windows_provides(dll: &str) -> bool {
    const SYSTEM: &[&str] = &[
        "kernel32",
        "kernelbase",
        "ntdll",
        "user32",
        "gdi32",
        "advapi32",
        "shell32",
        "ole32",
        "oleaut32",
        "ws2_32",
        "bcrypt",
        "crypt32",
        "msvcrt",
        "ucrtbase",
        "dbghelp",
        "psapi",
        "shlwapi",
        "version",
        "setupapi",
        "winmm",
        "comdlg32",
        "secur32",
        "iphlpapi",
        "rpcrt4",
        "imm32",
        "cfgmgr32",
        "dxgi",
        "d3d12",
        "dxcore",
        "d3d11",
        "d3dcompiler_47",
        "opengl32",
        "bcryptprimitives",
        "ncrypt",
        "pdh",
        "powrprof",
        "netapi32",
        "wintrust",
        "userenv",
        "dwmapi",
        "uxtheme",
        "comctl32",
        "winhttp",
        "wininet",
        "normaliz",
        "mpr",
        "wldap32",
        "dnsapi",
        "ntdsapi",
        "shcore",
        "propsys",
        "mswsock",
        "python3",
        "vcruntime140",
        "vcruntime140_1",
    ];
    let lower = dll.to_ascii_lowercase();
    let stem = lower.strip_suffix(".dll").unwrap_or(&lower);
    lower.starts_with("api-ms-win-")
        || lower.starts_with("ext-ms-")
        || SYSTEM.contains(&stem)
        || stem.starts_with("python3")
}

/// The DLLs a Windows binary on disk imports, as Python's loader resolves an extension's
/// DLLs: from the binary's own directory (names compared without case, as Windows does), or
/// Windows's own; each found DLL's imports in turn, once per name.
pub fn of_pe_file(path: &Path) -> Result<Tree, FileError> {
    let error = |problem| FileError { path: path.to_path_buf(), problem };
    let imports_of = |file: &Path| -> Result<Vec<String>, FactsError> {
        use std::os::unix::fs::FileExt;
        let f = crate::files::open_regular(file)?;
        let len = f.metadata()?.len();
        crate::elf::pe::imports(len, &|buf, at| f.read_exact_at(buf, at)).map_err(FactsError::Pe)
    };
    let needed = imports_of(path).map_err(error)?;
    let parent = crate::output::parent_dir(path);
    let dir = parent.canonicalize().unwrap_or_else(|_| parent.to_path_buf());
    // The binary's directory first; then the `<name>.libs` directories beside it and beside its
    // parents (delvewheel's layout, which the package adds with `os.add_dll_directory`).
    let mut dirs = vec![(dir.clone(), "the DLL's directory".to_string())];
    for ancestor in dir.ancestors().take(4) {
        let Ok(entries) = std::fs::read_dir(ancestor) else { continue };
        let mut libs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && p.extension().is_some_and(|e| e == "libs"))
            .collect();
        libs.sort();
        dirs.extend(
            libs.into_iter().map(|l| (l, "a .libs directory (delvewheel's, added by the package)".to_string())),
        );
    }
    let mut beside: BTreeMap<String, (PathBuf, PathBuf, String)> = BTreeMap::new();
    for (d, why) in &dirs {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_ascii_lowercase();
            beside.entry(name).or_insert_with(|| (e.path(), d.clone(), why.clone()));
        }
    }
    let mut libs = BTreeMap::new();
    let mut pending: Vec<String> = needed.clone();
    while let Some(name) = pending.pop() {
        if libs.contains_key(&name) {
            continue;
        }
        let library = match beside.get(&name.to_ascii_lowercase()) {
            Some((file, found_in, why)) => {
                // A DLL that cannot be read is listed, found, with no imports.
                let needed = imports_of(file).unwrap_or_default();
                pending.extend(needed.iter().cloned());
                Library {
                    path: Some(file.display().to_string()),
                    found_in: Some(found_in.display().to_string()),
                    source: Some(why.clone()),
                    needed,
                }
            }
            None if windows_provides(&name) => Library {
                path: Some(format!("windows:{name}")),
                found_in: None,
                source: Some("Windows".into()),
                needed: Vec::new(),
            },
            None => Library { path: None, found_in: None, source: None, needed: Vec::new() },
        };
        libs.insert(name, library);
    }
    Ok(Tree {
        file: path.display().to_string(),
        interpreter: None,
        rpath: Vec::new(),
        runpath: Vec::new(),
        needed,
        libs,
    })
}

/// The tree of a file on disk whose facts were read already.
pub fn of_disk_facts(path: &Path, facts: &ElfFacts, search: &LibrarySearch) -> Tree {
    let dir = path.parent().map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf())).unwrap_or_default();
    let root = object(facts, &Dir::Disk(dir), path.display().to_string());
    build(root, facts, path.display().to_string(), search, None)
}

/// The ELF facts of a file on disk, read by position: only the ranges the parser needs, so a
/// library of several GB costs no more memory than a small one.
pub fn facts_of_file(path: &Path) -> Result<ElfFacts, FactsError> {
    use std::os::unix::fs::FileExt;
    let file = crate::files::open_regular(path)?;
    let len = file.metadata()?.len();
    Ok(ElfFacts::parse_by_ranges(len, &|buf, at| file.read_exact_at(buf, at))?)
}

/// The tree of a wheel member, installed at `install_path`.
pub fn of_member(install_path: &str, facts: &ElfFacts, files: &WheelFiles<'_>, search: &LibrarySearch) -> Tree {
    let root = object(facts, &Dir::Wheel(parent(install_path)), install_path.to_string());
    build(root, facts, install_path.to_string(), search, Some(files))
}

/// The binaries of a wheel whose trees show all of it: those no other binary of the wheel names
/// in its DT_NEEDED (by file name), then any not reached from those (a loop of libraries).
/// A chain of two thousand libraries is one tree, not two thousand.
pub fn of_wheel(files: &WheelFiles<'_>, order: &[String], search: &LibrarySearch) -> Vec<Tree> {
    let needed_names: std::collections::HashSet<&str> =
        files.by_install_path.values().flat_map(|f| f.needed.iter().map(String::as_str)).collect();
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let mut trees = Vec::new();
    let mut reached: std::collections::HashSet<String> = std::collections::HashSet::new();
    let roots = order.iter().filter(|p| !needed_names.contains(name(p).as_str()));
    let rest = order.iter().filter(|p| needed_names.contains(name(p).as_str()));
    for path in roots.chain(rest) {
        if reached.contains(path) {
            continue;
        }
        let Some(facts) = files.by_install_path.get(path) else { continue };
        let tree = of_member(path, facts, files, search);
        reached.insert(path.clone());
        reached
            .extend(tree.libs.values().filter_map(|l| l.path.as_deref()?.strip_prefix("wheel:")).map(str::to_string));
        trees.push(tree);
    }
    trees
}

fn build(root: Object, facts: &ElfFacts, file: String, search: &LibrarySearch, wheel: Option<&WheelFiles<'_>>) -> Tree {
    let want = root.ident;
    let mut tree = Tree {
        file,
        interpreter: facts.interpreter.clone(),
        rpath: facts.rpath.clone(),
        runpath: facts.runpath.clone(),
        needed: facts.needed.clone(),
        libs: BTreeMap::new(),
    };
    let mut objects = vec![root];
    // Breadth first, as the loader loads: (object index, its loaders' indices).
    let mut queue: std::collections::VecDeque<(usize, std::rc::Rc<Vec<usize>>)> = [(0, Default::default())].into();
    while let Some((index, loaders)) = queue.pop_front() {
        let dirs = directories(&objects, index, &loaders, search);
        let needed = objects[index].needed.clone();
        for soname in &needed {
            if tree.libs.contains_key(soname) || super::linkage::is_loader(soname) {
                continue;
            }
            // A name with a slash is a path: opened as it is, never searched for.
            let found = if soname.contains('/') {
                let path = Path::new(soname);
                let dir = Dir::Disk(path.parent().map(Path::to_path_buf).unwrap_or_default());
                let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                (path.is_absolute())
                    .then(|| locate(&file, &dir, None, &want).map(|f| (f, &dir, "path".to_string())))
                    .flatten()
                    .map(|(f, d, s)| (f, d.clone(), s))
            } else {
                dirs.iter().find_map(|(dir, source)| {
                    locate(soname, dir, wheel, &want).map(|f| (f, dir.clone(), source.clone()))
                })
            };
            let Some(((lib_facts, origin), dir, source)) = found else {
                tree.libs
                    .insert(soname.clone(), Library { path: None, found_in: None, source: None, needed: Vec::new() });
                continue;
            };
            let base = soname.rsplit('/').next().unwrap_or(soname);
            let (display, found_in) = match &dir {
                Dir::Wheel(d) => (format!("wheel:{}", crate::wheel::join_path(d, base)), format!("wheel:{d}")),
                Dir::Disk(d) => (d.join(base).display().to_string(), d.display().to_string()),
            };
            let library = Library {
                path: Some(display.clone()),
                found_in: Some(found_in),
                source: Some(source),
                needed: lib_facts.needed.clone(),
            };
            tree.libs.insert(soname.clone(), library);
            objects.push(object(&lib_facts, &origin, display));
            let mut chain = (*loaders).clone();
            chain.push(index);
            queue.push_back((objects.len() - 1, std::rc::Rc::new(chain)));
        }
    }
    tree
}

/// The facts of `soname` in `dir` and its directory as an origin, if it is there and fits.
fn locate<'w>(
    soname: &str,
    dir: &Dir,
    wheel: Option<&WheelFiles<'w>>,
    want: &ElfIdent,
) -> Option<(std::borrow::Cow<'w, ElfFacts>, Dir)> {
    match dir {
        Dir::Wheel(d) => {
            let facts: &'w ElfFacts = wheel?.by_install_path.get(&crate::wheel::join_path(d, soname))?;
            (facts.ident() == *want).then(|| (std::borrow::Cow::Borrowed(facts), Dir::Wheel(d.clone())))
        }
        Dir::Disk(d) => {
            let path = d.join(soname);
            if ElfIdent::of_file(&path).is_none_or(|k| k != *want) {
                return None;
            }
            let facts = facts_of_file(&path).ok()?;
            let real = path.canonicalize().ok()?;
            Some((std::borrow::Cow::Owned(facts), Dir::Disk(real.parent()?.to_path_buf())))
        }
    }
}

/// The loader's directories for a DT_NEEDED entry of `objects[index]`, each with its reason
/// ([`super::linkage::search_order`]).
fn directories(objects: &[Object], index: usize, loaders: &[usize], search: &LibrarySearch) -> Vec<(Dir, String)> {
    use super::linkage::{SearchPaths, Searched, search_order};
    // The nearest loader first.
    let chain: Vec<usize> = loaders.iter().rev().copied().collect();
    let chain_paths: Vec<SearchPaths<'_, Dir>> =
        chain.iter().map(|&l| SearchPaths::of(&objects[l].rpath, &objects[l].runpath)).collect();
    let object = &objects[index];
    search_order(SearchPaths::of(&object.rpath, &object.runpath), &chain_paths, Some(search))
        .into_iter()
        .map(|step| match step {
            Searched::Rpath { loader: None, dir } => (dir.clone(), format!("RPATH of {}", object.display)),
            Searched::Rpath { loader: Some(i), dir } => {
                (dir.clone(), format!("RPATH of {}", objects[chain[i]].display))
            }
            Searched::Extra(d) => (Dir::Disk(d.to_path_buf()), "AUDITWHEEL_LD_LIBRARY_PATH".to_string()),
            Searched::Env(d) => (Dir::Disk(d.to_path_buf()), "LD_LIBRARY_PATH".to_string()),
            Searched::Runpath(dir) => (dir.clone(), format!("RUNPATH of {}", object.display)),
            Searched::System(d) => (Dir::Disk(d.to_path_buf()), "system".to_string()),
        })
        .collect()
}
