//! The one writer: applies a [`Plan`] to a wheel and writes the result atomically.
//!
//! Unchanged members are copied as their compressed bytes (no inflate, no deflate); only new and
//! changed members are compressed, in parallel. RECORD is always regenerated, so no caller can
//! forget it: every file with its sha256 and size, from the new content, the digests the
//! analysis computed, or the input's row where that is sound. Output goes to a temporary file
//! beside the destination and is renamed into place only when everything succeeded
//! ([`super::output`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::output::{Commit, OutputError, TempOutput};
use super::zip::{Compressed, DosTime, Spilled, ZipWriter};
use super::{RecordEntry, RecordFile, Wheel, WheelFilename};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot read member `{name}` to hash it: {message}")]
    Read { name: String, message: String },
    #[error("SOURCE_DATE_EPOCH=`{0}` is not a number of seconds")]
    SourceDateEpoch(String),
    #[error("the output would hold {0}; nothing was written")]
    Layout(String),
}

/// A new file for the output wheel.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub content: Content,
    /// Unix permission bits; `None` keeps the replaced member's.
    pub mode: Option<u32>,
}

/// The bytes of a new member: in memory, or already deflated into a file of their own (large
/// members, so that a wheel of many patched libraries never holds them all).
#[derive(Debug, Clone)]
pub enum Content {
    Bytes(Vec<u8>),
    Spilled(Arc<Spilled>),
}

impl NewMember {
    pub fn new(data: Vec<u8>, mode: Option<u32>) -> NewMember {
        NewMember { content: Content::Bytes(data), mode }
    }

    /// Deflate `data` at `level` into a file in `dir` when it is large, else keep it.
    pub fn spilled_if_large(data: Vec<u8>, mode: Option<u32>, level: u32, dir: &Path) -> std::io::Result<NewMember> {
        const SPILL_FROM: usize = 1 << 20;
        if data.len() < SPILL_FROM {
            return Ok(NewMember::new(data, mode));
        }
        Ok(NewMember { content: Content::Spilled(Arc::new(Spilled::new(&data, level, dir)?)), mode })
    }

    /// The sha256 of the member's bytes.
    pub fn sha256(&self) -> [u8; 32] {
        use sha2::Digest;
        match &self.content {
            Content::Bytes(b) => sha2::Sha256::digest(b).into(),
            Content::Spilled(s) => s.sha256,
        }
    }

    /// The bytes, when they are held in memory.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.content {
            Content::Bytes(b) => Some(b),
            Content::Spilled(_) => None,
        }
    }

    fn record_entry(&self, name: &str) -> RecordEntry {
        match &self.content {
            Content::Bytes(b) => RecordEntry::for_bytes(name, b),
            Content::Spilled(s) => RecordEntry::for_digest(name, &s.sha256, s.size),
        }
    }
}

/// What to change in a wheel. Everything not named here is copied unchanged.
#[derive(Debug, Clone)]
pub struct Plan {
    pub filename: WheelFilename,
    /// Old member path → new member path (a version change renames `.dist-info`).
    pub renames: BTreeMap<String, String>,
    /// Members whose content changes, by their *output* path.
    pub replace: BTreeMap<String, NewMember>,
    /// Members added, by output path (written before the `.dist-info` directory).
    pub add: BTreeMap<String, NewMember>,
    /// Members dropped, by input path.
    pub remove: BTreeSet<String>,
    /// Deflate level for new members (zlib levels 0–9).
    pub compression_level: u32,
}

impl Plan {
    pub fn new(filename: WheelFilename) -> Self {
        Plan {
            filename,
            renames: BTreeMap::new(),
            replace: BTreeMap::new(),
            add: BTreeMap::new(),
            remove: BTreeSet::new(),
            compression_level: 6,
        }
    }

    /// The output path of an input member.
    pub fn output_name<'a>(&'a self, input: &'a str) -> &'a str {
        self.renames.get(input).map(String::as_str).unwrap_or(input)
    }

