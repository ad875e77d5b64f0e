//! Bundles and members built in code, for the tests of this crate and of its users (the
//! `fixtures` feature).

use crate::BUNDLE_MAGIC;
use crate::targets::{Keep, TargetId};

/// Keep one requested target. Ex) `gfx942`
pub fn keep(t: &str) -> Keep {
    Keep::new(vec![TargetId::parse(t).unwrap()])
}

/// A bundle of a host entry and one 4096-aligned payload per target, filled with its index.
pub fn bundle(targets: &[&str]) -> Vec<u8> {
    let ids: Vec<String> = std::iter::once("host-x86_64-unknown-linux-gnu-".to_string())
        .chain(targets.iter().map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}")))
        .collect();
    let table = 32 + ids.iter().map(|i| 24 + i.len()).sum::<usize>();
    let mut out = BUNDLE_MAGIC.to_vec();
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    let mut payload_at = table.next_multiple_of(4096) as u64;
    for (i, id) in ids.iter().enumerate() {
        let size: u64 = if i == 0 { 0 } else { 5000 };
        out.extend_from_slice(&(if i == 0 { 0 } else { payload_at }).to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
        if i > 0 {
            payload_at = (payload_at + size).next_multiple_of(4096);
        }
    }
    for i in 1..ids.len() {
        out.resize(out.len().next_multiple_of(4096), 0);
        out.extend(std::iter::repeat_n(i as u8, 5000));
    }
    out
}

/// A member of a prefix, three bundles and a suffix, its bytes the test's own.
pub fn member() -> Vec<u8> {
    let mut data = vec![7u8; 3000];
    for targets in [&["gfx90a", "gfx942", "gfx1100"][..], &["gfx942"], &["gfx1100", "gfx908"]] {
        data.extend_from_slice(&bundle(targets));
        data.resize(data.len().next_multiple_of(4096), 0);
    }
    data.extend_from_slice(&[9u8; 777]);
    data
}
