//! The extras by which a split host, a selector or a metapackage brings device code: one per
//! processor (`device-gfx942`), one per device wheel that holds several (a family's or a
//! sub-family's: `device-gfx110x`, `device-gfx11`), and `device-all`. TheRock's packages and
//! wheelfix's outputs spell them the same way (`../shared/reference/rocm-packaging.md`); every
//! command that writes, reads or judges one goes through [`DeviceExtra`].

use std::fmt;

use crate::gpu::targets::is_known_processor;

/// The prefix every device extra has.
const PREFIX: &str = "device-";
/// The extra that brings every device wheel.
const ALL: &str = "all";

/// A `device-*` extra. Ex) `device-gfx942`, `device-gfx110x`, `device-all`
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceExtra {
    /// One processor's device code. Ex) `device-gfx942` (a generic processor too:
    /// `device-gfx9-4-generic`)
    Processor(String),
    /// A device wheel that holds several processors' code or files: a family or sub-family
    /// group. Ex) `device-gfx110x`, `device-gfx11`
    Group(String),
    /// Every device wheel: `device-all`.
    All,
}

impl DeviceExtra {
    /// The extra of a wheel group's name: a processor's, else a group's. Ex) `gfx942` →
    /// `device-gfx942`; `gfx110x` → `device-gfx110x` (a group)
    pub fn of(name: &str) -> DeviceExtra {
        if is_known_processor(name) {
            DeviceExtra::Processor(name.to_string())
        } else {
            DeviceExtra::Group(name.to_string())
        }
    }

    /// The device extra an extra's name is, if it is one; names compare as PEP 685 normalises
    /// them (case, and `_`/`.` as `-`). Ex) `device-gfx942`, `Device_All`; not `devel`,
    /// `device-`
    pub fn parse(extra: &str) -> Option<DeviceExtra> {
        let normal = crate::wheel::requirement::normalized_extra(extra);
        let name = normal.strip_prefix(PREFIX).filter(|n| !n.is_empty())?;
        Some(if name == ALL { DeviceExtra::All } else { DeviceExtra::of(name) })
    }

    /// The group it names: its processor or family; `None` for `device-all`.
    /// Ex) `device-gfx942` → `gfx942`
    pub fn target(&self) -> Option<&str> {
        match self {
            DeviceExtra::Processor(name) | DeviceExtra::Group(name) => Some(name),
            DeviceExtra::All => None,
        }
    }

    /// The processor it names, if it names one. Ex) `device-gfx942` → `gfx942`; `device-gfx110x`
    /// and `device-all` → `None`
    pub fn processor(&self) -> Option<&str> {
        match self {
            DeviceExtra::Processor(name) => Some(name),
            DeviceExtra::Group(_) | DeviceExtra::All => None,
        }
    }

    pub fn is_all(&self) -> bool {
        *self == DeviceExtra::All
    }
}

impl fmt::Display for DeviceExtra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceExtra::Processor(name) | DeviceExtra::Group(name) => write!(f, "{PREFIX}{name}"),
            DeviceExtra::All => write!(f, "{PREFIX}{ALL}"),
        }
    }
}

/// An extra that is not a `device-*` one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a device extra (device-<processor>, device-<group> or device-all)")]
pub struct NotADeviceExtra(pub String);

impl std::str::FromStr for DeviceExtra {
    type Err = NotADeviceExtra;

    fn from_str(text: &str) -> Result<DeviceExtra, NotADeviceExtra> {
        DeviceExtra::parse(text).ok_or_else(|| NotADeviceExtra(text.to_string()))
    }
}

impl PartialEq<str> for DeviceExtra {
    /// Whether an extra's name, normalised, is this extra.
    fn eq(&self, other: &str) -> bool {
        DeviceExtra::parse(other).as_ref() == Some(self)
    }
}

impl PartialEq<String> for DeviceExtra {
    fn eq(&self, other: &String) -> bool {
        *self == *other.as_str()
    }
}

/// The GPU target group a device project is for, from its name: what follows its last
/// `-device-`, a processor or a family group. Ex) `rocm-sdk-device-gfx950` → `gfx950`,
/// `amd-torch-device-gfx110x` → `gfx110x`; not `nvidia-device-plugin`
pub fn device_project_target(project: &str) -> Option<&str> {
    let (_, target) = project.rsplit_once("-device-")?;
    let rest = target.strip_prefix("gfx")?;
    (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')).then_some(target)
}

/// The device extras among `extras` (a METADATA's Provides-Extra), in their order.
pub fn device_extras<'a>(extras: impl IntoIterator<Item = &'a String>) -> impl Iterator<Item = DeviceExtra> {
    extras.into_iter().filter_map(|e| DeviceExtra::parse(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_extras_read_and_written() {
        assert_eq!(DeviceExtra::parse("device-gfx942"), Some(DeviceExtra::Processor("gfx942".into())));
        assert_eq!(DeviceExtra::parse("device-gfx110x"), Some(DeviceExtra::Group("gfx110x".into())));
        assert_eq!(DeviceExtra::parse("Device_All"), Some(DeviceExtra::All));
        assert_eq!(DeviceExtra::parse("device-gfx9-4-generic").unwrap().processor(), Some("gfx9-4-generic"));
        for not in ["devel", "device", "device-", "libraries"] {
            assert_eq!(DeviceExtra::parse(not), None, "{not}");
        }
        for text in ["device-gfx942", "device-gfx110x", "device-all", "device-gfx11"] {
            assert_eq!(DeviceExtra::parse(text).unwrap().to_string(), text);
        }
        assert!(DeviceExtra::of("gfx950") == *"DEVICE-GFX950");
        assert_eq!(DeviceExtra::All.target(), None);
        assert_eq!(DeviceExtra::of("gfx12-0").target(), Some("gfx12-0"));
        assert_eq!(device_project_target("rocm-sdk-device-gfx950"), Some("gfx950"));
        assert_eq!(device_project_target("amd-torch-device-gfx1201"), Some("gfx1201"));
        assert_eq!(device_project_target("nvidia-device-plugin"), None);
    }
}