    /// The output's `.dist-info` directory, given the input's. Ex) `torch-2.15.0+rocm10.1.0.dist-info`
    pub fn output_dist_info(&self, input_dist_info: &str) -> String {
        let prefix = format!("{input_dist_info}/");
        self.renames
            .iter()
            .find(|(old, _)| old.starts_with(&prefix))
            .and_then(|(_, new)| new.split_once('/'))
            .map_or_else(|| input_dist_info.to_string(), |(dir, _)| dir.to_string())
    }

    /// Whether the plan changes any member (a file name change alone changes none).
    pub fn changes_members(&self) -> bool {
        !self.replace.is_empty() || !self.add.is_empty() || !self.remove.is_empty() || !self.renames.is_empty()
    }
}

/// The timestamp for members written anew: `SOURCE_DATE_EPOCH` when set (clamped to the zip
/// range), else `fallback` (the replaced member's own time, or 1980-01-01).
pub fn new_member_time(fallback: Option<DosTime>) -> Result<DosTime, WriteError> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if !value.trim().is_empty() => {
            let secs: i64 = value.trim().parse().map_err(|_| WriteError::SourceDateEpoch(value.clone()))?;
            Ok(DosTime::from_epoch(secs))
        }
        _ => Ok(fallback.unwrap_or_default()),
    }
}

/// Where a member of the output comes from.
enum Source {
    /// Input member `index`, copied as its compressed bytes.
    Copy(usize),
    /// Content compressed here.
    New { mode: u32, time: DosTime, compressed: Compressed },
    /// Content deflated into a file of its own beforehand.
    Spilled { mode: u32, time: DosTime, spilled: Arc<Spilled> },
}

