//! The proof of an archive before it is published: the finished file read back by the
//! independent reader ([`crate::gpu::kpack_read`]), every frame decoded, and each code
//! object compared with what was recorded of it when it was taken from the fat binary (its size
//! and XXH3-128 digest), and its processor read from its own ELF header. `split` runs it on every
//! archive of every run; any difference refuses the wheel, naming the binary, the wrapper
//! (the key's `#index`) and the processor, and nothing of it is written. A frame that is not an
//! AMDGPU ELF file passes only when it decodes to exactly the bytes taken from the fat binary
//! (a bundle that held no ELF file: synthetic benchmarks, odd builds).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::zip::{Spilled, write::StoredDigest};

use crate::gpu::TargetId;
use crate::gpu::bundle_read;
use crate::gpu::kpack::{Expected, Object};
use crate::gpu::kpack_read::{self, ArchiveProblem};
use crate::gpu::resolve::{Lookup, Toc};

/// Why an archive is not what was put into it.
#[derive(Debug, thiserror::Error)]
#[error("the {group} archive of {binary} does not hold what was put into it: {}", .problems.join("; "))]
pub struct ProofError {
    pub binary: String,
    pub group: String,
    pub problems: Vec<String>,
}

/// The test hook that damages what `split` and `thin` wrote before its proof: a byte flipped in
/// the middle of an archive's first frame, or of a thinned file's first kept code object. It
/// exists only in a build with the cargo feature `test-hooks` (the tests enable it); the
/// commands turn it on from their settings ([`crate::settings::Settings::damage_output`]).
#[cfg(feature = "test-hooks")]
static DAMAGE_OUTPUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turn the test hook on or off for this process; without the feature, there is none to turn.
pub fn set_damage_hook(on: bool) {
    #[cfg(feature = "test-hooks")]
    DAMAGE_OUTPUT.store(on, std::sync::atomic::Ordering::Relaxed);
    let _ = on;
}

/// Whether the test hook is on: never in a build without the feature.
pub fn damage_hook_set() -> bool {
    #[cfg(feature = "test-hooks")]
    return DAMAGE_OUTPUT.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "test-hooks"))]
    false
}

