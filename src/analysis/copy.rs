//! Inflated copies of the members that hold offload bundles, kept for `thin`'s writer so that
//! each is inflated once. A copy is written as the member streams past; the payloads of bundle
//! entries that thinning will drop are not written at all ([`HoledCopy`]): their places are
//! holes of the file (they read as zeros) and are listed, so that a fat library costs the
//! bytes it keeps rather than all of them. The writer never serves a hole's bytes: it reads the
//! copy through [`crate::gpu::rewrite::ZeroedFile`], which fails a read of any hole its
//! rewrite has not written or zeroed, and then inflates the member afresh.
//!
//! For `split` ([`CopyRoom::capturing`]) no payload is written: each code object a group
//! takes is compressed as it streams past, on compressor threads while the member inflates
//! ([`crate::gpu::compressors`]), into an archive in
//! the making per target id whose keys are the payloads' offsets ([`Captured`]). The writer
//! names them when it meets their bundles, and an archive whose one target one group takes
//! becomes that group's archive as it is: the code objects are never written raw, nor read
//! back.
//!
//! Why one file: the holed copies `thin` reads
//! and the captured archives `split` writes are made in the same streaming pass over a member.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

use crate::gpu::BUNDLE_MAGIC;
use crate::gpu::compressors::Compressors;
use crate::gpu::kpack::{ArchiveWriter, Object};
use crate::gpu::rewrite::{self, Ranges};
use crate::gpu::scan::bundle_target;
use crate::gpu::targets::Keep;
use crate::zip::blocks::BlockMarks;

/// The most bytes of inflated copies a run keeps on disk at once, by default
/// (`WHEELFIX_COPY_ROOM` sets it: [`crate::settings::Settings::copy_room`]).
pub const DEFAULT_ROOM: u64 = 16 << 30;

/// Where inflated copies are kept, how many bytes of them a run may hold at once (a batch is
/// examined whole before it is written, and beyond this room the writer inflates again), and
/// what thinning keeps (so that what it drops is never written).
#[derive(Debug, Clone)]
pub struct CopyRoom {
    pub dir: PathBuf,
    left: Arc<AtomicU64>,
    keep: Keep,
    /// Code objects the keep keeps are compressed as they pass, not copied (`split`).
    capture: bool,
}

impl CopyRoom {
    pub fn new(dir: PathBuf, bytes: u64, keep: Keep) -> CopyRoom {
        CopyRoom { dir, left: Arc::new(AtomicU64::new(bytes)), keep, capture: false }
    }

    /// A room whose copies hold no payload: the code objects `keep` keeps are taken as they
    /// stream past, each a zstd frame ([`Captured`]); the others are left out.
    pub fn capturing(dir: PathBuf, bytes: u64, keep: Keep) -> CopyRoom {
        CopyRoom { capture: true, ..CopyRoom::new(dir, bytes, keep) }
    }

    /// Take room for `bytes`; false when there is not enough left.
    pub(super) fn take(&self, bytes: u64) -> bool {
        self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(bytes)).is_ok()
    }

    /// Give back room taken for a copy that was not kept.
    pub(super) fn give_back(&self, bytes: u64) {
        self.left.fetch_add(bytes, Ordering::SeqCst);
    }

    /// A new copy of a member of `size` bytes, in this room's directory.
    pub(crate) fn start(&self, size: u64) -> io::Result<HoledCopy<'_>> {
        Ok(HoledCopy {
            file: BackgroundWriter::new(tempfile::tempfile_in(&self.dir)?)?,
            size,
            keep: &self.keep,
            at: 0,
            holes: Ranges::default(),
            pending: None,
            tail: Vec::new(),
            buf: Vec::with_capacity(BUF),
            buf_at: 0,
            marks: None,
            capture: self.capture.then(|| Capture::new(self.dir.clone())),
        })
    }
}

