//! The compression of compressed offload bundles (CCOB's `method` field: 0 zlib, 1 zstd), one
//! decoder for both readers: the scanner pushes the bytes of a file as they stream past
//! ([`StreamDecoder::decode`]); the rewriter pulls from a range of a file ([`DecodingReader`]).

use std::io::{self, BufRead, Read};

/// A zlib or zstd stream decoded as its bytes arrive.
pub struct StreamDecoder(Inner);

enum Inner {
    Zlib(flate2::Decompress),
    Zstd(zstd::zstd_safe::DCtx<'static>),
    /// A zstd decoder given back to the spares ([`StreamDecoder`]'s drop).
    Returned,
}

/// zstd decoders kept for the next streams, of any thread. A decoder's window holds a whole
/// bundle (tens of MB) and is allocated when its first frame begins: a fresh decoder per bundle
/// faulted in all those pages again every time (on a wheel whose 41 bundles decode to 1.2 GB,
/// most of split's page faults and a third of its system time). A decoder used again keeps its
/// window where the next frame's fits; zstd itself shrinks one that stays far larger than its
/// frames need. At most [`SPARE_ZSTD_BYTES`] are kept, whatever the number of threads.
static SPARE_ZSTD: std::sync::Mutex<Vec<zstd::zstd_safe::DCtx<'static>>> = std::sync::Mutex::new(Vec::new());

/// The most bytes of spare zstd decoders kept (their windows): a few bundles' worth.
const SPARE_ZSTD_BYTES: usize = 128 << 20;

/// The largest spare zstd decoder, ready for a new frame, else a new one.
fn zstd_decoder() -> io::Result<zstd::zstd_safe::DCtx<'static>> {
    // Kept largest first.
    let spare = {
        let mut spare = SPARE_ZSTD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (!spare.is_empty()).then(|| spare.remove(0))
    };
    match spare {
        Some(mut d) => {
            d.reset(zstd::zstd_safe::ResetDirective::SessionOnly).map_err(zstd_error)?;
            Ok(d)
        }
        None => Ok(zstd::zstd_safe::DCtx::create()),
    }
}

/// A zstd error code as an error, named as zstd names it.
fn zstd_error(code: zstd::zstd_safe::ErrorCode) -> io::Error {
    io::Error::other(zstd::zstd_safe::get_error_name(code))
}

impl Drop for StreamDecoder {
    fn drop(&mut self) {
        if let Inner::Zstd(d) = std::mem::replace(&mut self.0, Inner::Returned) {
            // The largest are kept: a bundle's window fits in them, and a small one taken for
            // a large bundle grows, its new pages faulted in.
            let mut spare = SPARE_ZSTD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            spare.push(d);
            crate::keep_largest(&mut spare, |d| d.sizeof(), SPARE_ZSTD_BYTES);
        }
    }
}

/// What one [`StreamDecoder::decode`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Input bytes taken.
    pub used: usize,
    /// Output bytes written.
    pub produced: usize,
    /// The stream (one zstd frame) ended.
    pub ended: bool,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Inner::Zlib(_) => "zlib",
            Inner::Zstd(_) => "zstd",
            Inner::Returned => "returned",
        })
    }
}

impl StreamDecoder {
    /// The decoder of a CCOB method; `None` for a method no clang writes.
    pub fn for_method(method: u16) -> Option<io::Result<StreamDecoder>> {
        match method {
            0 => Some(Ok(StreamDecoder(Inner::Zlib(flate2::Decompress::new(true))))),
            1 => Some(zstd_decoder().map(|d| StreamDecoder(Inner::Zstd(d)))),
            _ => None,
        }
    }

    /// Decode what `input` holds into `output`, as far as either goes.
    pub fn decode(&mut self, input: &[u8], output: &mut [u8]) -> io::Result<Step> {
        match &mut self.0 {
            Inner::Zlib(d) => {
                let (before_in, before_out) = (d.total_in(), d.total_out());
                let status = d.decompress(input, output, flate2::FlushDecompress::None).map_err(io::Error::other)?;
                Ok(Step {
                    used: (d.total_in() - before_in) as usize,
                    produced: (d.total_out() - before_out) as usize,
                    ended: status == flate2::Status::StreamEnd,
                })
            }
            Inner::Zstd(d) => {
                let mut inb = zstd::zstd_safe::InBuffer::around(input);
                let mut outb = zstd::zstd_safe::OutBuffer::around(output);
                let hint = d.decompress_stream(&mut outb, &mut inb).map_err(zstd_error)?;
                Ok(Step { used: inb.pos(), produced: outb.pos(), ended: hint == 0 })
            }
            Inner::Returned => unreachable!("a decoder is given back only when dropped"),
        }
    }
}

