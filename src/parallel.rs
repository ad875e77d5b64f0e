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
