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
    #[error("more than {MAX_RECORD} bytes: no wheel's RECORD is that large")]
    TooLarge,
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

/// A RECORD to write: owned rows in output order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFile {
    pub entries: Vec<RecordEntry>,
    /// Whether to write CRLF line endings (an input's RECORD keeps its own).
    pub crlf: bool,
}

impl RecordFile {
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

/// One row of a parsed RECORD, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRow<'a> {
    pub path: &'a str,
    /// `sha256=...`, another `algorithm=digest`, or empty.
    pub hash: &'a str,
    /// The size as written: `None` when the field is empty or missing.
    pub size: Option<u64>,
    /// The size field when it is not a number.
    pub bad_size: Option<&'a str>,
}

impl RecordRow<'_> {
    pub fn to_entry(&self) -> RecordEntry {
        RecordEntry {
            path: self.path.to_string(),
            hash: self.hash.to_string(),
            size: self.size,
            bad_size: self.bad_size.map(str::to_string),
        }
    }
}

/// A byte range of [`Record`]'s text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

/// One row, in 32 bytes: its fields as spans of the text, the size with `u64::MAX` for none.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    path: Span,
    hash: Span,
    size: u64,
    /// A size field that is not a number (`len == u32::MAX`: none).
    bad_size: Span,
}

const NO_SIZE: u64 = u64::MAX;
const NO_SPAN: Span = Span { start: 0, len: u32::MAX };

/// A parsed RECORD, rows in file order, held compactly: the fields in one string and each row
/// as offsets into it (a RECORD of a million rows takes tens of MB, not a GB of strings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    text: String,
    rows: Vec<Row>,
    /// Whether the file used CRLF line endings (kept when rewriting).
    pub crlf: bool,
    /// Whether the file is valid UTF-8 (pip refuses a RECORD that is not); invalid bytes were
    /// read as U+FFFD.
    pub utf8: bool,
}

/// The largest RECORD read (a RECORD of a million rows is about 60 MB).
pub const MAX_RECORD: u64 = 1 << 30;

impl Record {
    /// Parse a RECORD held in memory ([`Record::read`]).
    pub fn parse(text: &[u8]) -> Result<Self, RecordError> {
        Self::read(text)
    }

    /// Parse a RECORD as it streams past, as pip reads it: CSV rows of path, hash and size; a
    /// missing hash or size field is empty. Only broken CSV, rows of more than three fields and
    /// a RECORD over [`MAX_RECORD`] are errors; bytes that are not UTF-8 are noted
    /// ([`Record::utf8`]). The text is never held whole.
    pub fn read(input: impl std::io::Read) -> Result<Self, RecordError> {
        let mut watch = Watch { inner: input, last: 0, crlf: false, bytes: 0, head: Vec::new() };
        let mut record = Record { text: String::new(), rows: Vec::new(), crlf: false, utf8: true };
        let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&mut watch);
        let mut row = csv::ByteRecord::new();
        let mut line = 0u64;
        loop {
            line += 1;
            match reader.read_byte_record(&mut row) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => return Err(RecordError::Malformed { line, message: e.to_string() }),
            }
            if row.iter().all(<[u8]>::is_empty) {
                continue;
            }
            if row.len() > 3 {
                return Err(RecordError::Malformed {
                    line,
                    message: format!("expected 3 fields, found {} (an unquoted `,` in a path?)", row.len()),
                });
            }
            let mut text = |i: usize| -> std::borrow::Cow<'_, str> {
                let bytes = row.get(i).unwrap_or(b"");
                match std::str::from_utf8(bytes) {
                    Ok(t) => std::borrow::Cow::Borrowed(t),
                    Err(_) => {
                        record.utf8 = false;
                        String::from_utf8_lossy(bytes)
                    }
                }
            };
            let (path, hash, size) = (text(0).into_owned(), text(1).trim().to_string(), text(2).trim().to_string());
            let (size, bad_size) = match size.as_str() {
                "" => (NO_SIZE, NO_SPAN),
                s => match s.parse::<u64>() {
                    Ok(n) if n != NO_SIZE => (n, NO_SPAN),
                    _ => (NO_SIZE, record.push(s)),
                },
            };
            let path = record.push(&path);
            let hash = record.push(&hash);
            record.rows.push(Row { path, hash, size, bad_size });
            if record.text.len() as u64 > MAX_RECORD {
                return Err(RecordError::Malformed {
                    line,
                    message: format!("more than {MAX_RECORD} bytes: no wheel's RECORD is that large"),
                });
            }
        }
        drop(reader);
        record.crlf = watch.crlf;
        // Python's csv (pip's, `wheel`'s) keeps a byte-order mark as part of the first path;
        // the csv crate drops it. Read as Python does, the first row names a file that is not
        // there, and the RECORD is not true.
        if watch.head.starts_with(b"\xEF\xBB\xBF")
            && let Some(first) = record.rows.first().cloned()
            && !record.get(first.path).starts_with('\u{feff}')
        {
            let path = format!("\u{feff}{}", record.get(first.path));
            record.rows[0].path = record.push(&path);
        }
        record.text.shrink_to_fit();
        record.rows.shrink_to_fit();
        Ok(record)
    }

    fn push(&mut self, field: &str) -> Span {
        let start = self.text.len() as u32;
        self.text.push_str(field);
        Span { start, len: field.len() as u32 }
    }

    fn get(&self, span: Span) -> &str {
        &self.text[span.start as usize..(span.start + span.len) as usize]
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row at `index`, in file order.
    pub fn row(&self, index: usize) -> RecordRow<'_> {
        let r = &self.rows[index];
        RecordRow {
            path: self.get(r.path),
            hash: self.get(r.hash),
            size: (r.size != NO_SIZE).then_some(r.size),
            bad_size: (r.bad_size.len != u32::MAX).then(|| self.get(r.bad_size)),
        }
    }

    pub fn rows(&self) -> impl Iterator<Item = RecordRow<'_>> {
        (0..self.rows.len()).map(|i| self.row(i))
    }
}

