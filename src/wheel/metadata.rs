//! The `WHEEL` file ([PEP 427](https://peps.python.org/pep-0427/#the-dist-info-directory)) and
//! the core metadata `METADATA` file ([core metadata spec](https://packaging.python.org/specifications/core-metadata/)).
//!
//! Both are email-header style files. We keep the original lines so that a rewrite changes only
//! the lines it must.

/// Header fields of an email-style file, in file order, up to the first empty line.
/// Continuation lines (starting with whitespace) are folded into the previous value.
pub fn parse_headers(text: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push('\n');
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            fields.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    fields
}

/// The parsed `WHEEL` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelInfo {
    /// The original text, kept so that rewrites preserve every other line.
    pub text: String,
    /// `Tag:` values in file order. Ex) `cp312-cp312-manylinux_2_28_x86_64`
    pub tags: Vec<String>,
    /// `Root-Is-Purelib`, `None` when absent.
    pub root_is_purelib: Option<bool>,
}

impl WheelInfo {
    pub fn parse(text: &str) -> Self {
        let fields = parse_headers(text);
        let tags = fields.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Tag")).map(|(_, v)| v.clone()).collect();
        let root_is_purelib = fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("Root-Is-Purelib"))
            .map(|(_, v)| v.eq_ignore_ascii_case("true"));
        WheelInfo { text: text.to_string(), tags, root_is_purelib }
    }

    /// Platform tags named by the `Tag:` lines, deduplicated, in order of first appearance.
    pub fn platform_tags(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for tag in &self.tags {
            if let Some(plat) = tag.splitn(3, '-').nth(2)
                && !out.iter().any(|p| p == plat)
            {
                out.push(plat.to_string());
            }
        }
        out
    }

    /// The text with the `Tag:` lines replaced by `tags` (written where the first `Tag:` line
    /// stood, or at the end of the headers) and `Root-Is-Purelib` set when `purelib` is given.
    /// Line endings follow the original file.
    pub fn with_tags(&self, tags: &[String], purelib: Option<bool>) -> String {
        let newline = if self.text.contains("\r\n") { "\r\n" } else { "\n" };
        let mut out: Vec<String> = Vec::new();
        let mut tags_written = false;
        let mut purelib_written = false;
        let mut header_ended = false;
        for line in self.text.lines() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if header_ended {
                out.push(line.to_string());
                continue;
            }
            if line.is_empty() {
                header_ended = true;
                Self::push_missing(&mut out, tags, &mut tags_written, purelib, &mut purelib_written);
                out.push(String::new());
                continue;
            }
            let key = line.split_once(':').map(|(k, _)| k.trim());
            match key {
                Some(k) if k.eq_ignore_ascii_case("Tag") => {
                    if !tags_written {
                        out.extend(tags.iter().map(|t| format!("Tag: {t}")));
                        tags_written = true;
                    }
                }
                Some(k) if k.eq_ignore_ascii_case("Root-Is-Purelib") && purelib.is_some() => {
                    if !purelib_written {
                        out.push(format!("Root-Is-Purelib: {}", purelib.unwrap_or(false)));
                        purelib_written = true;
                    }
                }
                _ => out.push(line.to_string()),
            }
        }
        if !header_ended {
            Self::push_missing(&mut out, tags, &mut tags_written, purelib, &mut purelib_written);
        }
        let mut text = out.join(newline);
        text.push_str(newline);
        if !header_ended {
            // The WHEEL file ends with an empty line, as `wheel` and auditwheel write it.
            text.push_str(newline);
        }
        text
    }

    fn push_missing(
        out: &mut Vec<String>,
        tags: &[String],
        tags_written: &mut bool,
        purelib: Option<bool>,
        purelib_written: &mut bool,
    ) {
        if !*purelib_written && let Some(p) = purelib {
            out.push(format!("Root-Is-Purelib: {p}"));
            *purelib_written = true;
        }
        if !*tags_written {
            out.extend(tags.iter().map(|t| format!("Tag: {t}")));
            *tags_written = true;
        }
    }
}

/// The fields of `METADATA` that wheelfix reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreMetadata {
    pub name: String,
    pub version: String,
    pub requires_python: Option<String>,
    pub requires_dist: Vec<String>,
    pub provides_extra: Vec<String>,
}

impl CoreMetadata {
    pub fn parse(text: &str) -> Self {
        let mut meta = CoreMetadata::default();
        for (key, value) in parse_headers(text) {
            match key.to_ascii_lowercase().as_str() {
                "name" => meta.name = value,
                "version" => meta.version = value,
                "requires-python" => meta.requires_python = Some(value),
                "requires-dist" => meta.requires_dist.push(value),
                "provides-extra" => meta.provides_extra.push(value),
                _ => {}
            }
        }
        meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHEEL: &str = "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n\n";

    #[test]
    fn replaces_tag_lines_and_keeps_others() {
        let info = WheelInfo::parse(WHEEL);
        assert_eq!(info.platform_tags(), ["linux_x86_64"]);
        let tags =
            vec!["cp312-cp312-manylinux2014_x86_64".to_string(), "cp312-cp312-manylinux_2_17_x86_64".to_string()];
        assert_eq!(
            info.with_tags(&tags, None),
            "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: false\n\
             Tag: cp312-cp312-manylinux2014_x86_64\nTag: cp312-cp312-manylinux_2_17_x86_64\n\n"
        );
    }

    #[test]
    fn sets_purelib_and_keeps_crlf() {
        let info = WheelInfo::parse("Wheel-Version: 1.0\r\nRoot-Is-Purelib: true\r\nTag: py3-none-any\r\n");
        let out = info.with_tags(&["py3-none-linux_x86_64".to_string()], Some(false));
        assert_eq!(out, "Wheel-Version: 1.0\r\nRoot-Is-Purelib: false\r\nTag: py3-none-linux_x86_64\r\n\r\n");
    }

    #[test]
    fn reads_core_metadata_fields() {
        let meta = CoreMetadata::parse(
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0a0+git31a77fc\nRequires-Python: >=3.10\n\
             Requires-Dist: triton==3.9.0; extra == \"x\"\n\nDescription: Version: 9\n",
        );
        assert_eq!(meta.version, "2.15.0a0+git31a77fc");
        assert_eq!(meta.requires_python.as_deref(), Some(">=3.10"));
        assert_eq!(meta.requires_dist, ["triton==3.9.0; extra == \"x\""]);
    }
}
