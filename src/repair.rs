//! `repair`: vendor the external libraries a wheel needs into `<dist>.libs/` and patch every
//! ELF file that needs them — the plan, made from the verdict; the writer applies it.
//!
//! Naming follows auditwheel so that both tools produce the same files: `<stem>-<first 8 hex of
//! the sha256 of the original file>.<rest>` from the resolved file's real name
//! (`libfoo.so.1.2` → `libfoo-0a1b2c3d.so.1.2`), SONAME set to that name, DT_RPATH
//! `$ORIGIN/<path to the libs dir>` on every file that needs a vendored library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::analysis::Analysis;
use crate::elf::patch::{ElfEdit, PatchError, Patcher, RpathEdit};
use crate::libsearch::expand_origin;
use crate::tags::first_blocker;
use crate::wheel::Wheel;
use crate::wheel::writer::NewMember;

#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(
        "cannot repair: {soname}, needed by {needed_by}, was not found; searched {searched} (use --ldpaths, LD_LIBRARY_PATH, or --exclude if the environment provides it)"
    )]
    NotFound { soname: String, needed_by: String, searched: String },
    #[error("cannot repair to {tag}: {reason}; build on an older toolchain or ask for a newer --plat")]
    TooRecent { tag: String, reason: String },
    #[error("--plat {0}: not a tag of this wheel's policies")]
    UnknownPlat(String),
    #[error(
        "vendoring into Android wheels is not supported (they need RUNPATH and the Android sysroot's libraries); build the wheel with its libraries, then use `wheelfix retag`"
    )]
    Android,
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot patch `{file}`: {source}")]
    Patch { file: String, source: PatchError },
    #[error("cannot strip {path}: {message}")]
    Strip { path: String, message: String },
}

/// Settings of `repair`.
pub struct RepairSettings<'a> {
    /// `--plat`: the policy to repair to (`None`/`auto`: the best the wheel can meet).
    pub plat: Option<String>,
    /// `-L`: the libs directory's suffix. Ex) `.libs` → `numpy.libs/`
    pub lib_sdir: String,
    pub strip: bool,
    pub patcher: &'a dyn Patcher,
    /// `-z`: deflate level for the members written anew.
    pub compression_level: u32,
}

/// One library copied into the wheel.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Graft {
    pub soname: String,
    pub source: String,
    /// Path inside the wheel. Ex) `numpy.libs/libgfortran-040039e1.so.5.0.0`
    pub member: String,
}

/// The changes `repair` makes, ready for the writer.
#[derive(Debug, Default)]
pub struct RepairPlan {
    pub grafts: Vec<Graft>,
    /// Patched wheel members (output path → content).
    pub patched: BTreeMap<String, NewMember>,
    /// Vendored libraries (output path → content).
    pub added: BTreeMap<String, NewMember>,
    /// libpython dependencies removed, by file.
    pub removed_libpython: Vec<String>,
    /// Executables moved from `.data/scripts/` behind a shim.
    pub moved_scripts: Vec<String>,
}

