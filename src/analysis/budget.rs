//! One budget of bytes in flight, shared by every worker of a run (every wheel, every member),
//! so that the memory a run takes does not grow with the number of cores: sixteen workers never
//! each hold a 1.5 GB member. Work that needs more than is free waits; work that needs more
//! than the whole budget waits until it can run alone.

use std::sync::{Condvar, Mutex};

/// `--memory` when neither the command line nor the config file sets it: what the buffers of a
/// run may take, below the peak RSS a user sees by the process's own footprint (code, policies,
/// central directories, facts).
pub const DEFAULT_SHOW: u64 = 160 << 20;
pub const DEFAULT_WRITE: u64 = 384 << 20;

#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

/// Bytes taken from a budget, given back when dropped.
#[derive(Debug)]
pub struct Permit<'a> {
    budget: &'a MemoryBudget,
    bytes: std::cell::Cell<u64>,
}

impl MemoryBudget {
    pub fn new(total: u64) -> MemoryBudget {
        MemoryBudget { total: total.max(1), used: Mutex::new(0), freed: Condvar::new() }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Take `bytes`, waiting until they are free (or, for more than the whole budget, until
    /// nothing else is taken). Never called while holding another permit of the same budget.
    pub fn take(&self, bytes: u64) -> Permit<'_> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used > 0 && *used + bytes > self.total {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += bytes;
        Permit { budget: self, bytes: bytes.into() }
    }

    /// Take `bytes` only if they are free now.
    pub fn try_take(&self, bytes: u64) -> Option<Permit<'_>> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        (*used + bytes <= self.total).then(|| {
            *used += bytes;
            Permit { budget: self, bytes: bytes.into() }
        })
    }
}

impl Permit<'_> {
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }

    /// Join another permit's bytes to this one.
    pub fn absorb(&mut self, other: Permit<'_>) {
        self.bytes.set(self.bytes.get() + other.bytes.get());
        std::mem::forget(other);
    }

    /// Give back what this permit holds beyond `bytes` (work that learned it needs less).
    pub fn shrink_to(&self, bytes: u64) {
        let held = self.bytes.get();
        if bytes >= held {
            return;
        }
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= held - bytes;
        self.bytes.set(bytes);
        self.budget.freed.notify_all();
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.bytes.get();
        self.budget.freed.notify_all();
    }
}

/// A size as people write it: `512M`, `2G`, `1.5GiB`, `800000000`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    let bytes = number * scale as f64;
    (bytes.is_finite() && bytes >= 1.0).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_written() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("0"), None);
    }

    #[test]
    fn permits_wait_for_room_and_oversized_ones_run_alone() {
        let budget = std::sync::Arc::new(MemoryBudget::new(100));
        let a = budget.take(60);
        assert!(budget.try_take(50).is_none());
        let b = budget.try_take(40).expect("fits");
        drop(b);
        let waiter = {
            let budget = budget.clone();
            std::thread::spawn(move || budget.take(500).bytes())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "an oversized permit waits for the others");
        drop(a);
        assert_eq!(waiter.join().unwrap(), 500);
        assert_eq!(*budget.used.lock().unwrap(), 0);
    }
}
