//! `repair`: vendor the external libraries a wheel needs into `<dist>.libs/` and patch every
//! ELF file that needs them, as edits to the wheel's plan, in the steps auditwheel names:
//! [`find`] the libraries to vendor, [`copy`] them in under new names, [`patch`] the wheel's own
//! files, with the [`rpath`] that reaches the copies, and record what was vendored in a
//! [`sbom`].
//!
//! Naming follows auditwheel so that both tools produce the same files: `<stem>-<first 8 hex of
//! the sha256 of the original file>.<rest>` from the resolved file's real name
//! (`libfoo.so.1.2` → `libfoo-0a1b2c3d.so.1.2`), SONAME set to that name, DT_RPATH
//! `$ORIGIN/<path to the libs dir>` on every file that needs a vendored library.

pub mod copy;
pub mod find;
pub mod patch;
pub mod rpath;
pub mod sbom;

use crate::analysis::Analysis;
use crate::analysis::budget::MemoryBudget;
use crate::elf::patch::{PatchError, Patcher};
use crate::policy::judgement::Judged;
use crate::wheel::Wheel;
use crate::wheel::writer::{NewMember, Plan};

#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(
        "cannot repair: {soname}, needed by {needed_by}, was not found; searched {searched} (use --ldpaths, LD_LIBRARY_PATH, or --exclude if the environment provides it)"
    )]
    NotFound { soname: String, needed_by: String, searched: String },
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
    #[error("cannot write the patched `{file}` aside: {source}")]
    Spill { file: String, source: std::io::Error },
    #[error(
        "the wheel holds a file `{file}` where repair would create the directory of vendored libraries; choose another with -L"
    )]
    LibsDirIsAFile { file: String },
}

/// Where patched files wait for the writer, and the memory budget patching takes from.
pub struct Spill<'a> {
    /// The output's directory: a patched file is deflated into an unlinked file there.
    pub dir: &'a std::path::Path,
    pub budget: &'a MemoryBudget,
}

impl Spill<'_> {
    /// A patched file as a new member: deflated into a file of its own when it is large.
    fn member(
        &self,
        data: Vec<u8>,
        mode: Option<u32>,
        settings: &RepairSettings<'_>,
        file: &str,
    ) -> Result<NewMember, RepairError> {
        NewMember::spilled_if_large(data, mode, settings.compression_level, self.dir)
            .map_err(|source| RepairError::Spill { file: file.to_string(), source })
    }
}

/// Settings of `repair`.
pub struct RepairSettings<'a> {
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

/// Add `repair`'s edits to `plan`: the vendored libraries, and the wheel's files patched to use
/// them. `target` is the policy whose whitelist decides what is vendored
/// ([`Judged::repair_target`]). Returns what was vendored.
pub fn add_to_plan(
    plan: &mut Plan,
    wheel: &Wheel,
    analysis: &Analysis,
    judgement: Option<&Judged>,
    target: Option<usize>,
    settings: &RepairSettings<'_>,
    spill: &Spill<'_>,
) -> Result<Vec<Graft>, RepairError> {
    plan.compression_level = settings.compression_level;
    let Some(judgement) = judgement else { return Ok(Vec::new()) };
    let libs = find::libraries_to_vendor(analysis, judgement, target)?;
    let libs_dir = format!("{}{}", wheel.filename.distribution, settings.lib_sdir);
    let copies = copy::vendor(&libs, analysis, &libs_dir, settings, spill)?;
    let renames = copy::renames(&copies);
    if !copies.is_empty()
        && let Some(file) = wheel.archive.members().iter().find(|m| *m.name == libs_dir)
    {
        return Err(RepairError::LibsDirIsAFile { file: file.name.to_string() });
    }
    for copy in &copies {
        add_or_replace(plan, wheel, &copy.graft.member, copy.member.clone());
    }
    for (path, member) in patch::patch_wheel_files(wheel, analysis, &renames, &libs_dir, settings, spill)? {
        match member {
            patch::Patched::InPlace(m) => {
                plan.replace.insert(plan.output_name(&path).to_string(), m);
            }
            patch::Patched::Moved { shim, moved_to, executable } => {
                add_or_replace(plan, wheel, &moved_to, executable);
                plan.replace.insert(plan.output_name(&path).to_string(), shim);
            }
        }
    }
    if !copies.is_empty() {
        add_sbom(plan, wheel, &copies);
    }
    Ok(copies.into_iter().map(|c| c.graft).collect())
}

/// A member to write at `path`: it replaces the input's member there (a wheel repaired before
/// already holds `<pkg>.libs/<lib-hash>.so`), or is added.
fn add_or_replace(plan: &mut Plan, wheel: &Wheel, path: &str, member: NewMember) {
    if wheel.archive.member(path).is_some() && plan.output_name(path) == path {
        plan.replace.insert(path.to_string(), member);
    } else {
        plan.add.insert(path.to_string(), member);
    }
}

/// `<dist-info>/sboms/wheelfix.cdx.json`, naming every vendored file and where it came from.
fn add_sbom(plan: &mut Plan, wheel: &Wheel, copies: &[copy::Copy]) {
    let vendored: Vec<sbom::Vendored> = copies
        .iter()
        .map(|c| sbom::Vendored {
            soname: c.graft.soname.clone(),
            source: c.graft.source.clone(),
            real: c.source_real.display().to_string(),
            member: c.graft.member.clone(),
            sha256: crate::wheel::digest::hex(&c.member.sha256()),
        })
        .collect();
    let owners = vendored
        .iter()
        .filter_map(|v| sbom::owner(std::path::Path::new(&v.real)).map(|p| (v.source.clone(), p)))
        .collect();
    let file_name = plan.filename.to_string();
    let text = sbom::document(&plan.filename.distribution, &plan.filename.version.text, &file_name, &vendored, &owners);
    let input_path = format!("{}/sboms/wheelfix.cdx.json", wheel.dist_info);
    let output_path = format!("{}/sboms/wheelfix.cdx.json", plan.output_dist_info(&wheel.dist_info));
    let member = NewMember::new(text.into_bytes(), Some(0o644));
    if wheel.archive.member(&input_path).is_some() {
        plan.replace.insert(output_path, member);
    } else {
        plan.add.insert(output_path, member);
    }
}
