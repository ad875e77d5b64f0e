//! The `RECORD` file ([PEP 376](https://peps.python.org/pep-0376/#record), [wheel spec](https://packaging.python.org/specifications/recording-installed-packages/#the-record-file)).
//!
//! Ex) `torch/lib/libc10.so,sha256=AbC...,1048576`: path, `algorithm=urlsafe-base64-nopad digest`, size.

use base64::Engine;
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("RECORD line {line}: {message}")]
    Malformed { line: u64, message: String },
    #[error("RECORD line {line}: the size `{size}` of `{path}` is not a number")]
    Size { line: u64, path: String, size: String },
}

/// One row of RECORD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry {
    pub path: String,
    /// `sha256=...` or empty (RECORD itself and signatures).
    pub hash: String,
    pub size: Option<u64>,
}

impl RecordEntry {
    /// A row for `data`, hashed with sha256.
    pub fn for_bytes(path: &str, data: &[u8]) -> Self {
        RecordEntry { path: path.to_string(), hash: record_hash(&Sha256::digest(data)), size: Some(data.len() as u64) }
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
    pub fn parse(text: &[u8]) -> Result<Self, RecordError> {
        let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text);
        let mut entries = Vec::new();
        for (i, row) in reader.records().enumerate() {
            let line = i as u64 + 1;
            let row = row.map_err(|e| RecordError::Malformed { line, message: e.to_string() })?;
            if row.iter().all(str::is_empty) {
                continue;
            }
            if row.len() != 3 {
                return Err(RecordError::Malformed {
                    line,
                    message: format!("expected 3 fields, found {}", row.len()),
                });
            }
            let size = match &row[2] {
                "" => None,
                s => Some(s.parse::<u64>().map_err(|_| RecordError::Size {
                    line,
                    path: row[0].to_string(),
                    size: s.to_string(),
                })?),
            };
            entries.push(RecordEntry { path: row[0].to_string(), hash: row[1].to_string(), size });
        }
        Ok(Record { entries, crlf: text.windows(2).any(|w| w == b"\r\n") })
    }

    pub fn get(&self, path: &str) -> Option<&RecordEntry> {
        self.entries.iter().find(|e| e.path == path)
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

/// The digest bytes of a RECORD hash field if it is sha256 (other algorithms are not checked).
pub fn sha256_of_record_hash(hash: &str) -> Option<Vec<u8>> {
    let b64 = hash.strip_prefix("sha256=")?;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(b64.trim_end_matches('=')).ok()
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
    fn reports_bad_sizes_with_line() {
        let err = Record::parse(b"a,sha256=x,3\nb,sha256=y,big\n").unwrap_err();
        assert_eq!(err.to_string(), "RECORD line 2: the size `big` of `b` is not a number");
    }
}
