//! The `RECORD` file ([PEP 376](https://peps.python.org/pep-0376/#record), [wheel spec](https://packaging.python.org/specifications/recording-installed-packages/#the-record-file)).
//!
//! Ex) `torch/lib/libc10.so,sha256=AbC...,1048576`: path, `algorithm=urlsafe-base64-nopad digest`, size.
//!
//! Published wheels often carry a RECORD that no longer matches the archive (a file edited after
//! the build, rows for files that are gone, md5 hashes, no hashes at all), and pip installs them
//! without a word. So a RECORD is read tolerantly, and every difference from the archive is a
//! [`RecordFinding`], not an error.

use base64::Engine;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("RECORD line {line}: {message}")]
    Malformed { line: u64, message: String },
}

/// One row of RECORD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry {
    pub path: String,
    /// `sha256=...`, another `algorithm=digest`, or empty (RECORD itself and signatures).
    pub hash: String,
    /// The size as written: `None` when the field is empty or missing.
    pub size: Option<u64>,
    /// The size field when it is not a number (a finding).
    pub bad_size: Option<String>,
}

impl RecordEntry {
    /// A row for `data`, hashed with sha256.
    pub fn for_bytes(path: &str, data: &[u8]) -> Self {
        Self::for_digest(path, &Sha256::digest(data).into(), data.len() as u64)
    }

    pub fn for_digest(path: &str, sha256: &[u8; 32], size: u64) -> Self {
        RecordEntry { path: path.to_string(), hash: record_hash(sha256), size: Some(size), bad_size: None }
    }
}

/// A parsed RECORD, rows in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub entries: Vec<RecordEntry>,
    /// Whether the file used CRLF line endings (kept when rewriting).
    pub crlf: bool,
}

impl Record {
    /// Parse a RECORD as pip reads it: CSV rows of path, hash and size; a missing hash or size
    /// field is empty. Only broken CSV and rows of more than three fields are errors.
    pub fn parse(text: &[u8]) -> Result<Self, RecordError> {
        let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text);
        let mut entries = Vec::new();
        for (i, row) in reader.records().enumerate() {
            let line = i as u64 + 1;
            let row = row.map_err(|e| RecordError::Malformed { line, message: e.to_string() })?;
            if row.iter().all(str::is_empty) {
                continue;
            }
            if row.len() > 3 {
                return Err(RecordError::Malformed {
                    line,
                    message: format!("expected 3 fields, found {} (an unquoted `,` in a path?)", row.len()),
                });
            }
            let field = |i: usize| row.get(i).unwrap_or("").trim();
            let (size, bad_size) = match field(2) {
                "" => (None, None),
                s => match s.parse::<u64>() {
                    Ok(n) => (Some(n), None),
                    Err(_) => (None, Some(s.to_string())),
                },
            };
            entries.push(RecordEntry { path: row[0].to_string(), hash: field(1).to_string(), size, bad_size });
        }
        Ok(Record { entries, crlf: text.windows(2).any(|w| w == b"\r\n") })
    }

    /// Serialise, quoting paths that need it (a `,` or `"` in a name).
    pub fn to_bytes(&self) -> Vec<u8> {
        let terminator = if self.crlf { csv::Terminator::CRLF } else { csv::Terminator::Any(b'\n') };
        let mut writer = csv::WriterBuilder::new().terminator(terminator).from_writer(Vec::new());
        for e in &self.entries {
            let size = e.size.map(|s| s.to_string()).unwrap_or_default();
            writer
                .write_record([e.path.as_str(), e.hash.as_str(), size.as_str()])
                .expect("writing to a Vec cannot fail");
        }
        writer.into_inner().expect("writing to a Vec cannot fail")
    }
}

/// `sha256=<urlsafe base64, no padding>` of a finished digest.
pub fn record_hash(digest: &[u8]) -> String {
    format!("sha256={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest))
}

/// A RECORD hash field, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordHash {
    /// An algorithm wheelfix checks, and the digest. Ex) `sha256`
    Checkable { algorithm: HashAlgorithm, digest: Vec<u8> },
    /// An algorithm wheelfix does not check (`md5`, `sha1`), or a digest that does not decode.
    Unverifiable,
    /// No hash at all.
    Missing,
}

/// The hash algorithms a RECORD may use that wheelfix verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgorithm {
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl HashAlgorithm {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "sha224" => Some(HashAlgorithm::Sha224),
            "sha256" => Some(HashAlgorithm::Sha256),
            "sha384" => Some(HashAlgorithm::Sha384),
            "sha512" => Some(HashAlgorithm::Sha512),
            _ => None,
        }
    }

    fn digest_len(self) -> usize {
        match self {
            HashAlgorithm::Sha224 => 28,
            HashAlgorithm::Sha256 => 32,
            HashAlgorithm::Sha384 => 48,
            HashAlgorithm::Sha512 => 64,
        }
    }

    /// A hasher of this algorithm, for data that arrives in pieces.
    pub fn hasher(self) -> Hasher {
        match self {
            HashAlgorithm::Sha224 => Hasher::Sha224(Sha224::new()),
            HashAlgorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            HashAlgorithm::Sha384 => Hasher::Sha384(Sha384::new()),
            HashAlgorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }
}

