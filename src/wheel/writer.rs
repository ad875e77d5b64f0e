//! The one writer: applies a [`Plan`] to a wheel and writes the result atomically.
//!
//! Unchanged members are copied as their compressed bytes (no inflate, no deflate); only new and
//! changed members are compressed, in parallel. RECORD is always regenerated from the plan, so
//! no caller can forget it. Output goes to a temporary file in the destination directory and is
//! renamed into place only when everything succeeded.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use zip::write::{FileOptions, PreparedZipFile, SimpleFileOptions, ZipFileBuilder};
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::{RecordEntry, Wheel, WheelFilename};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot write member `{name}`: {source}")]
    Zip { name: String, source: zip::result::ZipError },
    #[error("SOURCE_DATE_EPOCH=`{0}` is not a number of seconds")]
    SourceDateEpoch(String),
}

/// A new file for the output wheel.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub data: Vec<u8>,
    /// Unix permission bits; `None` keeps the replaced member's.
    pub mode: Option<u32>,
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
    pub compression_level: i64,
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
}

/// The timestamp for members written anew: `SOURCE_DATE_EPOCH` when set (clamped to the zip
/// range), else `fallback` (the replaced member's own time, or 1980-01-01).
pub fn new_member_time(fallback: Option<DateTime>) -> Result<DateTime, WriteError> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if !value.trim().is_empty() => {
            let secs: i64 = value.trim().parse().map_err(|_| WriteError::SourceDateEpoch(value.clone()))?;
            Ok(datetime_from_epoch(secs))
        }
        _ => Ok(fallback.unwrap_or_default()),
    }
}

/// A zip timestamp (UTC) from Unix seconds, clamped to 1980..=2107.
pub fn datetime_from_epoch(secs: i64) -> DateTime {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    if year < 1980 {
        return DateTime::default();
    }
    if year > 2107 {
        return DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58).unwrap_or_default();
    }
    DateTime::from_date_and_time(year as u16, month, day, (rem / 3600) as u8, (rem % 3600 / 60) as u8, (rem % 60) as u8)
        .unwrap_or_default()
}

/// A member to compress: its name, content, permissions and the time it replaces.
struct CompressJob {
    name: String,
    data: Vec<u8>,
    mode: u32,
    time: Option<DateTime>,
}

/// Where a member of the output comes from.
enum Source {
    /// Copy input member `index` (compressed bytes), possibly under a new name.
    Copy(usize),
    /// A member compressed by us.
    Prepared(Box<PreparedZipFile>),
}

/// Apply `plan` to `wheel` and write the result to `dest` (a file path). Returns `dest`.
/// Unchanged members keep their input RECORD rows (the caller verified them when asked to).
pub fn write_wheel(wheel: &mut Wheel, plan: &Plan, dest: &Path) -> Result<PathBuf, WriteError> {
    write_wheel_after(wheel, plan, dest, None)
}

/// Members copied into a temporary output before the plan was known, so that copying overlaps
/// the analysis. Only members no `retag` plan touches are copied: those before the first
/// `.dist-info`/`.data` member. [`write_wheel_after`] continues the file when the plan keeps them
/// first and unchanged, and discards it otherwise.
pub struct Prestart {
    temp: tempfile::NamedTempFile,
    zip: ZipWriter<std::io::BufWriter<std::fs::File>>,
    copied: Vec<(usize, String)>,
}

impl Prestart {
    /// Copy the leading members of `wheel` into a temporary file in `dir`.
    pub fn copy_prefix(wheel: &Wheel, dir: &Path) -> Result<Prestart, WriteError> {
        let io_err = |source: std::io::Error| WriteError::Io { path: dir.display().to_string(), source };
        let stem = wheel.dist_info.trim_end_matches(".dist-info");
        let (dist_info, data) = (format!("{stem}.dist-info/"), format!("{stem}.data/"));
        let temp =
            tempfile::Builder::new().prefix(".wheelfix-").suffix(".whl.part").tempfile_in(dir).map_err(io_err)?;
        let file = temp.as_file().try_clone().map_err(io_err)?;
        let mut zip = ZipWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
        let mut reader = wheel.archive.zip_clone();
        let mut copied = Vec::new();
        for member in &wheel.archive.members {
            if member.name.starts_with(&dist_info) || member.name.starts_with(&data) {
                break;
            }
            let zip_err = |source| WriteError::Zip { name: member.name.clone(), source };
            zip.raw_copy_file(reader.by_index_raw(member.index).map_err(zip_err)?).map_err(zip_err)?;
            copied.push((member.index, member.name.clone()));
        }
        Ok(Prestart { temp, zip, copied })
    }
}

