//! Linkage: what the host binaries need and where the loader finds it — inside the wheel
//! through `$ORIGIN` RPATH/RUNPATH entries, on this machine, or nowhere — with the closure of
//! what those libraries need in turn.
//!
//! The search follows glibc's loader. For a DT_NEEDED entry of object O, `ld.so` searches: the
//! DT_RPATH of O and of the objects that loaded it (only when O has no DT_RUNPATH),
//! `LD_LIBRARY_PATH`, O's own DT_RUNPATH, the directories of `/etc/ld.so.conf` (the cache),
//! then the default directories. auditwheel puts RUNPATH before `LD_LIBRARY_PATH` and lets the
//! top object's RUNPATH leak into indirect dependencies (auditwheel #737); wheelfix follows the
//! loader.
//!
//! Why one file: the loader's search order is one algorithm (RPATH inheritance,
//! RUNPATH, the cache, the defaults, the closure over what is found); kept in one place so that
//! it can be read against glibc's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::site::{Provider, SitePackages};
use super::{Analysis, AnalyzeOptions};
use crate::elf::ElfFacts;
use crate::elf::header::ElfIdent;
use crate::platform::Libc;
use crate::wheel::Wheel;
use crate::wheel::name::PackageName;

/// Where to look for libraries outside the wheel.
#[derive(Debug, Clone, Default)]
pub struct LibrarySearch {
    /// `AUDITWHEEL_LD_LIBRARY_PATH`: searched before `LD_LIBRARY_PATH`, kept with `--ldpaths`.
    pub extra_dirs: Vec<PathBuf>,
    /// `LD_LIBRARY_PATH` (dropped when `--ldpaths` is given, as auditwheel does).
    pub env_dirs: Vec<PathBuf>,
    /// `/etc/ld.so.conf` directories then the defaults, or `--ldpaths`.
    pub system_dirs: Vec<PathBuf>,
}

/// The search path entries of one object, `$ORIGIN` already expanded.
#[derive(Debug, Clone, Default)]
pub struct ObjectPaths {
    pub rpath: Vec<PathBuf>,
    pub runpath: Vec<PathBuf>,
}

impl LibrarySearch {
    /// The machine's search path (`ld_library_path`: `LD_LIBRARY_PATH`, as the settings read
    /// it), or `--ldpaths A:B` in place of the system part.
    pub fn from_environment(ldpaths: Option<&str>, ld_library_path: Option<&str>) -> Self {
        match ldpaths {
            Some(paths) => LibrarySearch { system_dirs: split_paths(paths), ..LibrarySearch::default() },
            None => {
                let env_dirs = ld_library_path.map(split_paths).unwrap_or_default();
                let mut system_dirs = Vec::new();
                read_ld_so_conf(Path::new("/etc/ld.so.conf"), &mut system_dirs, 0);
                for default in ["/lib64", "/usr/lib64", "/lib", "/usr/lib"] {
                    system_dirs.push(PathBuf::from(default));
                }
                dedup(&mut system_dirs);
                LibrarySearch { extra_dirs: Vec::new(), env_dirs, system_dirs }
            }
        }
    }

    /// `AUDITWHEEL_LD_LIBRARY_PATH` (colon-separated): searched before `LD_LIBRARY_PATH`, and
    /// kept with `--ldpaths`.
    pub fn set_extra_dirs(&mut self, paths: &str) {
        self.extra_dirs = split_paths(paths);
    }

    /// The directories searched for a DT_NEEDED entry of `object`, whose loaders (nearest first)
    /// are `loaders`, in the loader's order ([`search_order`]).
    pub fn directories(&self, object: &ObjectPaths, loaders: &[&ObjectPaths]) -> Vec<PathBuf> {
        let loaders: Vec<SearchPaths<'_, PathBuf>> =
            loaders.iter().map(|l| SearchPaths::of(&l.rpath, &l.runpath)).collect();
        let object = SearchPaths::of(&object.rpath, &object.runpath);
        let mut dirs: Vec<PathBuf> =
            search_order(object, &loaders, Some(self)).into_iter().map(|s| s.dir().to_path_buf()).collect();
        dedup(&mut dirs);
        dirs
    }

    /// The first `dir/soname` that exists and whose ELF header matches `want`
    /// (class, byte order, machine).
    pub fn find(&self, soname: &str, dirs: &[PathBuf], want: &ElfIdent) -> Option<PathBuf> {
        dirs.iter().map(|d| d.join(soname)).find(|candidate| ElfIdent::of_file(candidate).is_some_and(|k| k == *want))
    }
}

