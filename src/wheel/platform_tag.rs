//! Platform tags, parsed once where they enter (a file name, a WHEEL `Tag:` line, `--plat`)
//! ([platform compatibility tags](https://packaging.python.org/specifications/platform-compatibility-tags/)).
//!
//! Ex) `manylinux_2_17_x86_64`, `manylinux2014_aarch64`, `musllinux_1_2_x86_64`, `linux_armv6l`,
//! `android_24_arm64_v8a`, `win_amd64`, `macosx_11_0_arm64`, `any`.

use std::fmt;

use crate::platform::{Arch, Libc, Os};

/// One platform tag. Every tag prints back exactly as it was written; one wheelfix cannot take
/// apart is kept whole as [`PlatformTag::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PlatformTag {
    /// `manylinux_<major>_<minor>_<arch>` (PEP 600).
    Manylinux {
        major: u32,
        minor: u32,
        arch: String,
    },
    /// `manylinux1_<arch>`, `manylinux2010_<arch>`, `manylinux2014_<arch>` (PEPs 513, 571, 599).
    LegacyManylinux {
        year: u32,
        arch: String,
    },
    /// `musllinux_<major>_<minor>_<arch>` (PEP 656).
    Musllinux {
        major: u32,
        minor: u32,
        arch: String,
    },
    /// `linux_<arch>`: no promise beyond the architecture.
    Linux {
        arch: String,
    },
    /// `android_<api>_<abi>` (PEP 738). Ex) `android_24_arm64_v8a`
    Android {
        api: u32,
        abi: String,
    },
    /// `win32`, `win_amd64`, `win_arm64`, …
    Windows(String),
    /// `macosx_<major>_<minor>_<arch>`.
    Macos {
        major: u32,
        minor: u32,
        arch: String,
    },
    /// `ios_<…>` (PEP 730).
    Ios(String),
    /// `any`: pure Python.
    Any,
    Other(String),
}

impl PlatformTag {
    pub fn parse(tag: &str) -> PlatformTag {
        let parsed = Self::parse_parts(tag).unwrap_or_else(|| PlatformTag::Other(tag.to_string()));
        // Only a tag that prints back as written keeps its parts (`manylinux_2_017_x86_64` does not).
        if parsed.to_string() == tag { parsed } else { PlatformTag::Other(tag.to_string()) }
    }

    fn parse_parts(tag: &str) -> Option<PlatformTag> {
        /// `<number>_<number>_<rest>`
        fn version_and_rest(s: &str) -> Option<(u32, u32, String)> {
            let (major, rest) = s.split_once('_')?;
            let (minor, arch) = rest.split_once('_')?;
            let number = |n: &str| n.chars().all(|c| c.is_ascii_digit()).then(|| n.parse().ok()).flatten();
            Some((number(major)?, number(minor)?, arch.to_string())).filter(|(_, _, a)| !a.is_empty())
        }
        if tag == "any" {
            return Some(PlatformTag::Any);
        }
        if let Some(rest) = tag.strip_prefix("manylinux_") {
            let (major, minor, arch) = version_and_rest(rest)?;
            return Some(PlatformTag::Manylinux { major, minor, arch });
        }
        for year in [1, 2010, 2014] {
            if let Some(arch) = tag.strip_prefix(&format!("manylinux{year}_")) {
                return Some(PlatformTag::LegacyManylinux { year, arch: arch.to_string() });
            }
        }
        if let Some(rest) = tag.strip_prefix("musllinux_") {
            let (major, minor, arch) = version_and_rest(rest)?;
            return Some(PlatformTag::Musllinux { major, minor, arch });
        }
        if let Some(arch) = tag.strip_prefix("linux_") {
            return Some(PlatformTag::Linux { arch: arch.to_string() });
        }
        if let Some(rest) = tag.strip_prefix("android_") {
            let (api, abi) = rest.split_once('_')?;
            return Some(PlatformTag::Android { api: api.parse().ok()?, abi: abi.to_string() });
        }
        if let Some(rest) = tag.strip_prefix("macosx_") {
            let (major, minor, arch) = version_and_rest(rest)?;
            return Some(PlatformTag::Macos { major, minor, arch });
        }
        if tag.starts_with("win") {
            return Some(PlatformTag::Windows(tag.to_string()));
        }
        if tag.starts_with("ios_") {
            return Some(PlatformTag::Ios(tag.to_string()));
        }
        None
    }

