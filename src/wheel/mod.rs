//! The archive: file name and tags, `WHEEL`, `METADATA`, `RECORD`, reading and writing zips.

pub mod archive;
pub mod filename;
pub mod metadata;
pub mod name;
pub mod output;
pub mod platform_tag;
pub mod record;
pub mod requirement;
pub mod writer;
pub mod zip;

use std::path::Path;
use std::str::FromStr;

pub use archive::{Archive, ArchiveError, Member};
pub use filename::{FilenameError, WheelFilename};
pub use metadata::{CoreMetadata, DistVersion, WheelInfo};
pub use record::{Record, RecordEntry, RecordError, RecordFinding, RecordHash, RecordProblem};

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
    #[error("{path}: {source}")]
    Metadata { path: String, source: metadata::MetadataError },
    #[error("member `{path}`: {message}")]
    BadElf { path: String, message: String },
    #[error(
        "RECORD does not match the archive ({summary}: first `{first}`) and --strict-record is on; rebuild the wheel, or leave --strict-record off to have RECORD corrected"
    )]
    StrictRecord { summary: String, first: String },
}

/// A wheel opened only as far as its metadata: what an index or a metapackage needs.
pub struct WheelMetadata {
    pub archive: Archive,
    pub filename: WheelFilename,
    /// Ex) `torch-2.15.0.dist-info`
    pub dist_info: String,
    pub metadata: CoreMetadata,
    /// METADATA as written, so that a rewrite can keep every other byte (and an index can
    /// serve it as it is).
    pub metadata_text: String,
}

impl WheelMetadata {
    /// Open a wheel's archive and read its METADATA (nothing else is read).
    pub fn open(path: &Path) -> Result<WheelMetadata, WheelError> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let filename = WheelFilename::parse(&name)?;
        let archive = Archive::open(path)?;
        let dist_info = find_dist_info(&archive)?;
        let metadata_path = format!("{dist_info}/METADATA");
        let metadata_text = read_text(&archive, &metadata_path)?;
        let metadata = CoreMetadata::parse(&metadata_text)
            .map_err(|source| WheelError::Metadata { path: metadata_path, source })?;
        Ok(WheelMetadata { archive, filename, dist_info, metadata, metadata_text })
    }

    /// Where the file name and METADATA disagree on the name or the version (pip installs such
    /// a wheel under METADATA's).
    pub fn name_mismatch(&self) -> Option<String> {
        let (f, m) = (&self.filename, &self.metadata);
        let same_version = pep440_rs::Version::from_str(&f.version).ok().as_ref() == Some(&m.version.parsed);
        (f.package() != m.package || !same_version).then(|| {
            format!(
                "the file name says {} {}, METADATA says {} {}: pip installs it under METADATA's",
                f.name, f.version, m.name, m.version
            )
        })
    }
}

fn read_text(archive: &Archive, member_path: &str) -> Result<String, WheelError> {
    let member = archive.member(member_path).ok_or_else(|| WheelError::Missing(member_path.to_string()))?;
    String::from_utf8(archive.read(member)?.into_vec()).map_err(|_| WheelError::Encoding(member_path.to_string()))
}

/// An opened wheel with its metadata parsed and its RECORD compared with the archive.
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
    /// Where RECORD and the archive disagree, found from the central directory alone (sizes,
    /// missing and extra rows, hashes that cannot be checked). Hash mismatches need the
    /// members' bytes: the analysis adds those.
    pub record_findings: Vec<RecordFinding>,
    /// Where the file name and METADATA disagree, if they do.
    pub name_mismatch: Option<String>,
    /// RECORD row indices sorted by path, the first row of a path first.
    record_index: Vec<u32>,
}

