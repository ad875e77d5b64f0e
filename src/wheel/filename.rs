//! Wheel file names ([PEP 427](https://peps.python.org/pep-0427/#file-name-convention)).
//!
//! Ex) `torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl`: distribution `torch`, version
//! `2.15.0`, python tags `cp312`, ABI tags `cp312`, platform tags `manylinux_2_28_x86_64`.

use std::fmt;

use super::metadata::DistVersion;
use super::name::PackageName;
use super::platform_tag::{PlatformTag, join_tags};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilenameError {
    #[error("`{0}` is not a wheel file name: it does not end in `.whl`")]
    NotWhl(String),
    #[error(
        "`{0}` is not a valid wheel file name: expected `{{name}}-{{version}}(-{{build}})?-{{python}}-{{abi}}-{{platform}}(-{{variant}})?.whl`"
    )]
    Shape(String),
    #[error("`{0}` is not a valid wheel file name: the build tag `{1}` must start with a digit")]
    BuildTag(String, String),
    #[error("`{0}` is not a valid wheel file name: an empty tag in `{1}`")]
    EmptyTag(String, String),
    #[error("`{0}` is not a valid wheel file name: its version {1}")]
    Version(String, String),
    #[error("`{0}` is not a valid wheel file name: {1}")]
    Name(String, super::name::NameError),
    #[error(
        "`{0}` is not a valid wheel file name: the tag `{1}` holds a character other than ASCII letters, digits and `_`"
    )]
    TagCharacter(String, String),
    #[error(
        "`{0}` is not a valid wheel file name: the variant label `{1}` holds a character other than `0-9`, `a-z`, `_` and `.` (PEP 825)"
    )]
    VariantLabel(String, String),
}

/// The parsed parts of a wheel file name. Compressed tag sets (`py2.py3`) are split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelFilename {
    /// The distribution name as written in the file name (escaped, `-` replaced by `_`).
    /// Ex) `Foo_Bar`
    pub distribution: String,
    /// The distribution name, normalised. Ex) `foo-bar`
    pub name: PackageName,
    /// The version as written in the file name, and as PEP 440 reads it.
    pub version: DistVersion,
    pub build: Option<String>,
    pub python_tags: Vec<String>,
    pub abi_tags: Vec<String>,
    pub platform_tags: Vec<PlatformTag>,
    /// The variant label after the platform tag (PEP 825). Ex) `gfx942`, `null`
    pub variant: Option<String>,
}

impl WheelFilename {
    /// Parse a file name (not a path). Ex) `numpy-2.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl`
    pub fn parse(filename: &str) -> Result<Self, FilenameError> {
        let stem = filename.strip_suffix(".whl").ok_or_else(|| FilenameError::NotWhl(filename.to_string()))?;
        let parts: Vec<&str> = stem.split('-').collect();
        // Six parts are a build tag or a variant label: a build tag starts with a digit, a
        // python tag never does (PEP 825).
        let starts_with_digit = |part: &str| part.starts_with(|c: char| c.is_ascii_digit());
        let (name, version, build, py, abi, plat, variant) = match parts.as_slice() {
            [n, v, py, abi, plat] => (*n, *v, None, *py, *abi, *plat, None),
            [n, v, b, py, abi, plat] if starts_with_digit(b) => (*n, *v, Some(*b), *py, *abi, *plat, None),
            // Read as a variant only where the build-tag reading could not be a wheel name
            // either: `foo-1.0-x1-py3-none-any` is a bad build tag, not platform `none`.
            [n, v, py, abi, plat, label] if !starts_with_digit(py) && *plat != "none" && *label != "any" => {
                (*n, *v, None, *py, *abi, *plat, Some(*label))
            }
            [n, v, b, py, abi, plat] => (*n, *v, Some(*b), *py, *abi, *plat, None),
            [n, v, b, py, abi, plat, label] => (*n, *v, Some(*b), *py, *abi, *plat, Some(*label)),
            _ => return Err(FilenameError::Shape(filename.to_string())),
        };
        if let Some(label) = variant
            && !super::variant::is_label(label)
        {
            return Err(FilenameError::VariantLabel(filename.to_string(), label.to_string()));
        }
        if name.is_empty() || version.is_empty() {
            return Err(FilenameError::Shape(filename.to_string()));
        }
        if let Some(b) = build
            && !b.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(FilenameError::BuildTag(filename.to_string(), b.to_string()));
        }
        let package = PackageName::parse(name).map_err(|e| FilenameError::Name(filename.to_string(), e))?;
        let tag_character = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if let Some(bad) = [build.unwrap_or_default(), py, abi, plat]
            .into_iter()
            .find(|t| !t.chars().all(|c| tag_character(c) || c == '.'))
        {
            return Err(FilenameError::TagCharacter(filename.to_string(), bad.to_string()));
        }
        let split = |set: &str| -> Result<Vec<String>, FilenameError> {
            let tags: Vec<String> = set.split('.').map(str::to_string).collect();
            if tags.iter().any(String::is_empty) {
                return Err(FilenameError::EmptyTag(filename.to_string(), set.to_string()));
            }
            Ok(tags)
        };
        let parsed_version = DistVersion::parse(version).map_err(|e| {
            let detail = e.to_string();
            let detail = detail.strip_prefix("its ").unwrap_or(&detail).to_string();
            FilenameError::Version(filename.to_string(), detail)
        })?;
        Ok(WheelFilename {
            distribution: name.to_string(),
            name: package,
            version: parsed_version,
            build: build.map(str::to_string),
            python_tags: split(py)?,
            abi_tags: split(abi)?,
            platform_tags: split(plat)?.iter().map(|t| PlatformTag::parse(t)).collect(),
            variant: variant.map(str::to_string),
        })
    }

    /// The `{python}-{abi}` pairs this file name claims, in file-name order.
    pub fn python_abi_pairs(&self) -> Vec<String> {
        let mut pairs = Vec::new();
        for py in &self.python_tags {
            for abi in &self.abi_tags {
                pairs.push(format!("{py}-{abi}"));
            }
        }
        pairs
    }

    /// The tags as the file name writes them, each part compressed.
    /// Ex) `cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64`
    pub fn tag_triple(&self) -> String {
        format!("{}-{}-{}", self.python_tags.join("."), self.abi_tags.join("."), join_tags(&self.platform_tags))
    }

    /// The same name with other platform tags (kept in the given order).
    pub fn with_platform_tags(&self, platform_tags: Vec<PlatformTag>) -> Self {
        WheelFilename { platform_tags, ..self.clone() }
    }

    /// The same name with another version (a `-` in it escaped as `_`, as file names need).
    pub fn with_version(&self, version: &DistVersion) -> Self {
        let escaped = DistVersion { text: escape_version(&version.text), parsed: version.parsed.clone() };
        WheelFilename { version: escaped, ..self.clone() }
    }
}

