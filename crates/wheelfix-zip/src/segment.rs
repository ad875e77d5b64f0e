//! One segment of a raw deflate stream, deflated with a dictionary and ended by a sync flush,
//! through zlib-rs's zlib API with the deflater's memory kept per thread.
//!
//! A deflater's state is a few hundred KiB. Made afresh for every segment of a rewritten
//! library (thousands in a thinned wheel), it is a fresh mapping each time, faulted in page
//! by page and unmapped again, and each unmapping flushes the TLB of every core: a tenth of
//! `thin`'s time. Resetting one deflater instead would change the output: a reset leaves the
//! previous stream's window, which the match finder reads past the end of its input, so the
//! bytes would depend on which segment a thread deflated before. Here each segment still gets
//! its own deflater, initialised as zlib initialises one (window and hash chains zeroed, so
//! nothing of an earlier stream can be read), only its memory comes from the thread's pool.

use libz_rs_sys as z;
use std::alloc::Layout;
use std::cell::RefCell;
use std::ffi::{c_uint, c_void};
use std::io;

/// Deflate `data` at `level` after `dictionary` (at most 32 KiB of what comes before it) and
/// append it to `out`, ending with a sync flush (byte aligned, not final).
pub fn deflate_segment(dictionary: &[u8], data: &[u8], level: u32, out: &mut Vec<u8>) -> io::Result<()> {
    let mut stream = Deflater::new(level)?;
    if !dictionary.is_empty() {
        // SAFETY: the stream was initialised; the dictionary is read during the call only.
        let status =
            unsafe { z::deflateSetDictionary(&mut *stream.0, dictionary.as_ptr(), dictionary.len() as c_uint) };
        check(status, "set a deflate dictionary")?;
    }
    out.reserve(data.len() / 2 + 64);
    let mut input = data;
    loop {
        // zlib counts in 32 bits; a segment is a few MiB, but nothing here relies on it.
        let take = input.len().min(u32::MAX as usize);
        let room = (out.capacity() - out.len()).min(u32::MAX as usize);
        let flush = if take == input.len() { z::Z_SYNC_FLUSH } else { z::Z_NO_FLUSH };
        let s = &mut *stream.0;
        s.next_in = input.as_ptr();
        s.avail_in = take as c_uint;
        // SAFETY: next_out points at `room` bytes of `out`'s spare capacity, which deflate
        // writes and which are counted into its length below, by what deflate says it wrote.
        s.next_out = unsafe { out.as_mut_ptr().add(out.len()) };
        s.avail_out = room as c_uint;
        // SAFETY: the stream is initialised and its pointers are valid for the lengths given.
        let status = unsafe { z::deflate(s, flush) };
        let consumed = take - s.avail_in as usize;
        let written = room - s.avail_out as usize;
        // SAFETY: deflate initialised `written` bytes after the old length.
        unsafe { out.set_len(out.len() + written) };
        input = &input[consumed..];
        if status != z::Z_BUF_ERROR {
            check(status, "deflate")?;
        }
        // Done when everything is in and the flush fitted (room was left over).
        if input.is_empty() && flush == z::Z_SYNC_FLUSH && s.avail_out > 0 {
            return Ok(());
        }
        out.reserve(out.len().max(64 << 10));
    }
}

fn check(status: i32, what: &'static str) -> io::Result<()> {
    match status {
        z::Z_OK => Ok(()),
        _ => Err(io::Error::other(crate::blocks::ZlibFailed::Call { what, status })),
    }
}

/// A raw deflate stream (window bits 15, memory level 8, default strategy: what flate2 makes)
/// whose allocations come from [`POOL`]; ended when dropped.
struct Deflater(Box<z::z_stream>);

impl Deflater {
    fn new(level: u32) -> io::Result<Deflater> {
        let mut stream = Box::new(z::z_stream::default());
        stream.zalloc = Some(pool_alloc);
        stream.zfree = Some(pool_free);
        // SAFETY: the stream is a zeroed z_stream on the heap that outlives every call, with
        // an allocator pair that gives memory back only to itself; version and size are those of
        // the linked library.
        let status = unsafe {
            z::deflateInit2_(
                &mut *stream,
                level.min(9) as i32,
                z::Z_DEFLATED,
                -15,
                8,
                z::Z_DEFAULT_STRATEGY,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as i32,
            )
        };
        check(status, "start a deflater")?;
        Ok(Deflater(stream))
    }
}

impl Drop for Deflater {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by deflateInit2_ and is ended once.
        unsafe { z::deflateEnd(&mut *self.0) };
    }
}

/// Each block starts with its size, in a header this long (which keeps zlib's 16-byte
/// alignment; zlib-rs aligns further itself).
const HEADER: usize = 16;
/// Blocks kept per thread: a deflater makes two allocations.
const KEPT: usize = 4;