/// Decide and prepare everything `repair` changes in one wheel.
pub fn plan_repair(
    wheel: &Wheel,
    analysis: &Analysis,
    settings: &RepairSettings<'_>,
) -> Result<RepairPlan, RepairError> {
    let (Some(set), Some(verdict)) = (&analysis.policy_set, &analysis.verdict) else {
        return Ok(RepairPlan::default());
    };
    let linux = set.policies.len() - 1;
    // The policy whose whitelist decides what is vendored.
    let target = match settings.plat.as_deref().filter(|p| *p != "auto") {
        Some(plat) => {
            let policy = set.by_tag(plat).ok_or_else(|| RepairError::UnknownPlat(plat.to_string()))?;
            let index = set.policies.iter().position(|p| p == policy).unwrap_or(linux);
            if index < verdict.repairable {
                let mut blockers = verdict.blockers(set, &analysis.verdict_input(), index);
                blockers.libs_to_eliminate.clear();
                return Err(RepairError::TooRecent { tag: set.tag(index), reason: first_blocker(&blockers) });
            }
            index
        }
        // A wheel that cannot be manylinux (GLIBC_2.43) still gets its libraries vendored,
        // with the newest policy's whitelist.
        None => verdict.repairable.min(linux.saturating_sub(1)),
    };
    if set.own_tag.is_some() && !verdict.grafted[target].is_empty() {
        return Err(RepairError::Android);
    }
    let grafted: BTreeSet<String> =
        verdict.grafted[target].iter().filter(|s| !analysis.external[*s].libpython).cloned().collect();

    let mut plan = RepairPlan::default();
    for soname in &grafted {
        let lib = &analysis.external[soname];
        if lib.path.is_none() {
            return Err(RepairError::NotFound {
                soname: soname.clone(),
                needed_by: lib.needed_by.iter().cloned().collect::<Vec<_>>().join(", "),
                searched: if lib.searched.is_empty() { "nothing".into() } else { lib.searched.join(", ") },
            });
        }
    }
    let libs_dir = format!("{}{}", wheel.filename.name, settings.lib_sdir);

    // Read, name and patch the libraries to vendor.
    let prepared: Vec<(String, String, Vec<u8>)> = grafted
        .par_iter()
        .map(|soname| {
            let path = analysis.external[soname].path.clone().unwrap_or_default();
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path));
            let data = std::fs::read(&real).map_err(|source| RepairError::Read { path: path.clone(), source })?;
            let hash = hex8(&Sha256::digest(&data));
            let base_name =
                real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| soname.clone());
            Ok((soname.clone(), vendored_name(&base_name, &hash), data))
        })
        .collect::<Result<_, RepairError>>()?;
    let renames: BTreeMap<String, String> = prepared.iter().map(|(s, n, _)| (s.clone(), n.clone())).collect();
    let vendored: Vec<(String, NewMember)> = prepared
        .into_par_iter()
        .map(|(soname, new_name, data)| {
            let source = analysis.external[&soname].path.clone().unwrap_or_default();
            let data = if settings.strip { strip(&data, &source)? } else { data };
            let needs: BTreeMap<String, String> = analysis.external[&soname]
                .needs
                .iter()
                .filter_map(|n| renames.get(n).map(|r| (n.clone(), r.clone())))
                .collect();
            let edit = ElfEdit {
                soname: Some(new_name.clone()),
                rpath: if needs.is_empty() { RpathEdit::Remove } else { RpathEdit::Set("$ORIGIN".into()) },
                replace_needed: needs,
                remove_needed: BTreeSet::new(),
            };
            let patched = settings
                .patcher
                .patch(&data, &edit)
                .map_err(|e| RepairError::Patch { file: source.clone(), source: e })?;
            Ok((new_name, NewMember { data: patched, mode: Some(0o755) }, soname, source))
        })
        .collect::<Result<Vec<_>, RepairError>>()?
        .into_iter()
        .map(|(new_name, member, soname, source)| {
            let path = format!("{libs_dir}/{new_name}");
            plan.grafts.push(Graft { soname, source, member: path.clone() });
            (path, member)
        })
        .collect();
    plan.added = vendored.into_iter().collect();

    // Executables installed as scripts land outside site-packages, where no `$ORIGIN` path
    // reaches the libs directory: like auditwheel (#340), they move to `<dist>.scripts/` in the
    // wheel root and a Python shim that execs them takes their place.
    let scripts_prefix = format!("{}.data/scripts/", wheel.dist_info.trim_end_matches(".dist-info"));
    let scripts_dir = format!("{}.scripts", wheel.filename.name);
    let moved =
        |path: &str| -> Option<String> { path.strip_prefix(&scripts_prefix).map(|exe| format!("{scripts_dir}/{exe}")) };

    // Patch the wheel's own files that need a vendored library (or libpython).
    let edits: Vec<(&str, ElfEdit)> = analysis
        .binaries
        .iter()
        .filter_map(|b| {
            let replace: BTreeMap<String, String> =
                b.facts.needed.iter().filter_map(|n| renames.get(n).map(|r| (n.clone(), r.clone()))).collect();
            let remove: BTreeSet<String> = b
                .facts
                .needed
                .iter()
                .filter(|n| analysis.external.get(*n).is_some_and(|l| l.libpython))
                .cloned()
                .collect();
            if replace.is_empty() && remove.is_empty() {
                return None;
            }
            let location = moved(&b.path).filter(|_| !replace.is_empty()).unwrap_or_else(|| b.path.clone());
            let rpath = if replace.is_empty() {
                RpathEdit::Keep
            } else {
                RpathEdit::Set(rpath_for(wheel, &location, &b.facts, &libs_dir))
            };
            Some((b.path.as_str(), ElfEdit { soname: None, replace_needed: replace, remove_needed: remove, rpath }))
        })
        .collect();
    plan.removed_libpython =
        edits.iter().filter(|(_, e)| !e.remove_needed.is_empty()).map(|(p, _)| p.to_string()).collect();
    let patched: Vec<(String, NewMember)> = edits
        .par_iter()
        .map(|(path, edit)| {
            let member = wheel.archive.member(path).expect("binaries are members");
            let data = wheel.archive.read(member).map(|b| b.into_vec()).map_err(|e| RepairError::Patch {
                file: path.to_string(),
                source: PatchError::External(e.to_string()),
            })?;
            let out = settings
                .patcher
                .patch(&data, edit)
                .map_err(|source| RepairError::Patch { file: path.to_string(), source })?;
            Ok((path.to_string(), NewMember { data: out, mode: None }))
        })
        .collect::<Result<_, RepairError>>()?;
    for (path, member) in patched {
        match moved(&path).filter(|_| edits.iter().any(|(p, e)| *p == path && !e.replace_needed.is_empty())) {
            Some(new_path) => {
                let exe = new_path.rsplit('/').next().unwrap_or_default().to_string();
                plan.added.insert(new_path, NewMember { data: member.data, mode: Some(0o755) });
                plan.patched.insert(
                    path.clone(),
                    NewMember { data: script_shim(&scripts_dir, &exe).into_bytes(), mode: Some(0o755) },
                );
                plan.moved_scripts.push(path);
            }
            None => {
                plan.patched.insert(path, member);
            }
        }
    }
    Ok(plan)
}

