//! The archive: file name and tags, `WHEEL`, `METADATA`, `RECORD`, reading and writing zips.

pub mod archive;
pub mod filename;
pub mod metadata;
pub mod record;
pub mod writer;

use std::path::Path;

pub use archive::{Archive, ArchiveError, Member};
pub use filename::{FilenameError, WheelFilename, normalize_name};
pub use metadata::{CoreMetadata, WheelInfo};
pub use record::{Record, RecordEntry, RecordError};

#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error(transparent)]
    Filename(#[from] FilenameError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("no `.dist-info` directory at the top of the archive")]
    NoDistInfo,
    #[error("two `.dist-info` directories: `{0}` and `{1}`")]
    TwoDistInfo(String, String),
    #[error("missing `{0}`")]
    Missing(String),
    #[error("`{0}` is not valid UTF-8")]
    Encoding(String),
    #[error("{path}: {source}")]
    Record { path: String, source: RecordError },
    #[error("member `{0}` is not listed in RECORD (the wheel was changed after it was built: rebuild it)")]
    NotInRecord(String),
    #[error("RECORD lists `{0}`, which is not in the archive (the wheel was changed after it was built: rebuild it)")]
    NotInArchive(String),
    #[error("member `{path}`: RECORD says {recorded} bytes, the archive holds {actual}")]
    SizeMismatch { path: String, recorded: u64, actual: u64 },
    #[error("member `{path}`: {message}")]
    BadElf { path: String, message: String },
    #[error(
        "member `{path}`: sha256 does not match RECORD ({recorded} recorded, {actual} computed); the wheel was changed after it was built: rebuild it, or pass --no-verify to write it anyway"
    )]
    HashMismatch { path: String, recorded: String, actual: String },
}

/// An opened wheel with its metadata parsed and its RECORD checked against the archive.
pub struct Wheel {
    pub archive: Archive,
    pub filename: WheelFilename,
    /// Ex) `torch-2.15.0.dist-info`
    pub dist_info: String,
    pub wheel_info: WheelInfo,
    pub metadata: CoreMetadata,
    /// METADATA as written, so that a rewrite can keep every other byte.
    pub metadata_text: String,
    pub record: Record,
    /// RECORD row index by path.
    record_rows: std::collections::HashMap<String, usize>,
}

impl Wheel {
    /// Open a wheel: parse its name, read WHEEL, METADATA and RECORD, and check RECORD against
    /// the central directory (every member listed, every listed file present, sizes equal).
    pub fn open(path: &Path) -> Result<Wheel, WheelError> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let filename = WheelFilename::parse(&name)?;
        let archive = Archive::open(path)?;
        let dist_info = find_dist_info(&archive)?;
        let read_text = |file: &str| -> Result<String, WheelError> {
            let member_path = format!("{dist_info}/{file}");
            let member = archive.member(&member_path).ok_or_else(|| WheelError::Missing(member_path.clone()))?;
            String::from_utf8(archive.read(member)?).map_err(|_| WheelError::Encoding(member_path))
        };
        let wheel_info = WheelInfo::parse(&read_text("WHEEL")?);
        let metadata_text = read_text("METADATA")?;
        let metadata = CoreMetadata::parse(&metadata_text);
        let record_path = format!("{dist_info}/RECORD");
        let record = Record::parse(read_text("RECORD")?.as_bytes())
            .map_err(|source| WheelError::Record { path: record_path.clone(), source })?;
        let record_rows = record.entries.iter().enumerate().map(|(i, e)| (e.path.clone(), i)).collect();
        let wheel = Wheel { archive, filename, dist_info, wheel_info, metadata, metadata_text, record, record_rows };
        wheel.check_record()?;
        Ok(wheel)
    }

    pub fn record_path(&self) -> String {
        format!("{}/RECORD", self.dist_info)
    }

    /// The RECORD row of a member path.
    pub fn record_entry(&self, path: &str) -> Option<&RecordEntry> {
        self.record_rows.get(path).map(|&i| &self.record.entries[i])
    }

    /// RECORD may leave out itself and its signatures; everything else must match.
    fn check_record(&self) -> Result<(), WheelError> {
        let unlisted_ok = |name: &str| {
            name.strip_prefix(&self.dist_info)
                .is_some_and(|rest| matches!(rest, "/RECORD" | "/RECORD.jws" | "/RECORD.p7s"))
        };
        for member in self.archive.members.iter().filter(|m| !m.is_dir) {
            match self.record_entry(&member.name) {
                None if unlisted_ok(&member.name) => {}
                None => return Err(WheelError::NotInRecord(member.name.clone())),
                Some(entry) => {
                    if let Some(size) = entry.size
                        && size != member.size
                    {
                        return Err(WheelError::SizeMismatch {
                            path: member.name.clone(),
                            recorded: size,
                            actual: member.size,
                        });
                    }
                }
            }
        }
        for entry in &self.record.entries {
            if self.archive.member(&entry.path).is_none() {
                return Err(WheelError::NotInArchive(entry.path.clone()));
            }
        }
        Ok(())
    }

    /// Check a member's content against its RECORD hash (sha256 only; rows without a hash, such
    /// as RECORD's own, are not checked).
    pub fn verify_hash(&self, member: &Member, data: &[u8]) -> Result<(), WheelError> {
        use sha2::{Digest, Sha256};
        let Some(entry) = self.record.get(&member.name) else {
            return Ok(());
        };
        let Some(expected) = record::sha256_of_record_hash(&entry.hash) else {
            return Ok(());
        };
        let actual = Sha256::digest(data);
        if actual.as_slice() != expected.as_slice() {
            return Err(WheelError::HashMismatch {
                path: member.name.clone(),
                recorded: entry.hash.clone(),
                actual: record::record_hash(&actual),
            });
        }
        Ok(())
    }
}

/// The one top-level `*.dist-info` directory that holds members.
fn find_dist_info(archive: &Archive) -> Result<String, WheelError> {
    let mut found: Option<String> = None;
    for member in &archive.members {
        let Some((top, _)) = member.name.split_once('/') else {
            continue;
        };
        if !top.ends_with(".dist-info") {
            continue;
        }
        match &found {
            None => found = Some(top.to_string()),
            Some(existing) if existing != top => {
                return Err(WheelError::TwoDistInfo(existing.clone(), top.to_string()));
            }
            Some(_) => {}
        }
    }
    found.ok_or(WheelError::NoDistInfo)
}
