//! What `doctor` tells a person to run: a command that, pasted into a fresh shell where nothing
//! else is set up, repairs the environment. It runs the environment's own installer (its
//! Python's pip, or uv aimed at its Python when uv made it and pip is not in it), names the
//! index the distribution's release was published in (as its METADATA records it, or
//! `doctor --index-url`), and pins exactly. Where doctor cannot know a part, the fix says so in
//! words and shows the one value to fill in, never a command that would fail.

use crate::analysis::installed::{Distribution, InstallerFacts};

/// The fixes of one environment: its installer, and the index `--index-url` names, if given.
#[derive(Debug, Clone, Copy)]
pub struct Fixes<'a> {
    pub installer: &'a InstallerFacts,
    /// `doctor --index-url`: the index every fix installs from, over what METADATA records.
    pub index_url: Option<&'a str>,
    /// The one index the environment's distributions record, when they agree: for a fix of a
    /// distribution that records none (or cannot be read).
    pub recorded: Option<&'a str>,
}

impl<'a> Fixes<'a> {
    /// The fixes of an environment whose distributions are `distributions`.
    pub fn of(
        installer: &'a InstallerFacts,
        index_url: Option<&'a str>,
        distributions: &'a [Distribution],
    ) -> Fixes<'a> {
        let mut recorded: Vec<&str> = distributions.iter().filter_map(|d| d.index_url.as_deref()).collect();
        recorded.sort_unstable();
        recorded.dedup();
        Fixes { installer, index_url, recorded: if recorded.len() == 1 { Some(recorded[0]) } else { None } }
    }
}

/// What an install fix does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// Install (or upgrade to) what the requirements pin.
    Pinned,
    /// Reinstall exactly these, their dependencies left as they are (a damaged file).
    Reinstall,
}

/// The placeholder a fix shows where doctor cannot know the index.
const INDEX: &str = "INDEX";

impl Fixes<'_> {
    /// The command that installs `requirements` (`name[extras]==version`, exactly pinned) from
    /// the index of `from`'s release.
    pub fn install(&self, from: &[&Distribution], requirements: &[String], how: Install) -> String {
        self.try_install(from, requirements, how).unwrap_or_else(|words| words)
    }

    /// [`Fixes::install`]: the command when doctor knows all of it, else the words.
    pub fn try_install(&self, from: &[&Distribution], requirements: &[String], how: Install) -> Result<String, String> {
        let index = self.index_of(from);
        let command = self.command(index.unwrap_or(INDEX), requirements, how)?;
        match index {
            Some(_) => Ok(command),
            None => Err(format!(
                "the index {} came from is not recorded in its METADATA: run `{command}` with {INDEX} that index's URL (or run doctor --index-url URL for the command whole)",
                names(from)
            )),
        }
    }

    /// The index a fix installs `from`'s release from: `--index-url`, the one it records, or
    /// the one the environment's distributions record.
    fn index_of<'b>(&'b self, from: &[&'b Distribution]) -> Option<&'b str> {
        self.index_url.or_else(|| from.iter().find_map(|d| d.index_url.as_deref())).or(self.recorded)
    }

    /// A build of `d` for `processor`, which its own release does not have: from the index of
    /// a release for that processor (a per-architecture index), which only the person knows.
    /// A variant wheel's release has the variant in the same index, for an installer that
    /// picks variants to choose.
    pub fn build_for(&self, d: &Distribution, processor: &str) -> String {
        if let Some(label) = &d.variant {
            return self.variant_for(d, label, processor);
        }
        let requirement = [pinned(&d.name, None, &d.version)];
        match self.command(INDEX, &requirement, Install::Reinstall) {
            Ok(command) => format!(
                "install a build of {} {} with {processor} code: `{command}` with {INDEX} the URL of your release's {processor} index",
                d.name, d.version
            ),
            Err(why) => why,
        }
    }

    /// The variant of `d`'s release for this machine, in place of `label`: uv (with its wheel
    /// variants preview) reads the machine's GPU and picks it from the release's index.
    fn variant_for(&self, d: &Distribution, label: &str, processor: &str) -> String {
        let facts = self.installer;
        let index = self.index_of(&[d]);
        let uv = facts.uv.as_ref().map_or_else(|| "uv".to_string(), |u| u.display().to_string());
        let python = facts.python.as_ref().map_or_else(|| "PYTHON".to_string(), |p| p.display().to_string());
        let words = [
            uv.as_str(),
            "pip",
            "install",
            "--preview-features",
            "wheel-variants",
            "--python",
            &python,
            "--index-url",
            index.unwrap_or(INDEX),
            "--reinstall",
            "--no-deps",
            &pinned(&d.name, None, &d.version),
        ];
        let command = crate::html::shell_words(&words);
        let installed = format!("{}=={} is its variant `{label}`, which has no {processor} code", d.name, d.version);
        match (facts.uv.is_some() && facts.python.is_some(), index) {
            (true, Some(_)) => command,
            (_, None) => format!(
                "{installed}: on this machine, run `{command}` with {INDEX} the URL of the index its release was published in (uv picks the variant for the GPU)"
            ),
            (false, Some(_)) => format!(
                "{installed}: on this machine, with uv installed, run `{command}`{} (uv picks the variant for the GPU)",
                if facts.python.is_none() { " with PYTHON the environment's Python" } else { "" }
            ),
        }
    }

    /// The environment's installer with its arguments, or why it has none to run.
    fn command(&self, index: &str, requirements: &[String], how: Install) -> Result<String, String> {
        let facts = self.installer;
        let flags: &[&str] = match (how, self.uses_uv()) {
            (Install::Pinned, _) => &[],
            (Install::Reinstall, false) => &["--force-reinstall", "--no-deps"],
            (Install::Reinstall, true) => &["--reinstall", "--no-deps"],
        };
        let Some(python) = facts.python.as_ref().map(|p| p.display().to_string()) else {
            return Err(format!(
                "install {} with the installer of the Python whose site-packages this is, from its release's index (this directory names no Python: give doctor the environment or its Python)",
                requirements.join(" ")
            ));
        };
        let mut words: Vec<String> = if self.uses_uv() {
            let uv = facts.uv.as_ref().map_or_else(|| "uv".to_string(), |u| u.display().to_string());
            vec![uv, "pip".into(), "install".into(), "--python".into(), python]
        } else if facts.has_pip {
            vec![python, "-m".into(), "pip".into(), "install".into()]
        } else {
            return Err(format!(
                "this environment has no installer: pip is not in it and uv is not on PATH; install either (`{python} -m ensurepip`), then install {} from its release's index",
                requirements.join(" ")
            ));
        };
        words.extend(["--index-url".to_string(), index.to_string()]);
        words.extend(flags.iter().map(|f| f.to_string()));
        words.extend(requirements.iter().cloned());
        Ok(crate::html::shell_words(&words))
    }

    /// uv installs here: it made the environment and pip is not in it (uv is found or not).
    fn uses_uv(&self) -> bool {
        let facts = self.installer;
        !facts.has_pip && (facts.made_by_uv || facts.uv.is_some())
    }
}

