//! The proof of an archive before it is published: the finished file read back by the
//! independent reader ([`crate::elf::gpu::kpack_read`]), every frame decoded, and each code
//! object compared with what was recorded of it when it was taken from the fat binary (its size
//! and SHA-256), and its processor read from its own ELF header. `split` runs it on every
//! archive of every run; any difference refuses the wheel, naming the binary, the wrapper
//! (the key's `#index`) and the processor, and nothing of it is written. A frame that is not an
//! AMDGPU ELF file passes only when it decodes to exactly the bytes taken from the fat binary
//! (a bundle that held no ELF file: synthetic benchmarks, odd builds).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::elf::gpu::kpack::Expected;
use crate::elf::gpu::kpack_read::{self, ArchiveProblem};

/// Why an archive is not what was put into it.
#[derive(Debug, thiserror::Error)]
#[error("the {group} archive of {binary} does not hold what was put into it: {}", .problems.join("; "))]
pub struct ProofError {
    pub binary: String,
    pub group: String,
    pub problems: Vec<String>,
}

/// The test hook that damages an archive before its proof (`WHEELFIX_TEST_DAMAGE_ARCHIVE=1`
/// flips a byte in the middle of its first frame), so that a test can show the proof catches
/// it. Read here only; never set outside tests.
const DAMAGE_HOOK: &str = "WHEELFIX_TEST_DAMAGE_ARCHIVE";

/// Prove the finished archive `file` (of `binary`, for `group`) holds exactly `expected`.
pub fn prove_archive(file: &File, expected: &[Expected], binary: &str, group: &str) -> Result<(), ProofError> {
    let fail = |problems: Vec<String>| ProofError { binary: binary.to_string(), group: group.to_string(), problems };
    let len = file.metadata().map_err(|e| fail(vec![format!("cannot read it back: {e}")]))?.len();
    if std::env::var_os(DAMAGE_HOOK).is_some_and(|v| v == "1") {
        damage_first_frame(file).map_err(|e| fail(vec![format!("the test hook failed: {e}")]))?;
    }
    let read_at = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    let read = kpack_read::read_archive(&read_at, len);
    let mut wanted: BTreeMap<(&str, &str), &Expected> =
        expected.iter().map(|e| ((e.key.as_str(), e.target.as_str()), e)).collect();
    // A frame that is not an AMDGPU ELF file is what the fat binary's bundle held when it
    // decodes to exactly the bytes taken from it (synthetic or odd bundles): a faithful copy,
    // whose processor its header cannot tell.
    let faithful = |key: &str, target: &str| {
        let found = read.objects.iter().find(|o| o.key == key && o.target == target);
        found.is_some_and(|o| wanted.get(&(key, target)).is_some_and(|e| e.object == o.object))
    };
    let mut problems: Vec<String> = read
        .problems
        .iter()
        .filter(|p| !matches!(p, ArchiveProblem::NotCode { key, target, .. } if faithful(key, target)))
        .map(ArchiveProblem::to_string)
        .collect();
    for found in &read.objects {
        match wanted.remove(&(found.key.as_str(), found.target.as_str())) {
            None => problems.push(format!("{} for {}: not put into it", found.key, found.target)),
            Some(e) if e.object.size != found.object.size => problems.push(format!(
                "{} for {}: {} bytes decoded, {} taken from the binary",
                found.key, found.target, found.object.size, e.object.size
            )),
            Some(e) if e.object.sha256 != found.object.sha256 => problems.push(format!(
                "{} for {}: its {} bytes differ from those taken from the binary (SHA-256)",
                found.key, found.target, found.object.size
            )),
            Some(_) => {}
        }
    }
    for ((key, target), _) in wanted {
        problems.push(format!("{key} for {target}: missing"));
    }
    if problems.is_empty() { Ok(()) } else { Err(fail(problems)) }
}

/// Flip one byte in the middle of the archive's first frame (the test hook).
fn damage_first_frame(file: &File) -> std::io::Result<()> {
    // Header (64 bytes), frame count (4), the first frame's length (4), then the frame.
    let mut word = [0u8; 4];
    file.read_exact_at(&mut word, 68)?;
    let at = 72 + u64::from(u32::from_le_bytes(word)) / 2;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at)?;
    byte[0] ^= 0x5a;
    file.write_all_at(&byte, at)
}