/// An object's own search path entries, as [`search_order`] reads them.
#[derive(Debug, Clone, Copy)]
pub struct SearchPaths<'a, D> {
    pub rpath: &'a [D],
    pub runpath: &'a [D],
}

impl<'a, D> SearchPaths<'a, D> {
    pub fn of(rpath: &'a [D], runpath: &'a [D]) -> Self {
        SearchPaths { rpath, runpath }
    }
}

/// One directory the loader searches, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched<'a, D> {
    /// A DT_RPATH entry of the object (`loader: None`) or of its loader at that index.
    Rpath { loader: Option<usize>, dir: &'a D },
    /// `AUDITWHEEL_LD_LIBRARY_PATH`.
    Extra(&'a Path),
    /// `LD_LIBRARY_PATH`.
    Env(&'a Path),
    /// A DT_RUNPATH entry of the object.
    Runpath(&'a D),
    /// `/etc/ld.so.conf` and the default directories, or `--ldpaths`.
    System(&'a Path),
}

impl<'a> Searched<'a, PathBuf> {
    pub fn dir(&self) -> &'a Path {
        match *self {
            Searched::Rpath { dir, .. } | Searched::Runpath(dir) => dir,
            Searched::Extra(d) | Searched::Env(d) | Searched::System(d) => d,
        }
    }
}

/// The loader's order (ld.so(8)) for a DT_NEEDED entry of an object whose loaders are
/// `loaders` (nearest first): the DT_RPATH of the object and then of each loader, only while the
/// object has no DT_RUNPATH (and, of a loader, only if that loader has none), then
/// `AUDITWHEEL_LD_LIBRARY_PATH` and `LD_LIBRARY_PATH`, the object's DT_RUNPATH, the system's
/// directories. Without `search`, only the objects' own entries (a search inside a wheel).
/// The one place this order is written: linkage and `lddtree` both follow it.
pub fn search_order<'a, D>(
    object: SearchPaths<'a, D>,
    loaders: &[SearchPaths<'a, D>],
    search: Option<&'a LibrarySearch>,
) -> Vec<Searched<'a, D>> {
    let mut order = Vec::new();
    if object.runpath.is_empty() {
        order.extend(object.rpath.iter().map(|dir| Searched::Rpath { loader: None, dir }));
        for (i, loader) in loaders.iter().enumerate() {
            if loader.runpath.is_empty() {
                order.extend(loader.rpath.iter().map(|dir| Searched::Rpath { loader: Some(i), dir }));
            }
        }
    }
    if let Some(search) = search {
        order.extend(search.extra_dirs.iter().map(|d| Searched::Extra(d)));
        order.extend(search.env_dirs.iter().map(|d| Searched::Env(d)));
    }
    order.extend(object.runpath.iter().map(Searched::Runpath));
    if let Some(search) = search {
        order.extend(search.system_dirs.iter().map(|d| Searched::System(d)));
    }
    order
}

pub fn split_paths(value: &str) -> Vec<PathBuf> {
    value.split(':').filter(|p| !p.is_empty()).map(PathBuf::from).collect()
}

fn dedup(dirs: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
}

/// `/etc/ld.so.conf`: one directory per line, `include GLOB` lines, `#` comments.
fn read_ld_so_conf(path: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(text) = crate::files::read_text_bounded(path, 1 << 20) else {
        return;
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(pattern) = line.strip_prefix("include").filter(|r| r.starts_with([' ', '\t'])) {
            let pattern = pattern.trim();
            let pattern = if pattern.starts_with('/') {
                PathBuf::from(pattern)
            } else {
                path.parent().unwrap_or(Path::new("/")).join(pattern)
            };
            for file in glob_files(&pattern) {
                read_ld_so_conf(&file, out, depth + 1);
            }
        } else {
            out.push(PathBuf::from(line));
        }
    }
}

/// Files matching a glob whose wildcards are only in the last component (`/etc/ld.so.conf.d/*.conf`).
fn glob_files(pattern: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (pattern.parent(), pattern.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let Ok(matcher) = globset::Glob::new(name).map(|g| g.compile_matcher()) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_str().is_some_and(|n| matcher.is_match(n)))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `$ORIGIN` / `${ORIGIN}` replaced by `origin`; other entries as they are.
pub fn expand_origin(entry: &str, origin: &str) -> String {
    entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
}

/// An RPATH/RUNPATH entry relative to the object's own directory. Ex) `$ORIGIN/../lib`
pub fn is_origin_relative(entry: &str) -> bool {
    entry.contains("$ORIGIN") || entry.contains("${ORIGIN}")
}

pub use crate::wheel::normalize_path as normalize;

/// The dynamic loader itself: every process has it.
pub fn is_loader(soname: &str) -> bool {
    soname.starts_with("ld-linux")
        || soname.starts_with("ld64.so.")
        || soname.starts_with("ld-musl-")
        || soname == "ld.so.1"
}

/// `libpython3.12.so.1.0`, `libpython2.7m.so`
pub fn is_libpython(soname: &str) -> bool {
    let Some(rest) = soname.strip_prefix("libpython") else {
        return false;
    };
    let Some((version, tail)) = rest.split_once(".so") else {
        return false;
    };
    let version = version.strip_suffix('m').unwrap_or(version);
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    version.split_once('.').is_some_and(|(a, b)| numeric(a) && numeric(b))
        && (tail.is_empty() || tail.strip_prefix('.').is_some_and(|t| t.split('.').all(numeric)))
}

/// A library some binary needs that the wheel does not contain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExternalLib {
    pub soname: String,
    /// Where it resolved on this machine, if it did.
    pub path: Option<String>,
    /// Why the environment provides it (a ROCm library, `--exclude`), if it does.
    pub excluded: Option<String>,
    /// Wheel members (or other external libraries) that need it.
    pub needed_by: BTreeSet<String>,
    /// Needed directly by a binary of the wheel (not only by another external library).
    pub direct: bool,
    /// The resolved file's own DT_NEEDED entries.
    pub needs: Vec<String>,
    /// The resolved file's `.gnu.version_r`.
    #[serde(skip)]
    pub version_needs: Vec<crate::elf::VersionNeed>,
    #[serde(skip)]
    pub x86_isa_needed: Option<u32>,
    /// `libpythonX.Y.so`: never vendored, `repair` removes the dependency.
    pub libpython: bool,
    /// The directories searched for it, in order (for the error when it is not found).
    #[serde(skip)]
    pub searched: Vec<String>,
    /// The wheel that provides it in the virtual site-packages (`--with-wheels`): a dependency.
    pub provided_by: Option<Provider>,
    /// Whether the consumer's requirements name that wheel's project (directly or through the
    /// requirements of other `--with-wheels` members).
    #[serde(skip)]
    pub declared: bool,
    /// For a library not found: a required project ships a library of that soname (a torch
    /// extension's `libc10.so`), which the loader reuses if that project loaded it first.
    #[serde(skip)]
    pub same_soname_in: Option<Provider>,
    /// For a library not found: the RPATH/RUNPATH entries that leave the wheel, where the loader
    /// will look once other wheels are installed.
    #[serde(skip)]
    pub outside: Vec<OutsideEntry>,
    /// The DT_NEEDED entry is a path (it has a `/`): the loader opens it as it is.
    #[serde(skip)]
    pub path_like: bool,
}

/// An RPATH/RUNPATH entry of a wheel file that points out of the wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsideEntry {
    /// As written. Ex) `$ORIGIN/../../nvidia/cublas/lib`
    pub entry: String,
    /// The wheel file it belongs to.
    pub file: String,
    /// The site-packages directory it names; `None` when it climbs above site-packages.
    pub dir: Option<String>,
}

/// What the policy family that judges a wheel says about resolving its libraries.
#[derive(Debug, Clone, Copy)]
pub struct LinkageRules<'a> {
    /// The family's libc, whose loader rules apply.
    pub libc: Libc,
    /// The libraries even its most compatible policy takes from the system: found, but their
    /// own needs are not walked.
    pub always_allowed: &'a BTreeSet<String>,
}

