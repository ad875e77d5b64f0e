//! Parallelism, in one place: every loop that runs on rayon's pool is one of these.
//!
//! Order never depends on scheduling: results come back in input order, so every output is
//! deterministic.

use rayon::prelude::*;

/// Keep glibc's allocator from holding freed buffers: by default it raises its mmap threshold
/// each time a large buffer is freed, after which the 1 MiB buffers every wheel and member
/// passes through come from the per-thread heaps, where small allocations that outlive them
/// pin the space (a batch of 4,000 small wheels held 900 MB). With a fixed threshold, buffers
/// of 256 KiB and more are mapped and given back on free. Call once, before any thread starts.
pub fn fix_allocator_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// The most worker threads `RAYON_NUM_THREADS` may ask for: far past any machine's cores, short
/// of what an address-space limit refuses (each thread reserves its stack).
const MAX_THREADS: usize = 1024;

/// Why the pool could not start.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("RAYON_NUM_THREADS={0:?} is not a number of threads from 0 (one per core) to {MAX_THREADS}")]
    Setting(String),
    #[error("cannot start {threads} worker threads: {message} (set RAYON_NUM_THREADS lower)")]
    Start { threads: usize, message: String },
}

impl PoolError {
    /// A setting out of range is a usage error (2); a pool the system refuses is a failure (1).
    pub fn exit_code(&self) -> u8 {
        match self {
            PoolError::Setting(_) => 2,
            PoolError::Start { .. } => 1,
        }
    }
}

/// Start rayon's pool from `RAYON_NUM_THREADS` (0 or unset: one thread per core), before any
/// work: a value out of range, or threads the system will not start, is an error here rather
/// than a panic in the middle of a run.
pub fn start_pool() -> Result<(), PoolError> {
    let threads = match std::env::var("RAYON_NUM_THREADS") {
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n <= MAX_THREADS => n,
            _ => return Err(PoolError::Setting(text)),
        },
        Err(std::env::VarError::NotPresent) => 0,
        Err(std::env::VarError::NotUnicode(text)) => return Err(PoolError::Setting(text.to_string_lossy().into())),
    };
    let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .map_err(|e| PoolError::Start { threads, message: e.to_string() })
}

/// Run `f` on every index of `sizes` (an archive's members, by compressed size), largest first,
/// each worker taking the next item from one queue as it finishes the last: on a wheel dominated
/// by a few huge libraries, every core starts on one of them at once and the others work through
/// the rest meanwhile (rayon's splitting would hand a second core the middle of the list). `done`
/// is told of each index as it finishes. Results in index order; of several errors, the one of the
/// first index.
pub fn largest_first<R: Send, E: Send>(
    sizes: &[u64],
    f: impl Fn(usize) -> Result<R, E> + Sync + Send,
    done: impl Fn(usize) + Sync,
) -> Result<Vec<R>, E> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<R, E>)>> = Mutex::new(Vec::with_capacity(sizes.len()));
    let workers = rayon::current_num_threads().min(sizes.len()).max(1);
    rayon::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| {
                let mut mine = Vec::new();
                while let Some(&index) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let result = f(index);
                    done(index);
                    let failed = result.is_err();
                    mine.push((index, result));
                    if failed {
                        next.store(order.len(), Ordering::Relaxed); // the others stop too
                    }
                }
                results.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Run `consume` on a thread of its own over the buffers that `produce` hands it ([`Handoff`]),
/// at most `depth` waiting, the spent ones handed back for reuse: one long sequential job beside
/// another that feeds it (a large member's sha256 beside its inflate), so that the two take the
/// time of the longer rather than of both. `consume` has seen every buffer when this returns.
pub fn beside<R>(depth: usize, mut consume: impl FnMut(&[u8]) + Send, produce: impl FnOnce(&mut Handoff) -> R) -> R {
    use std::sync::mpsc;
    let (to_consumer, from_producer) = mpsc::sync_channel::<(Vec<u8>, usize, usize)>(depth);
    let (to_producer, spent) = mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for (buf, from, to) in from_producer {
                consume(&buf[from..to]);
                // The producer may have finished and gone: then the buffer is simply dropped.
                let _ = to_producer.send(buf);
            }
        });
        let mut handoff = Handoff { to_consumer: Some(to_consumer), spent };
        let result = produce(&mut handoff);
        // Closing the queue ends the consumer, which the scope then waits for.
        handoff.to_consumer = None;
        result
    })
}

