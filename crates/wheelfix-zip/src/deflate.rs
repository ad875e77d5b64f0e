//! Raw deflate made of blocks deflated independently (in parallel, as pigz does), that still
//! form one stream: zlib segments with the 32 KiB before them as their dictionary
//! ([`super::segment`]), and runs of zeros (the freed bytes of a thinned library, padding)
//! written by hand as fixed-code blocks, at any length, in a few bytes per 258 zeros.

use std::io;

/// The deflate window: each block is compressed with the input before it as its dictionary.
pub(crate) const WINDOW: usize = super::blocks::WINDOW as usize;

/// One block of a raw deflate stream made of blocks compressed in parallel, the way pigz
/// does: `input` is the block preceded by `dict` bytes of what comes before it (at most 32 KiB),
/// its dictionary. It is deflated in segments, each ending with a sync flush: runs of zeros of
/// [`ZERO_RUN`] bytes or more (the freed bytes of a thinned library, padding) are written as
/// literal-then-copy codes directly ([`zero_run`]), everything else by zlib with the 32 KiB
/// before it as its dictionary. The blocks' concatenation, closed by an empty final block, is
/// one valid stream, about as small as a serial one. A patched library of a GB compresses on every
/// core, and a few blocks at a time are in memory. The bytes depend only on the data and
/// `level`, never on the number of cores.
pub(crate) fn deflate_block(input: &[u8], dict: usize, level: u32, mut block: Vec<u8>) -> io::Result<Vec<u8>> {
    let data_len = input.len() - dict;
    block.clear();
    block.reserve(data_len + data_len / 1000 + 64);
    let mut at = dict;
    for (start, end) in zero_runs(&input[dict..], ZERO_RUN).into_iter().chain([(data_len, data_len)]) {
        let (start, end) = (start + dict, end + dict);
        if start > at {
            deflate_range(input, at, start, level, &mut block)?;
        }
        if end > start {
            zero_run(end - start, &mut block);
        }
        at = end;
    }
    Ok(block)
}

/// Zero runs at least this long are written without zlib.
const ZERO_RUN: usize = 16 << 10;

/// zlib on `input[start..end]`, with the 32 KiB before it as its dictionary, ending with a sync
/// flush (byte aligned, not final).
fn deflate_range(input: &[u8], start: usize, end: usize, level: u32, out: &mut Vec<u8>) -> io::Result<()> {
    super::segment::deflate_segment(&input[start - WINDOW.min(start)..start], &input[start..end], level, out)
}

/// The runs of zeros of at least `min` bytes in `data`, as [start, end), found a 4 KiB page at a
/// time (a run is whole pages of `data`'s own alignment; the bytes around it go to zlib).
fn zero_runs(data: &[u8], min: usize) -> Vec<(usize, usize)> {
    const PAGE: usize = 4096;
    // Or-ing whole words vectorises; a page of code stops at its first words anyway.
    let is_zero = |page: &[u8]| {
        page.chunks_exact(64).all(|c| {
            c.chunks_exact(8).fold(0u64, |acc, w| acc | u64::from_ne_bytes(w.try_into().expect("8 bytes"))) == 0
        })
    };
    let mut runs = Vec::new();
    let mut run_start = None;
    let pages = data.len() / PAGE;
    for page in 0..=pages {
        let zero = page < pages && is_zero(&data[page * PAGE..(page + 1) * PAGE]);
        match (zero, run_start) {
            (true, None) => run_start = Some(page * PAGE),
            (false, Some(start)) => {
                if page * PAGE - start >= min {
                    runs.push((start, page * PAGE));
                }
                run_start = None;
            }
            _ => {}
        }
    }
    runs
}

/// `n` zeros as one fixed-code deflate block, then a sync flush: a literal 0, then copies of
/// the byte before (distance 1), as long as deflate allows (258). It starts with a literal, so
/// it means the same after anything; from a byte boundary to a byte boundary, not final.
fn zero_run(n: usize, out: &mut Vec<u8>) {
    let mut bits = BitWriter { out, bits: 0, count: 0 };
    bits.put(0b010, 3); // BFINAL 0, BTYPE 01 (fixed codes), written LSB first
    bits.code(0x30, 8); // literal 0
    let mut left = n - 1;
    while left > 0 {
        let len = if left >= 258 { 258 } else { left };
        if len < 3 {
            for _ in 0..len {
                bits.code(0x30, 8);
            }
        } else {
            let (symbol, extra_bits, base) = length_symbol(len);
            if symbol < 280 {
                bits.code((symbol - 256) as u32, 7);
            } else {
                bits.code(0xc0 + (symbol - 280) as u32, 8);
            }
            bits.put((len - base) as u32, extra_bits);
            bits.code(0, 5); // distance code 0: distance 1
        }
        left -= len;
    }
    bits.code(0, 7); // end of block
    bits.put(0b000, 3); // an empty stored block: the sync flush
    bits.align();
    bits.out.extend_from_slice(&[0x00, 0x00, 0xff, 0xff]);
}

/// The length symbol of a copy of `len` (3–258): (symbol, extra bits, base length).
fn length_symbol(len: usize) -> (usize, u32, usize) {
    const BASES: [usize; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ];
    const EXTRA: [u32; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
    let i = BASES.iter().rposition(|b| *b <= len).expect("len >= 3");
    (257 + i, EXTRA[i], BASES[i])
}

/// Bits into bytes, least significant first, as deflate packs them.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    bits: u64,
    count: u32,
}

impl BitWriter<'_> {
    /// `count` bits of `value`, least significant first (header fields, extra bits).
    fn put(&mut self, value: u32, count: u32) {
        self.bits |= u64::from(value) << self.count;
        self.count += count;
        while self.count >= 8 {
            self.out.push(self.bits as u8);
            self.bits >>= 8;
            self.count -= 8;
        }
    }

    /// A Huffman code of `len` bits, most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        let reversed = code.reverse_bits() >> (32 - len);
        self.put(reversed, len);
    }

    fn align(&mut self) {
        if self.count > 0 {
            self.out.push(self.bits as u8);
            self.bits = 0;
            self.count = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_runs_of_every_length_decode_after_anything() {
        use std::io::Read;
        for n in [1, 2, 3, 4, 10, 257, 258, 259, 260, 261, 515, 516, 1000, 65_536, 100_003] {
            let mut stream = Vec::new();
            let prefix = b"some bytes before the run, ".repeat(50);
            deflate_range(&prefix, 0, prefix.len(), 6, &mut stream).unwrap();
            zero_run(n, &mut stream);
            stream.extend_from_slice(&[0x03, 0x00]);
            let mut back = Vec::new();
            flate2::read::DeflateDecoder::new(&stream[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back.len(), prefix.len() + n, "{n}");
            assert!(back[..prefix.len()] == prefix[..] && back[prefix.len()..].iter().all(|b| *b == 0), "{n}");
        }
    }
}
