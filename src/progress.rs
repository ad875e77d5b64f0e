//! A small progress interface, so that the stages never depend on the terminal; the commands
//! pick a bar or nothing ([`for_inputs`]).

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

/// A byte progress bar on stderr.
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

/// Progress over the bytes of `inputs`: a bar on stderr when stderr is a terminal and not
/// `quiet`, else nothing.
pub fn for_inputs(inputs: &[std::path::PathBuf], quiet: bool) -> Box<dyn Progress> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return Box::new(NoProgress);
    }
    let total: u64 = inputs.iter().filter_map(|w| std::fs::metadata(w).ok()).map(|m| m.len()).sum();
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {wide_bar} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Box::new(Bar(bar))
}
