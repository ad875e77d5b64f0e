//! The one writer: applies a [`Plan`] to a wheel and writes the result atomically.
//!
//! Unchanged members are copied as their compressed bytes (no inflate, no deflate); new and
//! changed members are made first ([`materialize`]: ELF files read, stripped and patched), then
//! compressed, in parallel. RECORD is always regenerated, so no caller can
//! forget it: every file with its sha256 and size, from the new content, the digests the
//! analysis computed, or the input's row where that is sound. Output goes to a temporary file
//! beside the destination and is renamed into place only when everything succeeded
//! ([`crate::output`]).

pub mod head_start;
pub mod materialize;
pub mod new_wheel;
pub mod proof;
pub mod thin;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::analysis::budget::MemoryBudget;
use crate::elf::patch::{PatchError, Patcher};
use crate::output::{Commit, OutputError, TempOutput};
use crate::plan::Plan;
use crate::wheel::{RecordEntry, RecordFile, Wheel};
use crate::zip::{Compressed, DosTime, Spilled, ZipWriter};
use head_start::HeadStart;
use materialize::Made;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot read member `{name}` to hash it: {message}")]
    Read { name: String, message: String },
    #[error("the output would hold {0}; nothing was written")]
    Layout(String),
    #[error("cannot read {path}: {source}")]
    ReadSource { path: String, source: std::io::Error },
    #[error("cannot patch `{file}`: {source}")]
    Patch { file: String, source: PatchError },
    #[error("cannot thin `{file}`: {problem}")]
    Thin { file: String, problem: thin::MemberProblem },
    #[error("cannot split `{file}`: {problem}")]
    Split { file: String, problem: thin::MemberProblem },
    #[error("cannot strip {path}: {message}")]
    Strip { path: String, message: String },
    #[error("cannot write the patched `{file}` aside: {source}")]
    Spill { file: String, source: std::io::Error },
    #[error("another wheelfix run is rewriting {0} in place; nothing was written")]
    InPlaceBusy(String),
    #[error("cannot remove the old file {path} ({source}); the new one was removed again, nothing changed")]
    RemoveOld { path: String, source: std::io::Error },
}

/// What the writer needs besides the plan: how to patch, the memory it may take, the time of
/// new members.
pub struct WriteOptions<'a> {
    pub patcher: &'a dyn Patcher,
    pub budget: &'a MemoryBudget,
    /// `SOURCE_DATE_EPOCH`.
    pub source_date_epoch: Option<i64>,
}

