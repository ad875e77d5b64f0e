//! Parallelism, in one place: every loop that runs on rayon's pool is one of these.
//!
//! Order never depends on scheduling: results come back in input order, so every output is
//! deterministic.

use rayon::prelude::*;

use crate::wheel::Member;

/// Run `f` on every member index of an archive, largest members first (on a wheel dominated by
/// one huge library the other cores work through the rest meanwhile, instead of waiting for it
/// at the end); `done` is told of each member as it finishes. Results in archive order; the
/// first error wins.
pub fn each_member<R: Send, E: Send>(
    members: &[Member],
    f: impl Fn(usize) -> Result<R, E> + Sync + Send,
    done: impl Fn(&Member) + Sync,
) -> Result<Vec<R>, E> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(members[i].compressed_size));
    let mut results: Vec<(usize, R)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&index| {
            let result = f(index);
            done(&members[index]);
            result.map(|r| (index, r))
        })
        .collect::<Result<_, E>>()?;
    results.sort_by_key(|(index, _)| *index);
    Ok(results.into_iter().map(|(_, r)| r).collect())
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