/// The script that replaces a moved executable: pip rewrites `#!python` to the environment's
/// interpreter, which finds the real executable in its platlib directory.
fn script_shim(scripts_dir: &str, exe: &str) -> String {
    format!(
        "#!python\nimport os\nimport sys\nimport sysconfig\n\nif __name__ == \"__main__\":\n    exe = os.path.join(sysconfig.get_path(\"platlib\"), \"{scripts_dir}\", \"{exe}\")\n    os.execv(exe, [exe] + sys.argv[1:])\n"
    )
}

/// `libfoo.so.1.2` + `0a1b2c3d` → `libfoo-0a1b2c3d.so.1.2` (kept when already named so).
pub fn vendored_name(file_name: &str, hash: &str) -> String {
    let (base, ext) = file_name.split_once('.').unwrap_or((file_name, ""));
    let base = if base.ends_with(&format!("-{hash}")) { base.to_string() } else { format!("{base}-{hash}") };
    if ext.is_empty() { base } else { format!("{base}.{ext}") }
}

fn hex8(digest: &[u8]) -> String {
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// DT_RPATH for a wheel file that needs vendored libraries: its `$ORIGIN` entries that stay
/// inside the wheel, then `$ORIGIN/<relative path to the libs dir>`. Absolute entries go.
fn rpath_for(wheel: &Wheel, member: &str, facts: &crate::elf::ElfFacts, libs_dir: &str) -> String {
    // Where the file lands in site-packages (the analysis' rule); a file installed elsewhere
    // keeps its path in the wheel, relative to the root.
    let installed = crate::analysis::install_path(wheel, member).unwrap_or_else(|| member.to_string());
    let dir = Path::new(&installed).parent().unwrap_or(Path::new(""));
    let mut entries: Vec<String> = Vec::new();
    for entry in facts.rpath.iter().chain(&facts.runpath) {
        if !(entry.contains("$ORIGIN") || entry.contains("${ORIGIN}")) {
            continue;
        }
        let expanded = expand_origin(entry, &dir.display().to_string());
        if crate::analysis::normalize(&expanded).is_some() && !entries.contains(entry) {
            entries.push(entry.clone());
        }
    }
    let relative = relative_path(dir, Path::new(libs_dir));
    let own = if relative.is_empty() { "$ORIGIN".to_string() } else { format!("$ORIGIN/{relative}") };
    if !entries.contains(&own) {
        entries.push(own);
    }
    entries.join(":")
}

/// `from` → `to`, both relative to the wheel root. Ex) `pkg/sub` → `pkg.libs` = `../../pkg.libs`
fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

/// `strip -s` on a copy of a library, before patching (auditwheel #716).
fn strip(data: &[u8], source: &str) -> Result<Vec<u8>, RepairError> {
    let fail = |message: String| RepairError::Strip { path: source.to_string(), message };
    let tmp = tempfile::NamedTempFile::new().map_err(|e| fail(e.to_string()))?;
    std::fs::write(tmp.path(), data).map_err(|e| fail(e.to_string()))?;
    let out = std::process::Command::new("strip")
        .arg("-s")
        .arg(tmp.path())
        .output()
        .map_err(|e| fail(format!("cannot run strip: {e}")))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    std::fs::read(tmp.path()).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendored_names_keep_the_version_suffix() {
        assert_eq!(vendored_name("libfoo.so.1.2", "0a1b2c3d"), "libfoo-0a1b2c3d.so.1.2");
        assert_eq!(vendored_name("libfoo-0a1b2c3d.so.1.2", "0a1b2c3d"), "libfoo-0a1b2c3d.so.1.2");
        assert_eq!(vendored_name("libgfortran.so.5.0.0", "040039e1"), "libgfortran-040039e1.so.5.0.0");
    }

    #[test]
    fn relative_paths_to_the_libs_dir() {
        assert_eq!(relative_path(Path::new("pkg/sub"), Path::new("pkg.libs")), "../../pkg.libs");
        assert_eq!(relative_path(Path::new(""), Path::new("pkg.libs")), "pkg.libs");
        assert_eq!(relative_path(Path::new("pkg.libs"), Path::new("pkg.libs")), "");
    }
}
