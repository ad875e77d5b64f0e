//! The import direction, held: every module of `src/` uses only modules of the layers before
//! its own, as the layer list in `src/lib.rs`'s documentation orders them. A `crate::…` path (or
//! a top-level module's `super::…`) that points to its own layer or above fails here, with the
//! file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer list of lib.rs's docs: lines `//! N. `a`, `b`: …`, lowest first.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let section = lib.split("//! ## Layers").nth(1).expect("lib.rs documents its layers under `## Layers`");
    for line in section.lines().skip(1).take_while(|l| l.starts_with("//!")) {
        let text = line.trim_start_matches("//!").trim();
        let Some((number, rest)) = text.split_once(". ") else { continue };
        let Ok(number) = number.parse::<usize>() else { continue };
        let names = rest.split(':').next().unwrap_or_default();
        for name in names.split(',') {
            let name = name.trim().trim_matches('`');
            assert!(!name.is_empty(), "a layer line without a module: {line}");
            layers.insert(name.to_string(), number);
        }
    }
    layers
}

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a line names through `crate::` (or `prefix`): `crate::a::b`,
/// `crate::{a, b::c}`, `crate::debug!` (a macro: the crate root's, defined in `log`).
fn named_modules(line: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: split at commas outside nested braces.
            let (mut depth, mut current) = (0, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(std::mem::take(&mut current));
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    current.push(c);
                }
            }
            names.push(current);
        } else {
            let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let is_macro = rest[ident.len()..].starts_with('!');
            names.push(if is_macro { "log".to_string() } else { ident });
        }
    }
    names
        .into_iter()
        .map(|n| n.trim().split("::").next().unwrap_or_default().trim().to_string())
        .filter(|n| !n.is_empty() && n != "self")
        .collect()
}

/// The module path of a file under `src/`. Ex) `elf/gpu/scan.rs` → [`elf`, `gpu`, `scan`];
/// `elf/gpu/mod.rs` → [`elf`, `gpu`]
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> =
        relative.components().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// The statements of a file, each with its first line's number: a `use` that spans lines
/// (`use crate::{\n    a,\n    b,\n};`) is one statement; comments are left out.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if let Some((_, joined)) = &mut open {
            joined.push(' ');
            joined.push_str(trimmed);
            if trimmed.contains(';') {
                out.push(open.take().expect("open"));
            }
            continue;
        }
        let starts_use =
            ["use ", "pub use ", "pub(crate) use ", "pub(super) use "].iter().any(|p| trimmed.starts_with(p));
        if starts_use && !trimmed.contains(';') {
            open = Some((number, trimmed.to_string()));
        } else {
            out.push((number, line.to_string()));
        }
    }
    out.extend(open);
    out
}