/// Resolve what the host binaries need, into [`Analysis::external`]: inside the wheel first,
/// then on this machine, by the `rules` of the policy family that judges the wheel.
pub fn resolve(
    wheel: &Wheel,
    analysis: &mut Analysis,
    rules: LinkageRules<'_>,
    options: &AnalyzeOptions,
    site: &SitePackages,
) {
    if analysis.binaries.is_empty() {
        return;
    }
    let inside = resolve_inside(&|member: &str| wheel.install_path(member), analysis);
    let outside = Outside::of(wheel, analysis, &inside);
    analysis.external = resolve_outside(analysis, &inside, rules, options);
    if !site.is_empty() || outside.entries.iter().any(|e| !e.is_empty()) {
        resolve_in_site(wheel, analysis, &outside, options, site);
    }
}

/// [`resolve`] for installed files ([`super::installed::analyse_files`]): each binary's
/// libraries among the files shown through its `$ORIGIN` search paths, the others where the
/// loader would find them on this machine (the files' own directories included).
pub fn resolve_installed(analysis: &mut Analysis, rules: LinkageRules<'_>, options: &AnalyzeOptions) {
    if analysis.binaries.is_empty() {
        return;
    }
    let inside = resolve_inside(&|path: &str| Some(path.to_string()), analysis);
    analysis.external = resolve_outside(analysis, &inside, rules, options);
}