/// A version as file and directory names write it: `-` becomes `_`.
pub fn escape_version(version: &str) -> String {
    version.replace('-', "_")
}

impl fmt::Display for WheelFilename {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.distribution, self.version.text)?;
        if let Some(b) = &self.build {
            write!(f, "-{b}")?;
        }
        write!(f, "-{}", self.tag_triple())?;
        if let Some(label) = &self.variant {
            write!(f, "-{label}")?;
        }
        f.write_str(".whl")
    }
}

/// The name of a release's variant set file (PEP 825): `{name}-{version}-variants.json`, the
/// name and version escaped as in a wheel's file name. Ex) (`rocm-torch`, `2.9.0+rocm7.0.2`) →
/// `rocm_torch-2.9.0+rocm7.0.2-variants.json`
pub fn variants_file_name(project: &str, version: &str) -> String {
    format!("{}-{}-variants.json", project.replace('-', "_"), escape_version(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compressed_tag_sets_and_build_tag() {
        let f =
            WheelFilename::parse("foo_bar-1.0-1a-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl").unwrap();
        assert_eq!(f.distribution, "foo_bar");
        assert_eq!(f.name.as_str(), "foo-bar");
        assert_eq!(f.version.parsed, "1.0".parse().unwrap());
        assert_eq!(f.build.as_deref(), Some("1a"));
        assert_eq!(f.python_tags, ["py2", "py3"]);
        assert_eq!(join_tags(&f.platform_tags), "manylinux_2_17_x86_64.manylinux2014_x86_64");
        assert_eq!(f.python_abi_pairs(), ["py2-none", "py3-none"]);
        assert_eq!(f.to_string(), "foo_bar-1.0-1a-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
    }

    #[test]
    fn rejects_bad_names() {
        assert!(matches!(WheelFilename::parse("foo-1.0.tar.gz"), Err(FilenameError::NotWhl(_))));
        assert!(matches!(WheelFilename::parse("foo-1.0-py3-none.whl"), Err(FilenameError::Shape(_))));
        assert!(matches!(WheelFilename::parse("foo-1.0-x1-py3-none-any.whl"), Err(FilenameError::BuildTag(..))));
        assert!(matches!(WheelFilename::parse("foo-1.0-py3.-none-any.whl"), Err(FilenameError::EmptyTag(..))));
        assert!(matches!(WheelFilename::parse("foo-one-py3-none-any.whl"), Err(FilenameError::Version(..))));
    }
}