/// `a==1`, or `a==1 and b==2`, for a sentence.
fn names(from: &[&Distribution]) -> String {
    let list: Vec<String> = from.iter().map(|d| format!("{}=={}", d.name, d.version)).collect();
    if list.is_empty() { "the distribution".to_string() } else { list.join(" and ") }
}

/// `name[extra]==version` (the extra when given).
pub fn pinned(name: &str, extra: Option<&str>, version: &str) -> String {
    match extra {
        Some(extra) => format!("{name}[{extra}]=={version}"),
        None => format!("{name}=={version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(index: Option<&str>) -> Distribution {
        Distribution {
            name: "demo-gpu".into(),
            version: "1.0+rocm7.1.0".into(),
            dist_info: "demo_gpu-1.0+rocm7.1.0.dist-info".into(),
            direct_url: None,
            installer: Some("pip".into()),
            index_url: index.map(str::to_string),
            variant: None,
            files: Vec::new(),
            provides_extra: Vec::new(),
            requires_dist: Vec::new(),
        }
    }

    fn facts(has_pip: bool, made_by_uv: bool) -> InstallerFacts {
        InstallerFacts {
            venv: Some("/v".into()),
            python: Some("/v/bin/python".into()),
            has_pip,
            made_by_uv,
            uv: Some("/opt/uv/bin/uv".into()),
        }
    }

    #[test]
    fn a_fix_runs_the_environments_own_installer_from_the_recorded_index() {
        let d = dist(Some("http://127.0.0.1:8000/simple/"));
        let req = [pinned("demo-gpu", Some("device-gfx942"), "1.0+rocm7.1.0")];
        let pip = Fixes { installer: &facts(true, false), index_url: None, recorded: None };
        assert_eq!(
            pip.install(&[&d], &req, Install::Pinned),
            "/v/bin/python -m pip install --index-url http://127.0.0.1:8000/simple/ 'demo-gpu[device-gfx942]==1.0+rocm7.1.0'"
        );
        let uv = Fixes { installer: &facts(false, true), index_url: Some("https://r.example/simple/"), recorded: None };
        assert_eq!(
            uv.install(&[&d], &["demo-gpu==1.0".to_string()], Install::Reinstall),
            "/opt/uv/bin/uv pip install --python /v/bin/python --index-url https://r.example/simple/ --reinstall --no-deps demo-gpu==1.0"
        );
    }

    #[test]
    fn what_doctor_cannot_know_is_said_in_words_with_the_one_value_to_fill_in() {
        let pip = Fixes { installer: &facts(true, false), index_url: None, recorded: None };
        let fix = pip.install(&[&dist(None)], &["demo-gpu==1.0".to_string()], Install::Pinned);
        assert!(fix.starts_with("the index demo-gpu==1.0+rocm7.1.0 came from is not recorded"), "{fix}");
        assert!(fix.contains("`/v/bin/python -m pip install --index-url INDEX demo-gpu==1.0`"), "{fix}");
        let none = InstallerFacts { uv: None, ..facts(false, false) };
        let fix = Fixes { installer: &none, index_url: Some("https://r/"), recorded: None }.install(
            &[],
            &["x==1".into()],
            Install::Pinned,
        );
        assert!(fix.starts_with("this environment has no installer"), "{fix}");
    }
}
