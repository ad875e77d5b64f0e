//! `-v/--verbose`: the library search and the decisions, on stderr, as they are made.
//!
//! One process-wide switch, set by the command line. Lines start with `wheelfix: debug:` and name
//! the wheel or the file they are about, so lines of wheels analysed in parallel stay readable.

use std::sync::atomic::{AtomicBool, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Turn the debug lines on (or off).
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Print one debug line when `-v` is on; the message is only built then.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log::verbose() {
            eprintln!("wheelfix: debug: {}", format_args!($($arg)*));
        }
    };
}

/// A count with its noun, for people. Ex) (1, `file`) → `1 file`; (3, `file`) → `3 files`
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
