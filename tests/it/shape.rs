//! The code's size, held: no function of the workspace runs over 100 lines, and every file
//! over 600 lines says at its top why it is one file (`CONTRIBUTING.md`, "Small pieces").

use std::path::{Path, PathBuf};

use super::layers::rust_files;

/// The `.rs` files of `src/` and of every crate's `src/`.
fn sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        rust_files(&krate.unwrap().path().join("src"), &mut files);
    }
    files.sort();
    files
}

/// The functions of a file that run over `limit` lines: (name, first line, length). A function
/// starts at a line whose code begins with `fn` (after its visibility and qualifiers) and ends
/// where its braces close; a declaration without a body ends at its `;`.
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let mut code = line.trim_start();
        for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
            code = code.strip_prefix(prefix).unwrap_or(code);
        }
        let Some(rest) = code.strip_prefix("fn ") else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (mut depth, mut opened) = (0i64, false);
        for (end, body) in lines.iter().enumerate().skip(start) {
            let body = body.split("//").next().unwrap_or_default();
            depth += body.matches('{').count() as i64 - body.matches('}').count() as i64;
            opened |= body.contains('{');
            if (opened && depth <= 0) || (!opened && body.trim_end().ends_with(';')) {
                if end - start + 1 > limit {
                    long.push((name.clone(), start + 1, end - start + 1));
                }
                break;
            }
        }
    }
    long
}

#[test]
fn no_function_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources();
    assert!(files.len() > 100, "only {} source files found", files.len());
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (name, line, length) in long_functions(&text, 100) {
            long.push(format!("{}:{line}: fn {name} is {length} lines", file.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(long.is_empty(), "functions over 100 lines (split them):\n{}", long.join("\n"));
}

#[test]
fn the_length_check_sees_a_long_function() {
    let body = "    let x = 1;\n".repeat(120);
    let text = format!("pub(crate) fn short() {{ }}\n\nfn long() {{\n{body}}}\nfn after() -> u8 {{ 0 }}\n");
    assert_eq!(long_functions(&text, 100), vec![("long".to_string(), 3, 122)]);
}

#[test]
fn every_file_over_600_lines_says_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut silent = Vec::new();
    let mut reasons: Vec<(String, String)> = Vec::new();
    let mut long = 0;
    for file in sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.lines().count() <= 600 {
            continue;
        }
        long += 1;
        // The module's own documentation: the `//!` lines it opens with, and in them the
        // paragraph that starts `Why one file:`, in words of its own (no two files alike).
        let head: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).map(|l| l[3..].trim()).collect();
        let head = head.join(" ");
        let name = file.strip_prefix(root).unwrap().display().to_string();
        match head.split_once("Why one file:") {
            Some((_, why)) => {
                let why = why.split("  ").next().unwrap_or(why).trim().to_string();
                reasons.push((why, name));
            }
            None => silent.push(name),
        }
    }
    assert!(long > 0, "no file over 600 lines was read");
    assert!(
        silent.is_empty(),
        "files over 600 lines that do not say `Why one file:` at their top:\n{}",
        silent.join("\n")
    );
    for (why, name) in &reasons {
        assert!(why.len() >= 60, "{name}: `Why one file:` says too little: {why}");
        let same: Vec<&String> = reasons.iter().filter(|(w, _)| w == why).map(|(_, n)| n).collect();
        assert_eq!(same.len(), 1, "the same reason in several files: {same:?}");
    }
}
