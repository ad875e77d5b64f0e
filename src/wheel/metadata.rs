//! The `WHEEL` file ([PEP 427](https://peps.python.org/pep-0427/#the-dist-info-directory)) and
//! the core metadata `METADATA` file ([core metadata spec](https://packaging.python.org/specifications/core-metadata/)).
//!
//! Both are email-header style files. We keep the original lines so that a rewrite changes only
//! the lines it must.

use std::str::FromStr;

use pep440_rs::Version;

use super::name::PackageName;
use super::platform_tag::PlatformTag;
use super::requirement::Requirement;

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

/// One wheel tag, as a WHEEL `Tag:` line names it. Ex) `cp312-cp312-manylinux_2_28_x86_64`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelTag {
    /// Ex) `cp312`
    pub python: String,
    /// Ex) `cp312`, `abi3`, `none`
    pub abi: String,
    pub platform: PlatformTag,
}

impl WheelTag {
    /// `{python}-{abi}-{platform}`; `None` for a value of another shape.
    pub fn parse(text: &str) -> Option<WheelTag> {
        let mut parts = text.splitn(3, '-');
        let (python, abi, platform) = (parts.next()?, parts.next()?, parts.next()?);
        Some(WheelTag { python: python.into(), abi: abi.into(), platform: PlatformTag::parse(platform) })
    }

    /// Ex) `cp312-cp312`
    pub fn python_abi(&self) -> String {
        format!("{}-{}", self.python, self.abi)
    }
}

/// A `Tag:` value as the tags it stands for: a compressed set (`py3-none-manylinux_2_12_x86_64.
/// musllinux_1_1_x86_64`, which some build tools write) is one tag per combination, as
/// packaging's `parse_tag` reads it. Ex) `py2.py3-none-any` → `py2-none-any`, `py3-none-any`
fn expand_tag(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.splitn(3, '-').collect();
    let [py, abi, plat] = parts[..] else { return vec![value.to_string()] };
    let mut out = Vec::new();
    for p in py.split('.') {
        for a in abi.split('.') {
            for t in plat.split('.') {
                out.push(format!("{p}-{a}-{t}"));
            }
        }
    }
    out
}