/// A library a wheel file needs from another wheel: not in the wheel, on an RPATH/RUNPATH
/// entry that leaves it (`check`'s cross-wheel view of a release set).
#[derive(Debug, Clone)]
pub struct CrossNeed {
    pub soname: String,
    /// The entries to look in, in the loader's order.
    pub entries: Vec<OutsideEntry>,
}

/// Every DT_NEEDED of the wheel's binaries that the wheel does not resolve and that an entry
/// leaving the wheel may resolve, except the loader.
pub fn cross_wheel_needs(wheel: &Wheel, analysis: &Analysis) -> Vec<CrossNeed> {
    if analysis.binaries.is_empty() {
        return Vec::new();
    }
    let inside = resolve_inside(&|member: &str| wheel.install_path(member), analysis);
    let outside = Outside::of(wheel, analysis, &inside);
    let mut out: BTreeMap<String, CrossNeed> = BTreeMap::new();
    for (i, binary) in analysis.binaries.iter().enumerate() {
        if outside.entries[i].is_empty() {
            continue;
        }
        for soname in analysis.binary(binary).1.needed.iter().filter(|s| !inside.resolved[i].contains_key(*s)) {
            if is_loader(soname) {
                continue;
            }
            out.entry(soname.clone())
                .or_insert_with(|| CrossNeed { soname: soname.clone(), entries: Vec::new() })
                .entries
                .extend(outside.entries[i].iter().cloned());
        }
    }
    let mut needs: Vec<CrossNeed> = out.into_values().collect();
    for need in &mut needs {
        let mut seen = BTreeSet::new();
        need.entries.retain(|e| seen.insert(e.dir.clone()));
    }
    needs
}

/// Whether the loader would find `soname` on this machine for the wheel's binaries, as `show`
/// searches for it (their absolute RPATH/RUNPATH entries, the environment, the system): a library
/// another wheel might provide that the system provides anyway is no missing provider.
pub fn found_on_system(analysis: &Analysis, soname: &str, options: &AnalyzeOptions) -> bool {
    let absolute = |entries: &[String]| -> Vec<PathBuf> {
        entries.iter().filter(|e| e.starts_with('/')).map(PathBuf::from).collect()
    };
    analysis.binaries.iter().map(|b| analysis.binary(b).1).filter(|f| f.needed.iter().any(|n| n == soname)).any(|f| {
        let object = ObjectPaths { rpath: absolute(&f.rpath), runpath: absolute(&f.runpath) };
        let dirs = options.search.directories(&object, &[]);
        options.search.find(soname, &dirs, &f.ident()).is_some()
    })
}

/// Per binary: its `$ORIGIN` RPATH/RUNPATH entries (and its loaders' RPATH) that lead out of the
/// wheel, in the loader's order, as site-packages directories.
struct Outside {
    entries: Vec<Vec<OutsideEntry>>,
}

impl Outside {
    fn of(wheel: &Wheel, analysis: &Analysis, inside: &Inside) -> Outside {
        // Every directory the wheel installs files into (and their parents).
        let mut own_dirs: std::collections::HashSet<String> = std::collections::HashSet::new();
        for member in wheel.archive.members() {
            if let Some(mut path) = wheel.install_path(&member.name) {
                while let Some((dir, _)) = path.rsplit_once('/') {
                    if !own_dirs.insert(dir.to_string()) {
                        break;
                    }
                    path = dir.to_string();
                }
            }
        }
        let binaries: Vec<(&str, &ElfFacts)> = analysis.binaries.iter().map(|b| analysis.binary(b)).collect();
        let leaving = |i: usize, entries: &[String]| -> Vec<OutsideEntry> {
            let (path, _) = binaries[i];
            let Some(install) = wheel.install_path(path) else { return Vec::new() };
            let origin = install.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default();
            entries
                .iter()
                .filter(|e| is_origin_relative(e))
                .filter_map(|e| {
                    let dir = normalize(&expand_origin(e, &origin));
                    let leaves = dir.as_ref().is_none_or(|d| !own_dirs.contains(d) && !d.is_empty());
                    leaves.then(|| OutsideEntry { entry: e.clone(), file: path.to_string(), dir })
                })
                .collect()
        };
        let entries = (0..binaries.len())
            .map(|i| {
                let facts = binaries[i].1;
                let mut out = Vec::new();
                if facts.runpath.is_empty() {
                    out.extend(leaving(i, &facts.rpath));
                    for &l in &inside.loaders[i] {
                        if binaries[l].1.runpath.is_empty() {
                            out.extend(leaving(l, &binaries[l].1.rpath));
                        }
                    }
                }
                out.extend(leaving(i, &facts.runpath));
                // One entry per directory: loaders often repeat the same RPATH.
                let mut seen = BTreeSet::new();
                out.retain(|e| seen.insert(e.dir.clone()));
                out
            })
            .collect();
        Outside { entries }
    }
}

