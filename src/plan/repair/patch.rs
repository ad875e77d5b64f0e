//! Step 3: patch the wheel's own ELF files that need a vendored library (DT_NEEDED and
//! `.gnu.version_r` renamed, DT_RPATH to the copies) or libpython (the dependency removed);
//! with `--strip`, every one of them is stripped first.
//! Executables installed as scripts move behind a shim.

use std::collections::{BTreeMap, BTreeSet};

use super::{RepairError, RepairSettings, Spill};
use crate::analysis::Analysis;
use crate::elf::patch::{ElfEdit, PatchError, RpathEdit};
use crate::wheel::Wheel;
use crate::wheel::writer::NewMember;

/// A patched wheel file: in its place, or moved out of `.data/scripts/` with a shim left there.
pub enum Patched {
    InPlace(NewMember),
    Moved { shim: NewMember, moved_to: String, executable: NewMember },
}

/// Every wheel file that needs a change, patched (in parallel). `renames`: old soname → copy.
pub fn patch_wheel_files(
    wheel: &Wheel,
    analysis: &Analysis,
    renames: &BTreeMap<String, String>,
    libs_dir: &str,
    settings: &RepairSettings<'_>,
    spill: &Spill<'_>,
) -> Result<Vec<(String, Patched)>, RepairError> {
    // Executables installed as scripts land outside site-packages, where no `$ORIGIN` path
    // reaches the libs directory: like auditwheel (#340), they move to `<dist>.scripts/` in the
    // wheel root and a Python shim that execs them takes their place.
    let scripts_prefix = format!("{}scripts/", wheel.data_prefix());
    let scripts_dir = format!("{}.scripts", wheel.filename.distribution);
    let moved =
        |path: &str| -> Option<String> { path.strip_prefix(&scripts_prefix).map(|exe| format!("{scripts_dir}/{exe}")) };

    let edits: Vec<(&str, ElfEdit)> = analysis
        .binaries
        .iter()
        .filter_map(|b| {
            let (path, facts) = analysis.binary(b);
            let replace: BTreeMap<String, String> =
                facts.needed.iter().filter_map(|n| renames.get(n).map(|r| (n.clone(), r.clone()))).collect();
            let remove: BTreeSet<String> = facts
                .needed
                .iter()
                .filter(|n| analysis.external.get(*n).is_some_and(|l| l.libpython))
                .cloned()
                .collect();
            // `--strip` strips every ELF file of the wheel, as auditwheel does, patched or not.
            if replace.is_empty() && remove.is_empty() && !settings.strip {
                return None;
            }
            let location = moved(path).filter(|_| !replace.is_empty()).unwrap_or_else(|| path.to_string());
            // Where the file lands in site-packages; a file installed elsewhere keeps its path
            // in the wheel, relative to the root.
            let installed = wheel.install_path(&location).unwrap_or_else(|| location.clone());
            let rpath = if replace.is_empty() {
                RpathEdit::Keep
            } else {
                RpathEdit::Set(super::rpath::rpath_for(&installed, facts, libs_dir))
            };
            Some((path, ElfEdit { soname: None, replace_needed: replace, remove_needed: remove, rpath }))
        })
        .collect();
    let size = |path: &str| wheel.archive.member(path).map_or(0, |m| m.size);
    let alone_above = spill.budget.total() / 2;
    crate::parallel::try_map_by_cost(
        &edits,
        |(path, _)| 2 * size(path),
        alone_above,
        |(path, edit)| {
            let member = wheel.archive.member(path).expect("binaries are members");
            // The file and its patched copy are in memory together, then the copy is deflated
            // into a file of its own: that is what the budget is asked for.
            let _permit = spill.budget.take(member.size.saturating_mul(2));
            let data = wheel.archive.read(member).map_err(|e| RepairError::Patch {
                file: path.to_string(),
                source: PatchError::External(e.to_string()),
            })?;
            // Stripped before it is patched (auditwheel #716).
            let stripped = if settings.strip { Some(super::copy::strip(&data, path)?) } else { None };
            let input: &[u8] = stripped.as_deref().unwrap_or(&data);
            let out = if edit.is_empty() {
                input.to_vec()
            } else {
                settings
                    .patcher
                    .patch(input, edit)
                    .map_err(|source| RepairError::Patch { file: path.to_string(), source })?
            };
            drop(stripped);
            drop(data);
            let moved_to = moved(path).filter(|_| !edit.replace_needed.is_empty());
            let mode = if moved_to.is_some() { Some(0o755) } else { None };
            let out = spill.member(out, mode, settings, path)?;
            let patched = match moved_to {
                Some(moved_to) => {
                    let exe = moved_to.rsplit('/').next().unwrap_or_default().to_string();
                    Patched::Moved {
                        shim: NewMember::new(script_shim(&scripts_dir, &exe).into_bytes(), Some(0o755)),
                        moved_to,
                        executable: out,
                    }
                }
                None => Patched::InPlace(out),
            };
            Ok((path.to_string(), patched))
        },
    )
}

/// The script that replaces a moved executable: pip rewrites `#!python` to the environment's
/// interpreter, which finds the real executable in its platlib directory.
fn script_shim(scripts_dir: &str, exe: &str) -> String {
    format!(
        "#!python\nimport os\nimport sys\nimport sysconfig\n\nif __name__ == \"__main__\":\n    exe = os.path.join(sysconfig.get_path(\"platlib\"), \"{scripts_dir}\", \"{exe}\")\n    os.execv(exe, [exe] + sys.argv[1:])\n"
    )
}