    /// The architecture as the tag writes it. Ex) `x86_64`, `armv6l`, `arm64_v8a`
    pub fn arch_name(&self) -> Option<&str> {
        match self {
            PlatformTag::Manylinux { arch, .. }
            | PlatformTag::LegacyManylinux { arch, .. }
            | PlatformTag::Musllinux { arch, .. }
            | PlatformTag::Linux { arch }
            | PlatformTag::Macos { arch, .. } => Some(arch),
            PlatformTag::Android { abi, .. } => Some(abi),
            _ => None,
        }
    }

    /// The architecture a manylinux/musllinux policy can name, for Linux and Android tags.
    /// Ex) `manylinux_2_17_x86_64` → `x86_64`; `android_24_arm64_v8a` → `aarch64`;
    /// `linux_armv6l` → `None`.
    pub fn arch(&self) -> Option<Arch> {
        match self {
            PlatformTag::Android { abi, .. } if abi == "arm64_v8a" => Some(Arch::Aarch64),
            PlatformTag::Any => None,
            // Any other tag that ends in `_<arch>` names that architecture (`macosx_11_0_x86_64`).
            _ => {
                let text = self.to_string();
                let mut all = Arch::ALL;
                // Longest names first so that `ppc64le` is not read as `ppc64`.
                all.sort_by_key(|a| std::cmp::Reverse(a.as_str().len()));
                all.into_iter().find(|a| text.strip_suffix(a.as_str()).is_some_and(|rest| rest.ends_with('_')))
            }
        }
    }

    /// The C library family the tag's prefix names. Ex) `musllinux_1_2_x86_64` → musl
    pub fn libc(&self) -> Option<Libc> {
        match self {
            PlatformTag::Manylinux { .. } | PlatformTag::LegacyManylinux { .. } => Some(Libc::Glibc),
            PlatformTag::Musllinux { .. } => Some(Libc::Musl),
            PlatformTag::Android { .. } => Some(Libc::Android),
            PlatformTag::Other(t) if t.starts_with("manylinux") => Some(Libc::Glibc),
            PlatformTag::Other(t) if t.starts_with("musllinux") => Some(Libc::Musl),
            PlatformTag::Other(t) if t.starts_with("android_") => Some(Libc::Android),
            _ => None,
        }
    }

    /// The glibc a manylinux tag allows a wheel to need, at most. Ex) `manylinux2014_x86_64` →
    /// (2, 17); `manylinux_2_28_aarch64` → (2, 28)
    pub fn glibc(&self) -> Option<(u32, u32)> {
        match self {
            PlatformTag::Manylinux { major, minor, .. } => Some((*major, *minor)),
            PlatformTag::LegacyManylinux { year: 1, .. } => Some((2, 5)),
            PlatformTag::LegacyManylinux { year: 2010, .. } => Some((2, 12)),
            PlatformTag::LegacyManylinux { year: 2014, .. } => Some((2, 17)),
            _ => None,
        }
    }

