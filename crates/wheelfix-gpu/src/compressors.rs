//! Code objects compressed into archive frames on threads of their own while the caller reads
//! the next ones, and handed back in the order they were given.
//!
//! `split` reads a binary's code objects on one thread (a compressed bundle is decoded as a
//! stream, bundle after bundle) and compresses each at level 3, which costs more than the
//! decoding. Compressed a batch at a time, the reader waited for each batch before sending the
//! next and the cores idled between batches (on a wheel of 1.2 GB of code objects, 1.4 of 2
//! cores were busy); here each object goes to whichever compressor is free as soon as it is
//! read, and the reader waits only when the bytes out reach their bound. The analysis pass of
//! `split` gives them the payloads of plain bundles as the member inflates: compressed a batch
//! at a time on the inflating thread, they held up the inflate of onnxruntime-rocm's 489 MB
//! library (split 9% slower).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, mpsc};

use crate::kpack::{self, Object};

/// An object to compress: its place in the order, its bytes, a buffer for its frame.
type Job = (u64, Vec<u8>, Vec<u8>);

/// A compressed object: its place, its description (or why it failed), its bytes and frame.
type Done = (u64, io::Result<Object>, Vec<u8>, Vec<u8>);

/// Where each compressed object goes, in the order given: its tag, its description, its frame.
pub type FrameOut<'a, T> = dyn FnMut(T, Object, &[u8]) -> io::Result<()> + 'a;

/// Compressor threads fed one object at a time, with the tags of the objects not yet handed
/// back.
pub struct Compressors<T> {
    /// Bytes held at once at most (or one object, however large): objects being compressed
    /// and frames waiting for those before them; the memory this holds, whatever the number
    /// of cores, with as much again in the frames' buffers (each about its object's size) and
    /// their spares.
    limit: usize,
    threads: usize,
    /// Where an object's buffer goes once it is compressed (its frame is all that is kept),
    /// on the thread that gave it.
    recycle: fn(Vec<u8>),
    running: Option<Running>,
    tags: VecDeque<T>,
    /// Compressed out of order, waiting for those before them: a slow object does not hold
    /// the others' buffers, and the reader goes on while the compressors are busy.
    arrived: BTreeMap<u64, (io::Result<Object>, Vec<u8>)>,
    /// The place of the next object to hand back, and of the next given.
    next_out: u64,
    next_in: u64,
    held: usize,
    spare_frames: Vec<Vec<u8>>,
}

/// The threads, made with the first object.
struct Running {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl<T> Compressors<T> {
    /// Compressors on `threads` threads, holding at most `limit` bytes; each object's buffer
    /// goes to `recycle` once it is compressed.
    pub fn new(threads: usize, limit: usize, recycle: fn(Vec<u8>)) -> Compressors<T> {
        Compressors {
            limit,
            threads: threads.max(1),
            recycle,
            running: None,
            tags: VecDeque::new(),
            arrived: BTreeMap::new(),
            next_out: 0,
            next_in: 0,
            held: 0,
            spare_frames: Vec::new(),
        }
    }

    /// Compress `object` (tagged `tag`); those compressed by now go to `out`, in order. Waits
    /// while the bytes held would pass the bound.
    pub fn submit(&mut self, tag: T, object: Vec<u8>, out: &mut FrameOut<'_, T>) -> io::Result<()> {
        while self.held > 0 && self.held + object.len() > self.limit {
            self.receive(true, out)?;
        }
        let frame = self.spare_frames.pop().unwrap_or_default();
        self.held += object.len();
        self.tags.push_back(tag);
        let job = (self.next_in, object, frame);
        self.next_in += 1;
        let running = match &mut self.running {
            Some(running) => running,
            None => self.running.insert(Running::start(self.threads)?),
        };
        running.jobs.as_ref().expect("open until dropped").send(job).map_err(|_| gone())?;
        while self.receive(false, out)? {}
        Ok(())
    }

    /// Wait for every object given, each handed to `out` in order.
    pub fn flush(&mut self, out: &mut FrameOut<'_, T>) -> io::Result<()> {
        while self.next_out < self.next_in {
            self.receive(true, out)?;
        }
        Ok(())
    }

    /// Take one compressed object (waiting for it with `wait`) and hand back every one now in
    /// order; false when none had arrived.
    fn receive(&mut self, wait: bool, out: &mut FrameOut<'_, T>) -> io::Result<bool> {
        let Some(running) = &self.running else { return Ok(false) };
        let done = if wait {
            running.done.recv().map_err(|_| gone())?
        } else {
            match running.done.try_recv() {
                Ok(done) => done,
                Err(mpsc::TryRecvError::Empty) => return Ok(false),
                Err(mpsc::TryRecvError::Disconnected) => return Err(gone()),
            }
        };
        let (at, described, object, frame) = done;
        self.held = self.held - object.len() + frame.len();
        (self.recycle)(object);
        self.arrived.insert(at, (described, frame));
        while let Some((described, frame)) = self.arrived.remove(&self.next_out) {
            let tag = self.tags.pop_front().expect("a tag per object given");
            self.next_out += 1;
            self.held -= frame.len();
            let handed = described.and_then(|object_described| out(tag, object_described, &frame));
            self.keep_frame(frame);
            handed?;
        }
        Ok(true)
    }

