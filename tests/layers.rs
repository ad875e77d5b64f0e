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

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

#[test]
fn every_import_points_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layers(&lib);
    // Every module lib.rs declares has a layer (test helpers excepted).
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ").and_then(|l| l.strip_suffix(';')) {
            assert!(layers.contains_key(name), "module `{name}` is in no layer of lib.rs's list");
        }
    }
    // The crate root's macros are `log`'s.
    let log = std::fs::read_to_string(src.join("log.rs")).unwrap();
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
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top =
            relative.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if matches!(top.as_str(), "lib" | "main" | "testing") {
            continue;
        }
        let own = *layers.get(&top).unwrap_or_else(|| panic!("{} belongs to no layer", relative.display()));
        // In a top-level module's own file, `super::` is the crate.
        let top_file =
            relative.components().count() == 1 || relative.ends_with("mod.rs") && relative.components().count() == 2;
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut names = named_modules(line, "crate::");
            if top_file {
                names.extend(named_modules(line, "super::"));
            }
            for name in names {
                let name = if macros.contains(&name) { "log".to_string() } else { name };
                if name == top || name == "testing" {
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
}

#[test]
fn the_scan_sees_the_shapes_imports_take() {
    assert_eq!(named_modules("use crate::analysis::{Analysis, Note};", "crate::"), ["analysis"]);
    assert_eq!(named_modules("use crate::{debug, parallel::map, plan};", "crate::"), ["debug", "parallel", "plan"]);
    assert_eq!(named_modules("    crate::debug!(\"x\");", "crate::"), ["log"]);
    assert_eq!(named_modules("let x = mycrate::wheel::y;", "crate::"), Vec::<String>::new());
    let lib = "//! ## Layers\n//!\n//! 1. `a`, `b`: ground.\n//! 2. `c`: above.\n";
    assert_eq!(layers(lib), [("a".into(), 1), ("b".into(), 1), ("c".into(), 2)].into());
}
