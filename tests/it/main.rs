//! wheelfix's integration tests, one binary (each test file is a module; the crate links once,
//! not once per file). Each module runs the built `wheelfix` on wheels and ELF files made in
//! code (`support`), and checks what comes out. Run one module with `cargo test --test it
//! <module>::`, e.g. `cargo test --test it split::`.

mod support;

mod bad_input;
mod check_flags;
mod compact;
mod docs;
mod doctor;
mod doctor_fixes;
mod doctor_hostile;
mod dropin;
mod golden;
mod gpu;
mod hostile;
mod hostile_release;
mod index_http;
mod inflate;
mod layers;
mod loadability;
mod manpages;
mod memory;
mod metadata;
mod page;
mod parity;
mod patch;
mod pe;
mod providers;
mod python_package;
mod recipes;
mod release;
mod release_path;
mod repair;
mod retag;
mod robustness;
mod scale;
mod schemas;
mod selector;
mod shape;
mod show;
mod split;
mod stale_record;
mod sweep;
mod testdata;
mod thin;
mod trust;
mod upstream;
mod variant_sets;
mod variants;
mod versions;