/// A reader that notes, as the bytes pass, whether a `\r\n` went by and how many bytes did.
struct Watch<R> {
    inner: R,
    last: u8,
    crlf: bool,
    bytes: u64,
    /// The first bytes, up to three: a UTF-8 byte-order mark?
    head: Vec<u8>,
}

impl<R: std::io::Read> std::io::Read for Watch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.head.len() < 3 {
            let take = (3 - self.head.len()).min(n);
            self.head.extend_from_slice(&buf[..take]);
        }
        if n > 0 && !self.crlf {
            let chunk = &buf[..n];
            self.crlf = (self.last == b'\r' && chunk[0] == b'\n') || chunk.windows(2).any(|w| w == b"\r\n");
            self.last = chunk[n - 1];
        }
        self.bytes += n as u64;
        if self.bytes > MAX_RECORD + (1 << 20) {
            return Err(std::io::Error::other(RecordError::TooLarge));
        }
        Ok(n)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
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
    /// A directory entry that holds data: installers drop it, nothing can list it.
    DirectoryData,
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
            RecordProblem::DirectoryData => "directory-data",
        }
    }
}

/// One difference between RECORD and the archive.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
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

/// Every difference between RECORD and the archive, counted by kind, with the first
/// [`RecordFindings::KEEP`] of them (in order) kept whole: a RECORD of a million stale rows is
/// reported in bounded memory. Made with [`FindingsBuilder`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFindings {
    kept: Vec<RecordFinding>,
    counts: std::collections::BTreeMap<RecordProblem, usize>,
}

/// Collects findings: counts them all, keeps the smallest [`RecordFindings::KEEP`].
#[derive(Debug, Default)]
pub struct FindingsBuilder {
    /// A max-heap: its top is the largest finding kept.
    heap: std::collections::BinaryHeap<RecordFinding>,
    counts: std::collections::BTreeMap<RecordProblem, usize>,
}

impl FindingsBuilder {
    pub fn push(&mut self, finding: RecordFinding) {
        *self.counts.entry(finding.problem).or_default() += 1;
        if self.heap.len() < RecordFindings::KEEP {
            self.heap.push(finding);
        } else if self.heap.peek().is_some_and(|largest| finding < *largest) {
            self.heap.pop();
            self.heap.push(finding);
        }
    }

