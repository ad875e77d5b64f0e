//! Making the new members a plan names: ELF files read (from the wheel or this machine),
//! stripped and patched, in parallel within the memory budget, each large result deflated into a
//! file of its own at once; then the bill of materials, which names their sha256.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{WriteError, WriteOptions};
use crate::plan::{Content, ElfChange, ElfSource, Plan};
use crate::wheel::Wheel;
use crate::zip::Spilled;

/// A new member's bytes, ready to write.
pub enum Made<'a> {
    /// Held in memory: the plan's own bytes, or a small result made here.
    Bytes(std::borrow::Cow<'a, [u8]>),
    /// Already deflated into a file of its own (large members, so that a wheel of many patched
    /// libraries never holds them all).
    Spilled(Arc<Spilled>),
}

impl Made<'_> {
    pub fn sha256(&self) -> [u8; 32] {
        use sha2::Digest;
        match self {
            Made::Bytes(b) => sha2::Sha256::digest(b).into(),
            Made::Spilled(s) => s.sha256,
        }
    }
}

/// Results from this size on are deflated into a file of their own at once.
const SPILL_FROM: usize = 1 << 20;

/// The new members of a plan, made, and what thinning them made besides.
pub struct Materialized<'a> {
    /// Every new member by output path.
    pub made: BTreeMap<&'a str, Made<'a>>,
    /// Per thinned member (by its output path): its archives (`split`) and notes.
    pub thinned: BTreeMap<String, super::thin::ThinOutcome>,
}

/// Every new member of `plan`, by output path, made: its bytes, its ELF file changed (spilled
/// into `spill_dir` when large), its bill of materials rendered.
pub fn materialize<'a>(
    wheel: &Wheel,
    plan: &'a Plan,
    options: &WriteOptions<'_>,
    spill_dir: &Path,
) -> Result<Materialized<'a>, WriteError> {
    let mut made: BTreeMap<&'a str, Made<'a>> = BTreeMap::new();
    let mut elf: Vec<(&'a str, &'a ElfChange)> = Vec::new();
    let mut sboms = Vec::new();
    let mut thins = Vec::new();
    for (name, member) in plan.replace.iter().chain(&plan.add) {
        match &member.content {
            Content::Bytes(bytes) => {
                made.insert(name, Made::Bytes(bytes.into()));
            }
            Content::Elf(change) => elf.push((name, change)),
            Content::Sbom(sbom) => sboms.push((name.as_str(), sbom)),
            Content::Thin(change) => thins.push((name.as_str(), change)),
        }
    }
    // Each thinned member is inflated into a file of its own and read back a few blocks at a
    // time: a constant amount of memory each, whatever its size.
    let mut thinned = BTreeMap::new();
    let results = crate::parallel::try_map(&thins, |(name, change)| {
        let (spilled, outcome) = super::thin::thin_member(wheel, change, plan.compression_level, spill_dir)?;
        Ok::<_, WriteError>((*name, spilled, outcome))
    })?;
    for (name, spilled, outcome) in results {
        made.insert(name, Made::Spilled(Arc::new(spilled)));
        thinned.insert(name.to_string(), outcome);
    }
    let size = |change: &ElfChange| match &change.source {
        ElfSource::Member(path) => wheel.archive.member(path).map_or(0, |m| m.size),
        ElfSource::File { real, .. } => std::fs::metadata(real).map_or(0, |m| m.len()),
    };
    // The file and its changed copy are in memory together, then the copy is deflated into a
    // file of its own: that is what the budget is asked for.
    let alone_above = options.budget.total() / 2;
    let changed = crate::parallel::try_map_by_cost(
        &elf,
        |(_, change)| 2 * size(change),
        alone_above,
        |(name, change)| {
            let _permit = options.budget.take(size(change).saturating_mul(2));
            let data = change_elf(wheel, change, options)?;
            let made = if data.len() < SPILL_FROM {
                Made::Bytes(data.into())
            } else {
                let spilled = Spilled::new(&data, plan.compression_level, spill_dir)
                    .map_err(|source| WriteError::Spill { file: change.source.name().to_string(), source })?;
                Made::Spilled(Arc::new(spilled))
            };
            Ok::<_, WriteError>((*name, made))
        },
    )?;
    made.extend(changed);
    for (name, sbom) in sboms {
        let text = sbom.render(&|member| made.get(member).map(Made::sha256));
        made.insert(name, Made::Bytes(text.into_bytes().into()));
    }
    Ok(Materialized { made, thinned })
}

/// One ELF file read, stripped when asked (before it is patched, auditwheel #716), patched.
fn change_elf(wheel: &Wheel, change: &ElfChange, options: &WriteOptions<'_>) -> Result<Vec<u8>, WriteError> {
    match &change.source {
        ElfSource::Member(path) => {
            let unreadable = |message: String| WriteError::Patch {
                file: path.clone(),
                source: crate::elf::patch::PatchError::External(message),
            };
            let member = wheel.archive.member(path).ok_or_else(|| unreadable("not a member of the wheel".into()))?;
            let data = wheel.archive.read(member).map_err(|e| unreadable(e.to_string()))?;
            strip_and_patch(&data, change, options)
        }
        ElfSource::File { path, real } => {
            let data = crate::files::read_bounded(real, u64::MAX)
                .map_err(|source| WriteError::ReadSource { path: path.clone(), source })?;
            strip_and_patch(&data, change, options)
        }
    }
}

fn strip_and_patch(data: &[u8], change: &ElfChange, options: &WriteOptions<'_>) -> Result<Vec<u8>, WriteError> {
    let name = change.source.name();
    let stripped = if change.strip { Some(strip(data, name)?) } else { None };
    if change.edit.is_empty() {
        return Ok(stripped.unwrap_or_else(|| data.to_vec()));
    }
    let input = stripped.as_deref().unwrap_or(data);
    options.patcher.patch(input, &change.edit).map_err(|source| WriteError::Patch { file: name.to_string(), source })
}

/// `strip -s` on a copy of an ELF file.
fn strip(data: &[u8], name: &str) -> Result<Vec<u8>, WriteError> {
    let fail = |message: String| WriteError::Strip { path: name.to_string(), message };
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