impl Wheel {
    /// Open a wheel: parse its name, read WHEEL, METADATA and RECORD, and compare RECORD with
    /// the central directory.
    pub fn open(path: &Path) -> Result<Wheel, WheelError> {
        let meta = WheelMetadata::open(path)?;
        let name_mismatch = meta.name_mismatch();
        let WheelMetadata { archive, filename, dist_info, metadata, metadata_text } = meta;
        let wheel_info = WheelInfo::parse(&read_text(&archive, &format!("{dist_info}/WHEEL"))?);
        let record_path = format!("{dist_info}/RECORD");
        let record = Record::parse(read_text(&archive, &record_path)?.as_bytes())
            .map_err(|source| WheelError::Record { path: record_path.clone(), source })?;
        let mut record_index: Vec<u32> = (0..record.entries.len() as u32).collect();
        record_index
            .sort_by(|&a, &b| record.entries[a as usize].path.cmp(&record.entries[b as usize].path).then(a.cmp(&b)));
        let mut wheel = Wheel {
            archive,
            filename,
            dist_info,
            wheel_info,
            metadata,
            metadata_text,
            record,
            record_findings: Vec::new(),
            name_mismatch,
            record_index,
        };
        wheel.record_findings = wheel.compare_record();
        Ok(wheel)
    }

    pub fn record_path(&self) -> String {
        format!("{}/RECORD", self.dist_info)
    }

    /// `{name}-{version}`, the stem of the `.dist-info` and `.data` directories.
    /// Ex) `torch-2.15.0`
    pub fn dist_info_stem(&self) -> &str {
        self.dist_info.trim_end_matches(".dist-info")
    }

    /// The `.data` directory's prefix. Ex) `torch-2.15.0.data/`
    pub fn data_prefix(&self) -> String {
        format!("{}.data/", self.dist_info_stem())
    }

    /// Where a member lands relative to site-packages: `.data/platlib` and `.data/purelib` are
    /// installed at the root; other `.data` categories land elsewhere (`None`).
    pub fn install_path(&self, member: &str) -> Option<String> {
        match member.strip_prefix(&self.data_prefix()) {
            None => Some(member.to_string()),
            Some(rest) => rest.strip_prefix("platlib/").or_else(|| rest.strip_prefix("purelib/")).map(str::to_string),
        }
    }

    /// The first RECORD row of a path.
    pub fn record_entry(&self, path: &str) -> Option<&RecordEntry> {
        let rows = &self.record.entries;
        let at = self.record_index.partition_point(|&i| rows[i as usize].path.as_str() < path);
        self.record_index.get(at).map(|&i| &rows[i as usize]).filter(|e| e.path == path)
    }

    /// Every row of a path, in file order.
    fn record_rows(&self, path: &str) -> impl Iterator<Item = &RecordEntry> {
        let rows = &self.record.entries;
        let at = self.record_index.partition_point(|&i| rows[i as usize].path.as_str() < path);
        self.record_index[at..].iter().map(|&i| &rows[i as usize]).take_while(move |e| e.path == path)
    }

    /// RECORD itself and its signatures: listed without a hash, or not at all.
    pub fn is_record_file(&self, name: &str) -> bool {
        name.strip_prefix(&self.dist_info).is_some_and(|rest| matches!(rest, "/RECORD" | "/RECORD.jws" | "/RECORD.p7s"))
    }

