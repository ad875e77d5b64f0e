//! The archive: file name and tags, `WHEEL`, `METADATA`, `RECORD`, reading and writing zips.

pub mod archive;
pub use wheelfix_base::digest;
pub mod filename;
pub mod metadata;
pub mod name;
pub mod platform_tag;
pub mod record;
pub mod requirement;
pub mod variant;

use std::path::Path;

use name::PackageName;

pub use archive::{Archive, ArchiveError, Member};
pub use filename::{FilenameError, WheelFilename};
pub use metadata::{CoreMetadata, DistVersion, WheelInfo};
pub use record::{
    FindingsBuilder, Record, RecordEntry, RecordError, RecordFile, RecordFinding, RecordFindings, RecordHash,
    RecordProblem, RecordRow,
};

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
    /// WHEEL as written (not valid UTF-8: decoded lossily, and an installer problem).
    pub wheel_text: String,
    /// Why pip would refuse to install this wheel, in pip's words; empty when it installs it.
    pub installer_problems: Vec<String>,
}

impl WheelMetadata {
    /// [`Wheel::is_wheelfix_metapackage`], from what opening it read.
    pub fn is_wheelfix_metapackage(&self) -> bool {
        wheelfix_metapackage(&self.wheel_text, &self.metadata, &self.archive, &self.dist_info)
    }

    /// Open a wheel's archive and read METADATA and WHEEL, and check what pip checks before it
    /// installs a wheel ([`installer_problems`]); RECORD is only decoded.
    pub fn open(path: &Path) -> Result<WheelMetadata, WheelError> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let filename = WheelFilename::parse(&name)?;
        let archive = Archive::open(path)?;
        let dist_info = find_dist_info(&archive)?;
        let metadata_path = format!("{dist_info}/METADATA");
        let metadata_text = read_text(&archive, &metadata_path)?;
        let metadata = CoreMetadata::parse(&metadata_text)
            .map_err(|source| WheelError::Metadata { path: metadata_path, source })?;
        let (wheel_text, wheel_utf8) = read_lossy(&archive, &format!("{dist_info}/WHEEL"))?;
        let record_path = format!("{dist_info}/RECORD");
        let record_utf8 = match archive.member(&record_path) {
            Some(member) if member.size <= SMALL_MEMBER => std::str::from_utf8(&archive.read(member)?).is_ok(),
            Some(member) => is_utf8(archive.zip.stream(member)?).map_err(|e| {
                WheelError::Archive(ArchiveError::Member { name: record_path.clone(), message: e.to_string() })
            })?,
            None => return Err(WheelError::Missing(record_path)),
        };
        let mut meta = WheelMetadata {
            archive,
            filename,
            dist_info,
            metadata,
            metadata_text,
            wheel_text,
            installer_problems: Vec::new(),
        };
        meta.installer_problems = installer_problems(&meta, wheel_utf8, record_utf8);
        Ok(meta)
    }
}

/// Metadata members up to this size are read whole; larger ones stream.
const SMALL_MEMBER: u64 = 4 << 20;

