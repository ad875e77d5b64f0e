//! A file's bytes as the readers need them: all in memory, or only the ranges kept while the
//! file streamed past ([`Kept`]). A reader asks for ranges; a range that was not kept is not an
//! error of the file but a request to read it again, keeping that range ([`ViewError::NotKept`]).

use std::collections::BTreeMap;

/// Why a range cannot be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewError {
    /// The range runs past the end of the file: the file lies about it.
    PastEnd { offset: u64, size: u64 },
    /// The range exists but was not kept.
    NotKept { offset: u64, size: u64 },
}

/// The bytes of a file, or some of them.
pub trait FileView {
    fn len(&self) -> u64;
    fn get(&self, offset: u64, size: u64) -> Result<&[u8], ViewError>;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl FileView for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn get(&self, offset: u64, size: u64) -> Result<&[u8], ViewError> {
        let end = offset.checked_add(size).filter(|e| *e <= <[u8]>::len(self) as u64);
        match end {
            Some(end) => Ok(&self[offset as usize..end as usize]),
            None => Err(ViewError::PastEnd { offset, size }),
        }
    }
}

/// Ranges of a file kept while it streamed past: disjoint, sorted by offset.
#[derive(Debug, Default, Clone)]
pub struct Kept {
    len: u64,
    ranges: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl Kept {
    pub fn new(len: u64) -> Kept {
        Kept { len, ranges: BTreeMap::new(), bytes: 0 }
    }

    /// How many bytes are kept.
    pub fn kept_bytes(&self) -> u64 {
        self.bytes
    }

    /// Keep `data`, which starts at `offset`; it may extend or join ranges already kept.
    pub fn insert(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // The common case as a file streams past: the bytes extend the range they follow, and
        // reach no other range.
        if let Some((&start, kept)) = self.ranges.range(..=offset).next_back() {
            let kept_end = start + kept.len() as u64;
            if kept_end >= offset && end <= kept_end {
                return; // already kept
            }
            if kept_end >= offset && self.ranges.range(start + 1..=end).next().is_none() {
                let kept = self.ranges.get_mut(&start).expect("found above");
                kept.extend_from_slice(&data[(kept_end - offset) as usize..]);
                self.bytes += end - kept_end;
                return;
            }
        }
        // Merge with every range that overlaps or touches [offset, end).
        let mut start = offset;
        let mut merged_end = end;
        let touching: Vec<u64> =
            self.ranges.range(..=end).filter(|(s, v)| **s + v.len() as u64 >= offset).map(|(s, _)| *s).collect();
        let mut pieces: Vec<(u64, Vec<u8>)> = Vec::new();
        for s in touching {
            let v = self.ranges.remove(&s).expect("listed");
            self.bytes -= v.len() as u64;
            start = start.min(s);
            merged_end = merged_end.max(s + v.len() as u64);
            pieces.push((s, v));
        }
        let mut buf = vec![0u8; (merged_end - start) as usize];
        for (s, v) in &pieces {
            buf[(s - start) as usize..(s - start) as usize + v.len()].copy_from_slice(v);
        }
        buf[(offset - start) as usize..(end - start) as usize].copy_from_slice(data);
        self.bytes += buf.len() as u64;
        self.ranges.insert(start, buf);
    }

    /// Whether all of [offset, offset+size) is kept.
    pub fn contains(&self, offset: u64, size: u64) -> bool {
        self.get(offset, size).is_ok()
    }
}

impl FileView for Kept {
    fn len(&self) -> u64 {
        self.len
    }

    fn get(&self, offset: u64, size: u64) -> Result<&[u8], ViewError> {
        if offset.checked_add(size).is_none_or(|e| e > self.len) {
            return Err(ViewError::PastEnd { offset, size });
        }
        if let Some((start, data)) = self.ranges.range(..=offset).next_back() {
            let at = (offset - start) as usize;
            if at as u64 + size <= data.len() as u64 {
                return Ok(&data[at..at + size as usize]);
            }
        }
        Err(ViewError::NotKept { offset, size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_ranges_merge_and_answer_only_for_what_was_kept() {
        let mut k = Kept::new(100);
        k.insert(10, &[1; 10]);
        k.insert(30, &[3; 10]);
        assert_eq!(k.get(12, 5), Ok(&[1u8; 5][..]));
        assert_eq!(k.get(15, 10), Err(ViewError::NotKept { offset: 15, size: 10 }));
        k.insert(20, &[2; 10]);
        assert_eq!(k.get(15, 20).unwrap().len(), 20, "three ranges became one");
        assert_eq!(k.kept_bytes(), 30);
        assert_eq!(k.get(95, 10), Err(ViewError::PastEnd { offset: 95, size: 10 }));
        let bytes: &[u8] = &[0, 1, 2, 3];
        assert_eq!(FileView::get(bytes, 1, 2), Ok(&[1u8, 2][..]));
        assert!(matches!(FileView::get(bytes, 3, 2), Err(ViewError::PastEnd { .. })));
    }
}