/// The decoded bytes of a stream read from `source`; it knows how much input it took.
pub struct DecodingReader<R> {
    source: R,
    decoder: StreamDecoder,
    consumed: u64,
    ended: bool,
}

impl<R: BufRead> DecodingReader<R> {
    pub fn new(source: R, decoder: StreamDecoder) -> DecodingReader<R> {
        DecodingReader { source, decoder, consumed: 0, ended: false }
    }

    /// The input bytes the decoder took (for a stream that ended: its compressed length).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }
}

impl<R: BufRead> Read for DecodingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while !self.ended && !buf.is_empty() {
            let input = self.source.fill_buf()?;
            let at_end = input.is_empty();
            // Called at the input's end too: a decoder may still hold output.
            let step = self.decoder.decode(input, buf)?;
            self.source.consume(step.used);
            self.consumed += step.used as u64;
            self.ended = step.ended;
            if step.produced > 0 {
                return Ok(step.produced);
            }
            if at_end {
                // The input ended before the stream did: what was decoded is all there is.
                return Ok(0);
            }
            if step.used == 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the compressed stream makes no progress"));
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn the_largest_spares_are_kept_within_their_bytes() {
        let mut spares = vec![vec![0u8; 3], vec![0u8; 10], vec![0u8; 1], vec![0u8; 6]];
        crate::keep_largest(&mut spares, Vec::len, 17);
        assert_eq!(spares.iter().map(Vec::len).collect::<Vec<_>>(), [10, 6], "the largest first, while they fit");
        crate::keep_largest(&mut spares, Vec::len, 5);
        assert!(spares.is_empty(), "one larger than the room is not kept");
    }

    #[test]
    fn a_decoder_used_again_decodes_the_next_stream_from_its_start() {
        let first = zstd::encode_all(&vec![1u8; 300_000][..], 3).unwrap();
        let second = zstd::encode_all(&b"the next frame"[..], 3).unwrap();
        // A stream abandoned half way gives its decoder back mid-frame.
        let mut cut = StreamDecoder::for_method(1).unwrap().unwrap();
        let mut out = vec![0u8; 1000];
        cut.decode(&first[..first.len() / 2], &mut out).unwrap();
        drop(cut);
        let mut again = StreamDecoder::for_method(1).unwrap().unwrap();
        let mut out = vec![0u8; 100];
        let step = again.decode(&second, &mut out).unwrap();
        assert!(step.ended);
        assert_eq!(&out[..step.produced], b"the next frame");
    }

    #[test]
    fn both_methods_decode_pushed_and_pulled_and_count_their_input() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for (method, compressed) in [(0, zlib(&data)), (1, zstd::encode_all(&data[..], 3).unwrap())] {
            // Pulled, with trailing bytes after the stream that are not taken.
            let mut padded = compressed.clone();
            padded.extend_from_slice(&[0u8; 100]);
            let decoder = StreamDecoder::for_method(method).unwrap().unwrap();
            let mut reader = DecodingReader::new(io::BufReader::with_capacity(4096, &padded[..]), decoder);
            let mut out = Vec::new();
            reader.read_to_end(&mut out).unwrap();
            assert_eq!(out, data, "method {method}");
            assert_eq!(reader.consumed(), compressed.len() as u64, "method {method}");
            // Pushed, a few bytes at a time.
            let mut decoder = StreamDecoder::for_method(method).unwrap().unwrap();
            let (mut out, mut buf, mut ended) = (Vec::new(), vec![0u8; 1000], false);
            for piece in compressed.chunks(7) {
                let mut input = piece;
                while !input.is_empty() && !ended {
                    let step = decoder.decode(input, &mut buf).unwrap();
                    out.extend_from_slice(&buf[..step.produced]);
                    input = &input[step.used..];
                    ended = step.ended;
                }
            }
            assert!(ended, "method {method}");
            assert_eq!(out, data, "method {method}");
        }
        assert!(StreamDecoder::for_method(2).is_none());
    }

    #[test]
    fn a_cut_stream_ends_short_and_garbage_is_an_error() {
        let compressed = zlib(&[5u8; 100_000]);
        let decoder = StreamDecoder::for_method(0).unwrap().unwrap();
        let mut reader = DecodingReader::new(&compressed[..compressed.len() / 2], decoder);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        assert!(out.len() < 100_000);
        let decoder = StreamDecoder::for_method(1).unwrap().unwrap();
        let mut reader = DecodingReader::new(&b"not a zstd frame at all"[..], decoder);
        assert!(reader.read_to_end(&mut Vec::new()).is_err());
    }
}