/// The code objects a copy took as they streamed past, compressed, by target id: each an
/// archive in the making ([`ArchiveWriter`]) keyed by the payload's offset in the member
/// ([`Captured::key`]).
#[derive(Default)]
pub struct Captured {
    pub by_target: std::collections::BTreeMap<String, ArchiveWriter>,
}

impl std::fmt::Debug for Captured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Captured").field("targets", &self.by_target.keys().collect::<Vec<_>>()).finish()
    }
}

impl Captured {
    /// The key a code object is captured under: its payload's offset in the member.
    pub fn key(at: u64) -> String {
        format!("@{at}")
    }

    /// The offset a key names.
    pub fn offset(key: &str) -> Option<u64> {
        key.strip_prefix('@')?.parse().ok()
    }

    /// Add the frame of the code object `object` describes, at `at`, for `target`, its archive
    /// made in `dir` when it is the target's first.
    pub fn add(&mut self, dir: &Path, at: u64, target: &str, object: Object, frame: &[u8]) -> io::Result<()> {
        self.archive(dir, target)?.add_frame(&Captured::key(at), target, object, frame)
    }

    /// Compress the code object at `at` for `target` (`size` bytes) into its target's archive as
    /// `reader` gives it.
    pub fn stream(
        &mut self,
        dir: &Path,
        at: u64,
        target: &str,
        size: u64,
        reader: &mut dyn io::Read,
    ) -> io::Result<()> {
        self.archive(dir, target)?.add_streamed(&Captured::key(at), target, size, reader).map(|_| ())
    }

    /// The archive of `target`, made in `dir` when it is the target's first.
    fn archive(&mut self, dir: &Path, target: &str) -> io::Result<&mut ArchiveWriter> {
        Ok(match self.by_target.entry(target.to_string()) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => v.insert(ArchiveWriter::new(tempfile::tempfile_in(dir)?)?),
        })
    }
}

/// The code object bytes a capturing copy holds while they are compressed (objects being
/// compressed and frames waiting for those before them): two objects of the largest held
/// whole, one compressing on each of two cores while the member inflates.
const CAPTURE_IN_FLIGHT: usize = 2 * rewrite::WHOLE_OBJECT as usize;

/// What a capturing copy holds in memory at most: the objects in flight and their frames' buffers
/// (each bounded by [`CAPTURE_IN_FLIGHT`]), the payload being gathered (up to
/// [`rewrite::WHOLE_OBJECT`]; a larger code object is streamed into its archive, never held),
/// the spare buffers of the thread that gathers ([`rewrite::recycle`] keeps three objects'
/// worth), and the copy's own buffers.
const CAPTURE_MEMORY: u64 = 2 * CAPTURE_IN_FLIGHT as u64 + 4 * rewrite::WHOLE_OBJECT + COPY_BUFFERS;

/// What a payload being taken has of its bytes.
enum Taken {
    /// Gathered in a buffer, to be compressed once complete.
    Bytes(Vec<u8>),
    /// Larger than [`rewrite::WHOLE_OBJECT`]: compressed into its target's archive as its
    /// bytes arrive (this many so far), never held whole.
    Streamed(u64),
}

impl Taken {
    fn len(&self) -> u64 {
        match self {
            Taken::Bytes(bytes) => bytes.len() as u64,
            Taken::Streamed(n) => *n,
        }
    }
}

/// Payloads being taken from the stream, and the archives they go to.
struct Capture {
    dir: PathBuf,
    /// Payloads not yet complete, in the order of their offsets: start, end, target id, bytes.
    taking: std::collections::VecDeque<(u64, u64, String, Taken)>,
    /// Complete payloads being compressed on threads of their own while the member inflates,
    /// each tagged with its offset and target id; their frames come back in the order given.
    compressors: Compressors<(u64, String)>,
    done: Captured,
}