/// One running digest of any supported algorithm.
#[derive(Clone)]
pub enum Hasher {
    Sha224(Sha224),
    Sha256(Sha256),
    Sha384(Sha384),
    Sha512(Sha512),
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha224(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    pub fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha224(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

impl RecordHash {
    /// Ex) `sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ` → sha256 and its 32 bytes
    pub fn parse(field: &str) -> RecordHash {
        if field.is_empty() {
            return RecordHash::Missing;
        }
        let Some((name, b64)) = field.split_once('=') else { return RecordHash::Unverifiable };
        let Some(algorithm) = HashAlgorithm::from_name(&name.to_ascii_lowercase()) else {
            return RecordHash::Unverifiable;
        };
        match base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(b64.trim_end_matches('=')) {
            Ok(digest) if digest.len() == algorithm.digest_len() => RecordHash::Checkable { algorithm, digest },
            _ => RecordHash::Unverifiable,
        }
    }

    /// The sha256 digest, when that is what the row records.
    pub fn sha256(&self) -> Option<[u8; 32]> {
        match self {
            RecordHash::Checkable { algorithm: HashAlgorithm::Sha256, digest } => digest.as_slice().try_into().ok(),
            _ => None,
        }
    }
}

/// How a RECORD row differs from the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordProblem {
    /// The recorded size is not the member's (or not a number, or missing).
    Size,
    /// The recorded hash is not the member's (found only when members are hashed).
    Hash,
    /// A member RECORD does not list.
    NotInRecord,
    /// A row for a file the archive does not hold.
    NotInArchive,
    /// A second row for one file.
    DuplicateRow,
    /// A hash in an algorithm wheelfix does not check (`md5`), or one that does not decode.
    UnverifiableHash,
    /// A row without a hash.
    NoHash,
}

impl RecordProblem {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordProblem::Size => "size",
            RecordProblem::Hash => "hash",
            RecordProblem::NotInRecord => "not-in-record",
            RecordProblem::NotInArchive => "not-in-archive",
            RecordProblem::DuplicateRow => "duplicate-row",
            RecordProblem::UnverifiableHash => "unverifiable-hash",
            RecordProblem::NoHash => "no-hash",
        }
    }
}

/// One difference between RECORD and the archive.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct RecordFinding {
    pub file: String,
    pub problem: RecordProblem,
    /// What RECORD says (a size, a hash, a duplicate row's hash).
    pub recorded: Option<String>,
    /// What the archive holds, where that is known.
    pub actual: Option<String>,
}

impl RecordFinding {
    pub fn new(file: &str, problem: RecordProblem, recorded: Option<String>, actual: Option<String>) -> Self {
        RecordFinding { file: file.to_string(), problem, recorded, actual }
    }
}

/// One line per problem kind, with counts. Ex) `3 size, 1 not-in-archive`
pub fn summarize(findings: &[RecordFinding]) -> String {
    let mut counts: std::collections::BTreeMap<RecordProblem, usize> = Default::default();
    for f in findings {
        *counts.entry(f.problem).or_default() += 1;
    }
    counts.iter().map(|(p, n)| format!("{n} {}", p.as_str())).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_quoted_paths_and_crlf() {
        let text = b"a/b.py,sha256=x,3\r\n\"we,ird.py\",sha256=y,4\r\na-1.0.dist-info/RECORD,,\r\n";
        let record = Record::parse(text).unwrap();
        assert_eq!(record.entries[1].path, "we,ird.py");
        assert_eq!(record.entries[2].size, None);
        assert!(record.crlf);
        assert_eq!(record.to_bytes(), text);
    }

    #[test]
    fn hashes_like_pip() {
        // python -c "import hashlib,base64;print(base64.urlsafe_b64encode(hashlib.sha256(b'hello').digest()).rstrip(b'='))"
        assert_eq!(RecordEntry::for_bytes("x", b"hello").hash, "sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ");
    }

    #[test]
    fn tolerates_short_rows_and_bad_sizes() {
        let record = Record::parse(b"a,sha256=x,3\nb,sha256=y,big\nc,sha256=z\nd\n").unwrap();
        assert_eq!(record.entries[1].bad_size.as_deref(), Some("big"));
        assert_eq!(record.entries[2].size, None);
        assert_eq!(record.entries[3].hash, "");
        let err = Record::parse(b"a,b,c,d\n").unwrap_err();
        assert!(err.to_string().contains("RECORD line 1: expected 3 fields, found 4"), "{err}");
    }

    #[test]
    fn hash_fields_by_algorithm() {
        let sha256 = RecordEntry::for_bytes("x", b"hello").hash;
        assert!(RecordHash::parse(&sha256).sha256().is_some());
        let sha512 =
            format!("sha512={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha512::digest(b"hello")));
        assert!(matches!(RecordHash::parse(&sha512), RecordHash::Checkable { algorithm: HashAlgorithm::Sha512, .. }));
        assert_eq!(RecordHash::parse("md5=XUFAKrxLKna5cZ2REBfFkg"), RecordHash::Unverifiable);
        assert_eq!(RecordHash::parse("sha256=short"), RecordHash::Unverifiable);
        assert_eq!(RecordHash::parse("garbage"), RecordHash::Unverifiable);
        assert_eq!(RecordHash::parse(""), RecordHash::Missing);
    }
}