/// Why pip (26) refuses to install a wheel, in pip's own words: the checks of its
/// `parse_wheel` (the `.dist-info` directory must start with the project's name, WHEEL must be
/// UTF-8 and say a `Wheel-Version` of major version 1), the UTF-8 RECORD it reads, and the
/// resolver's check that METADATA names the project and version of the file name.
fn installer_problems(meta: &WheelMetadata, wheel_utf8: bool, record_utf8: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let (f, m) = (&meta.filename, &meta.metadata);
    let project = &f.name;
    if !PackageName::new(&meta.dist_info).as_str().starts_with(project.as_str()) {
        problems.push(format!(".dist-info directory {:?} does not start with {:?}", meta.dist_info, project.as_str()));
    }
    if !wheel_utf8 {
        problems.push(format!("error decoding {:?}: it is not valid UTF-8", format!("{}/WHEEL", meta.dist_info)));
    }
    let fields = metadata::parse_headers(&meta.wheel_text);
    match fields.iter().find(|(k, _)| k.eq_ignore_ascii_case("Wheel-Version")).map(|(_, v)| v.trim()) {
        None => problems.push("WHEEL is missing Wheel-Version".into()),
        Some(version) => match version.split('.').map(str::parse::<u64>).collect::<Result<Vec<_>, _>>() {
            Err(_) => problems.push(format!("invalid Wheel-Version: {version:?}")),
            Ok(parts) if parts.first().is_some_and(|major| *major > 1) => problems.push(format!(
                "{}'s Wheel-Version ({version}) is not compatible with this version of pip",
                project.as_str()
            )),
            Ok(_) => {}
        },
    }
    if !record_utf8 {
        problems.push(format!("error decoding {:?}: it is not valid UTF-8", format!("{}/RECORD", meta.dist_info)));
    }
    if *project != m.package {
        problems.push(format!(
            "inconsistent name: the file name says {:?}, but METADATA has {:?}",
            project.as_str(),
            m.package.as_str()
        ));
    }
    if f.version.parsed != m.version.parsed {
        problems.push(format!(
            "inconsistent version: the file name says {:?}, but METADATA has {:?}",
            f.version.text, m.version.text
        ));
    }
    problems
}

fn read_text(archive: &Archive, member_path: &str) -> Result<String, WheelError> {
    let member = archive.member(member_path).ok_or_else(|| WheelError::Missing(member_path.to_string()))?;
    String::from_utf8(archive.read(member)?.into_vec()).map_err(|_| WheelError::Encoding(member_path.to_string()))
}

/// Whether a stream is valid UTF-8, checked as it passes (a character may straddle two reads).
fn is_utf8(mut input: impl std::io::Read) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 1 << 16];
    let mut carried = 0;
    loop {
        let n = input.read(&mut buf[carried..])?;
        if n == 0 {
            return Ok(carried == 0);
        }
        let filled = carried + n;
        match std::str::from_utf8(&buf[..filled]) {
            Ok(_) => carried = 0,
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                buf.copy_within(valid..filled, 0);
                carried = filled - valid;
            }
            Err(_) => return Ok(false),
        }
    }
}

/// A member as text, decoded lossily when it is not UTF-8 (then `false`).
fn read_lossy(archive: &Archive, member_path: &str) -> Result<(String, bool), WheelError> {
    let member = archive.member(member_path).ok_or_else(|| WheelError::Missing(member_path.to_string()))?;
    let bytes = archive.read(member)?.into_vec();
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, true)),
        Err(e) => Ok((String::from_utf8_lossy(e.as_bytes()).into_owned(), false)),
    }
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
    pub record_findings: RecordFindings,
    /// Why pip would refuse to install it ([`WheelMetadata::installer_problems`]).
    pub installer_problems: Vec<String>,
    /// RECORD row indices sorted by path, the first row of a path first.
    record_index: Vec<u32>,
}

impl Wheel {
    /// A metapackage `wheelfix metapackage` wrote: WHEEL's `Generator: wheelfix …`, nothing
    /// but its `.dist-info`, and requirements.
    pub fn is_wheelfix_metapackage(&self) -> bool {
        wheelfix_metapackage(&self.wheel_info.text, &self.metadata, &self.archive, &self.dist_info)
    }