impl Capture {
    fn new(dir: PathBuf) -> Capture {
        // Object buffers come from the inflating thread's spares and go back to them.
        let compressors = Compressors::new(rayon::current_num_threads(), CAPTURE_IN_FLIGHT, rewrite::recycle);
        Capture { dir, taking: Default::default(), compressors, done: Captured::default() }
    }

    /// Take the bytes of `data` (at `at`) that belong to payloads being taken. Each payload,
    /// once complete, goes to the compressors; one that lies whole in `data` is copied from it
    /// (a member read whole is one write), the others are gathered as they pass.
    fn take(&mut self, data: &[u8], at: u64) -> io::Result<()> {
        let end = at + data.len() as u64;
        let mut left = std::collections::VecDeque::new();
        for (from, to, target, mut taken) in std::mem::take(&mut self.taking) {
            let next = from + taken.len();
            if next < at.min(to) {
                // Bytes of it went past before it was known: it is not taken (its hole stays,
                // and the writer inflates the member afresh). A streamed frame is abandoned:
                // the archive is not used.
                if matches!(taken, Taken::Streamed(_)) {
                    self.done.by_target.remove(&target);
                }
                continue;
            }
            let stop = to.min(end);
            // What `data` holds of it (none when it starts past `data`).
            let piece: &[u8] = if next < stop { &data[(next - at) as usize..(stop - at) as usize] } else { &[] };
            if next < stop && next == from && to - from > rewrite::WHOLE_OBJECT {
                // Too large to hold: its frame is streamed into the archive as its bytes
                // arrive, after every payload before it (frames go in offset order, and
                // nothing else enters the archive while the frame is open: a payload after it
                // has no bytes before it ends).
                self.flush()?;
                self.done.archive(&self.dir, &target)?.begin_frame(&Captured::key(from), &target, to - from)?;
                taken = Taken::Streamed(0);
            }
            match &mut taken {
                Taken::Streamed(n) if next < stop => {
                    self.done.archive(&self.dir, &target)?.write_frame(piece)?;
                    *n += piece.len() as u64;
                }
                Taken::Bytes(bytes) if next < stop => {
                    // A buffer is taken when the payload's first bytes arrive: a table
                    // announces all its payloads at once, and they stream past one after
                    // another.
                    if bytes.capacity() == 0 {
                        *bytes = rewrite::object_room((to - from) as usize);
                    }
                    bytes.extend_from_slice(piece);
                }
                _ => {}
            }
            match taken {
                Taken::Streamed(n) if n == to - from => {
                    self.done.archive(&self.dir, &target)?.end_frame()?;
                }
                Taken::Bytes(bytes) if bytes.len() as u64 == to - from => self.submit(from, target, bytes)?,
                taken => left.push_back((from, to, target, taken)),
            }
        }
        self.taking = left;
        Ok(())
    }

    /// Compress a complete payload into its target's archive, after those given before it.
    fn submit(&mut self, at: u64, target: String, bytes: Vec<u8>) -> io::Result<()> {
        let Capture { dir, compressors, done, .. } = self;
        compressors
            .submit((at, target), bytes, &mut |(at, target), object, frame| done.add(dir, at, &target, object, frame))
    }

    /// Wait for every payload given, each in its archive.
    fn flush(&mut self) -> io::Result<()> {
        let Capture { dir, compressors, done, .. } = self;
        compressors.flush(&mut |(at, target), object, frame| done.add(dir, at, &target, object, frame))
    }
}

/// A member's inflated copy: the file, the ranges it does not hold (they read as zeros), and
/// where the member's deflate blocks start, when the inflater noted it (the writer reuses the
/// blocks whose content the rewrite leaves).
#[derive(Debug)]
pub struct BundledCopy {
    pub file: File,
    pub holes: Ranges,
    pub marks: Option<BlockMarks>,
    /// The code objects taken as they passed (a capturing room's copy), for the one writer
    /// that takes them.
    pub captured: std::sync::Mutex<Option<Captured>>,
}

