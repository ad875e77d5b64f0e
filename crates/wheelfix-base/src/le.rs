//! Little-endian integers read from a byte slice, checked: `None` where the slice ends before
//! the integer does (never a panic, whatever offset a hostile header gives).

/// The `u16` at `at`. Ex) `u16_at(&[1, 2, 3], 1)` → `Some(0x0302)`
pub fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(*bytes.get(at..)?.first_chunk()?))
}

/// The `u32` at `at`.
pub fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(*bytes.get(at..)?.first_chunk()?))
}

/// The `u64` at `at`.
pub fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(*bytes.get(at..)?.first_chunk()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_the_slice_and_nothing_past_it() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(u16_at(&b, 1), Some(0x0302));
        assert_eq!(u32_at(&b, 0), Some(0x0403_0201));
        assert_eq!(u64_at(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(u64_at(&b, 2), None);
        assert_eq!(u32_at(&b, usize::MAX), None);
        assert_eq!(u16_at(&b, 8), None);
        assert_eq!(u16_at(&[], 0), None);
    }
}