/// Resolve what is still unresolved through the entries that leave the wheel, in the virtual
/// site-packages: a library found there is a dependency (its own needs are followed there too,
/// through its own RPATH); one not found keeps the entry for its reason. A dependency found
/// this way replaces whatever the system search or the exclusion lists said: once the wheels
/// are installed, the loader takes that file.
fn resolve_in_site(
    wheel: &Wheel,
    analysis: &mut Analysis,
    outside: &Outside,
    options: &AnalyzeOptions,
    site: &SitePackages,
) {
    let consumer = wheel.metadata.package.clone();
    // The projects the wheel's requirements reach: walked only when a library needs it (a batch
    // of thousands of wheels requiring each other must not walk it for every wheel).
    let declared_cell = std::cell::OnceCell::new();
    let declared = || declared_cell.get_or_init(|| site.declared(&wheel.metadata.requires_dist));
    let binaries: Vec<(String, Vec<String>)> =
        analysis.binaries.iter().map(|b| analysis.binary(b)).map(|(p, f)| (p.to_string(), f.needed.clone())).collect();
    // (soname, needed by, the directories to search)
    let mut queue: Vec<(String, String, Vec<OutsideEntry>)> = Vec::new();
    for (i, (path, needed)) in binaries.iter().enumerate() {
        for soname in needed {
            if analysis.external.contains_key(soname) && !outside.entries[i].is_empty() {
                queue.push((soname.clone(), path.clone(), outside.entries[i].clone()));
            }
        }
    }
    // A soname another binary's entries already found is done; one not found yet is tried
    // again with each binary's own entries.
    while let Some((soname, needed_by, entries)) = queue.pop() {
        let provided = analysis.external.get(&soname).is_some_and(|l| l.provided_by.is_some());
        if is_loader(&soname) || provided {
            if let Some(lib) = analysis.external.get_mut(&soname) {
                lib.needed_by.insert(needed_by);
            }
            continue;
        }
        let found = entries.iter().find_map(|e| {
            let dir = e.dir.as_deref()?;
            let install = crate::wheel::join_path(dir, &soname);
            site.find(&install, &consumer).map(|(w, m)| (w, m, install))
        });
        let lib = analysis
            .external
            .entry(soname.clone())
            .or_insert_with(|| ExternalLib { soname: soname.clone(), ..Default::default() });
        lib.needed_by.insert(needed_by);
        let Some((site_wheel, member, install)) = found else {
            if lib.path.is_none() && lib.excluded.is_none() {
                for e in entries {
                    if !lib.outside.iter().any(|o| o.dir == e.dir) {
                        lib.outside.push(e);
                    }
                }
            }
            continue;
        };
        let provider = SitePackages::provider(site_wheel, &install);
        crate::debug!("{soname}: provided by {} {} ({}) at {install}", provider.name, provider.version, provider.wheel);
        lib.declared = declared().iter().any(|d| d.to_string() == provider.name);
        lib.path = None;
        lib.excluded = None;
        lib.outside = Vec::new();
        lib.searched = Vec::new();
        match crate::analysis::member_elf_facts(&site_wheel.wheel, member, options) {
            Ok(Some(facts)) => {
                lib.needs = facts.needed.clone();
                lib.version_needs = facts.version_needs.clone();
                lib.x86_isa_needed = facts.x86_isa_needed;
                for (need, entries) in needs_in_site(&facts, &install, site, &consumer) {
                    queue.push((need, soname.clone(), entries));
                }
            }
            Ok(None) => {}
            Err(e) => {
                analysis.notes.push(super::Note { file: provider.wheel.clone(), message: format!("{install}: {e}") });
            }
        }
        lib.provided_by = Some(provider);
    }

    loaded_elsewhere(analysis, site, &consumer, declared());
}

