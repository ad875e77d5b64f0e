//! Digests as wheels and indexes write them: hex for index pages and file names, and the sha256
//! of a stream read to its end.

use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// Lower-case hex. Ex) `[0xe3, 0xb0]` → `e3b0`
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// The sha256 of a regular file, as far as its size when it was opened (a file that grows
/// while it is read is never read forever).
pub fn file_sha256(path: &std::path::Path) -> io::Result<[u8; 32]> {
    let file = crate::files::open_regular(path)?;
    let len = file.metadata()?.len();
    let digest = sha256_of_reader(file.take(len))?;
    Ok(digest)
}

/// [`file_sha256`] in hex. Ex) `e3b0c442…`
pub fn file_sha256_hex(path: &std::path::Path) -> io::Result<String> {
    file_sha256(path).map(|d| hex(&d))
}

/// The sha256 of everything `reader` gives, read in chunks of 1 MiB.
pub fn sha256_of_reader(mut reader: impl Read) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(hasher.finalize().into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_stream_digests() {
        assert_eq!(hex(&[0xe3, 0xb0, 0x0f]), "e3b00f");
        let digest = sha256_of_reader(&b"hello"[..]).unwrap();
        assert_eq!(hex(&digest[..4]), "2cf24dba");
    }
}
