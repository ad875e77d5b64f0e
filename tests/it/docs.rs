//! Every command example of the README and the user's guide runs, and prints what the page says.
//!
//! A ```` ```console ```` block holds commands (`$ ` lines; a line ending in `\` continues) each
//! followed by what it prints, stdout and stderr as a terminal shows them, then `? N` when it
//! exits with N (else it must exit 0). Expected lines match exactly, but for `[..]` (any text
//! within the line) and a line of `...` (any lines). The blocks of one page run in order in one
//! fresh directory holding a copy of `testdata/`, with the built `wheelfix` first on `PATH`.
//! Other blocks (`toml`, `yaml`, `sh`) are not run: they show files and recipes for other
//! machines. `WHEELFIX_BLESS=1` writes what the commands printed into the pages where it differs
//! from what they say; an example that already matches keeps its text, wildcards included.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Step {
    command: String,
    expected: Vec<String>,
    code: i32,
    /// The lines of the page the expected output and exit code occupy (for blessing).
    lines: (usize, usize),
}

fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The console blocks' steps, in page order.
fn steps(text: &str) -> Vec<Step> {
    let lines: Vec<&str> = text.lines().collect();
    let mut steps: Vec<Step> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```console" {
            i += 1;
            continue;
        }
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            let Some(first) = lines[i].strip_prefix("$ ") else {
                panic!("line {}: a console block's output before any `$ ` command", i + 1);
            };
            let mut command = first.to_string();
            while command.ends_with('\\') && i + 1 < lines.len() {
                command.pop();
                i += 1;
                command.push_str(lines[i]);
            }
            i += 1;
            let start = i;
            let mut expected = Vec::new();
            let mut code = 0;
            while i < lines.len() && !lines[i].starts_with("$ ") && !lines[i].starts_with("```") {
                match lines[i].strip_prefix("? ") {
                    Some(n) => code = n.trim().parse().expect("`? N`: an exit code"),
                    None => expected.push(lines[i].to_string()),
                }
                i += 1;
            }
            steps.push(Step { command, expected, code, lines: (start, i) });
        }
        i += 1;
    }
    steps
}

/// Whether `actual` matches `pattern`: `[..]` stands for any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the printed lines match the expected ones (`...` any lines, at least none).
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => (0..=actual.len()).any(|k| matches(rest, &actual[k..])),
        Some((first, rest)) => actual.first().is_some_and(|a| line_matches(first, a)) && matches(rest, &actual[1..]),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn run(step: &Step, dir: &Path) -> (String, i32) {
    let bin = Path::new(env!("CARGO_BIN_EXE_wheelfix")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("sh")
        .args(["-c", &format!("exec 2>&1; {}", step.command)])
        .current_dir(dir)
        .env("PATH", path)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env("NO_COLOR", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1")
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .env_remove("WHEELFIX_DEBUG")
        .output()
        .expect("sh runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (text, out.status.code().unwrap_or(-1))
}

#[test]
fn every_console_example_prints_what_its_page_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("WHEELFIX_BLESS").is_some();
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let steps = steps(&text);
        if steps.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&root.join("testdata"), dir.path());
        let mut blessed: Vec<String> = text.lines().map(str::to_string).collect();
        let mut shift: isize = 0;
        for step in &steps {
            ran += 1;
            let (printed, code) = run(step, dir.path());
            let lines: Vec<&str> = printed.lines().map(str::trim_end).collect();
            let agrees = code == step.code && matches(&step.expected, &lines);
            if bless && !agrees {
                let (start, end) = ((step.lines.0 as isize + shift) as usize, (step.lines.1 as isize + shift) as usize);
                let mut new: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                if code != 0 {
                    new.push(format!("? {code}"));
                }
                shift += new.len() as isize - (end - start) as isize;
                blessed.splice(start..end, new);
                continue;
            }
            if !bless && !agrees {
                failures.push(format!(
                    "{}: `{}` exited {code} (the page says {}) and printed:\n{printed}\n--- the page says:\n{}",
                    page.strip_prefix(root).unwrap_or(&page).display(),
                    step.command,
                    step.code,
                    step.expected.join("\n")
                ));
            }
        }
        if bless {
            let mut out = blessed.join("\n");
            out.push('\n');
            std::fs::write(&page, out).unwrap();
        }
    }
    assert!(ran > 0, "no console example found: the pages are missing");
    assert!(failures.is_empty(), "{} of {ran} examples differ:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn the_matcher_can_fail() {
    let expected = |s: &str| s.lines().map(str::to_string).collect::<Vec<_>>();
    assert!(matches(&expected("a [..] c\n...\nz"), &["a b c", "x", "y", "z"]));
    assert!(!matches(&expected("a [..] c"), &["a b d"]));
    assert!(!matches(&expected("a\nb"), &["a"]));
    assert!(!matches(&expected("a"), &["a", "b"]));
    let parsed = steps("```console\n$ echo one \\\n two\none two\n$ false\n? 1\n```\n");
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed[0].command, "echo one  two");
    assert_eq!((parsed[1].code, parsed[1].expected.len()), (1, 0));
}