impl WheelInfo {
    pub fn parse(text: &str) -> Self {
        let fields = parse_headers(text);
        let tags =
            fields.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Tag")).flat_map(|(_, v)| expand_tag(v)).collect();
        let root_is_purelib = fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("Root-Is-Purelib"))
            .map(|(_, v)| v.eq_ignore_ascii_case("true"));
        WheelInfo { text: text.to_string(), tags, root_is_purelib }
    }

    /// The `Tag:` lines that have a wheel tag's shape, typed, in file order.
    pub fn wheel_tags(&self) -> Vec<WheelTag> {
        self.tags.iter().filter_map(|t| WheelTag::parse(t)).collect()
    }

    /// Platform tags named by the `Tag:` lines, deduplicated, in order of first appearance.
    pub fn platform_tags(&self) -> Vec<PlatformTag> {
        let mut out: Vec<PlatformTag> = Vec::new();
        for tag in self.wheel_tags() {
            if !out.contains(&tag.platform) {
                out.push(tag.platform);
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

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MetadataError {
    #[error("it has no `{0}` field")]
    Missing(&'static str),
    #[error("its `Version: {0}` is not a valid PEP 440 version: {1}")]
    Version(String, String),
    #[error("its `Name`: {0}")]
    Name(#[from] super::name::NameError),
}

/// A version as written, and as PEP 440 reads it. Ex) `2.15.0a0+git31a77fc`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistVersion {
    pub text: String,
    pub parsed: Version,
}

impl DistVersion {
    pub fn parse(text: &str) -> Result<Self, MetadataError> {
        let parsed = Version::from_str(text).map_err(|e| MetadataError::Version(text.to_string(), e.to_string()))?;
        Ok(DistVersion { text: text.to_string(), parsed })
    }
}

impl serde::Serialize for DistVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// A version reads back from its text; one that is not PEP 440 is an error.
impl<'de> serde::Deserialize<'de> for DistVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        DistVersion::parse(&<String as serde::Deserialize>::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for DistVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The fields of core metadata (`METADATA`, an sdist's `PKG-INFO`) that wheelfix reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreMetadata {
    /// `Name` as written. Ex) `Amd_Aiter`
    pub name: String,
    /// `Name`, normalised. Ex) `amd-aiter`
    pub package: PackageName,
    pub version: DistVersion,
    pub requires_python: Option<String>,
    pub requires_dist: Vec<Requirement>,
    pub provides_extra: Vec<String>,
    /// `Project-URL` lines: (label, URL). Ex) (`Package index`, `https://rocm.example/simple/`)
    pub project_urls: Vec<(String, String)>,
}

/// The `Project-URL` label under which wheelfix records the index a release is published in
/// (`--index-url`), so that `doctor`'s fixes name it.
pub const INDEX_LABEL: &str = "Package index";

/// A `Project-URL` label as PEP 753 compares them: lower case, without punctuation or
/// whitespace. Ex) `Package index` → `packageindex`
fn normalized_label(label: &str) -> String {
    label.chars().filter(|c| !c.is_ascii_punctuation() && !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

impl CoreMetadata {
    /// The index the release was published in, as `--index-url` recorded it
    /// ([`INDEX_LABEL`]).
    pub fn index_url(&self) -> Option<&str> {
        let wanted = normalized_label(INDEX_LABEL);
        self.project_urls.iter().find(|(label, _)| normalized_label(label) == wanted).map(|(_, url)| url.as_str())
    }

    /// Parse core metadata; a missing `Name` or `Version`, or a version PEP 440 cannot read,
    /// is an error (pip refuses such a distribution too).
    pub fn parse(text: &str) -> Result<Self, MetadataError> {
        let (mut name, mut version) = (None, None);
        let (mut requires_python, mut requires_dist, mut provides_extra) = (None, Vec::new(), Vec::new());
        let mut project_urls = Vec::new();
        for (key, value) in parse_headers(text) {
            match key.to_ascii_lowercase().as_str() {
                "name" => name = Some(value),
                "version" => version = Some(value),
                "requires-python" => requires_python = Some(value),
                "requires-dist" => requires_dist.push(Requirement::parse(&value)),
                "provides-extra" => provides_extra.push(value),
                "project-url" => {
                    if let Some((label, url)) = value.split_once(',') {
                        project_urls.push((label.trim().to_string(), url.trim().to_string()));
                    }
                }
                _ => {}
            }
        }
        let name = name.filter(|n| !n.is_empty()).ok_or(MetadataError::Missing("Name"))?;
        let version = version.filter(|v| !v.is_empty()).ok_or(MetadataError::Missing("Version"))?;
        Ok(CoreMetadata {
            package: PackageName::parse(&name)?,
            name,
            version: DistVersion::parse(&version)?,
            requires_python,
            requires_dist,
            provides_extra,
            project_urls,
        })
    }
}

/// METADATA with `Project-URL: Package index, <url>` ([`INDEX_LABEL`]) among its headers, in
/// place of one it had; the other lines and the description as they were.
pub fn with_index_url(metadata: &str, url: &str) -> String {
    let line = format!("Project-URL: {INDEX_LABEL}, {url}");
    let wanted = normalized_label(INDEX_LABEL);
    let (head, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i + 1], &metadata[i + 1..]),
        None => (metadata, ""),
    };
    let mut lines: Vec<&str> = head.lines().collect();
    let ours = |l: &&str| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("Project-URL")
                && v.split_once(',').is_some_and(|(label, _)| normalized_label(label) == wanted)
        })
    };
    lines.retain(|l| !ours(l));
    lines.push(&line);
    format!("{}\n{body}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHEEL: &str = "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n\n";

    #[test]
    fn replaces_tag_lines_and_keeps_others() {
        let info = WheelInfo::parse(WHEEL);
        assert_eq!(info.platform_tags(), [PlatformTag::parse("linux_x86_64")]);
        let tags =
            vec!["cp312-cp312-manylinux2014_x86_64".to_string(), "cp312-cp312-manylinux_2_17_x86_64".to_string()];
        assert_eq!(
            info.with_tags(&tags, None),
            "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: false\n\
             Tag: cp312-cp312-manylinux2014_x86_64\nTag: cp312-cp312-manylinux_2_17_x86_64\n\n"
        );
    }

    #[test]
    fn a_compressed_tag_line_is_several_tags() {
        let info = WheelInfo::parse(
            "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64\n",
        );
        assert_eq!(info.tags.len(), 3);
        assert_eq!(info.platform_tags()[2], PlatformTag::parse("musllinux_1_1_x86_64"));
    }

    #[test]
    fn sets_purelib_and_keeps_crlf() {
        let info = WheelInfo::parse("Wheel-Version: 1.0\r\nRoot-Is-Purelib: true\r\nTag: py3-none-any\r\n");
        let out = info.with_tags(&["py3-none-linux_x86_64".to_string()], Some(false));
        assert_eq!(out, "Wheel-Version: 1.0\r\nRoot-Is-Purelib: false\r\nTag: py3-none-linux_x86_64\r\n\r\n");
    }

    #[test]
    fn wheel_tags_are_typed_and_compressed_sets_expanded() {
        let info = WheelInfo::parse(
            "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_12_x86_64.musllinux_1_1_x86_64\nTag: odd\n",
        );
        let tags = info.wheel_tags();
        assert_eq!(tags.len(), 2, "the line without a wheel tag's shape is not one");
        assert_eq!(tags[1].python_abi(), "py3-none");
        assert_eq!(tags[1].platform.to_string(), "musllinux_1_1_x86_64");
        assert_eq!(info.platform_tags().len(), 2);
    }

    #[test]
    fn reads_core_metadata_fields() {
        let meta = CoreMetadata::parse(
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0a0+git31a77fc\nRequires-Python: >=3.10\n\
             Requires-Dist: triton==3.9.0; extra == \"x\"\n\nDescription: Version: 9\n",
        )
        .unwrap();
        assert_eq!(meta.version.text, "2.15.0a0+git31a77fc");
        assert!(meta.version.parsed.is_local());
        assert_eq!(meta.requires_python.as_deref(), Some(">=3.10"));
        assert_eq!(meta.requires_dist, [Requirement::parse("triton==3.9.0; extra == \"x\"")]);
        assert_eq!(meta.requires_dist[0].extra.as_deref(), Some("x"));
        assert_eq!(CoreMetadata::parse("Name: x\n"), Err(MetadataError::Missing("Version")));
        assert!(matches!(CoreMetadata::parse("Name: x\nVersion: one\n"), Err(MetadataError::Version(..))));
    }
}
