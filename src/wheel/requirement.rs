//! `Requires-Dist` lines ([PEP 508](https://peps.python.org/pep-0508/)), taken apart once, where
//! METADATA is read: the name, the exact pin if there is one, and the marker as `pep508_rs`
//! reads it (every `extra` it names, its `sys_platform`, evaluated for a set of extras). The
//! text is kept as written, so that a pin rewritten keeps the author's spacing; a line PEP 508
//! rejects is still read as far as it goes, and says why it is rejected.
//!
//! Ex) `triton[tests] === 3.9.0+gitaad2a60d ; python_version >= "3.10"`

use std::str::FromStr;

use super::name::PackageName;

/// One requirement, parsed once where METADATA is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// As written. Ex) `triton[tests] === 3.9.0+gitaad2a60d ; python_version >= "3.10"`
    pub text: String,
    /// The project name as written. Ex) `amd_aiter`
    pub name: String,
    pub package: PackageName,
    /// Where the marker's `;` stands in `text`, if there is one.
    marker_at: Option<usize>,
    /// The version an `==`/`===` clause names, whatever follows it. Ex) `3.9.0+gitaad2a60d`
    pub pinned: Option<String>,
    /// The requirement is exactly one `==`/`===` clause (not a range, not a wildcard).
    pub exact: Option<ExactPin>,
    /// The first of [`Requirement::marker_extras`].
    pub extra: Option<String>,
    /// Every extra the marker tests with `extra == "…"` (`extra == "a" or extra == "b"`),
    /// normalised as PEP 685 compares them. Ex) `device-gfx942`
    pub marker_extras: Vec<String>,
    /// The `sys_platform == "…"` the marker names.
    pub sys_platform: Option<String>,
    /// The marker as PEP 508 reads it; `None` without one or when the line is rejected.
    marker_tree: Option<pep508_rs::MarkerTree>,
    /// Why PEP 508 rejects the line (what an installer would refuse), if it does.
    pub problem: Option<String>,
}

/// An exact pin: its operator, its version, and where the version stands in [`Requirement::spec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactPin {
    pub op: &'static str,
    pub version: String,
    pub range: std::ops::Range<usize>,
}