/// The needs of a library a wheel of the site provides that the site provides too: through the
/// library's own `$ORIGIN` RPATH/RUNPATH, where it is installed (at `install`). The rest is the
/// provider's own business with the system.
fn needs_in_site(
    facts: &ElfFacts,
    install: &str,
    site: &SitePackages,
    consumer: &PackageName,
) -> Vec<(String, Vec<OutsideEntry>)> {
    let origin = install.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default();
    let own: Vec<OutsideEntry> = facts
        .rpath
        .iter()
        .chain(&facts.runpath)
        .filter(|e| is_origin_relative(e))
        .map(|e| OutsideEntry {
            entry: e.clone(),
            file: install.to_string(),
            dir: normalize(&expand_origin(e, &origin)),
        })
        .collect();
    facts
        .needed
        .iter()
        .filter(|need| {
            own.iter().any(|e| {
                e.dir.as_deref().is_some_and(|d| site.find(&crate::wheel::join_path(d, need), consumer).is_some())
            })
        })
        .map(|need| (need.clone(), own.clone()))
        .collect()
}

/// What is still missing may be loaded already, by soname, by a project the wheel requires
/// (`declared`): not something the files say, so it is named in the reason, not counted as found.
fn loaded_elsewhere(
    analysis: &mut Analysis,
    site: &SitePackages,
    consumer: &PackageName,
    declared: &BTreeSet<PackageName>,
) {
    let missing: Vec<String> = analysis
        .external
        .values()
        .filter(|l| l.direct && l.path.is_none() && l.excluded.is_none() && l.provided_by.is_none() && !l.libpython)
        .map(|l| l.soname.clone())
        .collect();
    for soname in missing {
        let Some((site_wheel, _, install)) = site.find_loaded(&soname, consumer, declared) else { continue };
        let provider = SitePackages::provider(site_wheel, &install);
        crate::debug!("{soname}: not reachable, but {} {} ships it at {install}", provider.name, provider.version);
        if let Some(lib) = analysis.external.get_mut(&soname) {
            lib.same_soname_in = Some(provider);
        }
    }
}

/// How the binaries find one another inside the wheel.
struct Inside {
    /// Per binary: needed soname → the binary it resolves to.
    resolved: Vec<BTreeMap<String, usize>>,
    /// Per binary: the binaries that load it.
    loaders: Vec<BTreeSet<usize>>,
}

/// Resolve each binary's DT_NEEDED entries inside the wheel, as the loader would through its
/// `$ORIGIN` RPATH/RUNPATH (inheriting the loaders' RPATH), to a fixed point: resolving a
/// dependency inside the wheel makes its loader's RPATH available to it.
fn resolve_inside(install_path: &dyn Fn(&str) -> Option<String>, analysis: &Analysis) -> Inside {
    let facts: Vec<&ElfFacts> = analysis.binaries.iter().map(|b| analysis.binary(b).1).collect();
    let paths: Vec<&str> = analysis.binaries.iter().map(|b| analysis.binary(b).0).collect();
    // Host binaries by install path.
    let installed: HashMap<String, usize> =
        paths.iter().enumerate().filter_map(|(i, p)| install_path(p).map(|p| (p, i))).collect();

    // Each binary's $ORIGIN-relative search directories inside the wheel.
    struct Dirs {
        rpath: Vec<String>,
        runpath: Vec<String>,
    }
    let wheel_dirs = |entries: &[String], origin: &str| -> Vec<String> {
        entries.iter().filter(|e| is_origin_relative(e)).filter_map(|e| normalize(&expand_origin(e, origin))).collect()
    };
    let dirs: Vec<Dirs> = paths
        .iter()
        .zip(&facts)
        .map(|(path, f)| {
            let origin = install_path(path).map(|p| p.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default());
            match origin {
                Some(o) => Dirs { rpath: wheel_dirs(&f.rpath, &o), runpath: wheel_dirs(&f.runpath, &o) },
                None => Dirs { rpath: Vec::new(), runpath: Vec::new() },
            }
        })
        .collect();

    let n = facts.len();
    let mut loaders: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    let mut resolved: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); n];
    loop {
        let mut changed = false;
        for i in 0..n {
            // Every loader, each once (the loaders' DT_RPATH counts only without DT_RUNPATH).
            let mut chain: Vec<usize> = Vec::new();
            if dirs[i].runpath.is_empty() {
                let mut stack: Vec<usize> = loaders[i].iter().copied().collect();
                let mut seen = BTreeSet::new();
                while let Some(l) = stack.pop() {
                    if seen.insert(l) {
                        chain.push(l);
                        stack.extend(loaders[l].iter().copied());
                    }
                }
            }
            let chain: Vec<SearchPaths<'_, String>> =
                chain.iter().map(|&l| SearchPaths::of(&dirs[l].rpath, &dirs[l].runpath)).collect();
            let search = search_order(SearchPaths::of(&dirs[i].rpath, &dirs[i].runpath), &chain, None);
            for soname in &facts[i].needed {
                // A path is opened as it is, relative to the working directory: never found
                // through `$ORIGIN`.
                if resolved[i].contains_key(soname) || soname.contains('/') {
                    continue;
                }
                let hit = search.iter().find_map(|step| {
                    let (Searched::Rpath { dir, .. } | Searched::Runpath(dir)) = step else { return None };
                    let candidate = crate::wheel::join_path(dir, soname);
                    installed.get(&candidate).copied().filter(|&j| facts[j].ident() == facts[i].ident())
                });
                if let Some(j) = hit {
                    crate::debug!("{}: {soname} resolves inside the wheel to {}", paths[i], paths[j]);
                    resolved[i].insert(soname.clone(), j);
                    changed |= loaders[j].insert(i);
                }
            }
        }
        if !changed {
            break;
        }
    }
    Inside { resolved, loaders }
}