/// Bytes written to the copy at a time.
const BUF: usize = 1 << 20;
/// The longest bundle table read from the stream (a real one is a few KB); a longer one is
/// written whole, no holes.
const MAX_TABLE: usize = 1 << 20;
/// What is taken of a table first.
const FIRST_TAKE: usize = 4 << 10;

/// How many of a copy's buffers may wait for their write.
const IN_FLIGHT: usize = 4;
/// The buffers a copy holds at most: those waiting, the one being written, one given back and
/// the one being filled.
const COPY_BUFFERS: u64 = (IN_FLIGHT + 3) as u64 * BUF as u64;

/// A copy's file, written on a thread of its own: the page-cache copy of each buffer (on a
/// 470 MB library, a second of kernel time) runs beside the inflating thread, not in it.
struct BackgroundWriter {
    file: File,
    queue: Option<mpsc::SyncSender<(Vec<u8>, u64)>>,
    /// Buffers written, given back to be filled again.
    spare: mpsc::Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl BackgroundWriter {
    fn new(file: File) -> io::Result<BackgroundWriter> {
        let (queue, waiting) = mpsc::sync_channel::<(Vec<u8>, u64)>(IN_FLIGHT);
        let (give_back, spare) = mpsc::channel();
        let writes_to = file.try_clone()?;
        let thread = std::thread::Builder::new().name("copy writer".into()).spawn(move || {
            for (buf, at) in waiting {
                writes_to.write_all_at(&buf, at)?;
                // The copy may have finished meanwhile: the buffer is then dropped.
                let _ = give_back.send(buf);
            }
            Ok(())
        })?;
        Ok(BackgroundWriter { file, queue: Some(queue), spare, thread: Some(thread) })
    }

    /// An empty buffer of [`BUF`] bytes' capacity: one written before, else a new one.
    fn buffer(&self) -> Vec<u8> {
        let mut buf = self.spare.try_recv().unwrap_or_default();
        buf.clear();
        buf.reserve(BUF);
        buf
    }

    /// Write `buf` at `at`, once the buffers before it are written.
    fn write(&mut self, buf: Vec<u8>, at: u64) -> io::Result<()> {
        let sent = self.queue.as_ref().map(|queue| queue.send((buf, at)).is_ok());
        if sent != Some(true) {
            // The thread stopped: its error says why.
            self.finish()?;
            return Err(io::Error::other("the copy's writer stopped"));
        }
        Ok(())
    }

    /// The file, every write done.
    fn into_file(mut self) -> io::Result<File> {
        self.finish()?;
        Ok(self.file)
    }

    /// Wait for every write; the first error, if one failed.
    fn finish(&mut self) -> io::Result<&File> {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            thread.join().map_err(|_| io::Error::other("the copy's writer panicked"))??;
        }
        Ok(&self.file)
    }
}

/// A copy being written in stream order. Every bundle magic that passes starts a table, read as
/// its bytes arrive; once it reads, the payloads of entries the keep drops become holes.
pub struct HoledCopy<'k> {
    file: BackgroundWriter,
    size: u64,
    keep: &'k Keep,
    /// The offset of the next byte to arrive.
    at: u64,
    holes: Ranges,
    /// A bundle table being gathered: its offset and its bytes so far.
    pending: Option<(u64, Vec<u8>)>,
    /// The last bytes of the previous write, for a magic that straddles two.
    tail: Vec<u8>,
    buf: Vec<u8>,
    buf_at: u64,
    marks: Option<BlockMarks>,
    capture: Option<Capture>,
}