thread_local! {
    /// Blocks given back by this thread's deflaters: (address, size with header).
    static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
}

struct Pool(Vec<(*mut u8, usize)>);

impl Drop for Pool {
    fn drop(&mut self) {
        for &(ptr, size) in &self.0 {
            // SAFETY: every block in the pool was allocated by pool_alloc with this layout.
            unsafe { std::alloc::dealloc(ptr, block_layout(size)) };
        }
    }
}

fn block_layout(size: usize) -> Layout {
    Layout::from_size_align(size, HEADER).expect("a deflater's allocation has a valid layout")
}

extern "C" fn pool_alloc(_opaque: *mut c_void, items: c_uint, size: c_uint) -> *mut c_void {
    let Some(size) = (items as usize).checked_mul(size as usize).and_then(|s| s.checked_add(HEADER)) else {
        return std::ptr::null_mut();
    };
    let kept = POOL.with_borrow_mut(|pool| {
        let at = pool.0.iter().position(|&(_, s)| s == size)?;
        Some(pool.0.swap_remove(at).0)
    });
    let ptr = match kept {
        Some(ptr) => ptr,
        // SAFETY: the layout has a non-zero size (at least the header).
        None => unsafe { std::alloc::alloc(block_layout(size)) },
    };
    if ptr.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the block is `size` bytes, at least HEADER, aligned to HEADER.
    unsafe {
        ptr.cast::<usize>().write(size);
        ptr.add(HEADER).cast()
    }
}

extern "C" fn pool_free(_opaque: *mut c_void, address: *mut c_void) {
    if address.is_null() {
        return;
    }
    // SAFETY: `address` came from pool_alloc, HEADER bytes into a block whose size is written
    // at its start.
    let (ptr, size) = unsafe {
        let ptr = address.cast::<u8>().sub(HEADER);
        (ptr, ptr.cast::<usize>().read())
    };
    let given_back = POOL
        .try_with(|pool| {
            let mut pool = pool.borrow_mut();
            (pool.0.len() < KEPT).then(|| pool.0.push((ptr, size))).is_some()
        })
        .unwrap_or(false);
    if !given_back {
        // SAFETY: allocated by pool_alloc with this layout, and no longer used by zlib.
        unsafe { std::alloc::dealloc(ptr, block_layout(size)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflate_raw(stream: &[u8], dictionary: &[u8]) -> Vec<u8> {
        let mut d = flate2::Decompress::new(false);
        if !dictionary.is_empty() {
            d.set_dictionary(dictionary).unwrap();
        }
        let mut out = Vec::with_capacity(1 << 22);
        d.decompress_vec(stream, &mut out, flate2::FlushDecompress::Sync).unwrap();
        out
    }

    fn sample(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                if i % 7 < 4 { (i % 61) as u8 } else { (x >> 24) as u8 }
            })
            .collect()
    }

    #[test]
    fn a_segment_inflates_to_its_data_after_its_dictionary() {
        let all = sample(300_000, 7);
        let (dictionary, data) = all.split_at(32 << 10);
        let mut out = Vec::new();
        deflate_segment(dictionary, data, 6, &mut out).unwrap();
        assert!(out.len() < data.len(), "compressible data got smaller");
        // A sync flush ends with an empty stored block.
        assert_eq!(&out[out.len() - 4..], &[0x00, 0x00, 0xff, 0xff]);
        assert_eq!(inflate_raw(&out, dictionary), data);
    }

    #[test]
    fn pooled_deflaters_make_what_a_fresh_flate2_deflater_makes() {
        // The bytes must not depend on what a thread deflated before: each segment here follows
        // another on the same thread, whose deflater's memory it takes over.
        for (seed, level) in [(1, 6), (2, 6), (3, 1), (4, 9), (5, 6)] {
            let all = sample(200_000 + seed as usize * 10_000, seed);
            let (dictionary, data) = all.split_at(32 << 10);
            let mut ours = Vec::new();
            deflate_segment(dictionary, data, level, &mut ours).unwrap();
            let mut c = flate2::Compress::new(flate2::Compression::new(level), false);
            c.set_dictionary(dictionary).unwrap();
            let mut theirs = Vec::with_capacity(data.len() + 1024);
            c.compress_vec(data, &mut theirs, flate2::FlushCompress::Sync).unwrap();
            assert_eq!(ours, theirs, "seed {seed} level {level}");
        }
    }

    #[test]
    fn output_grows_past_a_small_reservation() {
        // Incompressible data: more than the half of its size reserved at first.
        let mut x = 0u32;
        let noise: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect();
        let mut out = Vec::new();
        deflate_segment(&[], &noise, 6, &mut out).unwrap();
        assert!(out.len() > noise.len() / 2);
        assert_eq!(inflate_raw(&out, &[]), noise);
    }
}