/// [`write_wheel`], continuing a [`Prestart`] when it fits the plan.
pub fn write_wheel_after(
    wheel: &mut Wheel,
    plan: &Plan,
    dest: &Path,
    prestart: Option<Prestart>,
) -> Result<PathBuf, WriteError> {
    let record_path = format!("{}/RECORD", plan_dist_info(wheel, plan));
    let signature = |name: &str| name.ends_with("/RECORD.jws") || name.ends_with("/RECORD.p7s");
    let members_changed =
        !plan.replace.is_empty() || !plan.add.is_empty() || !plan.remove.is_empty() || !plan.renames.is_empty();

    // The output's member list, in order: input order, additions before the dist-info
    // directory, RECORD last. Signatures over a changed RECORD no longer verify: dropped.
    let mut names: Vec<(String, Option<usize>)> = Vec::new();
    for member in &wheel.archive.members {
        if plan.remove.contains(&member.name)
            || member.name == wheel.record_path()
            || (members_changed && signature(&member.name))
        {
            continue;
        }
        names.push((plan.output_name(&member.name).to_string(), Some(member.index)));
    }
    let dist_info_prefix = format!("{}/", plan_dist_info(wheel, plan));
    let insert_at = names.iter().position(|(n, _)| n.starts_with(&dist_info_prefix)).unwrap_or(names.len());
    let added: Vec<(String, Option<usize>)> = plan.add.keys().map(|k| (k.clone(), None)).collect();
    names.splice(insert_at..insert_at, added);

    // RECORD: input rows renamed, rewritten rows for new content, RECORD's own row last.
    let mut record = wheel.record.clone();
    record.entries.retain(|e| {
        !plan.remove.contains(&e.path) && e.path != wheel.record_path() && !(members_changed && signature(&e.path))
    });
    for entry in &mut record.entries {
        entry.path = plan.output_name(&entry.path).to_string();
        if let Some(new) = plan.replace.get(&entry.path) {
            *entry = RecordEntry::for_bytes(&entry.path, &new.data);
        }
    }
    let by_path: std::collections::HashMap<&str, &RecordEntry> =
        record.entries.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut record_entries: Vec<RecordEntry> = Vec::new();
    for (name, _) in &names {
        if let Some(new) = plan.add.get(name) {
            record_entries.push(RecordEntry::for_bytes(name, &new.data));
        } else if let Some(entry) = by_path.get(name.as_str()) {
            record_entries.push((*entry).clone());
        }
    }
    // Rows for members that are not in the archive order above (none in a valid wheel) are kept.
    record_entries.push(RecordEntry { path: record_path.clone(), hash: String::new(), size: None });
    record.entries = record_entries;
    let record_bytes = record.to_bytes();

    // Compress new content in parallel; copies are decided here and written in order below.
    let mut jobs: Vec<CompressJob> = Vec::new();
    for (name, source) in &names {
        let input = source.map(|i| &wheel.archive.members[i]);
        let new = plan.replace.get(name).or_else(|| plan.add.get(name));
        if let Some(new) = new {
            let mode = new.mode.or_else(|| input.and_then(|m| m.unix_mode)).unwrap_or(0o644);
            jobs.push(CompressJob {
                name: name.clone(),
                data: new.data.clone(),
                mode,
                time: input.and_then(|m| m.modified),
            });
        }
    }
    let record_time = wheel.archive.member(&wheel.record_path()).and_then(|m| m.modified);
    let record_mode = wheel.archive.member(&wheel.record_path()).and_then(|m| m.unix_mode).unwrap_or(0o644);
    jobs.push(CompressJob { name: record_path.clone(), data: record_bytes, mode: record_mode, time: record_time });
    let level = plan.compression_level;
    let prepared: Vec<(String, PreparedZipFile)> = jobs
        .into_par_iter()
        .map(|job| {
            let time = new_member_time(job.time)?;
            let prepared = prepare(&job.name, &job.data, job.mode, time, level)?;
            Ok((job.name, prepared))
        })
        .collect::<Result<_, WriteError>>()?;
    let mut prepared: BTreeMap<String, PreparedZipFile> = prepared.into_iter().collect();
    let mut order: Vec<(String, Source)> = Vec::with_capacity(names.len() + 1);
    for (name, source) in names {
        match prepared.remove(&name) {
            Some(p) => order.push((name, Source::Prepared(Box::new(p)))),
            None => {
                order.push((name, Source::Copy(source.expect("a member without new content comes from the input"))))
            }
        }
    }
    let record_prepared = prepared.remove(&record_path).expect("RECORD is always prepared");
    order.push((record_path, Source::Prepared(Box::new(record_prepared))));

    // The prestarted file fits when the plan begins with exactly its members, copied as they are,
    // and it lies in the destination's directory (the final rename must not cross file systems).
    let dest_dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let prestart = prestart.filter(|p| {
        p.temp.path().parent() == Some(dest_dir)
            && p.copied.len() <= order.len()
            && p.copied.iter().zip(&order).all(|((index, name), (out_name, source))| {
                out_name == name && matches!(source, Source::Copy(i) if i == index)
            })
    });
    match prestart {
        Some(p) => {
            let skip = p.copied.len();
            let rest = order.into_iter().skip(skip).collect();
            emit_into(p.temp, p.zip, rest, Some(&mut wheel.archive), dest)
        }
        None => emit(order, Some(&mut wheel.archive), dest),
    }
}