    pub fn os(&self) -> Os {
        match self {
            PlatformTag::Manylinux { .. }
            | PlatformTag::LegacyManylinux { .. }
            | PlatformTag::Musllinux { .. }
            | PlatformTag::Linux { .. } => Os::Linux,
            PlatformTag::Android { .. } => Os::Android,
            PlatformTag::Windows(_) => Os::Windows,
            PlatformTag::Macos { .. } => Os::MacOs,
            PlatformTag::Ios(_) => Os::Ios,
            PlatformTag::Any => Os::Any,
            // A tag that does not parse still says its system by its prefix.
            PlatformTag::Other(t) if t.starts_with("manylinux") || t.starts_with("musllinux") => Os::Linux,
            PlatformTag::Other(t) if t.starts_with("linux_") => Os::Linux,
            PlatformTag::Other(t) if t.starts_with("android_") => Os::Android,
            PlatformTag::Other(_) => Os::Other,
        }
    }

    pub fn is_any(&self) -> bool {
        *self == PlatformTag::Any
    }

    pub fn is_linux(&self) -> bool {
        matches!(self, PlatformTag::Linux { .. })
    }
}

impl fmt::Display for PlatformTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlatformTag::Manylinux { major, minor, arch } => write!(f, "manylinux_{major}_{minor}_{arch}"),
            PlatformTag::LegacyManylinux { year, arch } => write!(f, "manylinux{year}_{arch}"),
            PlatformTag::Musllinux { major, minor, arch } => write!(f, "musllinux_{major}_{minor}_{arch}"),
            PlatformTag::Linux { arch } => write!(f, "linux_{arch}"),
            PlatformTag::Android { api, abi } => write!(f, "android_{api}_{abi}"),
            PlatformTag::Macos { major, minor, arch } => write!(f, "macosx_{major}_{minor}_{arch}"),
            PlatformTag::Windows(t) | PlatformTag::Ios(t) | PlatformTag::Other(t) => f.write_str(t),
            PlatformTag::Any => f.write_str("any"),
        }
    }
}

impl serde::Serialize for PlatformTag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A tag reads back from its text: every text is some tag ([`PlatformTag::parse`]).
impl<'de> serde::Deserialize<'de> for PlatformTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(PlatformTag::parse(&<String as serde::Deserialize>::deserialize(d)?))
    }
}

/// Tags in the order auditwheel writes them: lexicographic by their text.
pub fn sort_tags(tags: &mut Vec<PlatformTag>) {
    tags.sort_by_key(|t| t.to_string());
    tags.dedup();
}

/// `.`-joined. Ex) `manylinux_2_17_x86_64.manylinux2014_x86_64`
pub fn join_tags(tags: &[PlatformTag]) -> String {
    tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tag_prints_back_as_written() {
        for tag in [
            "manylinux_2_17_x86_64",
            "manylinux2014_aarch64",
            "manylinux1_i686",
            "musllinux_1_2_ppc64le",
            "linux_armv6l",
            "android_24_arm64_v8a",
            "win_amd64",
            "macosx_11_0_arm64",
            "ios_13_0_arm64_iphoneos",
            "any",
            "manylinux_2_017_x86_64",
            "emscripten_3_1_58_wasm32",
        ] {
            assert_eq!(PlatformTag::parse(tag).to_string(), tag);
        }
        assert_eq!(PlatformTag::parse("manylinux_2_017_x86_64"), PlatformTag::Other("manylinux_2_017_x86_64".into()));
    }

    #[test]
    fn reads_arch_and_libc() {
        assert_eq!(PlatformTag::parse("manylinux_2_17_ppc64le").arch(), Some(Arch::Ppc64le));
        assert_eq!(PlatformTag::parse("manylinux2014_ppc64").arch(), Some(Arch::Ppc64));
        assert_eq!(PlatformTag::parse("linux_x86_64").arch(), Some(Arch::X86_64));
        assert_eq!(PlatformTag::parse("linux_armv6l").arch(), None);
        assert_eq!(PlatformTag::parse("android_24_arm64_v8a").arch(), Some(Arch::Aarch64));
        assert_eq!(PlatformTag::parse("any").arch(), None);
        assert_eq!(PlatformTag::parse("musllinux_1_1_x86_64").libc(), Some(Libc::Musl));
        assert_eq!(PlatformTag::parse("win_amd64").os(), Os::Windows);
    }
}
