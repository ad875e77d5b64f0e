//! Step 3: patch the wheel's own ELF files that need a vendored library (DT_NEEDED and
//! `.gnu.version_r` renamed, DT_RPATH to the copies) or libpython (the dependency removed);
//! with `--strip`, every one of them is stripped first.
//! Executables installed as scripts move behind a shim.

use std::collections::{BTreeMap, BTreeSet};

use super::RepairSettings;
use crate::analysis::Analysis;
use crate::elf::patch::{ElfEdit, RpathEdit};
use crate::plan::{Content, ElfChange, ElfSource, Input, NewMember};

/// A patched wheel file: in its place, or moved out of `.data/scripts/` with a shim left there.
pub enum Patched {
    InPlace(NewMember),
    Moved { shim: NewMember, moved_to: String, executable: NewMember },
}

/// Every wheel file that needs a change, as an edit. `renames`: old soname → copy.
pub fn patch_wheel_files(
    input: &Input<'_>,
    analysis: &Analysis,
    renames: &BTreeMap<String, String>,
    libs_dir: &str,
    settings: &RepairSettings,
) -> Vec<(String, Patched)> {
    // Executables installed as scripts land outside site-packages, where no `$ORIGIN` path
    // reaches the libs directory: like auditwheel (#340), they move to `<dist>.scripts/` in the
    // wheel root and a Python shim that execs them takes their place.
    let scripts_prefix = format!("{}scripts/", input.data_prefix());
    let scripts_dir = format!("{}.scripts", input.filename.distribution);
    let moved =
        |path: &str| -> Option<String> { path.strip_prefix(&scripts_prefix).map(|exe| format!("{scripts_dir}/{exe}")) };

    analysis
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
            let moved_to = moved(path).filter(|_| !replace.is_empty());
            let location = moved_to.clone().unwrap_or_else(|| path.to_string());
            // Where the file lands in site-packages; a file installed elsewhere keeps its path
            // in the wheel, relative to the root.
            let installed = input.install_path(&location).unwrap_or_else(|| location.clone());
            let rpath = if replace.is_empty() {
                RpathEdit::Keep
            } else {
                RpathEdit::Set(super::rpath::rpath_for(&installed, facts, libs_dir))
            };
            let change = ElfChange {
                source: ElfSource::Member(path.to_string()),
                strip: settings.strip,
                edit: ElfEdit { soname: None, replace_needed: replace, remove_needed: remove, rpath },
            };
            let patched = match moved_to {
                Some(moved_to) => {
                    let exe = moved_to.rsplit('/').next().unwrap_or_default().to_string();
                    Patched::Moved {
                        shim: NewMember::new(script_shim(&scripts_dir, &exe).into_bytes(), Some(0o755)),
                        moved_to,
                        executable: NewMember { content: Content::Elf(change), mode: Some(0o755) },
                    }
                }
                None => Patched::InPlace(NewMember { content: Content::Elf(change), mode: None }),
            };
            Some((path.to_string(), patched))
        })
        .collect()
}

/// The script that replaces a moved executable: pip rewrites `#!python` to the environment's
/// interpreter, which finds the real executable in its platlib directory.
fn script_shim(scripts_dir: &str, exe: &str) -> String {
    format!(
        "#!python\nimport os\nimport sys\nimport sysconfig\n\nif __name__ == \"__main__\":\n    exe = os.path.join(sysconfig.get_path(\"platlib\"), \"{scripts_dir}\", \"{exe}\")\n    os.execv(exe, [exe] + sys.argv[1:])\n"
    )
}