/// The modules of the crate a statement names, as paths from the crate root, resolving
/// `crate::` and `super::…` against `here` (the module the statement is in). Ex) in
/// `gpu::scan`, `super::super::Container` → [`gpu`, `Container`]
fn named_paths(line: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut paths: Vec<Vec<String>> = named_modules(line, "crate::").into_iter().map(|n| vec![n]).collect::<Vec<_>>();
    // `super::` chains: count them, climb, and take the name after them.
    let mut rest = line;
    while let Some(at) = rest.find("super::") {
        let before = rest[..at].chars().last();
        let after = &rest[at..];
        rest = &rest[at + "super::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut climbs = 0;
        let mut tail = after;
        while let Some(t) = tail.strip_prefix("super::") {
            climbs += 1;
            tail = t;
        }
        rest = tail;
        if climbs > here.len() {
            continue;
        }
        let base = &here[..here.len() - climbs];
        for name in named_modules(&format!("crate::{tail}"), "crate::") {
            let mut path = base.to_vec();
            path.push(name);
            paths.push(path);
        }
    }
    paths
}

#[test]
fn every_import_points_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layers(&lib);
    // Every module lib.rs declares or re-exports has a layer (test helpers excepted).
    for line in lib.lines() {
        let declared = line.strip_prefix("pub mod ").map(|l| l.trim_end_matches([';', '{', ' ']));
        let reexported = line.strip_prefix("pub use wheelfix_base::{").and_then(|l| l.strip_suffix("};"));
        // A workspace crate, re-exported under its own name (`pub use wheelfix_gpu as gpu;`).
        let crate_named = line.strip_prefix("pub use wheelfix_").and_then(|l| l.strip_suffix(';')).and_then(|l| {
            let (krate, name) = l.split_once(" as ")?;
            assert_eq!(krate, name, "a crate re-exported under another name: {line}");
            Some(name)
        });
        for name in declared.into_iter().chain(crate_named).chain(reexported.into_iter().flat_map(|l| l.split(", "))) {
            if name == "debug" {
                continue;
            }
            assert!(layers.contains_key(name), "module `{name}` is in no layer of lib.rs's list");
        }
    }
    // The crate root's macros are `log`'s (wheelfix-base's, re-exported).
    let log = std::fs::read_to_string(src.join("../crates/wheelfix-base/src/log.rs")).unwrap();
    let macros: Vec<String> = log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("macro_rules! "))
        .map(|m| m.trim_end_matches(|c: char| c == '{' || c.is_whitespace()).to_string())
        .collect();
    assert!(!macros.is_empty(), "log.rs defines the crate's macros");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    let mut checked = 0;
    // Within each top-level module: which of its submodules uses which (for the cycle check).
    let mut within: BTreeMap<String, BTreeMap<String, std::collections::BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let path = module_path(relative);
        let top = path[0].clone();
        // The binary (`main`, its command line `cli`) is checked by the test below.
        if matches!(top.as_str(), "lib" | "main" | "cli" | "testing") {
            continue;
        }
        let own = *layers.get(&top).unwrap_or_else(|| panic!("{} belongs to no layer", relative.display()));
        let text = std::fs::read_to_string(file).unwrap();
        let mut here = path.clone();
        for (number, line) in statements(&text) {
            // An inline `mod tests` is one level further down.
            if line.trim_start().starts_with("mod tests") && line.contains('{') {
                here = path.clone();
                here.push("tests".into());
            }
            for named in named_paths(&line, &here) {
                let name =
                    if named.len() == 1 && macros.contains(&named[0]) { "log".to_string() } else { named[0].clone() };
                if name == "testing" {
                    continue;
                }
                if name == top {
                    // A sibling submodule of the same top-level module.
                    // A module's tests may use what stands on it; its code may not.
                    if let (Some(from), Some(to)) = (path.get(1), named.get(1))
                        && from != to
                        && here.last().is_none_or(|m| m != "tests")
                    {
                        within.entry(top.clone()).or_default().entry(from.clone()).or_default().insert(to.clone());
                    }
                    continue;
                }
                checked += 1;
                match layers.get(&name) {
                    Some(&layer) if layer < own => {}
                    Some(&layer) => wrong.push(format!(
                        "{}:{}: `{top}` (layer {own}) uses `{name}` (layer {layer}): {}",
                        relative.display(),
                        number + 1,
                        line.trim()
                    )),
                    None => {
                        wrong.push(format!("{}:{}: `{name}` is no module of lib.rs", relative.display(), number + 1))
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports that do not point down the layers:\n{}", wrong.join("\n"));
    assert!(checked > 200, "only {checked} imports read: the scan reads nothing");
    // No two submodules of one module use each other, directly or around a circle.
    let mut circles = Vec::new();
    for (top, uses) in &within {
        for start in uses.keys() {
            let mut stack = vec![vec![start.clone()]];
            while let Some(chain) = stack.pop() {
                let last = chain.last().expect("non-empty");
                for next in uses.get(last).into_iter().flatten() {
                    if next == start {
                        circles.push(format!("{top}: {} → {start}", chain.join(" → ")));
                    } else if !chain.contains(next) && chain.len() < 8 {
                        let mut longer = chain.clone();
                        longer.push(next.clone());
                        stack.push(longer);
                    }
                }
            }
        }
    }
    circles.sort();
    circles.dedup();
    assert!(circles.is_empty(), "submodules that use each other:\n{}", circles.join("\n"));
}

#[test]
fn the_scan_sees_the_shapes_imports_take() {
    assert_eq!(named_modules("use crate::analysis::{Analysis, Note};", "crate::"), ["analysis"]);
    assert_eq!(named_modules("use crate::{debug, parallel::map, plan};", "crate::"), ["debug", "parallel", "plan"]);
    assert_eq!(named_modules("    crate::debug!(\"x\");", "crate::"), ["log"]);
    assert_eq!(named_modules("let x = mycrate::wheel::y;", "crate::"), Vec::<String>::new());
    let lib = "//! ## Layers\n//!\n//! 1. `a`, `b`: ground.\n//! 2. `c`: above.\n";
    assert_eq!(layers(lib), [("a".into(), 1), ("b".into(), 1), ("c".into(), 2)].into());
    // A `use` over several lines is one statement; `super::` chains climb from where they are.
    let text = "use crate::{\n    analysis,\n    wheel::Wheel,\n};\nfn f() {}\n";
    let joined = statements(text);
    assert_eq!(named_modules(&joined[0].1, "crate::"), ["analysis", "wheel"]);
    let here = vec!["elf".to_string(), "gpu".into(), "scan".into()];
    assert_eq!(named_paths("x = super::super::Container::A;", &here), [vec!["elf".to_string(), "Container".into()]]);
    assert_eq!(named_paths("use super::super::super::wheel::W;", &here), [vec!["wheel".to_string()]]);
}

/// The workspace's crates, lowest first: a crate depends only on crates of lower rank. Cargo
/// refuses a cycle; this refuses a sideways or upward edge (the GPU formats may not use the
/// archive: no zip types in them).
const CRATE_RANKS: &[(&str, usize)] =
    &[("wheelfix-base", 1), ("wheelfix-zip", 2), ("wheelfix-elf", 2), ("wheelfix-gpu", 3)];

#[test]
fn the_crates_depend_down_their_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rank = |name: &str| CRATE_RANKS.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let own = rank(&name).unwrap_or_else(|| panic!("crate `{name}` has no rank in CRATE_RANKS"));
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}: the directory names the crate");
        let uses: Vec<&str> = manifest
            .lines()
            .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim()))
            .filter(|k| k.starts_with("wheelfix-"))
            .collect();
        for used in uses {
            let theirs = rank(used).unwrap_or_else(|| panic!("{name} uses `{used}`, which is no crate here"));
            assert!(theirs < own, "{name} (rank {own}) depends on {used} (rank {theirs})");
        }
        // Each crate says what it is, for a reader and for crates.io.
        assert!(manifest.contains("description = "), "{name}: no description");
        assert!(dir.join("README.md").is_file(), "{name}: no README.md");
        seen.push(name);
    }
    seen.sort();
    let mut expected: Vec<String> = CRATE_RANKS.iter().map(|(n, _)| n.to_string()).collect();
    expected.sort();
    assert_eq!(seen, expected, "every crate of crates/ is ranked, every ranked crate exists");
}

