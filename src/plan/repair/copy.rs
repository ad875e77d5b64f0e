//! Step 2: copy each library to vendor into `<dist>.libs/` under its hashed name, stripped when
//! asked, its SONAME set to that name and its own needs renamed to the other copies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::{Graft, RepairError, RepairSettings, Spill};
use crate::analysis::Analysis;
use crate::elf::patch::{ElfEdit, RpathEdit};
use crate::wheel::writer::NewMember;

/// One library copied into the wheel.
pub struct Copy {
    pub graft: Graft,
    /// The new name. Ex) `libfoo-0a1b2c3d.so.1.2`
    pub file_name: String,
    pub member: NewMember,
    /// The file it was copied from, symlinks resolved.
    pub source_real: PathBuf,
}

/// Name, read and patch every library to vendor, in parallel: first each copy's name (from a
/// hash of the file, streamed), then each copy, within the memory budget.
pub fn vendor(
    libs: &BTreeSet<String>,
    analysis: &Analysis,
    libs_dir: &str,
    settings: &RepairSettings<'_>,
    spill: &Spill<'_>,
) -> Result<Vec<Copy>, RepairError> {
    let libs: Vec<&String> = libs.iter().collect();
    let named: Vec<(String, PathBuf, String)> = crate::parallel::try_map(&libs, |soname| {
        let path = analysis.external[*soname].path.clone().unwrap_or_default();
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path));
        let hash = hex8(
            &crate::wheel::digest::file_sha256(&real)
                .map_err(|source| RepairError::Read { path: path.clone(), source })?,
        );
        let base_name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| (*soname).clone());
        Ok(((*soname).clone(), real, vendored_name(&base_name, &hash)))
    })?;
    let renames: BTreeMap<String, String> = named.iter().map(|(s, _, n)| (s.clone(), n.clone())).collect();
    let size = |path: &PathBuf| std::fs::metadata(path).map_or(0, |m| m.len());
    let alone_above = spill.budget.total() / 2;
    crate::parallel::try_map_by_cost(
        &named,
        |(_, real, _)| 2 * size(real),
        alone_above,
        |(soname, real, new_name)| {
            let (soname, new_name) = (soname.clone(), new_name.clone());
            let source = analysis.external[&soname].path.clone().unwrap_or_default();
            let read_error = |source_err| RepairError::Read { path: source.clone(), source: source_err };
            let size = std::fs::metadata(real).map_err(read_error)?.len();
            let _permit = spill.budget.take(size.saturating_mul(2));
            let data = crate::wheel::inputs::read_bounded(real, u64::MAX).map_err(read_error)?;
            let data = if settings.strip { strip(&data, &source)? } else { data };
            let needs: BTreeMap<String, String> = analysis.external[&soname]
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
            let patched = settings
                .patcher
                .patch(&data, &edit)
                .map_err(|e| RepairError::Patch { file: source.clone(), source: e })?;
            drop(data);
            let member = format!("{libs_dir}/{new_name}");
            crate::debug!("vendoring {soname} from {source} as {member}");
            let content = spill.member(patched, Some(0o755), settings, &source)?;
            Ok(Copy {
                graft: Graft { soname, source, member },
                file_name: new_name,
                member: content,
                source_real: real.clone(),
            })
        },
    )
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

/// `strip -s` on a copy of a library, before patching (auditwheel #716).
pub fn strip(data: &[u8], source: &str) -> Result<Vec<u8>, RepairError> {
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
}
