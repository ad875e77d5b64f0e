//! The ground every wheelfix crate stands on: nothing here knows about wheels, ELF files or GPU
//! code.
//!
//! - [`log`]: the `-v` switch and its `debug!` lines; counts with their nouns.
//! - [`platform`]: architectures, C libraries, ELF machine numbers.
//! - [`parallel`]: the thread pool and the ways work is spread over it.
//! - [`digest`]: sha256 of streams and files, hex as indexes write it.
//! - [`files`]: input files opened only when they are regular files, read within the size they
//!   had, walked once; file identities; new files and new names that never replace one.
//! - [`output`]: output files written beside their destination and renamed into place when
//!   complete, removed on every exit path (signals too).
//! - [`paths`]: `/`-separated relative paths, as archives and install trees name members.

pub mod digest;
pub mod files;
pub mod le;
pub mod log;
pub mod output;
pub mod parallel;
pub mod paths;
pub mod platform;