/// Run `background` on a thread of its own while `foreground` runs here; once `foreground` is
/// done, tell `background` to stop (the flag it is given) and wait for it. Work that may start
/// early and be cut short (copying a wheel's members while the batch is analysed).
pub fn while_running<A: Send, B>(
    background: impl FnOnce(&std::sync::atomic::AtomicBool) -> A + Send,
    foreground: impl FnOnce() -> B,
) -> (A, B) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| background(&stop));
        let b = foreground();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let a = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (a, b)
    })
}

/// The producer's end of [`beside`].
pub struct Handoff {
    to_consumer: Option<std::sync::mpsc::SyncSender<(Vec<u8>, usize, usize)>>,
    spent: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Handoff {
    /// Hand the first `len` bytes of `buf` over (waiting while the queue is full), and get a
    /// buffer of the same length to fill next: a spent one, or a new one.
    pub fn pass(&mut self, buf: Vec<u8>, len: usize) -> Vec<u8> {
        let size = buf.len();
        match self.pass_range(buf, 0..len) {
            Some(mut spent) => {
                spent.resize(size, 0);
                spent
            }
            None => vec![0u8; size],
        }
    }

    /// Hand `buf[range]` over (waiting while the queue is full); a spent buffer back, when one
    /// has come back.
    pub fn pass_range(&mut self, buf: Vec<u8>, range: std::ops::Range<usize>) -> Option<Vec<u8>> {
        if let Some(queue) = &self.to_consumer {
            // The consumer ends only when the queue closes, so the send cannot fail.
            let _ = queue.send((buf, range.start, range.end));
        }
        self.spent.try_recv().ok()
    }

    /// The spent buffers that have come back since, without waiting.
    pub fn spent(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.spent.try_iter()
    }
}

/// `f` on every item, in parallel; results in input order.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    items.par_iter().map(f).collect()
}

/// `f` on every item (consumed), in parallel; results in input order.
pub fn map_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    items.into_par_iter().map(f).collect()
}

/// [`map`] for fallible work: the first error in input order wins.
pub fn try_map<T: Sync, R: Send, E: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, E> + Sync + Send,
) -> Result<Vec<R>, E> {
    items.par_iter().map(f).collect()
}

/// [`map_owned`] for fallible work.
pub fn try_map_owned<T: Send, R: Send, E: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> Result<R, E> + Sync + Send,
) -> Result<Vec<R>, E> {
    items.into_par_iter().map(f).collect()
}

/// `f` on every item, in parallel, each giving any number of results, flattened in input order.
pub fn flat_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> Vec<R> + Sync + Send) -> Vec<R> {
    items.par_iter().flat_map_iter(f).collect()
}

/// [`try_map`] for work whose memory cost varies: items costing more than `alone_above` run one
/// at a time, first (each may use every core inside, as block deflate does, instead of holding
/// its memory beside others while the rest wait for budget), the rest in parallel. Results in
/// input order.
pub fn try_map_by_cost<T: Sync, R: Send, E: Send>(
    items: &[T],
    cost: impl Fn(&T) -> u64,
    alone_above: u64,
    f: impl Fn(&T) -> Result<R, E> + Sync + Send,
) -> Result<Vec<R>, E> {
    let (large, small): (Vec<usize>, Vec<usize>) = (0..items.len()).partition(|&i| cost(&items[i]) > alone_above);
    let mut results: Vec<(usize, R)> = Vec::with_capacity(items.len());
    for i in large {
        results.push((i, f(&items[i])?));
    }
    let small: Vec<(usize, R)> = small.par_iter().map(|&i| f(&items[i]).map(|r| (i, r))).collect::<Result<_, E>>()?;
    results.extend(small);
    results.sort_by_key(|(i, _)| *i);
    Ok(results.into_iter().map(|(_, r)| r).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_sees_every_buffer_in_order_on_another_thread() {
        let mut seen = Vec::new();
        let mut threads = std::collections::BTreeSet::new();
        let given = beside(
            2,
            |bytes| {
                seen.extend_from_slice(bytes);
                threads.insert(format!("{:?}", std::thread::current().id()));
            },
            |handoff| {
                let mut buf = vec![0u8; 64];
                let mut given = Vec::new();
                for i in 0..1000u32 {
                    let len = (i % 64) as usize;
                    buf[..len].fill(i as u8);
                    given.extend(std::iter::repeat_n(i as u8, len));
                    buf = handoff.pass(buf, len);
                    assert_eq!(buf.len(), 64);
                }
                given
            },
        );
        assert!(seen == given, "every byte, in order");
        assert_eq!(threads.len(), 1);
        assert!(!threads.contains(&format!("{:?}", std::thread::current().id())), "not the producer's thread");
    }
}