impl Requirement {
    pub fn parse(text: &str) -> Requirement {
        let marker_at = text.find(';');
        let (spec, marker) = match marker_at {
            Some(at) => (&text[..at], Some(&text[at + 1..])),
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
        let parsed = <pep508_rs::Requirement as std::str::FromStr>::from_str(text);
        let (marker_tree, problem) = match parsed {
            Ok(r) => ((!r.marker.is_true()).then_some(r.marker), None),
            Err(e) => (None, Some(e.message.to_string())),
        };
        let (marker_extras, sys_platform) = match &marker_tree {
            Some(tree) => marker_facts(tree),
            // Rejected by PEP 508: the marker read as far as it goes.
            None => (quoted_after("extra").into_iter().collect(), quoted_after("sys_platform")),
        };
        Requirement {
            text: text.to_string(),
            name: name.to_string(),
            package: PackageName::new(name),
            marker_at,
            pinned,
            exact: exact_pin(spec),
            extra: marker_extras.first().cloned(),
            marker_extras,
            sys_platform,
            marker_tree,
            problem,
        }
    }

    /// Whether the marker names `extra` (compared as PEP 685 normalises extras).
    pub fn under_extra(&self, extra: &str) -> bool {
        let wanted = normalized_extra(extra);
        self.marker_extras.contains(&wanted)
    }

    /// Whether the requirement is active when `extras` are asked for, whatever the rest of the
    /// environment (`python_version`, `sys_platform`) is: its marker evaluated for those extras.
    pub fn active_with(&self, extras: &std::collections::BTreeSet<String>) -> bool {
        match &self.marker_tree {
            Some(tree) => {
                let names: Vec<pep508_rs::ExtraName> =
                    extras.iter().filter_map(|e| pep508_rs::ExtraName::from_str(e).ok()).collect();
                tree.evaluate_extras(&names)
            }
            None => self.extra.as_ref().is_none_or(|e| extras.contains(e)),
        }
    }

    /// Everything before the marker's `;`.
    pub fn spec(&self) -> &str {
        &self.text[..self.marker_at.unwrap_or(self.text.len())]
    }

    /// Everything after the `;`, as written.
    pub fn marker(&self) -> Option<&str> {
        self.marker_at.map(|at| &self.text[at + 1..])
    }

    /// Its version specifiers (PEP 440), `None` when they cannot be read; no specifier at all
    /// is an empty set, which every version meets. Ex) `nixl (>=1.5, <2)` → `>=1.5, <2`
    pub fn specifiers(&self) -> Option<pep440_rs::VersionSpecifiers> {
        let spec = self.spec();
        let after_name = &spec[project_name(spec).len()..];
        let after_extras = match after_name.trim_start().strip_prefix('[') {
            Some(rest) => rest.split_once(']')?.1,
            None => after_name,
        };
        let text = after_extras.trim().trim_start_matches('(').trim_end_matches(')').trim();
        std::str::FromStr::from_str(text).ok()
    }

    /// `version` meets its specifiers (PEP 440: `==1.5.2` admits `1.5.2+rocm7.1`, `==1.5.2+rocm7.1`
    /// only that label). A requirement whose specifiers cannot be read is met by nothing.
    pub fn admits(&self, version: &pep440_rs::Version) -> bool {
        self.specifiers().is_some_and(|s| s.contains(version))
    }

    /// The extras it asks for. Ex) `cuda-toolkit[cublas,cupti]` → `cublas`, `cupti`
    pub fn extras(&self) -> impl Iterator<Item = &str> {
        let spec = self.spec();
        let inside = spec.split_once('[').and_then(|(_, e)| e.split_once(']')).map(|(e, _)| e).unwrap_or("");
        inside.split(',').map(str::trim).filter(|e| !e.is_empty())
    }

    /// The same requirement with its exact pin's version replaced (extras, spacing and marker
    /// kept). `None` without an exact pin.
    pub fn with_pinned_version(&self, version: &str) -> Option<String> {
        let pin = self.exact.as_ref()?;
        let spec = self.spec();
        let mut out = String::with_capacity(self.text.len() + version.len());
        out.push_str(&spec[..pin.range.start]);
        out.push_str(version);
        out.push_str(&spec[pin.range.end..]);
        if let Some(m) = self.marker() {
            out.push(';');
            out.push_str(m);
        }
        Some(out)
    }
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Every project `requires` names, directly or through the requirements of the projects it
/// names, as `requires_of` gives them (every requirement counts, extras included): the projects an
/// install of them brings. Ex) `torch` → `torch`, `triton`, `rocm-sdk-core`, …
pub fn required_projects<'a>(
    requires: &'a [Requirement],
    requires_of: impl Fn(&PackageName) -> Vec<&'a [Requirement]>,
) -> std::collections::BTreeSet<PackageName> {
    let mut found = std::collections::BTreeSet::new();
    let mut queue: Vec<&PackageName> = requires.iter().map(|r| &r.package).collect();
    while let Some(name) = queue.pop() {
        if found.insert(name.clone()) {
            for list in requires_of(name) {
                queue.extend(list.iter().map(|r| &r.package));
            }
        }
    }
    found
}

/// Every extra a marker tests for equality, normalised, and the first `sys_platform` it
/// compares with `==`.
fn marker_facts(tree: &pep508_rs::MarkerTree) -> (Vec<String>, Option<String>) {
    use pep508_rs::{ExtraOperator, MarkerExpression, MarkerOperator, MarkerValueString};
    let mut extras = Vec::new();
    let mut sys_platform = None;
    for expression in tree.to_dnf().into_iter().flatten() {
        match expression {
            MarkerExpression::Extra { operator: ExtraOperator::Equal, name } => {
                let name = normalized_extra(&name.to_string());
                if !extras.contains(&name) {
                    extras.push(name);
                }
            }
            MarkerExpression::String {
                key: MarkerValueString::SysPlatform | MarkerValueString::SysPlatformDeprecated,
                operator: MarkerOperator::Equal,
                value,
            } if sys_platform.is_none() => sys_platform = Some(value),
            _ => {}
        }
    }
    (extras, sys_platform)
}

/// An extra's name as PEP 685 compares it (lower case, runs of `-_.` as one `-`); a name it
/// rejects as written. Ex) `Device_GFX942` → `device-gfx942`
pub fn normalized_extra(extra: &str) -> String {
    pep508_rs::ExtraName::from_str(extra).map(|e| e.to_string()).unwrap_or_else(|_| extra.to_string())
}

/// The project name at the start of a requirement. Ex) `triton[x]==3.9.0; python_version>"3"` → `triton`
pub fn project_name(requirement: &str) -> &str {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(requirement.len());
    &requirement[..end]
}

/// An exact pin in a requirement's specifier part: the operator, the version and its byte range.
fn exact_pin(spec: &str) -> Option<ExactPin> {
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
    Some(ExactPin { op, version: version.to_string(), range: start..start + len })
}

/// Why a text is not one requirement by name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByNameError {
    #[error("not a PEP 508 requirement: {0}")]
    NotPep508(String),
    /// `name @ https://…`: installers fetch it from the URL, not from an index.
    #[error("names a URL")]
    Url,
}

