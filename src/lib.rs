//! wheelfix: the true platform tag of a Python wheel, and the changes that make its tags,
//! versions and metadata true.
//!
//! The data flows through five stages:
//!
//! 1. [`wheel`]: the archive, opened — file name and tags, WHEEL, METADATA, RECORD compared with
//!    the central directory.
//! 2. [`analysis`]: facts about every member ([`analysis::scan`]: host ELF files via [`elf`],
//!    GPU code, hashes), then the libraries the host binaries need ([`analysis::linkage`]).
//! 3. [`policy`]: the policies that apply ([`policy::Policies::select`]) and what they make of
//!    the facts, once ([`policy::judgement::Judgement`]: a verdict, each claim's worth, each
//!    library's disposition).
//! 4. [`plan`]: what to change, as edits to one [`plan::Plan`], data only: the true tags and
//!    local versions ([`plan::retag`]) for every writing command, plus the copies of vendored
//!    libraries and the patched files for `repair` ([`plan::repair`]).
//! 5. [`writer`]: the one writer, which applies any plan (it reads, strips and patches what the
//!    plan names, and copies the rest as it is).
//!
//! Sets of wheels, a release: [`distribution`] reads a set's files once, [`index`] writes static
//! pip indexes (and gathers them into a site), [`upstream`] reads other indexes and runs
//! resolvers against them, [`check`] lints a set, [`metapackage`] writes the wheels a set adds
//! (metapackages, selectors). [`report`] renders every command's outcome, as text and JSON;
//! [`settings`] resolves a run's settings once;
//! [`cmd`] runs each command over its inputs and decides its exit code. The binary only parses
//! the command line, calls [`cmd::run`] and prints.
//!
//! ## Layers
//!
//! The layers that stand alone are crates of the workspace, so that Cargo refuses an upward
//! dependency or a cycle: `wheelfix-base` (the ground: `log`, `platform`, `parallel`, digests,
//! regular-file opens, output files, paths), `wheelfix-zip` (the archive, `zip`), `wheelfix-elf` (host
//! ELF files, `elf`) and `wheelfix-gpu` (GPU code formats, `gpu`). This crate re-exports each
//! under the name of its crate, so that a path says which crate holds what it names. Each module of this crate uses only the modules of
//! the layers before its own (`tests/it/layers.rs` holds the code to it, and the crates to their
//! order):
//!
//! 1. `log`, `platform`, `parallel`, `files`, `output`, `progress`, `zip`: the ground every stage
//!    stands on.
//! 2. `wheel`: the archive and its metadata.
//! 3. `config`, `elf`, `gpu`, `exclude`, `html`, `version`: file formats and rules, each on its own.
//! 4. `extra`: the `device-*` extras of split hosts, selectors and metapackages (on `gpu`'s processors).
//! 5. `analysis`: facts.
//! 6. `policy`: what the policies make of the facts.
//! 7. `examine`: one wheel opened, scanned, resolved and judged: how every command starts.
//! 8. `plan`: the changes, as data.
//! 9. `writer`: the changes, made.
//! 10. `distribution`: a release set's files, read.
//! 11. `index`: static pip indexes, their uploads, a site of several.
//! 12. `upstream`: other indexes, over HTTP, and the resolvers run against them.
//! 13. `check`: a release set, linted.
//! 14. `metapackage`: the wheels a set adds (metapackages, selectors).
//! 15. `report`: every outcome, rendered.
//! 16. `settings`: a run's settings.
//! 17. `cmd`: the commands.

pub mod analysis;
pub mod check;
pub mod cmd;
pub mod config;
pub mod distribution;
pub mod examine;
pub mod exclude;
pub mod extra;
pub mod html;
pub mod index;
pub mod metapackage;
pub mod plan;
pub mod policy;
pub mod progress;
pub mod report;
pub mod settings;
#[cfg(test)]
mod testing;
pub mod upstream;
pub mod version;
pub mod wheel;
pub mod writer;

pub use wheelfix_base::{debug, files, log, output, parallel, platform};
/// Host ELF files.
pub use wheelfix_elf as elf;
/// GPU code: code objects, offload bundles, kpack archives, in and beside host binaries.
pub use wheelfix_gpu as gpu;
/// The zip archive: positional reads, parallel inflate, deflate-block reuse, the writer.
pub use wheelfix_zip as zip;

pub use cmd::pipeline::{Error, examine};
pub use cmd::show::show;
pub use cmd::write::{Destination, retag_batch};
pub use examine::Examined;