/// The binary parses and prints: it reaches the library through the commands (`cmd`), the run's
/// settings (`settings`), the option types and argument checks of the release commands (`index`,
/// `metapackage`, `check`, `upstream::resolve`), and the ground
/// (`log`, `parallel`, the signal handler of `output`). Anything else it named would be a
/// decision made in main.rs that belongs in `cmd` or `settings`.
#[test]
fn main_rs_reaches_the_library_only_through_its_front() {
    let allowed = [
        "cmd",
        "settings",
        "index",
        "metapackage",
        "check",
        "upstream::resolve",
        "log",
        "parallel",
        "output",
        "Destination",
    ];
    let mut wrong = Vec::new();
    for file in ["src/main.rs", "src/cli.rs"] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(at) = rest.find("wheelfix::") {
                rest = &rest[at + "wheelfix::".len()..];
                let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                if !allowed.iter().any(|a| path == *a || path.starts_with(&format!("{a}::"))) {
                    wrong.push(format!("{file}:{}: wheelfix::{path}", number + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "main.rs names what it should leave to cmd or settings:\n{}", wrong.join("\n"));
}

/// Within each crate of `crates/`, no two top-level modules use each other, directly or around
/// a circle (a module's uses: `crate::<module>` anywhere in its files, `super::<module>` in its
/// top-level file). Ex) `kpack` and `rewrite` of wheelfix-gpu used each other until the
/// streaming limit they share moved to `kpack`.
#[test]
fn no_crates_modules_use_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut circles = Vec::new();
    let mut read = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let src = entry.unwrap().path().join("src");
        // Each top-level module and the text of its files.
        let mut modules: BTreeMap<String, String> = BTreeMap::new();
        for e in std::fs::read_dir(&src).unwrap().flatten() {
            let path = e.path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            if name == "lib" || name == "main" {
                continue;
            }
            let text = if path.is_dir() {
                let mut all = String::new();
                let mut pending = vec![path.clone()];
                while let Some(d) = pending.pop() {
                    for f in std::fs::read_dir(&d).unwrap().flatten().map(|f| f.path()) {
                        if f.is_dir() {
                            pending.push(f);
                        } else if f.extension().is_some_and(|x| x == "rs") {
                            // `super::` in a nested file names its parent, not the crate.
                            let own = std::fs::read_to_string(&f).unwrap();
                            all.push_str(&own.replace("super::", "parent::"));
                        }
                    }
                }
                all
            } else if path.extension().is_some_and(|x| x == "rs") {
                std::fs::read_to_string(&path).unwrap()
            } else {
                continue;
            };
            read += 1;
            modules.entry(name).or_default().push_str(&text);
        }
        let names: Vec<String> = modules.keys().cloned().collect();
        let uses: BTreeMap<&String, Vec<&String>> = modules
            .iter()
            .map(|(m, text)| {
                let used = names
                    .iter()
                    .filter(|n| *n != m)
                    .filter(|n| text.contains(&format!("crate::{n}::")) || text.contains(&format!("super::{n}::")))
                    .collect();
                (m, used)
            })
            .collect();
        for start in uses.keys() {
            let mut stack = vec![vec![*start]];
            while let Some(chain) = stack.pop() {
                for next in uses.get(chain.last().unwrap()).into_iter().flatten() {
                    if next == start {
                        let path: Vec<&str> = chain.iter().map(|s| s.as_str()).collect();
                        circles.push(format!("{}: {} → {start}", src.display(), path.join(" → ")));
                    } else if !chain.contains(next) && chain.len() < 8 {
                        let mut longer = chain.clone();
                        longer.push(next);
                        stack.push(longer);
                    }
                }
            }
        }
    }
    assert!(read > 20, "only {read} modules read: the scan reads nothing");
    assert!(circles.is_empty(), "modules of a crate that use each other:\n{}", circles.join("\n"));
}
