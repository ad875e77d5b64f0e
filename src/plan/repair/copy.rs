//! Step 2: copy each library to vendor into `<dist>.libs/` under its hashed name, stripped when
//! asked, its SONAME set to that name and its own needs renamed to the other copies (as edits;
//! the writer makes the copies).

use std::collections::{BTreeMap, BTreeSet};

use super::{Graft, RepairSettings};
use crate::analysis::Analysis;
use crate::analysis::vendor::VendorSource;
use crate::elf::patch::{ElfEdit, RpathEdit};
use crate::plan::{Content, ElfChange, ElfSource, NewMember};

/// One library copied into the wheel.
pub struct Copy {
    pub graft: Graft,
    /// The new name. Ex) `libfoo-0a1b2c3d.so.1.2`
    pub file_name: String,
    pub member: NewMember,
    /// Where it comes from.
    pub source: VendorSource,
}

/// The copy of every library to vendor: its name (from the hash of the file), and the edit
/// that makes it the wheel's own (its SONAME, its needs renamed to the other copies).
pub fn vendor(sources: &[VendorSource], analysis: &Analysis, libs_dir: &str, settings: &RepairSettings) -> Vec<Copy> {
    let named: Vec<(&VendorSource, String)> = sources
        .iter()
        .map(|source| {
            let base_name = source
                .real
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| source.soname.clone());
            (source, vendored_name(&base_name, &hex8(&source.sha256)))
        })
        .collect();
    let renames: BTreeMap<String, String> = named.iter().map(|(s, n)| (s.soname.clone(), n.clone())).collect();
    named
        .into_iter()
        .map(|(source, new_name)| {
            let needs: BTreeMap<String, String> = analysis.external[&source.soname]
                .needs
                .iter()
                .filter_map(|n| renames.get(n).map(|r| (n.clone(), r.clone())))
                .collect();
            // A copy that needs other copies finds them beside itself.
            let edit = ElfEdit {
                soname: Some(new_name.clone()),
                rpath: if needs.is_empty() { RpathEdit::Remove } else { RpathEdit::Set("$ORIGIN".into()) },
                replace_needed: needs,
                remove_needed: BTreeSet::new(),
            };
            let member = format!("{libs_dir}/{new_name}");
            crate::debug!("vendoring {} from {} as {member}", source.soname, source.path);
            let change = ElfChange {
                source: ElfSource::File { path: source.path.clone(), real: source.real.clone() },
                strip: settings.strip,
                edit,
            };
            Copy {
                graft: Graft { soname: source.soname.clone(), source: source.path.clone(), member },
                file_name: new_name,
                member: NewMember { content: Content::Elf(change), mode: Some(0o755) },
                source: source.clone(),
            }
        })
        .collect()
}

/// Old soname → the copy's file name.
pub fn renames(copies: &[Copy]) -> BTreeMap<String, String> {
    copies.iter().map(|c| (c.graft.soname.clone(), c.file_name.clone())).collect()
}

/// `libfoo.so.1.2` + `0a1b2c3d` → `libfoo-0a1b2c3d.so.1.2` (kept when already named so).
pub fn vendored_name(file_name: &str, hash: &str) -> String {
    let (base, ext) = file_name.split_once('.').unwrap_or((file_name, ""));
    let base = if base.ends_with(&format!("-{hash}")) { base.to_string() } else { format!("{base}-{hash}") };
    if ext.is_empty() { base } else { format!("{base}.{ext}") }
}

fn hex8(digest: &[u8]) -> String {
    crate::wheel::digest::hex(&digest[..4])
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
}
