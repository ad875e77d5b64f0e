//! Distribution names, normalised once where they enter
//! ([PEP 503](https://peps.python.org/pep-0503/#normalized-names)).

use std::fmt;

/// A name that is not a PEP 508 project name; the name is held as an error shows it (at most 80
/// characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown:?} is not a valid project name (PEP 508: ASCII letters and digits, with `.`, `_`, `-` inside)")]
pub struct NameError {
    shown: String,
}

/// A distribution name in its normal form: lower case, runs of `-`, `_` and `.` as one `-`.
/// Ex) `Amd_Aiter` → `amd-aiter`
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PackageName(String);

impl PackageName {
    pub fn new(name: &str) -> Self {
        let mut out = String::with_capacity(name.len());
        let mut in_sep = false;
        for c in name.chars() {
            if matches!(c, '-' | '_' | '.') {
                if !in_sep {
                    out.push('-');
                }
                in_sep = true;
            } else {
                out.push(c.to_ascii_lowercase());
                in_sep = false;
            }
        }
        PackageName(out)
    }

    /// A name as it enters from a file name, METADATA or PKG-INFO, checked as PEP 508 names
    /// are (ASCII letters and digits, with `.`, `_` and `-` inside), then normalised. PEP 508
    /// sets no length: a name too long for a file that must be written of it is refused where
    /// that file is written, with that reason. Ex) `Amd_Aiter`; not `../x`, `<img>`, `x; touch y`
    pub fn parse(name: &str) -> Result<Self, NameError> {
        if is_valid(name) { Ok(PackageName::new(name)) } else { Err(NameError { shown: shown(name) }) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_valid(name: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A name as an error shows it: at most 80 characters.
fn shown(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_string(),
    }
}

impl fmt::Display for PackageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for PackageName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl PartialEq<str> for PackageName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_names_like_pep_503() {
        assert_eq!(PackageName::new("Amd_Aiter").as_str(), "amd-aiter");
        assert_eq!(PackageName::new("a.-_b").as_str(), "a-b");
        assert_eq!(PackageName::new("rocm-sdk-device-gfx950"), PackageName::new("ROCM_SDK.device_gfx950"));
    }

    #[test]
    fn parses_only_pep_508_names() {
        assert_eq!(PackageName::parse("Amd_Aiter").unwrap().as_str(), "amd-aiter");
        assert_eq!(PackageName::parse("a").unwrap().as_str(), "a");
        for bad in
            ["", "/etc", "../x", "<img src=x onerror=alert(1)>", "x; touch pwned #", "a\0b", "-a", "a.", "é", "%2e%2e"]
        {
            assert!(PackageName::parse(bad).is_err(), "{bad:?}");
        }
        // PEP 508 sets no length (a 206-byte name makes a valid 227-byte wheel file name).
        assert!(PackageName::parse(&"a".repeat(206)).is_ok());
        assert!(PackageName::parse(&"a".repeat(300)).is_ok());
    }
}