    /// Open a wheel: parse its name, read WHEEL, METADATA and RECORD, and compare RECORD with
    /// the central directory.
    pub fn open(path: &Path) -> Result<Wheel, WheelError> {
        let meta = WheelMetadata::open(path)?;
        let WheelMetadata { archive, filename, dist_info, metadata, metadata_text, wheel_text, installer_problems } =
            meta;
        let wheel_info = WheelInfo::parse(&wheel_text);
        let record_path = format!("{dist_info}/RECORD");
        let record_member = archive.member(&record_path).ok_or_else(|| WheelError::Missing(record_path.clone()))?;
        // A RECORD of a few MB is read whole; a larger one streams past, never held whole.
        let record = if record_member.size <= SMALL_MEMBER {
            Record::parse(&archive.read(record_member)?)
        } else {
            Record::read(archive.zip.stream(record_member)?)
        };
        let record = record.map_err(|source| WheelError::Record { path: record_path.clone(), source })?;
        let mut record_index: Vec<u32> = (0..record.len() as u32).collect();
        record_index.sort_by(|&a, &b| record.row(a as usize).path.cmp(record.row(b as usize).path).then(a.cmp(&b)));
        let mut wheel = Wheel {
            archive,
            filename,
            dist_info,
            wheel_info,
            metadata,
            metadata_text,
            record,
            record_findings: RecordFindings::default(),
            installer_problems,
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
        dist_info_stem(&self.dist_info)
    }

    /// The `.data` directory's prefix. Ex) `torch-2.15.0.data/`
    pub fn data_prefix(&self) -> String {
        format!("{}.data/", self.dist_info_stem())
    }

    /// Where a member lands relative to site-packages: `.data/platlib` and `.data/purelib` are
    /// installed at the root; other `.data` categories land elsewhere (`None`).
    pub fn install_path(&self, member: &str) -> Option<String> {
        install_path(&self.dist_info, member)
    }

    /// The first RECORD row of a path.
    pub fn record_entry(&self, path: &str) -> Option<RecordRow<'_>> {
        let record = &self.record;
        let at = self.record_index.partition_point(|&i| record.row(i as usize).path < path);
        self.record_index.get(at).map(|&i| record.row(i as usize)).filter(|e| e.path == path)
    }

    /// Every row of a path, in file order.
    fn record_rows<'a>(&'a self, path: &'a str) -> impl Iterator<Item = RecordRow<'a>> + 'a {
        let record = &self.record;
        let at = self.record_index.partition_point(|&i| record.row(i as usize).path < path);
        self.record_index[at..].iter().map(|&i| record.row(i as usize)).take_while(move |e| e.path == path)
    }

    /// RECORD itself and its signatures: listed without a hash, or not at all.
    pub fn is_record_file(&self, name: &str) -> bool {
        name.strip_prefix(&self.dist_info).is_some_and(|rest| matches!(rest, "/RECORD" | "/RECORD.jws" | "/RECORD.p7s"))
    }

    /// Every difference the central directory shows: members without a row, rows without a
    /// member, sizes, duplicate rows, hashes that are missing or cannot be checked.
    fn compare_record(&self) -> RecordFindings {
        use RecordProblem::*;
        let mut findings = FindingsBuilder::default();
        for member in self.archive.members().iter().filter(|m| !self.is_record_file(&m.name)) {
            if member.is_dir() {
                // Installers make a directory and drop what the entry holds: nothing can list it.
                if member.size > 0 {
                    findings.push(RecordFinding::new(&member.name, DirectoryData, None, Some(member.size.to_string())));
                }
                continue;
            }
            let mut rows = self.record_rows(&member.name);
            let Some(row) = rows.next() else {
                findings.push(RecordFinding::new(&member.name, NotInRecord, None, Some(member.size.to_string())));
                continue;
            };
            for dup in rows {
                findings.push(RecordFinding::new(&member.name, DuplicateRow, Some(row_text(&dup)), None));
            }
            // An empty size beside an empty hash is one finding (no-hash), not two.
            let unsized_unhashed = row.size.is_none() && row.bad_size.is_none() && row.hash.is_empty();
            if row.size != Some(member.size) && !unsized_unhashed {
                let recorded = row.size.map(|s| s.to_string()).or_else(|| row.bad_size.map(str::to_string));
                findings.push(RecordFinding::new(&member.name, Size, recorded, Some(member.size.to_string())));
            }
            match RecordHash::parse(row.hash) {
                RecordHash::Missing => findings.push(RecordFinding::new(&member.name, NoHash, None, None)),
                RecordHash::Unverifiable => {
                    findings.push(RecordFinding::new(&member.name, UnverifiableHash, Some(row.hash.to_string()), None))
                }
                RecordHash::Checkable { .. } => {}
            }
        }
        let mut previous: Option<&str> = None;
        for &i in &self.record_index {
            let row = self.record.row(i as usize);
            if previous == Some(row.path) {
                continue;
            }
            previous = Some(row.path);
            if !row.path.ends_with('/') && self.archive.member(row.path).is_none() {
                findings.push(RecordFinding::new(row.path, NotInArchive, Some(row_text(&row)), None));
            }
        }
        findings.finish()
    }

    /// Whether a member's RECORD row can be written again as it is (one row, its size, a
    /// sha256 hash): otherwise a command that writes the wheel must hash the member.
    pub fn row_is_reusable(&self, member: &Member) -> bool {
        let mut rows = self.record_rows(&member.name);
        let Some(row) = rows.next() else { return false };
        let duplicates_agree = rows.all(|d| d.hash == row.hash && d.size == row.size);
        duplicates_agree && row.size == Some(member.size) && RecordHash::parse(row.hash).sha256().is_some()
    }

    /// The algorithm to check a member with besides sha256, when its row uses another one.
    pub fn extra_algorithm(&self, member: &Member) -> Option<record::HashAlgorithm> {
        match RecordHash::parse(self.record_entry(&member.name)?.hash) {
            RecordHash::Checkable { algorithm, .. } if algorithm != record::HashAlgorithm::Sha256 => Some(algorithm),
            _ => None,
        }
    }

    /// Compare a member's digests with its RECORD row: a finding when they differ.
    pub fn check_digest(&self, member: &Member, digest: &MemberDigest) -> Option<RecordFinding> {
        let row = self.record_entry(&member.name)?;
        let actual = record::record_hash(&digest.sha256);
        let matches = match RecordHash::parse(row.hash) {
            RecordHash::Checkable { algorithm: record::HashAlgorithm::Sha256, digest: d } => d == digest.sha256,
            RecordHash::Checkable { digest: d, .. } => digest.other.as_deref() == Some(d.as_slice()),
            _ => return None,
        };
        (!matches)
            .then(|| RecordFinding::new(&member.name, RecordProblem::Hash, Some(row.hash.to_string()), Some(actual)))
    }
}