/// The timestamp for members written anew: `SOURCE_DATE_EPOCH` when set (clamped to the zip
/// range; [`crate::settings::Settings::source_date_epoch`]), else `fallback` (the replaced
/// member's own time, or 1980-01-01).
pub fn new_member_time(source_date_epoch: Option<i64>, fallback: Option<DosTime>) -> DosTime {
    match source_date_epoch {
        Some(secs) => DosTime::from_epoch(secs),
        None => fallback.unwrap_or_default(),
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

/// Where the writer puts a wheel, and how.
pub struct WriteTo<'a> {
    pub dest: &'a Path,
    /// How the output takes `dest`'s place.
    pub commit: Commit,
    /// The file's mode in place of `0666 & ~umask` (an in-place rewrite keeps the input's).
    pub mode: Option<u32>,
    /// A file already holding copies of the first members ([`head_start`]), to go on from.
    pub head: Option<HeadStart>,
}

impl<'a> WriteTo<'a> {
    /// A new file at `dest`, committed as `commit` says.
    pub fn new(dest: &'a Path, commit: Commit) -> WriteTo<'a> {
        WriteTo { dest, commit, mode: None, head: None }
    }
}

/// Apply `plan` to `wheel` and write the result where `to` says. `digests` holds the sha256 of
/// the input members the analysis hashed (by member index).
pub fn write_wheel(
    wheel: &Wheel,
    plan: &Plan,
    digests: &[Option<[u8; 32]>],
    options: &WriteOptions<'_>,
    to: WriteTo<'_>,
) -> Result<Written, WriteError> {
    let WriteTo { dest, commit, mode, head } = to;
    let materialize::Materialized { made, thinned } =
        materialize::materialize(wheel, plan, options, crate::output::parent_dir(dest))?;
    let members = wheel.archive.members();
    let input_record = wheel.record_path();
    let output_record = plan.output_name(&input_record).to_string();

    let mut names = output_names(wheel, plan, &input_record)?;
    let mut record = output_record_file(wheel, &names, &made, digests, &output_record)?;
    let mut record_bytes = record.to_bytes();
    // Signatures sign RECORD's bytes: they stay only if RECORD does.
    // Read only when it can be the same (the same size): a stale RECORD may be huge.
    let input_record_bytes = wheel
        .archive
        .member(&input_record)
        .filter(|m| m.size == record_bytes.len() as u64)
        .and_then(|m| wheel.archive.read(m).ok());
    let record_unchanged = output_record == input_record && input_record_bytes.as_deref() == Some(&record_bytes[..]);
    if !record_unchanged && names.iter().any(|(n, _)| is_signature(n)) {
        names.retain(|(n, _)| !is_signature(n));
        record.entries.retain(|r| !is_signature(&r.path));
        record_bytes = record.to_bytes();
    }

    // Compress new content in parallel; copies are written in order below.
    let record_member = wheel.archive.member(&input_record);
    let mut jobs: Vec<(String, &Made<'_>, u32, Option<DosTime>)> = Vec::new();
    for (name, source) in &names {
        if let (Some(new), Some(content)) = (plan.new_member(name), made.get(name.as_str())) {
            let input = source.map(|i| &members[i]);
            let mode = new.mode.or_else(|| input.and_then(|m| m.unix_mode())).unwrap_or(0o644);
            jobs.push((name.clone(), content, mode, input.map(|m| DosTime { time: m.dos_time, date: m.dos_date })));
        }
    }
    let record_content = Made::Bytes(record_bytes.into());
    if !record_unchanged {
        let mode = record_member.and_then(|m| m.unix_mode()).unwrap_or(0o644);
        let time = record_member.map(|m| DosTime { time: m.dos_time, date: m.dos_date });
        jobs.push((output_record.clone(), &record_content, mode, time));
    }
    let mut compressed = compress(jobs, plan.compression_level, options.source_date_epoch)?;
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
    let path = emit(order, Some(wheel), WriteTo { dest, commit, mode, head })?;
    Ok(Written { path, thinned })
}

/// A wheel written: where, and what thinning its members made besides (`split`'s archives).
pub struct Written {
    pub path: PathBuf,
    /// Per thinned member, by its path in the output.
    pub thinned: BTreeMap<String, thin::ThinOutcome>,
}

/// `--in-place`: replace the input (keeping its mode), or write the new name and remove the
/// input. Never replace a file that is not this wheel's input, and only go on while the input
/// is still the file that was read.
pub fn write_in_place(
    wheel: &Wheel,
    plan: &Plan,
    digests: &[Option<[u8; 32]>],
    options: &WriteOptions<'_>,
    path: &Path,
    dest: &Path,
) -> Result<Written, WriteError> {
    let (mode, identity) = (wheel.archive.zip.file_mode, wheel.archive.zip.identity);
    // One run at a time rewrites an input in place: two runs with different flags would both
    // write, and both say they succeeded.
    if !crate::output::try_lock(wheel.archive.zip.file()) {
        return Err(WriteError::InPlaceBusy(path.display().to_string()));
    }
    let replaced = || WriteError::Output(OutputError::InputChanged(path.display().to_string()));
    let input_unchanged = || crate::files::FileIdentity::at(path).ok() == Some(identity);
    if !input_unchanged() {
        return Err(replaced());
    }
    if dest == path {
        let to = WriteTo { mode: Some(mode), ..WriteTo::new(dest, Commit::ReplaceInput(identity)) };
        return write_wheel(wheel, plan, digests, options, to);
    }
    let to = WriteTo { mode: Some(mode), ..WriteTo::new(dest, Commit::NoClobber) };
    let written = write_wheel(wheel, plan, digests, options, to).map_err(|e| match e {
        WriteError::Output(OutputError::Exists(_)) if !input_unchanged() => replaced(),
        e => e,
    })?;
    if input_unchanged()
        && let Err(source) = std::fs::remove_file(path)
        && source.kind() != std::io::ErrorKind::NotFound
    {
        // The input stays (immutable, a read-only directory): the new file goes again, so
        // that one wheel is never left as two.
        let _ = std::fs::remove_file(&written.path);
        return Err(WriteError::RemoveOld { path: path.display().to_string(), source });
    }
    Ok(written)
}

/// The output's member list, in order: input order, additions before the dist-info
/// directory, RECORD left out (it goes last); each with the input member it comes from.
fn output_names(wheel: &Wheel, plan: &Plan, input_record: &str) -> Result<Vec<(String, Option<usize>)>, WriteError> {
    let mut names: Vec<(String, Option<usize>)> = Vec::new();
    for (index, member) in wheel.archive.members().iter().enumerate() {
        if plan.remove.contains(&*member.name) || *member.name == *input_record {
            continue;
        }
        names.push((plan.output_name(&member.name).to_string(), Some(index)));
    }
    let dist_info_prefix = format!("{}/", plan.output_dist_info(&wheel.dist_info));
    let insert_at = names.iter().position(|(n, _)| n.starts_with(&dist_info_prefix)).unwrap_or(names.len());
    names.splice(insert_at..insert_at, plan.add.keys().map(|k| (k.clone(), None)));
    check_layout(&names)?;
    Ok(names)
}

/// RECORD's signatures: made after RECORD, over its bytes.
fn is_signature(name: &str) -> bool {
    name.ends_with("/RECORD.jws") || name.ends_with("/RECORD.p7s")
}

/// The output's RECORD: every file with its sha256 and size, in output order; signatures keep
/// the rows the input gave them (usually none: they are made after RECORD).
fn output_record_file(
    wheel: &Wheel,
    names: &[(String, Option<usize>)],
    made: &BTreeMap<&str, Made<'_>>,
    digests: &[Option<[u8; 32]>],
    output_record: &str,
) -> Result<RecordFile, WriteError> {
    let members = wheel.archive.members();
    let mut record = RecordFile { entries: Vec::with_capacity(names.len() + 1), crlf: wheel.record.crlf };
    for (name, source) in names {
        if name.ends_with('/') {
            continue; // directory entries have no rows
        }
        let row = match (made.get(name.as_str()), source) {
            (Some(new), _) => record_entry(name, new),
            (None, Some(index)) if is_signature(name) => match wheel.record_entry(&members[*index].name) {
                Some(row) => RecordEntry { path: name.clone(), ..row.to_entry() },
                None => continue,
            },
            (None, Some(index)) => input_row(wheel, *index, name, digests)?,
            (None, None) => unreachable!("an added member has content"),
        };
        record.entries.push(row);
    }
    record.entries.push(RecordEntry {
        path: output_record.to_string(),
        hash: String::new(),
        size: None,
        bad_size: None,
    });
    Ok(record)
}

/// Compress the new members in parallel (`jobs`: name, content, mode, the replaced member's time).
fn compress(
    jobs: Vec<(String, &Made<'_>, u32, Option<DosTime>)>,
    level: u32,
    source_date_epoch: Option<i64>,
) -> Result<BTreeMap<String, Source>, WriteError> {
    Ok(crate::parallel::try_map_owned(jobs, |(name, content, mode, time)| {
        let time = new_member_time(source_date_epoch, time);
        let source = match content {
            Made::Bytes(data) => Source::New { mode, time, compressed: Compressed::new(data, level) },
            Made::Spilled(spilled) => Source::Spilled { mode, time, spilled: spilled.clone() },
        };
        Ok::<_, WriteError>((name, source))
    })?
    .into_iter()
    .collect())
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
    let from = crate::files::open_regular(input).map_err(io_err)?;
    let len = from.metadata().map_err(io_err)?.len();
    let mut to = temp.file()?;
    std::io::copy(&mut std::io::Read::take(from, len), &mut to).map_err(io_err)?;
    drop(to);
    if let Some(mode) = mode {
        temp.set_mode(mode)?;
    }
    Ok(temp.commit(commit)?)
}

/// Write a wheel that has no input ([`new_wheel::NewWheel`] composes its members): `spilled`,
/// deflated (or stored) into files of their own beforehand, first (a large member is never held
/// in memory), then `members` in order (mode 0644), RECORD generated last.
pub fn write_new_wheel_with(
    dist_info: &str,
    spilled: &[(String, Arc<Spilled>)],
    members: &[(String, Vec<u8>)],
    dest: &Path,
    source_date_epoch: Option<i64>,
) -> Result<PathBuf, WriteError> {
    let record_path = format!("{dist_info}/RECORD");
    let mut record = RecordFile::default();
    for (name, s) in spilled {
        record.entries.push(RecordEntry::for_digest(name, &s.sha256, s.size));
    }
    for (name, data) in members {
        record.entries.push(RecordEntry::for_bytes(name, data));
    }
    record.entries.push(RecordEntry { path: record_path.clone(), hash: String::new(), size: None, bad_size: None });
    let record_bytes = record.to_bytes();
    let time = new_member_time(source_date_epoch, None);
    let order = spilled
        .iter()
        .map(|(name, s)| (name.clone(), Source::Spilled { mode: 0o644, time, spilled: s.clone() }))
        .chain(
            members
                .iter()
                .map(|(name, data)| (name.as_str(), data.as_slice()))
                .chain(std::iter::once((record_path.as_str(), record_bytes.as_slice())))
                .map(|(name, data)| {
                    (name.to_string(), Source::New { mode: 0o644, time, compressed: Compressed::new(data, 6) })
                }),
        )
        .collect();
    emit(order, None, WriteTo::new(dest, Commit::Replace))
}

/// The RECORD row of a new member.
fn record_entry(name: &str, made: &Made<'_>) -> RecordEntry {
    match made {
        Made::Bytes(b) => RecordEntry::for_bytes(name, b),
        Made::Spilled(s) => RecordEntry::for_digest(name, &s.sha256, s.size),
    }
}

/// Write the members in order to a temporary file beside `dest` (or on from a head start's),
/// then move it into place.
fn emit(order: Vec<(String, Source)>, wheel: Option<&Wheel>, to: WriteTo<'_>) -> Result<PathBuf, WriteError> {
    let WriteTo { dest, commit, mode, head } = to;
    let io_err = |name: &str| {
        let name = name.to_string();
        let dest = dest.display().to_string();
        move |source: std::io::Error| WriteError::Io { path: format!("{dest} (member `{name}`)"), source }
    };
    let (temp, mut zip, done) = match (head, wheel) {
        (Some(mut head), Some(wheel)) if head.input == wheel.archive.zip.identity => {
            // The members the head start copied as this order would copy them stay.
            let members = wheel.archive.members();
            let same = |((name, source), &index): (&(String, Source), &usize)| {
                matches!(source, Source::Copy(i) if *i == index) && *name == *members[index].name
            };
            let kept = order.iter().zip(&head.copied).take_while(|&pair| same(pair)).count();
            head.zip.truncate(kept).map_err(io_err("(the members copied ahead)"))?;
            head.temp.retarget(dest)?;
            crate::debug!("{}: {kept} member(s) were copied ahead", dest.display());
            (head.temp, head.zip, kept)
        }
        _ => {
            let temp = TempOutput::create(dest)?;
            let zip = ZipWriter::new(temp.file()?);
            (temp, zip, 0)
        }
    };
    for (name, source) in &order[done..] {
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