/// Apply `plan` to `wheel` and write the result to `dest`. `digests` holds the sha256 of the
/// input members the analysis hashed (by member index); `mode` replaces `0666 & ~umask`.
pub fn write_wheel(
    wheel: &Wheel,
    plan: &Plan,
    digests: &[Option<[u8; 32]>],
    dest: &Path,
    commit: Commit,
    mode: Option<u32>,
) -> Result<PathBuf, WriteError> {
    let members = wheel.archive.members();
    let input_record = wheel.record_path();
    let output_record = plan.output_name(&input_record).to_string();
    let signature = |name: &str| name.ends_with("/RECORD.jws") || name.ends_with("/RECORD.p7s");

    // The output's member list, in order: input order, additions before the dist-info
    // directory, RECORD last.
    let mut names: Vec<(String, Option<usize>)> = Vec::new();
    for (index, member) in members.iter().enumerate() {
        if plan.remove.contains(&*member.name) || *member.name == input_record {
            continue;
        }
        names.push((plan.output_name(&member.name).to_string(), Some(index)));
    }
    let dist_info_prefix = format!("{}/", plan.output_dist_info(&wheel.dist_info));
    let insert_at = names.iter().position(|(n, _)| n.starts_with(&dist_info_prefix)).unwrap_or(names.len());
    names.splice(insert_at..insert_at, plan.add.keys().map(|k| (k.clone(), None)));
    check_layout(&names)?;

    // RECORD: every file with its sha256 and size, in output order; signatures keep the rows
    // the input gave them (usually none: they are made after RECORD).
    let mut record = RecordFile { entries: Vec::with_capacity(names.len() + 1), crlf: wheel.record.crlf };
    for (name, source) in &names {
        if name.ends_with('/') {
            continue; // directory entries have no rows
        }
        let row = match (plan.replace.get(name).or_else(|| plan.add.get(name)), source) {
            (Some(new), _) => new.record_entry(name),
            (None, Some(index)) if signature(name) => match wheel.record_entry(&members[*index].name) {
                Some(row) => RecordEntry { path: name.clone(), ..row.to_entry() },
                None => continue,
            },
            (None, Some(index)) => input_row(wheel, *index, name, digests)?,
            (None, None) => unreachable!("an added member has content"),
        };
        record.entries.push(row);
    }
    record.entries.push(RecordEntry { path: output_record.clone(), hash: String::new(), size: None, bad_size: None });
    let mut record_bytes = record.to_bytes();
    // Signatures sign RECORD's bytes: they stay only if RECORD does.
    // Read only when it can be the same (the same size): a stale RECORD may be huge.
    let input_record_bytes = wheel
        .archive
        .member(&input_record)
        .filter(|m| m.size == record_bytes.len() as u64)
        .and_then(|m| wheel.archive.read(m).ok());
    let record_unchanged = output_record == input_record && input_record_bytes.as_deref() == Some(&record_bytes[..]);
    if !record_unchanged && names.iter().any(|(n, _)| signature(n)) {
        names.retain(|(n, _)| !signature(n));
        record.entries.retain(|r| !signature(&r.path));
        record_bytes = record.to_bytes();
    }

    // Compress new content in parallel; copies are written in order below.
    let level = plan.compression_level;
    let record_member = wheel.archive.member(&input_record);
    let mut jobs: Vec<(String, &Content, u32, Option<DosTime>)> = Vec::new();
    for (name, source) in &names {
        if let Some(new) = plan.replace.get(name).or_else(|| plan.add.get(name)) {
            let input = source.map(|i| &members[i]);
            let mode = new.mode.or_else(|| input.and_then(|m| m.unix_mode())).unwrap_or(0o644);
            jobs.push((
                name.clone(),
                &new.content,
                mode,
                input.map(|m| DosTime { time: m.dos_time, date: m.dos_date }),
            ));
        }
    }
    let record_content = Content::Bytes(record_bytes);
    if !record_unchanged {
        let mode = record_member.and_then(|m| m.unix_mode()).unwrap_or(0o644);
        let time = record_member.map(|m| DosTime { time: m.dos_time, date: m.dos_date });
        jobs.push((output_record.clone(), &record_content, mode, time));
    }
    let mut compressed: BTreeMap<String, Source> =
        crate::parallel::try_map_owned(jobs, |(name, content, mode, time)| {
            let time: DosTime = new_member_time(time)?;
            let source = match content {
                Content::Bytes(data) => Source::New { mode, time, compressed: Compressed::new(data, level) },
                Content::Spilled(spilled) => Source::Spilled { mode, time, spilled: spilled.clone() },
            };
            Ok::<_, WriteError>((name, source))
        })?
        .into_iter()
        .collect();
    let mut order: Vec<(String, Source)> = Vec::with_capacity(names.len() + 1);
    for (name, source) in names {
        let from = match (compressed.remove(&name), source) {
            (Some(new), _) => new,
            // A directory entry that holds data is written empty: installers drop the data,
            // and no RECORD row can list it.
            (None, Some(index)) if members[index].is_dir() && members[index].compressed_size > 0 => {
                let m = &members[index];
                let time = DosTime { time: m.dos_time, date: m.dos_date };
                Source::New { mode: m.unix_mode().unwrap_or(0o755), time, compressed: Compressed::new(&[], 0) }
            }
            (None, Some(index)) => Source::Copy(index),
            (None, None) => return Err(WriteError::Layout(format!("`{name}` without content"))),
        };
        order.push((name, from));
    }
    let record_source = match compressed.remove(&output_record) {
        Some(new) => new,
        None => Source::Copy(members.iter().position(|m| *m.name == input_record).expect("RECORD is a member")),
    };
    order.push((output_record, record_source));
    emit(order, Some(wheel), dest, commit, mode)
}

/// Every member name once, and no name both a file and a directory another member lies in
/// (`hz.libs` beside `hz.libs/libz.so`): installers cannot unpack such an archive.
fn check_layout(names: &[(String, Option<usize>)]) -> Result<(), WriteError> {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::with_capacity(names.len());
    for (name, _) in names {
        if !seen.insert(name.as_str()) {
            return Err(WriteError::Layout(format!("`{name}` twice")));
        }
    }
    for (name, _) in names {
        let mut at = name.len();
        while let Some(slash) = name[..at].rfind('/') {
            let dir = &name[..slash];
            if seen.contains(dir) {
                return Err(WriteError::Layout(format!("a file `{dir}` and the member `{name}` inside it")));
            }
            at = slash;
        }
    }
    Ok(())
}

