//! Distribution names, normalised once where they enter
//! ([PEP 503](https://peps.python.org/pep-0503/#normalized-names)).

use std::fmt;

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

    pub fn as_str(&self) -> &str {
        &self.0
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
}