/// The digests of one member's content: sha256 (what RECORD gets), and the row's own algorithm
/// when that is another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDigest {
    pub sha256: [u8; 32],
    pub other: Option<Vec<u8>>,
}

fn row_text(row: &RecordRow<'_>) -> String {
    format!(
        "{},{}",
        row.hash,
        row.size.map(|s| s.to_string()).or_else(|| row.bad_size.map(str::to_string)).unwrap_or_default()
    )
}

/// `{name}-{version}` of a `.dist-info` directory's name. Ex) `torch-2.15.0.dist-info` → `torch-2.15.0`
pub fn dist_info_stem(dist_info: &str) -> &str {
    dist_info.strip_suffix(".dist-info").unwrap_or(dist_info)
}

pub use wheelfix_base::paths::{join_path, normalize_path};

/// Where a member of the wheel whose `.dist-info` directory is `dist_info` lands relative to
/// site-packages (see [`Wheel::install_path`]).
pub fn install_path(dist_info: &str, member: &str) -> Option<String> {
    match member.strip_prefix(dist_info_stem(dist_info)).and_then(|rest| rest.strip_prefix(".data/")) {
        None => Some(member.to_string()),
        Some(rest) => rest.strip_prefix("platlib/").or_else(|| rest.strip_prefix("purelib/")).map(str::to_string),
    }
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

/// WHEEL's `Generator:` value. Ex) `wheelfix 0.1.0`
/// WHEEL's `Generator: wheelfix …`, nothing but its `.dist-info`, and requirements: a
/// metapackage or selector wheelfix wrote.
fn wheelfix_metapackage(wheel_text: &str, metadata: &CoreMetadata, archive: &Archive, dist_info: &str) -> bool {
    parse_generator(wheel_text).is_some_and(|g| g.starts_with("wheelfix"))
        && !metadata.requires_dist.is_empty()
        && archive.members().iter().filter(|m| !m.is_dir()).all(|m| m.name.starts_with(&format!("{dist_info}/")))
}

fn parse_generator(wheel_text: &str) -> Option<&str> {
    wheel_text.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        key.trim().eq_ignore_ascii_case("Generator").then(|| value.trim())
    })
}
