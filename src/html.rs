//! Every HTML page wheelfix writes (the PEP 503 pages, the release page, the landing page) is a
//! template in `templates/`, rendered by minijinja with escaping on for every value: a value is
//! written as markup only where the code marks it safe (the style sheet alone). minijinja was
//! chosen because its templates keep the pages readable as HTML, it has no dependencies to
//! speak of, and auto-escaping is its default for `.html` templates.
//!
//! Escaping writes `&`, `<`, `>`, `"` and `'` as entities (not `/`, which minijinja's own
//! escaper also rewrites): hrefs stay as installers and people read them.

use std::sync::OnceLock;

use minijinja::{Environment, Value};

const TEMPLATES: &[(&str, &str)] = &[
    ("layout.html", include_str!("templates/layout.html")),
    ("macros.html", include_str!("templates/macros.html")),
    ("release.html", include_str!("templates/release.html")),
    ("landing.html", include_str!("templates/landing.html")),
    ("simple_project.html", include_str!("templates/simple_project.html")),
    ("simple_root.html", include_str!("templates/simple_root.html")),
];

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_keep_trailing_newline(true);
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        env.set_formatter(|out, _state, value| {
            if value.is_safe() {
                return write!(out, "{value}").map_err(minijinja::Error::from);
            }
            escape_into(out, &value.to_string()).map_err(minijinja::Error::from)
        });
        // `{{ n | plural("file") }}` → `1 file`, `3 files`
        env.add_filter("plural", |n: usize, noun: String| crate::log::plural(n, &noun));
        for (name, source) in TEMPLATES {
            env.add_template(name, source).expect("the shipped templates parse");
        }
        env
    })
}

/// Render template `name` with `context`. The templates ship with the binary and are tested,
/// so a failure here is a bug, not an input's fault.
pub fn render(name: &str, context: impl serde::Serialize) -> String {
    let template = environment().get_template(name).expect("a shipped template");
    template.render(Value::from_serialize(context)).unwrap_or_else(|e| panic!("template {name}: {e:#}"))
}

/// Text as markup that stands for it: `&`, `<`, `>`, `"`, `'` as entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _ = escape_into(&mut out, text);
    out
}

fn escape_into(out: &mut impl std::fmt::Write, text: &str) -> std::fmt::Result {
    let mut last = 0;
    for (at, c) in text.char_indices() {
        let entity = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&#39;",
            _ => continue,
        };
        out.write_str(&text[last..at])?;
        out.write_str(entity)?;
        last = at + 1;
    }
    out.write_str(&text[last..])
}

/// [`render`] a page of people's with its style sheet, the one value written as markup as it
/// is: text of the program's own.
pub fn render_page(name: &str, style: &'static str, context: impl serde::Serialize) -> String {
    let template = environment().get_template(name).expect("a shipped template");
    let context =
        minijinja::context! { style => Value::from_safe_string(style.to_string()), ..Value::from_serialize(context) };
    template.render(context).unwrap_or_else(|e| panic!("template {name}: {e:#}"))
}

/// A command line as a POSIX shell reads it back into the same words: each word that holds
/// anything but `A-Za-z0-9` and `@%+=:,./_-` is put in single quotes (a `'` inside as `'\''`).
/// Ex) [`pip`, `install`, `rocm-stack[device-gfx942]`] → `pip install 'rocm-stack[device-gfx942]'`
pub fn shell_words(words: &[impl AsRef<str>]) -> String {
    words.iter().map(|w| shell_quote(w.as_ref())).collect::<Vec<_>>().join(" ")
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<img src=x onerror="a('1')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;1&#39;)&quot;&gt;&amp;"
        );
        assert_eq!(escape("a/b.whl"), "a/b.whl");
    }

    #[test]
    fn shell_words_read_back_as_given() {
        assert_eq!(
            shell_words(&["pip", "install", "--index-url", "https://h/x/", "torch"]),
            "pip install --index-url https://h/x/ torch"
        );
        assert_eq!(shell_words(&["rocm-stack[device-gfx942]"]), "'rocm-stack[device-gfx942]'");
        assert_eq!(shell_words(&["x; touch pwned #"]), "'x; touch pwned #'");
        assert_eq!(shell_words(&["it's"]), r"'it'\''s'");
        assert_eq!(shell_words(&[""]), "''");
    }
}