    /// Every difference the central directory shows: members without a row, rows without a
    /// member, sizes, duplicate rows, hashes that are missing or cannot be checked.
    fn compare_record(&self) -> Vec<RecordFinding> {
        use RecordProblem::*;
        let mut findings = Vec::new();
        for member in self.archive.members().iter().filter(|m| !m.is_dir() && !self.is_record_file(&m.name)) {
            let mut rows = self.record_rows(&member.name);
            let Some(row) = rows.next() else {
                findings.push(RecordFinding::new(&member.name, NotInRecord, None, Some(member.size.to_string())));
                continue;
            };
            for dup in rows {
                findings.push(RecordFinding::new(&member.name, DuplicateRow, Some(row_text(dup)), None));
            }
            // An empty size beside an empty hash is one finding (no-hash), not two.
            let unsized_unhashed = row.size.is_none() && row.bad_size.is_none() && row.hash.is_empty();
            if row.size != Some(member.size) && !unsized_unhashed {
                let recorded = row.size.map(|s| s.to_string()).or_else(|| row.bad_size.clone());
                findings.push(RecordFinding::new(&member.name, Size, recorded, Some(member.size.to_string())));
            }
            match RecordHash::parse(&row.hash) {
                RecordHash::Missing => findings.push(RecordFinding::new(&member.name, NoHash, None, None)),
                RecordHash::Unverifiable => {
                    findings.push(RecordFinding::new(&member.name, UnverifiableHash, Some(row.hash.clone()), None))
                }
                RecordHash::Checkable { .. } => {}
            }
        }
        let mut previous: Option<&str> = None;
        for &i in &self.record_index {
            let row = &self.record.entries[i as usize];
            if previous == Some(row.path.as_str()) {
                continue;
            }
            previous = Some(&row.path);
            if !row.path.ends_with('/') && self.archive.member(&row.path).is_none() {
                findings.push(RecordFinding::new(&row.path, NotInArchive, Some(row_text(row)), None));
            }
        }
        findings.sort();
        findings
    }

    /// Whether a member's RECORD row can be written again as it is (one row, its size, a
    /// sha256 hash): otherwise a command that writes the wheel must hash the member.
    pub fn row_is_reusable(&self, member: &Member) -> bool {
        let mut rows = self.record_rows(&member.name);
        let Some(row) = rows.next() else { return false };
        let duplicates_agree = rows.all(|d| d.hash == row.hash && d.size == row.size);
        duplicates_agree && row.size == Some(member.size) && RecordHash::parse(&row.hash).sha256().is_some()
    }

    /// The algorithm to check a member with besides sha256, when its row uses another one.
    pub fn extra_algorithm(&self, member: &Member) -> Option<record::HashAlgorithm> {
        match RecordHash::parse(&self.record_entry(&member.name)?.hash) {
            RecordHash::Checkable { algorithm, .. } if algorithm != record::HashAlgorithm::Sha256 => Some(algorithm),
            _ => None,
        }
    }

    /// Compare a member's digests with its RECORD row: a finding when they differ.
    pub fn check_digest(&self, member: &Member, digest: &MemberDigest) -> Option<RecordFinding> {
        let row = self.record_entry(&member.name)?;
        let actual = record::record_hash(&digest.sha256);
        let matches = match RecordHash::parse(&row.hash) {
            RecordHash::Checkable { algorithm: record::HashAlgorithm::Sha256, digest: d } => d == digest.sha256,
            RecordHash::Checkable { digest: d, .. } => digest.other.as_deref() == Some(d.as_slice()),
            _ => return None,
        };
        (!matches).then(|| RecordFinding::new(&member.name, RecordProblem::Hash, Some(row.hash.clone()), Some(actual)))
    }
}

/// The digests of one member's content: sha256 (what RECORD gets), and the row's own algorithm
/// when that is another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDigest {
    pub sha256: [u8; 32],
    pub other: Option<Vec<u8>>,
}

fn row_text(row: &RecordEntry) -> String {
    format!("{},{}", row.hash, row.size.map(|s| s.to_string()).or_else(|| row.bad_size.clone()).unwrap_or_default())
}

/// The one top-level `*.dist-info` directory that holds members.
fn find_dist_info(archive: &Archive) -> Result<String, WheelError> {
    let mut found: Option<&str> = None;
    for member in archive.members() {
        let Some((top, _)) = member.name.split_once('/') else {
            continue;
        };
        if !top.ends_with(".dist-info") {
            continue;
        }
        match found {
            None => found = Some(top),
            Some(existing) if existing != top => {
                return Err(WheelError::TwoDistInfo(existing.to_string(), top.to_string()));
            }
            Some(_) => {}
        }
    }
    found.map(str::to_string).ok_or(WheelError::NoDistInfo)
}
