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

use super::{Input, NewMember, Plan};
use crate::analysis::Analysis;
use crate::analysis::vendor::VendorSource;

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
    #[error(
        "the wheel holds a file `{file}` where repair would create the directory of vendored libraries; choose another with -L"
    )]
    LibsDirIsAFile { file: String },
}

/// What `repair` is asked to do besides vendoring.
#[derive(Debug, Clone)]
pub struct RepairSettings {
    /// `-L`: the libs directory's suffix. Ex) `.libs` → `numpy.libs/`
    pub lib_sdir: String,
    /// `--strip`: strip every ELF file of the wheel and every copy, before patching.
    pub strip: bool,
    /// `-z`: deflate level for the members written anew.
    pub compression_level: u32,
}

/// One library copied into the wheel.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Graft {
    pub soname: String,
    pub source: String,
    /// Path inside the wheel. Ex) `numpy.libs/libgfortran-040039e1.so.5.0.0`
    pub member: String,
}

/// Add `repair`'s edits to `plan`: a copy of each library of `sources` (the libraries
/// [`find::libraries_to_vendor`] names, with their facts), and the wheel's files patched to
/// use them. Returns what is vendored.
pub fn add_to_plan(
    plan: &mut Plan,
    input: &Input<'_>,
    analysis: &Analysis,
    sources: &[VendorSource],
    settings: &RepairSettings,
) -> Result<Vec<Graft>, RepairError> {
    let libs_dir = format!("{}{}", input.filename.distribution, settings.lib_sdir);
    let copies = copy::vendor(sources, analysis, &libs_dir, settings);
    let renames = copy::renames(&copies);
    if !copies.is_empty()
        && let Some(file) = input.members.iter().find(|m| **m == libs_dir)
    {
        return Err(RepairError::LibsDirIsAFile { file: file.to_string() });
    }
    let has = |path: &str| input.has_member(path);
    for copy in &copies {
        plan.add_or_replace(&copy.graft.member, copy.member.clone(), has);
    }
    for (path, member) in patch::patch_wheel_files(input, analysis, &renames, &libs_dir, settings) {
        match member {
            patch::Patched::InPlace(m) => {
                plan.replace.insert(plan.output_name(&path).to_string(), m);
            }
            patch::Patched::Moved { shim, moved_to, executable } => {
                plan.add_or_replace(&moved_to, executable, has);
                plan.replace.insert(plan.output_name(&path).to_string(), shim);
            }
        }
    }
    if !copies.is_empty() {
        add_sbom(plan, input, &copies);
    }
    Ok(copies.into_iter().map(|c| c.graft).collect())
}

/// `<dist-info>/sboms/wheelfix.cdx.json`, naming every vendored file and where it came from.
fn add_sbom(plan: &mut Plan, input: &Input<'_>, copies: &[copy::Copy]) {
    let vendored = copies
        .iter()
        .map(|c| sbom::Planned {
            soname: c.graft.soname.clone(),
            source: c.graft.source.clone(),
            real: c.source.real.display().to_string(),
            member: c.graft.member.clone(),
            owner: c.source.owner.clone(),
        })
        .collect();
    let sbom = sbom::SbomPlan {
        name: plan.filename.distribution.clone(),
        version: plan.filename.version.text.clone(),
        wheel_file_name: plan.filename.to_string(),
        vendored,
    };
    let input_path = format!("{}/sboms/wheelfix.cdx.json", input.dist_info);
    let output_path = format!("{}/sboms/wheelfix.cdx.json", plan.output_dist_info(input.dist_info));
    let member = NewMember { content: super::Content::Sbom(Box::new(sbom)), mode: Some(0o644) };
    if input.has_member(&input_path) {
        plan.replace.insert(output_path, member);
    } else {
        plan.add.insert(output_path, member);
    }
}