impl HoledCopy<'_> {
    /// The finished copy, its length the member's.
    pub fn finish(mut self) -> io::Result<BundledCopy> {
        self.flush_buf()?;
        self.file.finish()?.set_len(self.size.max(self.at))?;
        // A payload the member ended inside of was not taken: its hole stays, and the writer,
        // finding neither bytes nor frame, inflates the member afresh.
        let captured = match self.capture.as_mut() {
            Some(capture) => {
                capture.flush()?;
                // A frame the member ended inside of is abandoned with its archive.
                for (_, _, target, taken) in &capture.taking {
                    if matches!(taken, Taken::Streamed(_)) {
                        capture.done.by_target.remove(target);
                    }
                }
                Some(std::mem::take(&mut capture.done))
            }
            None => None,
        };
        Ok(BundledCopy {
            file: self.file.into_file()?,
            holes: self.holes,
            marks: self.marks,
            captured: std::sync::Mutex::new(captured),
        })
    }

    /// The ranges it will not hold from `at` on, as known so far (payloads of tables read).
    pub fn holes_from(&self, at: u64) -> Vec<(u64, u64)> {
        self.holes.within(at, u64::MAX)
    }

    /// The memory it may hold beyond the stream's (for the budget of the pass that fills it).
    pub fn memory(&self) -> u64 {
        if self.capture.is_some() { CAPTURE_MEMORY } else { COPY_BUFFERS }
    }

    /// Where the member's deflate blocks start (from the inflater that gave the bytes).
    pub fn set_marks(&mut self, marks: Option<BlockMarks>) {
        self.marks = marks;
    }

    /// Find the bundles whose tables start or complete in `data` (at `self.at`).
    fn learn(&mut self, data: &[u8]) {
        let at = self.at;
        if let Some((start, mut table)) = self.pending.take() {
            self.gather(start, &mut table, data);
        }
        let overlap = BUNDLE_MAGIC.len() - 1;
        let tail = std::mem::take(&mut self.tail);
        if !tail.is_empty() {
            let from = at - tail.len() as u64;
            let mut joined = tail.clone();
            joined.extend_from_slice(&data[..data.len().min(overlap)]);
            for found in memchr::memmem::find_iter(&joined, BUNDLE_MAGIC) {
                self.begin(from + found as u64, at, &tail, data);
            }
        }
        for found in memchr::memmem::find_iter(data, BUNDLE_MAGIC) {
            self.begin(at + found as u64, at, &tail, data);
        }
        // The last bytes seen, however short the writes.
        let mut tail = tail;
        tail.extend_from_slice(&data[data.len().saturating_sub(overlap)..]);
        self.tail = tail.split_off(tail.len().saturating_sub(overlap));
    }

    /// A magic at `start`: gather its table from `tail` (the bytes just before `at`) and `data`
    /// (at `at`), unless it lies in a hole or a table is already being read.
    fn begin(&mut self, start: u64, at: u64, tail: &[u8], data: &[u8]) {
        if self.holes.covers(start) || self.pending.is_some() {
            return;
        }
        let mut table = Vec::new();
        if start < at {
            table.extend_from_slice(&tail[tail.len() - (at - start) as usize..]);
        }
        let offset = start.saturating_sub(at) as usize;
        self.gather(start, &mut table, &data[offset.min(data.len())..]);
    }

    /// Add `more` to the table at `start`: when it reads, its dropped payloads become holes;
    /// while it is short, it stays pending.
    fn gather(&mut self, start: u64, table: &mut Vec<u8>, mut more: &[u8]) {
        // Taken in doubling steps: a table is mostly a few hundred bytes, and the rest of a
        // chunk taken for each of thousands of bundles is a fresh buffer, faulted in, each time.
        loop {
            let want = (table.len() * 2).clamp(FIRST_TAKE, MAX_TABLE).saturating_sub(table.len()).min(more.len());
            table.extend_from_slice(&more[..want]);
            more = &more[want..];
            if let Some(capture) = self.capture.as_mut() {
                match rewrite::payload_entries(table) {
                    rewrite::Tabled::Entries(entries) => {
                        for e in entries {
                            let (from, to) = (start + e.offset, start + e.offset + e.size);
                            self.holes.add(from, to);
                            let target = bundle_target(&e.id).unwrap_or(&e.id);
                            if !e.id.starts_with("host-") && self.keep.keeps(target) {
                                // In the order of their offsets, which a table need not
                                // list them in: the order they stream past in.
                                let at = capture.taking.partition_point(|t| t.0 < from);
                                capture.taking.insert(at, (from, to, target.to_string(), Taken::Bytes(Vec::new())));
                            }
                        }
                        return;
                    }
                    rewrite::Tabled::Short if table.len() < MAX_TABLE => {
                        if more.is_empty() {
                            self.pending = Some((start, std::mem::take(table)));
                            return;
                        }
                        continue;
                    }
                    _ => return,
                }
            }
            match rewrite::dropped_payloads(table, self.keep) {
                rewrite::Dropped::Payloads(dropped) => {
                    for (from, to) in dropped {
                        self.holes.add(start + from, start + to);
                    }
                    return;
                }
                rewrite::Dropped::Short if table.len() < MAX_TABLE => {
                    if more.is_empty() {
                        self.pending = Some((start, std::mem::take(table)));
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let full = std::mem::replace(&mut self.buf, self.file.buffer());
            self.file.write(full, self.buf_at)?;
        }
        Ok(())
    }

    /// Write `data` (at `self.at`) but for its holes.
    fn put(&mut self, data: &[u8]) -> io::Result<()> {
        let end = self.at + data.len() as u64;
        let mut at = self.at;
        for (from, to) in self.holes.within(self.at, end) {
            self.keep_bytes(&data[(at - self.at) as usize..(from - self.at) as usize], at)?;
            at = to;
        }
        self.keep_bytes(&data[(at - self.at) as usize..], at)
    }

    fn keep_bytes(&mut self, bytes: &[u8], at: u64) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.buf_at + self.buf.len() as u64 != at || self.buf.len() + bytes.len() > BUF {
            self.flush_buf()?;
            self.buf_at = at;
        }
        // Bytes of a chunk with no holes fill buffers of their own (a copy, cheaper than the
        // page-cache copy it moves off this thread).
        for (i, piece) in bytes.chunks(BUF).enumerate() {
            if i > 0 {
                self.flush_buf()?;
                self.buf_at = at + (i * BUF) as u64;
            }
            self.buf.extend_from_slice(piece);
        }
        Ok(())
    }
}

impl Write for HoledCopy<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.learn(data);
        if let Some(capture) = self.capture.as_mut() {
            capture.take(data, self.at)?;
        }
        self.put(data)?;
        self.at += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::rewrite::{ZeroedFile, thin_range};
    use crate::gpu::scan::bundle_target;
    use wheelfix_gpu::fixtures::{keep, member};

    /// `data` streamed into a kept copy (that leaves out what `keep` drops), `chunk` bytes a write.
    fn streamed_copy(data: &[u8], chunk: usize, keep: &Keep) -> BundledCopy {
        use std::io::Write;
        let room = CopyRoom::new(std::env::temp_dir(), u64::MAX, keep.clone());
        let mut copy = room.start(data.len() as u64).unwrap();
        for piece in data.chunks(chunk) {
            copy.write_all(piece).unwrap();
        }
        copy.finish().unwrap()
    }

    #[test]
    fn a_copy_leaves_out_the_dropped_payloads_and_thins_to_the_same_bytes() {
        let data = member();
        let len = data.len() as u64;
        let keep = keep("gfx942");
        let mut whole = data.clone();
        let expected = thin_range(&mut whole, 0, len, &keep).unwrap();
        // Writes of every size: magic and tables straddle writes.
        for chunk in [1usize, 23, 1000, 4096, 1 << 20] {
            let copy = streamed_copy(&data, chunk, &keep);
            assert_eq!(copy.file.metadata().unwrap().len(), len);
            // Dropped: gfx90a and gfx1100 of the first, gfx1100 and gfx908 of the third.
            assert_eq!(copy.holes.bytes(), 4 * 5000, "writes of {chunk}");
            let mut zeroed = ZeroedFile::with_holes(&copy.file, copy.holes.clone());
            let thinned = thin_range(&mut zeroed, 0, len, &keep).unwrap();
            assert_eq!(thinned, expected);
            let mut back = vec![0u8; data.len()];
            zeroed.read_at(&mut back, 0).unwrap();
            assert!(back == whole, "writes of {chunk}: the copy thins to other bytes");
        }
    }

    /// Every payload of a plain bundle with its offset in `data` and target id.
    fn payloads(data: &[u8]) -> Vec<(u64, u64, String)> {
        let mut found = Vec::new();
        for at in memchr::memmem::find_iter(data, BUNDLE_MAGIC) {
            if let rewrite::Tabled::Entries(entries) = rewrite::payload_entries(&data[at..]) {
                for e in entries {
                    let target = bundle_target(&e.id).unwrap_or(&e.id).to_string();
                    found.push((at as u64 + e.offset, at as u64 + e.offset + e.size, target));
                }
            }
        }
        found
    }

    #[test]
    fn a_capturing_copy_holds_no_payload_and_takes_each_wanted_one_as_a_frame() {
        use std::io::Write;
        let data = member();
        let all = payloads(&data);
        assert_eq!(all.len(), 6);
        for (keep, wanted) in [(Keep::everything(), 6), (keep("gfx942"), 2)] {
            // Writes of every size: magic, tables and payloads straddle writes.
            for chunk in [1usize, 23, 1000, 4096, 1 << 20] {
                let room = CopyRoom::capturing(std::env::temp_dir(), u64::MAX, keep.clone());
                let mut copy = room.start(data.len() as u64).unwrap();
                for piece in data.chunks(chunk) {
                    copy.write_all(piece).unwrap();
                }
                let copy = copy.finish().unwrap();
                let mut captured = copy.captured.lock().unwrap().take().unwrap();
                let mut taken = 0;
                for (from, to, target) in &all {
                    assert!(
                        copy.holes.covers(*from) && copy.holes.covers(to - 1),
                        "writes of {chunk}: a payload copied"
                    );
                    let Some(archive) = captured.by_target.get_mut(target) else { continue };
                    let (described, frame) = archive.frame(&Captured::key(*from), target).unwrap();
                    assert_eq!(described.size, to - from);
                    let object = zstd::bulk::decompress(&frame, described.size as usize).unwrap();
                    assert_eq!(described, Object::of(&object));
                    assert!(object == data[*from as usize..*to as usize], "writes of {chunk}: {target} at {from}");
                    taken += 1;
                }
                assert_eq!(taken, wanted, "writes of {chunk}");
                let frames: usize = captured.by_target.values().map(|a| a.entries().count()).sum();
                assert_eq!(frames, wanted, "writes of {chunk}: nothing else taken");
                // The copy holds the rest: the prefix, the tables, the suffix.
                let zeroed = ZeroedFile::with_holes(&copy.file, copy.holes.clone());
                let mut head = vec![0u8; 3000];
                zeroed.read_at(&mut head, 0).unwrap();
                assert_eq!(head, vec![7u8; 3000]);
            }
        }
    }

    #[test]
    fn a_large_object_listed_before_a_smaller_one_at_an_earlier_offset_is_framed_after_it() {
        // Held whole, and streamed (past the bound, as cupy's and onnxruntime's largest).
        for big_len in [5usize << 20, rewrite::WHOLE_OBJECT as usize + (1 << 20)] {
            large_object_after_a_smaller_one(big_len);
        }
    }

    fn large_object_after_a_smaller_one(big_len: usize) {
        use std::io::Write;
        // One bundle whose table lists a large gfx942 object first, then a small gfx942 object
        // that lies before it (tables need not list entries in offset order; onnxruntime-rocm's
        // do not): the small one is framed first, the large one after it.
        let big: Vec<u8> = (0..big_len as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let small = vec![5u8; 5000];
        let ids =
            ["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx942", "hipv4-amdgcn-amd-amdhsa--gfx942"];
        let table = 32 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
        let (small_at, big_at) = (4096u64, 4096 + 8192u64);
        let mut bundle = crate::gpu::BUNDLE_MAGIC.to_vec();
        bundle.extend(3u64.to_le_bytes());
        for (id, offset, size) in
            [(ids[0], 0, 0), (ids[1], big_at, big.len() as u64), (ids[2], small_at, small.len() as u64)]
        {
            bundle.extend(offset.to_le_bytes());
            bundle.extend(size.to_le_bytes());
            bundle.extend((id.len() as u64).to_le_bytes());
            bundle.extend(id.as_bytes());
        }
        assert_eq!(bundle.len(), table);
        bundle.resize(small_at as usize, 0);
        bundle.extend(&small);
        bundle.resize(big_at as usize, 0);
        bundle.extend(&big);
        let mut data = vec![7u8; 4096];
        data.extend(&bundle);
        for chunk in [1000usize, 65536, 1 << 20, data.len()] {
            let room = CopyRoom::capturing(std::env::temp_dir(), u64::MAX, Keep::everything());
            let mut copy = room.start(data.len() as u64).unwrap();
            for piece in data.chunks(chunk) {
                copy.write_all(piece).unwrap();
            }
            let copy = copy.finish().unwrap();
            let mut captured = copy.captured.lock().unwrap().take().unwrap();
            let archive = captured.by_target.get_mut("gfx942").expect("taken");
            for (at, object) in [(4096 + small_at, &small), (4096 + big_at, &big)] {
                let (described, frame) = archive.frame(&Captured::key(at), "gfx942").unwrap();
                assert_eq!(described, Object::of(object), "{big_len} bytes, writes of {chunk}");
                let back = zstd::bulk::decompress(&frame, object.len()).unwrap();
                assert!(back == *object, "{big_len} bytes, writes of {chunk}");
            }
        }
    }

    #[test]
    fn a_table_larger_than_the_first_take_is_read_from_one_write() {
        // 400 entries (22 KB of table), every other one for gfx90a, each payload 64 bytes: the
        // table is taken in doubling steps within the one write that holds the whole bundle.
        let ids: [&[u8]; 2] = [b"hipv4-amdgcn-amd-amdhsa--gfx942", b"hipv4-amdgcn-amd-amdhsa--gfx90a"];
        let n = 400;
        let table = 32 + n * (24 + ids[0].len());
        let mut data = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        data.extend((n as u64).to_le_bytes());
        for i in 0..n {
            data.extend(((table + 64 * i) as u64).to_le_bytes());
            data.extend(64u64.to_le_bytes());
            data.extend((ids[i % 2].len() as u64).to_le_bytes());
            data.extend(ids[i % 2]);
        }
        data.extend(vec![0xabu8; 64 * n]);
        for chunk in [data.len(), 5000] {
            let copy = streamed_copy(&data, chunk, &keep("gfx942"));
            assert_eq!(copy.holes.bytes(), 64 * n as u64 / 2, "writes of {chunk}");
        }
    }

    #[test]
    fn a_hole_that_the_rewrite_needs_is_an_error_not_zeros() {
        let data = member();
        let len = data.len() as u64;
        // Copied for one keep, thinned for another: the copy lacks a payload that now stays.
        let copy = streamed_copy(&data, 4096, &keep("gfx942"));
        let mut zeroed = ZeroedFile::with_holes(&copy.file, copy.holes.clone());
        let e = thin_range(&mut zeroed, 0, len, &keep("gfx1100")).unwrap_err();
        assert!(e.to_string().contains("does not hold"), "{e}");
        // Nothing rewritten: every hole is still one, and reading it fails.
        let untouched = ZeroedFile::with_holes(&copy.file, copy.holes.clone());
        let mut back = vec![0u8; data.len()];
        assert!(untouched.read_at(&mut back, 0).is_err());
    }
}
