//! JSON as wheelfix prints it: pretty, every object's keys sorted (each document goes through
//! `serde_json::Value`, whose maps sort their keys), a newline at the end. The documents are
//! typed structs; only their printing goes through `Value`.
//!
//! Why not the types' own order: the command documents are compositions (a `show` entry is the
//! report with the version change flattened into it; every batch entry carries `version` beside
//! its body), and their keys have always printed sorted, which scripts diff against. Printing
//! in declaration order would need every composition rebuilt as one flat type. The documents
//! that are not compositions are printed straight from their types: PEP 691 pages and the SBOM
//! (fields declared in key order), `release.json` (its own order; `site` reads it back).

use serde::Serialize;

/// Version of the JSON documents wheelfix writes.
pub const JSON_VERSION: u32 = 1;

/// The printed document. Characters that would reorder what a terminal shows (bidirectional
/// overrides, embeddings and isolates, which JSON may hold raw) are written as `\uXXXX`
/// escapes: the same document to a parser, and nothing hidden on a screen.
pub fn to_text(document: &impl Serialize) -> String {
    let value = serde_json::to_value(document).expect("documents serialise");
    let text = serde_json::to_string_pretty(&value).expect("documents serialise") + "\n";
    if !text.chars().any(super::is_bidi_control) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if super::is_bidi_control(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A document with the format's `version` beside its own fields.
#[derive(Serialize)]
pub struct Versioned<'a, T: Serialize> {
    pub version: u32,
    #[serde(flatten)]
    pub body: &'a T,
}

impl<'a, T: Serialize> Versioned<'a, T> {
    pub fn new(body: &'a T) -> Self {
        Versioned { version: JSON_VERSION, body }
    }
}

/// The entry of a wheel that failed: its name and the error.
#[derive(Serialize)]
pub struct Failed<'a> {
    pub version: u32,
    pub wheel: &'a str,
    pub error: String,
}

impl<'a> Failed<'a> {
    pub fn new(wheel: &'a str, error: &dyn std::fmt::Display) -> Self {
        Failed { version: JSON_VERSION, wheel, error: error.to_string() }
    }
}

/// One entry of a batch document: a wheel's outcome or its failure.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Entry<'a, T: Serialize> {
    Done(T),
    Failed(Failed<'a>),
}

#[cfg(test)]
mod tests {
    #[test]
    fn bidi_overrides_are_escaped_and_the_document_reads_back_the_same() {
        let document = serde_json::json!({"file": "demo/\u{202e}os.k.so", "line": "a\nb"});
        let text = super::to_text(&document);
        assert!(text.contains(r#""file": "demo/\u202eos.k.so""#), "{text}");
        assert!(!text.contains('\u{202e}') && text.contains(r#""a\nb""#), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), document);
    }
}
