//! `Requires-Dist` lines ([PEP 508](https://peps.python.org/pep-0508/)), taken apart once: the
//! name, the exact pin if there is one, and the `extra` and `sys_platform` a marker names.
//!
//! Ex) `triton[tests] === 3.9.0+gitaad2a60d ; python_version >= "3.10"`

use super::name::PackageName;

/// One requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement<'a> {
    pub text: &'a str,
    /// The project name as written. Ex) `amd_aiter`
    pub name: &'a str,
    pub package: PackageName,
    /// Everything before the marker's `;`.
    pub spec: &'a str,
    /// Everything after the `;`, as written.
    pub marker: Option<&'a str>,
    /// The version an `==`/`===` clause names, whatever follows it. Ex) `3.9.0+gitaad2a60d`
    pub pinned: Option<String>,
    /// The requirement is exactly one `==`/`===` clause (not a range, not a wildcard).
    pub exact: Option<ExactPin<'a>>,
    /// The `extra == "…"` the marker names.
    pub extra: Option<String>,
    /// The `sys_platform == "…"` the marker names.
    pub sys_platform: Option<String>,
}

/// An exact pin: its operator, its version, and where the version stands in [`Requirement::spec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactPin<'a> {
    pub op: &'static str,
    pub version: &'a str,
    pub range: std::ops::Range<usize>,
}

impl<'a> Requirement<'a> {
    pub fn parse(text: &'a str) -> Requirement<'a> {
        let (spec, marker) = match text.split_once(';') {
            Some((s, m)) => (s, Some(m)),
            None => (text, None),
        };
        let name = project_name(text);
        let pinned = spec
            .split_once("==")
            .map(|(_, v)| v.trim_start_matches('=').trim().trim_end_matches(')').trim().to_string());
        let quoted_after = |key: &str| -> Option<String> {
            let marker = marker?;
            let at = marker.find(key)?;
            let rest = &marker[at + key.len()..];
            let start = rest.find(['"', '\''])? + 1;
            let end = rest[start..].find(['"', '\''])? + start;
            Some(rest[start..end].to_string())
        };
        Requirement {
            text,
            name,
            package: PackageName::new(name),
            spec,
            marker,
            pinned,
            exact: exact_pin(spec),
            extra: quoted_after("extra"),
            sys_platform: quoted_after("sys_platform"),
        }
    }

    /// The same requirement with its exact pin's version replaced (extras, spacing and marker
    /// kept). `None` without an exact pin.
    pub fn with_pinned_version(&self, version: &str) -> Option<String> {
        let pin = self.exact.as_ref()?;
        let mut out = String::with_capacity(self.text.len() + version.len());
        out.push_str(&self.spec[..pin.range.start]);
        out.push_str(version);
        out.push_str(&self.spec[pin.range.end..]);
        if let Some(m) = self.marker {
            out.push(';');
            out.push_str(m);
        }
        Some(out)
    }
}

/// The project name at the start of a requirement. Ex) `triton[x]==3.9.0; python_version>"3"` → `triton`
pub fn project_name(requirement: &str) -> &str {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(requirement.len());
    &requirement[..end]
}

/// An exact pin in a requirement's specifier part: the operator, the version and its byte range.
fn exact_pin(spec: &str) -> Option<ExactPin<'_>> {
    let (op, at) = if let Some(i) = spec.find("===") { ("===", i + 3) } else { ("==", spec.find("==")? + 2) };
    // Only a single clause is an exact pin (`==1.0,<2` is a range).
    if spec.contains(',') {
        return None;
    }
    let rest = &spec[at..];
    let start = at + (rest.len() - rest.trim_start().len());
    let len = spec[start..].find(|c: char| c.is_whitespace() || c == ')').unwrap_or(spec.len() - start);
    let version = &spec[start..start + len];
    if version.is_empty() || version.contains('*') {
        return None;
    }
    Some(ExactPin { op, version, range: start..start + len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_with_extras_and_markers() {
        let r = Requirement::parse(
            "rocm-sdk-device-gfx942==7.13.0; extra == \"device-gfx942\" and sys_platform == 'linux'",
        );
        assert_eq!(r.package.as_str(), "rocm-sdk-device-gfx942");
        assert_eq!(r.pinned.as_deref(), Some("7.13.0"));
        assert_eq!(r.exact.as_ref().map(|p| p.version), Some("7.13.0"));
        assert_eq!(r.extra.as_deref(), Some("device-gfx942"));
        assert_eq!(r.sys_platform.as_deref(), Some("linux"));
    }

    #[test]
    fn exact_pins_keep_extras_spacing_and_markers_when_rewritten() {
        let r = Requirement::parse("triton[tests] === 3.9.0+gitaad2a60d ; python_version >= \"3.10\"");
        assert_eq!(r.name, "triton");
        assert_eq!(r.exact.as_ref().unwrap().op, "===");
        assert_eq!(
            r.with_pinned_version("3.9.0+gitaad2a60d.rocm10.1.0").unwrap(),
            "triton[tests] === 3.9.0+gitaad2a60d.rocm10.1.0 ; python_version >= \"3.10\""
        );
        assert_eq!(Requirement::parse("amd_aiter (==0.1.29)").exact.unwrap().version, "0.1.29");
        assert!(Requirement::parse("triton==3.*").exact.is_none());
        assert!(Requirement::parse("triton==3.0,<4").exact.is_none());
        assert_eq!(Requirement::parse("triton==3.0,<4").pinned.as_deref(), Some("3.0,<4"));
        assert!(Requirement::parse("triton>=3.0").pinned.is_none());
    }
}