/// Everything not resolved inside the wheel: found on this machine, excluded, or missing, and
/// the closure of what those libraries need (not through libraries every policy allows).
fn resolve_outside(
    analysis: &Analysis,
    inside: &Inside,
    rules: LinkageRules<'_>,
    options: &AnalyzeOptions,
) -> BTreeMap<String, ExternalLib> {
    let facts: Vec<&ElfFacts> = analysis.binaries.iter().map(|b| analysis.binary(b).1).collect();
    let paths: Vec<&str> = analysis.binaries.iter().map(|b| analysis.binary(b).0).collect();
    let mut external: BTreeMap<String, ExternalLib> = BTreeMap::new();
    let mut queue: Vec<(String, ObjectPaths)> = Vec::new();
    let always_whitelisted = rules.always_allowed;
    // On Android the interpreter provides libpython (auditwheel's android rule); every musl
    // system provides musl's C library, under either name its loader answers to.
    let provided = |s: &str| {
        is_loader(s)
            || (rules.libc == Libc::Android && is_libpython(s))
            || (rules.libc == Libc::Musl && crate::platform::is_musl_libc(s))
    };
    let absolute = |entries: &[String]| -> Vec<PathBuf> {
        entries.iter().filter(|e| e.starts_with('/')).map(PathBuf::from).collect()
    };
    for (i, f) in facts.iter().enumerate() {
        for soname in f.needed.iter().filter(|s| !inside.resolved[i].contains_key(*s) && !provided(s)) {
            let lib = external
                .entry(soname.clone())
                .or_insert_with(|| ExternalLib { soname: soname.clone(), ..Default::default() });
            lib.direct = true;
            lib.needed_by.insert(paths[i].to_string());
            if lib.path.is_some() || lib.excluded.is_some() || lib.libpython {
                continue;
            }
            // System search: absolute RPATH/RUNPATH entries of the binary and its loaders.
            let object = ObjectPaths { rpath: absolute(&f.rpath), runpath: absolute(&f.runpath) };
            let loader_paths: Vec<ObjectPaths> = inside.loaders[i]
                .iter()
                .map(|&l| ObjectPaths { rpath: absolute(&facts[l].rpath), runpath: absolute(&facts[l].runpath) })
                .collect();
            let dirs = options.search.directories(&object, &loader_paths.iter().collect::<Vec<_>>());
            describe_external(lib, &dirs, f.ident(), options, always_whitelisted, &mut queue);
        }
    }

    // The closure: what those libraries need in turn (not through whitelisted ones).
    let want = facts.first().map(|f| f.ident());
    while let Some((parent, parent_paths)) = queue.pop() {
        let Some(want) = want else { break };
        let needs = external.get(&parent).map(|l| l.needs.clone()).unwrap_or_default();
        for soname in needs.iter().filter(|s| !is_loader(s)) {
            if let Some(lib) = external.get_mut(soname) {
                lib.needed_by.insert(parent.clone());
                continue;
            }
            let mut lib = ExternalLib { soname: soname.clone(), ..Default::default() };
            lib.needed_by.insert(parent.clone());
            let dirs = options.search.directories(&parent_paths, &[]);
            describe_external(&mut lib, &dirs, want, options, always_whitelisted, &mut queue);
            external.insert(soname.clone(), lib);
        }
    }
    external
}

