//! What a policy does with one external library: the one rule that both the verdict (which
//! libraries a policy would graft) and the reports (what happens to each) follow. Its own
//! module so that the verdict and the judgement both stand on it, neither on the other.

use super::Policy;
use crate::analysis::linkage::ExternalLib;
use crate::analysis::site::Provider;

/// What happens to one external library, relative to the policy the wheel gets once repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Another wheel provides it (`--with-wheels`).
    Dependency(Provider),
    /// The environment provides it (a ROCm library, `--exclude`, the GPU driver), and why.
    Excluded(String),
    /// `libpythonX.Y.so`: never vendored; repair removes the dependency.
    LibPython,
    /// The policy lets the system provide it.
    Whitelisted { policy: String },
    /// The policy does not allow it, and it was found: repair would copy it into the wheel.
    Vendor { policy: String },
    /// Not in the wheel and not found.
    NotFound,
}

impl Disposition {
    /// Ex) `whitelisted`
    pub fn kind(&self) -> &'static str {
        match self {
            Disposition::Dependency(_) => "dependency",
            Disposition::Excluded(_) => "excluded",
            Disposition::LibPython | Disposition::NotFound => "not-found",
            Disposition::Whitelisted { .. } => "whitelisted",
            Disposition::Vendor { .. } => "vendor",
        }
    }

    /// What a policy does with an external library: the one rule that both the verdict (which
    /// libraries a policy would graft) and the reports (what happens to each) follow.
    pub fn of(lib: &ExternalLib, policy: &Policy) -> Disposition {
        if let Some(provider) = &lib.provided_by {
            Disposition::Dependency(provider.clone())
        } else if let Some(why) = &lib.excluded {
            Disposition::Excluded(why.clone())
        } else if lib.libpython {
            Disposition::LibPython
        } else if policy.lib_whitelist.contains(&lib.soname) {
            Disposition::Whitelisted { policy: policy.name.clone() }
        } else if lib.path.is_some() {
            Disposition::Vendor { policy: policy.name.clone() }
        } else {
            Disposition::NotFound
        }
    }

    /// Whether the policy would graft the library (vendor it, or fail for want of it).
    pub fn is_grafted(&self) -> bool {
        matches!(self, Disposition::LibPython | Disposition::Vendor { .. } | Disposition::NotFound)
    }
}