/// A PEP 508 requirement by name (not `name @ url`), in its normal form.
/// Ex) `rocm-torch [device-gfx950]` → `rocm-torch[device-gfx950]`
pub fn by_name(text: &str) -> Result<String, ByNameError> {
    let parsed = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(text)
        .map_err(|e| ByNameError::NotPep508(e.message.to_string()))?;
    if matches!(parsed.version_or_url, Some(pep508_rs::VersionOrUrl::Url(_))) {
        return Err(ByNameError::Url);
    }
    Ok(parsed.to_string())
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
        assert_eq!(r.exact.as_ref().map(|p| p.version.as_str()), Some("7.13.0"));
        assert_eq!(r.extra.as_deref(), Some("device-gfx942"));
        assert_eq!(r.sys_platform.as_deref(), Some("linux"));
        assert!(r.problem.is_none());
    }

    #[test]
    fn every_extra_of_a_marker_is_seen_and_markers_are_evaluated_for_extras() {
        let r = Requirement::parse(r#"hip-runtime==7.1; extra == "device-gfx942" or extra == "Device_All""#);
        assert_eq!(r.marker_extras, ["device-all", "device-gfx942"]);
        assert!(r.under_extra("device-gfx942") && r.under_extra("device_all") && !r.under_extra("device-gfx950"));
        let active = |e: &[&str]| e.iter().map(|s| s.to_string()).collect();
        assert!(r.active_with(&active(&["device-all"])));
        assert!(!r.active_with(&active(&["tests"])));
        let anded = Requirement::parse(r#"x; extra == "a" and python_version >= "3.10""#);
        assert!(anded.active_with(&active(&["a"])), "the rest of the environment is not judged");
        assert!(Requirement::parse("x").active_with(&active(&[])));
        let negated = Requirement::parse(r#"x; extra != "cpu""#);
        assert!(negated.marker_extras.is_empty() && negated.active_with(&active(&[])));
        assert!(!negated.active_with(&active(&["cpu"])));
    }

    #[test]
    fn a_line_pep_508_rejects_says_why_and_is_read_as_far_as_it_goes() {
        let r = Requirement::parse(r#"rocm==7.1; extra == "a" andd sys_platform == "linux""#);
        assert!(r.problem.is_some(), "{r:?}");
        assert_eq!(r.package.as_str(), "rocm");
        assert_eq!(r.extra.as_deref(), Some("a"));
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

    #[test]
    fn specifiers_admit_versions_as_pep_440_says() {
        let v = |s: &str| <pep440_rs::Version as std::str::FromStr>::from_str(s).unwrap();
        let labelled = Requirement::parse("nixl-rocm==1.5.2+rocm10.1.0; extra == \"x\"");
        assert!(labelled.admits(&v("1.5.2+rocm10.1.0")));
        assert!(!labelled.admits(&v("1.5.2+rocm7.14.0")));
        let bare = Requirement::parse("nixl==1.5.2");
        assert!(bare.admits(&v("1.5.2+rocm7.14.0")), "a pin without a label admits every label");
        assert!(bare.admits(&v("1.5.2")));
        assert!(!bare.admits(&v("1.5.1")));
        let range = Requirement::parse("amd_aiter[x] (>=0.1, <0.2)");
        assert!(range.admits(&v("0.1.29")));
        assert!(!range.admits(&v("0.2")));
        assert!(Requirement::parse("nixl").admits(&v("9")));
        assert!(!Requirement::parse("nixl ==== 1").admits(&v("1")));
    }
}