/// Fill in where an external library comes from; queue it for the closure walk when its own
/// needs matter.
fn describe_external(
    lib: &mut ExternalLib,
    dirs: &[PathBuf],
    want: ElfIdent,
    options: &AnalyzeOptions,
    always_whitelisted: &BTreeSet<String>,
    queue: &mut Vec<(String, ObjectPaths)>,
) {
    let needed_by = || lib.needed_by.iter().cloned().collect::<Vec<_>>().join(", ");
    if is_libpython(&lib.soname) {
        crate::debug!("{} (needed by {}): libpython, never vendored", lib.soname, needed_by());
        lib.libpython = true;
        return;
    }
    if let Some(reason) = options.exclude.reason(&lib.soname, None) {
        crate::debug!("{} (needed by {}): provided by the environment: {reason}", lib.soname, needed_by());
        lib.excluded = Some(reason);
        return;
    }
    // A name with a slash is a path to glibc's loader: opened as it is (relative to the working
    // directory when it does not start with `/`), never searched for.
    let found = if lib.soname.contains('/') {
        lib.path_like = true;
        let path = PathBuf::from(&lib.soname);
        (path.is_absolute() && ElfIdent::of_file(&path).is_some_and(|k| k == want)).then_some(path)
    } else {
        lib.searched = dirs.iter().map(|d| d.display().to_string()).collect();
        options.search.find(&lib.soname, dirs, &want)
    };
    let Some(path) = found else {
        crate::debug!("{} (needed by {}): not found; searched {}", lib.soname, needed_by(), lib.searched.join(":"));
        return;
    };
    let display = path.display().to_string();
    crate::debug!("{} (needed by {}): found {display}; searched {}", lib.soname, needed_by(), lib.searched.join(":"));
    if let Some(reason) = options.exclude.reason(&lib.soname, Some(&display)) {
        crate::debug!("{}: provided by the environment: {reason}", lib.soname);
        lib.excluded = Some(reason);
        lib.path = Some(display);
        return;
    }
    lib.path = Some(display);
    if always_whitelisted.contains(&lib.soname) {
        crate::debug!("{}: every policy allows it; its own needs are not walked", lib.soname);
        return;
    }
    // Read the library's own facts: its needs, symbol versions and ISA level.
    let Ok(data) = crate::files::read_bounded(&path, 16 << 30) else {
        return;
    };
    let Ok(facts) = ElfFacts::parse(&data) else {
        return;
    };
    lib.needs = facts.needed.clone();
    lib.version_needs = facts.version_needs.clone();
    lib.x86_isa_needed = facts.x86_isa_needed;
    let origin = path.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let expand = |entries: &[String]| entries.iter().map(|e| PathBuf::from(expand_origin(e, &origin))).collect();
    let own = ObjectPaths { rpath: expand(&facts.rpath), runpath: expand(&facts.runpath) };
    queue.push((lib.soname.clone(), own));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_libpython() {
        assert!(is_libpython("libpython3.12.so.1.0"));
        assert!(is_libpython("libpython2.7m.so"));
        assert!(!is_libpython("libpython3.so"));
        assert!(!is_libpython("libpythonx.so"));
    }

    #[test]
    fn normalizes_relative_paths() {
        assert_eq!(normalize("torch/lib/../_C").as_deref(), Some("torch/_C"));
        assert_eq!(normalize("a/../../b"), None);
    }

    #[test]
    fn rpath_of_loaders_only_without_runpath() {
        let search = LibrarySearch {
            extra_dirs: vec!["/extra".into()],
            env_dirs: vec!["/env".into()],
            system_dirs: vec!["/usr/lib".into()],
        };
        let object = ObjectPaths { rpath: vec!["/rpath".into()], runpath: vec![] };
        let loader = ObjectPaths { rpath: vec!["/loader".into()], runpath: vec![] };
        let dirs = search.directories(&object, &[&loader]);
        assert_eq!(
            dirs,
            [PathBuf::from("/rpath"), "/loader".into(), "/extra".into(), "/env".into(), "/usr/lib".into()]
        );

        let with_runpath = ObjectPaths { rpath: vec!["/ignored".into()], runpath: vec!["/runpath".into()] };
        let dirs = search.directories(&with_runpath, &[&loader]);
        assert_eq!(dirs, [PathBuf::from("/extra"), "/env".into(), "/runpath".into(), "/usr/lib".into()]);
    }

    #[test]
    fn reads_ld_so_conf_includes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("conf.d")).unwrap();
        std::fs::write(dir.path().join("conf.d/a.conf"), "/opt/a\n# comment\n").unwrap();
        std::fs::write(dir.path().join("conf.d/b.conf"), "/opt/b\n").unwrap();
        std::fs::write(dir.path().join("ld.so.conf"), "include conf.d/*.conf\n/opt/c # trailing\n").unwrap();
        let mut out = Vec::new();
        read_ld_so_conf(&dir.path().join("ld.so.conf"), &mut out, 0);
        assert_eq!(out, [PathBuf::from("/opt/a"), "/opt/b".into(), "/opt/c".into()]);
    }
}