    /// Keep a frame's buffer for the next object, while the spares take no more than the bound
    /// (a frame's buffer is as large as its object could compress to: about the object's size).
    fn keep_frame(&mut self, frame: Vec<u8>) {
        let spare: usize = self.spare_frames.iter().map(Vec::capacity).sum();
        if spare + frame.capacity() <= self.limit {
            self.spare_frames.push(frame);
        }
    }
}

impl Running {
    fn start(threads: usize) -> io::Result<Running> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (finished, done) = mpsc::channel::<Done>();
        let queue = Arc::new(Mutex::new(queue));
        let mut handles = Vec::new();
        for _ in 0..threads {
            let (queue, finished) = (queue.clone(), finished.clone());
            let thread = std::thread::Builder::new().name("compressor".into()).spawn(move || {
                loop {
                    let job = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
                    let Ok((at, object, mut frame)) = job else { return };
                    // A compressor that panicked would leave its object's place empty, and
                    // the reader waiting for it forever: the panic becomes that object's error.
                    let described = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        kpack::compress_frame_into(&object, &mut frame)
                    }))
                    .unwrap_or_else(|_| Err(io::Error::other("a compressor panicked")));
                    if finished.send((at, described, object, frame)).is_err() {
                        return;
                    }
                }
            })?;
            handles.push(thread);
        }
        Ok(Running { jobs: Some(jobs), done, handles })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Closing the queue ends the threads once they finish what they hold.
        self.jobs = None;
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the compressor threads ended early")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(i: usize) -> Vec<u8> {
        (0..(1000 + i * 7919 % 50_000)).map(|k| (k * (i + 1) % 251) as u8).collect()
    }

    #[test]
    fn frames_come_back_in_the_order_given_and_decode_to_their_objects() {
        for (threads, limit) in [(1, 1), (2, 60_000), (4, 1 << 20)] {
            let mut pool = Compressors::new(threads, limit, drop);
            let mut got = Vec::new();
            let mut out = |tag: usize, described: Object, frame: &[u8]| {
                let bytes = object(tag);
                assert_eq!(described, Object::of(&bytes), "object {tag} described by its own bytes");
                assert_eq!(zstd::bulk::decompress(frame, bytes.len()).unwrap(), bytes);
                got.push(tag);
                Ok(())
            };
            for i in 0..40 {
                pool.submit(i, object(i), &mut out).unwrap();
            }
            pool.flush(&mut out).unwrap();
            assert_eq!(got, (0..40).collect::<Vec<_>>(), "{threads} threads, limit {limit}");
        }
    }

    #[test]
    fn an_object_larger_than_the_bound_is_compressed_whole_between_smaller_ones() {
        // Code objects of 8 MiB and more once came out as empty frames: their buffers were
        // dropped before the caller took them.
        let big: Vec<u8> = (0..9u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut pool = Compressors::new(2, 1 << 20, drop);
        let mut got = Vec::new();
        let mut out = |tag: usize, described: Object, frame: &[u8]| {
            let bytes = if tag == 1 { big.clone() } else { object(tag) };
            assert_eq!(described, Object::of(&bytes), "object {tag}");
            assert!(zstd::bulk::decompress(frame, bytes.len()).unwrap() == bytes, "object {tag} decodes whole");
            got.push(tag);
            Ok(())
        };
        for i in 0..3 {
            pool.submit(i, if i == 1 { big.clone() } else { object(i) }, &mut out).unwrap();
        }
        pool.flush(&mut out).unwrap();
        assert_eq!(got, [0, 1, 2]);
    }

    #[test]
    fn an_error_where_a_frame_goes_is_returned_after_the_frames_before_it() {
        let mut pool = Compressors::new(2, 1 << 20, drop);
        let mut got = Vec::new();
        let mut out = |tag: usize, _: Object, _: &[u8]| {
            if tag == 3 {
                return Err(io::Error::other("the archive is full"));
            }
            got.push(tag);
            Ok(())
        };
        // As `split` does: the first error ends the binary.
        let failed = (0..8).try_for_each(|i| pool.submit(i, object(i), &mut out)).and_then(|()| pool.flush(&mut out));
        assert_eq!(failed.unwrap_err().to_string(), "the archive is full");
        assert_eq!(got, [0, 1, 2], "the frames before it, in order, and none after");
        // Dropped with objects still out: its threads end, nothing waits forever.
        drop(pool);
    }
}