/// Write a wheel that has no input (a metapackage): `members` in order, RECORD generated last.
pub fn write_new_wheel(dist_info: &str, members: &[(String, NewMember)], dest: &Path) -> Result<PathBuf, WriteError> {
    let record_path = format!("{dist_info}/RECORD");
    let mut record = super::Record::default();
    for (name, member) in members {
        record.entries.push(RecordEntry::for_bytes(name, &member.data));
    }
    record.entries.push(RecordEntry { path: record_path.clone(), hash: String::new(), size: None });
    let record_member = NewMember { data: record.to_bytes(), mode: Some(0o644) };
    let time = new_member_time(None)?;
    let order = members
        .iter()
        .chain(std::iter::once(&(record_path, record_member)))
        .map(|(name, m)| {
            Ok((name.clone(), Source::Prepared(Box::new(prepare(name, &m.data, m.mode.unwrap_or(0o644), time, 6)?))))
        })
        .collect::<Result<Vec<_>, WriteError>>()?;
    emit(order, None, dest)
}

/// Write the members in order to a temporary file beside `dest`, then rename it into place.
fn emit(
    order: Vec<(String, Source)>,
    archive: Option<&mut super::Archive>,
    dest: &Path,
) -> Result<PathBuf, WriteError> {
    let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let io_err = |source: std::io::Error| WriteError::Io { path: dest.display().to_string(), source };
    let temp = tempfile::Builder::new().prefix(".wheelfix-").suffix(".whl.part").tempfile_in(dir).map_err(io_err)?;
    let file = temp.as_file().try_clone().map_err(io_err)?;
    let zip = ZipWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    emit_into(temp, zip, order, archive, dest)
}

/// Append the members to an open output, finish it, and rename it to `dest`.
fn emit_into(
    temp: tempfile::NamedTempFile,
    mut zip: ZipWriter<std::io::BufWriter<std::fs::File>>,
    order: Vec<(String, Source)>,
    mut archive: Option<&mut super::Archive>,
    dest: &Path,
) -> Result<PathBuf, WriteError> {
    let io_err = |source: std::io::Error| WriteError::Io { path: dest.display().to_string(), source };
    for (name, source) in order {
        let zip_err = |source| WriteError::Zip { name: name.clone(), source };
        match source {
            Source::Prepared(p) => zip.add_prepared_file(*p).map_err(zip_err)?,
            Source::Copy(index) => {
                let archive = archive.as_deref_mut().expect("copies come from an input archive");
                let input = archive.zip_mut().by_index_raw(index).map_err(zip_err)?;
                if input.name().is_ok_and(|n| n == name) {
                    zip.raw_copy_file(input).map_err(zip_err)?;
                } else {
                    zip.raw_copy_file_rename(input, &name).map_err(zip_err)?;
                }
            }
        }
    }
    let mut out = zip.finish().map_err(|source| WriteError::Zip { name: "(central directory)".into(), source })?;
    out.flush().map_err(io_err)?;
    drop(out);
    temp.as_file().sync_all().map_err(io_err)?;
    temp.persist(dest).map_err(|e| io_err(e.error))?;
    Ok(dest.to_path_buf())
}

/// The output's `.dist-info` directory name.
fn plan_dist_info(wheel: &Wheel, plan: &Plan) -> String {
    let record = wheel.record_path();
    plan.output_name(&record).trim_end_matches("/RECORD").to_string()
}

fn prepare(name: &str, data: &[u8], mode: u32, time: DateTime, level: i64) -> Result<PreparedZipFile, WriteError> {
    let zip_err = |source| WriteError::Zip { name: name.to_string(), source };
    let (method, level) =
        if level == 0 { (CompressionMethod::Stored, None) } else { (CompressionMethod::Deflated, Some(level)) };
    let options: SimpleFileOptions = FileOptions::default()
        .compression_method(method)
        .compression_level(level)
        .last_modified_time(time)
        .unix_permissions(mode)
        .large_file(data.len() as u64 >= 0xFFFF_FFFF);
    let mut builder = ZipFileBuilder::new(name, options).map_err(zip_err)?;
    builder.write_all(data).map_err(|source| WriteError::Io { path: name.to_string(), source })?;
    builder.finish().map_err(zip_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_epoch_seconds_to_zip_time() {
        let t = datetime_from_epoch(1_700_000_000); // 2023-11-14 22:13:20 UTC
        assert_eq!((t.year(), t.month(), t.day(), t.hour(), t.minute(), t.second()), (2023, 11, 14, 22, 13, 20));
        assert_eq!(datetime_from_epoch(0), DateTime::default());
    }
}
