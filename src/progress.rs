//! A small progress interface, so the library never depends on the terminal.

/// Receives progress as work is done; implementations must be cheap and thread-safe.
pub trait Progress: Sync {
    /// `bytes` more of the input were processed.
    fn advance(&self, bytes: u64);
}

/// Progress that goes nowhere.
pub struct NoProgress;

impl Progress for NoProgress {
    fn advance(&self, _bytes: u64) {}
}