/// The RECORD row of an unchanged input member: from its digest when the analysis hashed it,
/// else the input's row when that can stand, else hashed here.
fn input_row(wheel: &Wheel, index: usize, name: &str, digests: &[Option<[u8; 32]>]) -> Result<RecordEntry, WriteError> {
    let member = &wheel.archive.members()[index];
    if let Some(Some(digest)) = digests.get(index) {
        return Ok(RecordEntry::for_digest(name, digest, member.size));
    }
    if wheel.row_is_reusable(member) {
        let mut row = wheel.record_entry(&member.name).expect("a reusable row exists").to_entry();
        row.path = name.to_string();
        return Ok(row);
    }
    // Streamed: the member may be larger than memory allows.
    use sha2::Digest;
    let fail = |message: String| WriteError::Read { name: member.name.to_string(), message };
    let mut stream = wheel.archive.zip.stream(member).map_err(|e| fail(e.to_string()))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut stream, &mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(RecordEntry::for_digest(name, &hasher.finalize().into(), member.size))
}

/// Copy a wheel byte for byte to `dest` (a wheel that is already what it should be).
pub fn copy_wheel(input: &Path, dest: &Path, commit: Commit, mode: Option<u32>) -> Result<PathBuf, WriteError> {
    let temp = TempOutput::create(dest)?;
    let io_err = |source| WriteError::Io { path: dest.display().to_string(), source };
    let from = super::inputs::open_regular(input).map_err(io_err)?;
    let len = from.metadata().map_err(io_err)?.len();
    let mut to = temp.file()?;
    std::io::copy(&mut std::io::Read::take(from, len), &mut to).map_err(io_err)?;
    drop(to);
    if let Some(mode) = mode {
        temp.set_mode(mode)?;
    }
    Ok(temp.commit(commit)?)
}

/// Write a wheel that has no input (a metapackage): `members` in order, RECORD generated last.
pub fn write_new_wheel(dist_info: &str, members: &[(String, NewMember)], dest: &Path) -> Result<PathBuf, WriteError> {
    let record_path = format!("{dist_info}/RECORD");
    let mut record = RecordFile::default();
    for (name, member) in members {
        record.entries.push(member.record_entry(name));
    }
    record.entries.push(RecordEntry { path: record_path.clone(), hash: String::new(), size: None, bad_size: None });
    let record_member = NewMember::new(record.to_bytes(), Some(0o644));
    let time = new_member_time(None)?;
    let order = members
        .iter()
        .chain(std::iter::once(&(record_path, record_member)))
        .map(|(name, m)| {
            let mode = m.mode.unwrap_or(0o644);
            let source = match &m.content {
                Content::Bytes(data) => Source::New { mode, time, compressed: Compressed::new(data, 6) },
                Content::Spilled(spilled) => Source::Spilled { mode, time, spilled: spilled.clone() },
            };
            (name.clone(), source)
        })
        .collect();
    emit(order, None, dest, Commit::Replace, None)
}

/// Write the members in order to a temporary file beside `dest`, then move it into place.
fn emit(
    order: Vec<(String, Source)>,
    wheel: Option<&Wheel>,
    dest: &Path,
    commit: Commit,
    mode: Option<u32>,
) -> Result<PathBuf, WriteError> {
    let temp = TempOutput::create(dest)?;
    let io_err = |name: &str| {
        let name = name.to_string();
        let dest = dest.display().to_string();
        move |source: std::io::Error| WriteError::Io { path: format!("{dest} (member `{name}`)"), source }
    };
    let mut zip = ZipWriter::new(temp.file()?);
    for (name, source) in &order {
        match source {
            Source::New { mode, time, compressed } => zip.add(name, *mode, *time, compressed).map_err(io_err(name))?,
            Source::Spilled { mode, time, spilled } => {
                zip.add_spilled(name, *mode, *time, spilled).map_err(io_err(name))?
            }
            Source::Copy(index) => {
                let wheel = wheel.expect("copies come from an input wheel");
                let entry = &wheel.archive.members()[*index];
                zip.copy(&wheel.archive.zip, entry, name).map_err(io_err(name))?;
            }
        }
    }
    zip.finish().map_err(io_err("(central directory)"))?;
    if let Some(mode) = mode {
        temp.set_mode(mode)?;
    }
    Ok(temp.commit(commit)?)
}