/// Prove that the thinned file that `read_at` reads holds, in the bundles of `ranges`, exactly
/// the code objects `kept` (entry id, size and digest, read from the original before the
/// rewrite), read back by the independent reader ([`crate::gpu::bundle_read`]): none
/// lost, none changed, none that should have been dropped. Returns what differs.
pub fn prove_thinned(
    kept: &[(String, Object)],
    read_at: &(dyn Fn(&mut [u8], u64) -> std::io::Result<()> + Sync),
    ranges: &[(u64, u64)],
) -> Result<(), Vec<String>> {
    use rayon::prelude::*;
    let mut wanted: BTreeMap<(&str, Object), usize> = BTreeMap::new();
    for (id, object) in kept {
        *wanted.entry((id.as_str(), *object)).or_default() += 1;
    }
    let mut problems = Vec::new();
    let mut found = Vec::new();
    // Each range (a bundle's span, where the thinned bundle starts) read apart, on every core.
    let read: Vec<Result<bundle_read::BundlesRead, bundle_read::BundleReadError>> =
        ranges.par_iter().map(|&(from, to)| bundle_read::read_bundles(read_at, from, to)).collect();
    for result in read {
        match result {
            Ok(read) => found.extend(read.objects),
            Err(e) => problems.push(e.to_string()),
        }
    }
    for o in &found {
        match wanted.get_mut(&(o.id.as_str(), o.object)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => problems.push(format!("`{}` ({} bytes): not a code object it keeps, or changed", o.id, o.object.size)),
        }
    }
    for ((id, object), n) in wanted.into_iter().filter(|&(_, n)| n > 0) {
        problems.push(format!(
            "`{id}` ({} bytes): missing{}",
            object.size,
            if n > 1 { format!(" ({n} times)") } else { String::new() }
        ));
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Prove the finished archive `file` (of `binary`, for `group`) holds exactly `expected`, and
/// make it a stored member whose CRC-32 and SHA-256 are taken from the proof's own reads.
pub fn proven_archive(file: File, expected: &[Expected], binary: &str, group: &str) -> std::io::Result<Proven> {
    let digest = std::cell::RefCell::new(StoredDigest::default());
    let toc =
        prove_archive(&file, expected, binary, group, &digest).map_err(|e| std::io::Error::other(e.to_string()))?;
    let stored = std::sync::Arc::new(Spilled::stored_after(file, digest.into_inner())?);
    Ok(Proven { stored, toc })
}

/// An archive proven: the file to store, and its table of contents as the proof read it back
/// (what the runtime's lookup will find in it).
#[derive(Debug, Clone)]
pub struct Proven {
    pub stored: std::sync::Arc<Spilled>,
    pub toc: Toc,
}

/// Prove that every code object the archives of one device wheel hold for its processors is
/// found by the kpack runtime's lookup ([`crate::gpu::resolve`]) from the host binary's marker,
/// as each binary's search paths lead to the archives' install paths (`archives`: install path
/// → the table of contents the proof read back): the layout the split chose, judged by the
/// runtime's rules rather than by the choice itself. Returns what is not found.
pub fn prove_lookups(
    binaries: &[Lookup<'_>],
    processors: &[String],
    archives: &BTreeMap<&str, &Toc>,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    let toc_at = |path: &str| archives.get(path).copied();
    for lookup in binaries {
        let prefix = format!("{}#", lookup.kernel_name);
        for processor in processors {
            let modes = crate::gpu::resolve::device_modes(processor);
            let for_processor = |t: &TargetId| {
                t.processor() == processor
                    || crate::gpu::targets::generic_covers(t.processor())
                        .is_some_and(|c| c.contains(&processor.as_str()))
            };
            // Every wrapper some archive of the wheel holds code for this processor under.
            let mut keys: Vec<&str> = archives
                .values()
                .flat_map(|toc| toc.iter())
                .filter(|(key, targets)| key.starts_with(&prefix) && targets.iter().any(for_processor))
                .map(|(key, _)| key.as_str())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let Some(index) = key[prefix.len()..].parse::<usize>().ok() else { continue };
                let found = modes.iter().any(|mode| lookup.resolve(index, mode, toc_at).found());
                if !found {
                    problems.push(format!(
                        "{key} for {processor}: the runtime's lookup from {} ({}) does not find it",
                        lookup.binary,
                        lookup.search_paths.join(", ")
                    ));
                }
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// A binary's archives being finished, proven ([`proven_archive`]) and hashed as members to
/// store, on threads of their own, while its host binary is compacted and deflated: the proof
/// decodes every frame and the host's writing leaves a core idle much of the time (on a
/// binary of 1.2 GB of code objects the two overlapped save a tenth of `split`). Not the
/// pool's threads: a pool thread waiting for them would take up other members' writing
/// beneath this one, each with its memory. Dropped unwaited (the host failed), it waits for
/// them, and their files go.
pub struct ProvingArchives {
    jobs: Vec<std::thread::JoinHandle<Vec<ProvenArchive>>>,
}

/// An archive's name and its proven file, or why not.
type ProvenArchive = std::io::Result<(String, Proven)>;

/// An archive to finish and prove: its name, its family (the table's), its writer.
pub type ArchiveToProve = (String, String, crate::gpu::kpack::ArchiveWriter);

impl ProvingArchives {
    /// Start finishing and proving `archives` (of the binary `binary`, its kernel named
    /// `kernel_name`), spread over as many threads as the pool has.
    pub fn start(archives: Vec<ArchiveToProve>, kernel_name: &str, binary: &str) -> std::io::Result<ProvingArchives> {
        let threads = rayon::current_num_threads().clamp(1, archives.len().max(1));
        let mut queues: Vec<Vec<ArchiveToProve>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, archive) in archives.into_iter().enumerate() {
            queues[i % threads].push(archive);
        }
        let mut proving = ProvingArchives { jobs: Vec::new() };
        for queue in queues.into_iter().filter(|q| !q.is_empty()) {
            let (kernel_name, binary) = (kernel_name.to_string(), binary.to_string());
            let one = move |(name, family, writer): ArchiveToProve| -> ProvenArchive {
                let expected = writer.expected();
                let file = writer.finish(&kernel_name, &family)?;
                Ok((name.clone(), proven_archive(file, &expected, &binary, &name)?))
            };
            let job = std::thread::Builder::new()
                .name("archive proof".into())
                .spawn(move || queue.into_iter().map(&one).collect())?;
            proving.jobs.push(job);
        }
        Ok(proving)
    }

    /// Every archive, finished and proven, by name; the first failure otherwise.
    pub fn wait(mut self) -> std::io::Result<BTreeMap<String, Proven>> {
        let mut finished = BTreeMap::new();
        let mut failed = None;
        for job in std::mem::take(&mut self.jobs) {
            let results =
                job.join().unwrap_or_else(|_| vec![Err(std::io::Error::other("an archive's proof panicked"))]);
            for result in results {
                match result {
                    Ok((name, stored)) => {
                        finished.insert(name, stored);
                    }
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
        }
        failed.map_or(Ok(finished), Err)
    }
}

impl Drop for ProvingArchives {
    fn drop(&mut self) {
        for job in self.jobs.drain(..) {
            let _ = job.join();
        }
    }
}

/// Prove the finished archive `file` holds exactly `expected`, hashing into `digest` as it reads.
fn prove_archive(
    file: &File,
    expected: &[Expected],
    binary: &str,
    group: &str,
    digest: &std::cell::RefCell<StoredDigest>,
) -> Result<Toc, ProofError> {
    let fail = |problems: Vec<String>| ProofError { binary: binary.to_string(), group: group.to_string(), problems };
    let len = file.metadata().map_err(|e| fail(vec![format!("cannot read it back: {e}")]))?.len();
    if damage_hook_set() {
        damage_first_frame(file).map_err(|e| fail(vec![format!("the test hook failed: {e}")]))?;
    }
    let read_at = |buf: &mut [u8], at: u64| digest.borrow_mut().read_at(file, buf, at);
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
            Some(e) if e.object.xxh3 != found.object.xxh3 => problems.push(format!(
                "{} for {}: its {} bytes differ from those taken from the binary (XXH3-128)",
                found.key, found.target, found.object.size
            )),
            Some(_) => {}
        }
    }
    for ((key, target), _) in wanted {
        problems.push(format!("{key} for {target}: missing"));
    }
    if !problems.is_empty() {
        return Err(fail(problems));
    }
    let mut toc = Toc::new();
    for o in read.objects {
        toc.entry(o.key).or_default().push(TargetId::from_code(o.target));
    }
    Ok(toc)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn toc(entries: &[(&str, &[&str])]) -> Toc {
        entries.iter().map(|(k, ts)| (k.to_string(), ts.iter().map(|t| TargetId::from_code(*t)).collect())).collect()
    }

    #[test]
    fn every_code_object_of_a_device_wheel_is_found_from_its_hosts_marker() {
        let search = vec!["../.kpack/k.so_@GFXARCH@.kpack".to_string()];
        let lookup = Lookup { binary: "p/lib/k.so", kernel_name: "p/lib/k.so", search_paths: &search };
        let both = toc(&[("p/lib/k.so#0", &["gfx942:sramecc+:xnack-"]), ("p/lib/k.so#1", &["gfx9-4-generic"])]);
        let at_the_marker = BTreeMap::from([("p/.kpack/k.so_gfx942.kpack", &both)]);
        assert_eq!(prove_lookups(&[lookup], &["gfx942".to_string()], &at_the_marker), Ok(()));
        // The same archive one directory off: nothing is found, and each key is named.
        let elsewhere = BTreeMap::from([("p/lib/.kpack/k.so_gfx942.kpack", &both)]);
        let problems = prove_lookups(&[lookup], &["gfx942".to_string()], &elsewhere).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("p/lib/k.so#0 for gfx942"), "{problems:?}");
        // Code filed under another processor's archive name is not found for this one.
        let misnamed = BTreeMap::from([("p/.kpack/k.so_gfx950.kpack", &both)]);
        assert!(prove_lookups(&[lookup], &["gfx942".to_string()], &misnamed).is_err());
    }
}