    pub fn finish(self) -> RecordFindings {
        let mut kept = self.heap.into_sorted_vec();
        kept.dedup();
        RecordFindings { kept, counts: self.counts }
    }
}

impl RecordFindings {
    /// How many findings are kept whole.
    pub const KEEP: usize = 1000;

    /// These findings and more, as a builder.
    pub fn builder(self) -> FindingsBuilder {
        FindingsBuilder { heap: self.kept.into_iter().collect(), counts: self.counts }
    }

    /// The kept findings, in order.
    pub fn items(&self) -> &[RecordFinding] {
        &self.kept
    }

    pub fn first(&self) -> Option<&RecordFinding> {
        self.kept.first()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Every finding, kept or not.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// Findings counted but not kept whole.
    pub fn truncated(&self) -> usize {
        self.total() - self.kept.len()
    }

    pub fn has(&self, problem: RecordProblem) -> bool {
        self.counts.contains_key(&problem)
    }

    /// One line per problem kind, with counts. Ex) `3 size, 1 not-in-archive`
    pub fn summarize(&self) -> String {
        self.counts.iter().map(|(p, n)| format!("{n} {}", p.as_str())).collect::<Vec<_>>().join(", ")
    }
}

impl serde::Serialize for RecordFindings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.kept.serialize(s)
    }
}

/// Read back from the list printed: only the findings kept whole are printed, so those are
/// what is counted.
impl<'de> serde::Deserialize<'de> for RecordFindings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut builder = FindingsBuilder::default();
        for finding in Vec::<RecordFinding>::deserialize(d)? {
            builder.push(finding);
        }
        Ok(builder.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_belongs_to_the_first_path_as_python_reads_it() {
        let record = Record::parse(b"\xEF\xBB\xBFa.py,sha256=x,3\nb.py,,\n").unwrap();
        let paths: Vec<String> = record.rows().map(|r| r.path.to_string()).collect();
        assert_eq!(paths, ["\u{feff}a.py", "b.py"]);
    }

    #[test]
    fn round_trips_quoted_paths_and_crlf() {
        let text = b"a/b.py,sha256=x,3\r\n\"we,ird.py\",sha256=y,4\r\na-1.0.dist-info/RECORD,,\r\n";
        let record = Record::parse(text).unwrap();
        assert_eq!(record.row(1).path, "we,ird.py");
        assert_eq!(record.row(2).size, None);
        assert!(record.crlf);
        let file = RecordFile { entries: record.rows().map(|r| r.to_entry()).collect(), crlf: true };
        assert_eq!(file.to_bytes(), text);
    }

    #[test]
    fn hashes_like_pip() {
        // python -c "import hashlib,base64;print(base64.urlsafe_b64encode(hashlib.sha256(b'hello').digest()).rstrip(b'='))"
        assert_eq!(RecordEntry::for_bytes("x", b"hello").hash, "sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ");
    }

    #[test]
    fn tolerates_short_rows_and_bad_sizes() {
        let record = Record::parse(b"a,sha256=x,3\nb,sha256=y,big\nc,sha256=z\nd\n").unwrap();
        assert_eq!(record.row(1).bad_size, Some("big"));
        assert_eq!(record.row(2).size, None);
        assert_eq!(record.row(3).hash, "");
        let err = Record::parse(b"a,b,c,d\n").unwrap_err();
        assert!(err.to_string().contains("RECORD line 1: expected 3 fields, found 4"), "{err}");
    }

    #[test]
    fn findings_are_counted_all_and_kept_in_order_up_to_the_bound() {
        let mut findings = FindingsBuilder::default();
        for i in (0..3 * RecordFindings::KEEP).rev() {
            findings.push(RecordFinding::new(&format!("f{i:05}"), RecordProblem::NotInArchive, None, None));
        }
        findings.push(RecordFinding::new("a", RecordProblem::Size, None, None));
        let findings = findings.finish();
        assert_eq!(findings.total(), 3 * RecordFindings::KEEP + 1);
        assert_eq!(findings.items().len(), RecordFindings::KEEP);
        assert_eq!(findings.first().unwrap().file, "a");
        assert_eq!(findings.items()[1].file, "f00000");
        assert_eq!(findings.summarize(), "1 size, 3000 not-in-archive");
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
