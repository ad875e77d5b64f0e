//! The set against other indexes: an upstream index's files (`--upstream`) and a real
//! resolver's choice (`--resolve`).

use std::collections::{BTreeMap, BTreeSet};

use super::facts::Dist;
use super::rules::by_project;
use super::{Finding, Kind, Severity};

/// Why a resolution could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum ResolutionError {
    #[error("--forbid `{pattern}`: {source}")]
    Forbid { pattern: String, source: globset::Error },
    #[error(transparent)]
    Globs(globset::Error),
    #[error("the set's index: {0}")]
    Site(crate::upstream::UpstreamError),
}

/// What a resolution means for the set whose index is `site`: a distribution of the set's
/// projects taken from elsewhere (`resolve-upstream`), a name `forbid` matches
/// (`resolve-forbidden`), or no resolution (`resolve-failed`); all errors.
pub fn resolution_findings(
    resolution: &crate::upstream::resolve::Resolution,
    site: &crate::upstream::Upstream,
    forbid: &[String],
) -> Result<Vec<Finding>, ResolutionError> {
    let mut findings = Vec::new();
    if let Some(message) = &resolution.failure {
        // uv searches `--extra-index-url` before `--index-url` and stops at the first index
        // that has a name: given the set's index first, as pip reads it, uv takes the upstream
        // releases of the set's names and an exact labelled pin cannot resolve.
        let site_given_first = resolution
            .command
            .windows(2)
            .any(|w| w[0] == "--index-url" && crate::index::directory_url(&w[1]) == site.url);
        let hint = if resolution.resolver.starts_with("uv") && site_given_first {
            "; uv searched the --extra-index-url indexes first, and stops at the first that has a name: the release page's uv command gives the set's index as --extra-index-url (check it with --site-first)"
        } else {
            ""
        };
        findings.push(Finding {
            kind: Kind::ResolveFailed,
            severity: Severity::Error,
            message: format!("{} found no resolution: {message}{hint}", resolution.resolver),
            files: Vec::new(),
        });
        return Ok(findings);
    }
    let mut globs = globset::GlobSetBuilder::new();
    for pattern in forbid {
        globs.add(
            globset::Glob::new(pattern)
                .map_err(|source| ResolutionError::Forbid { pattern: pattern.clone(), source })?,
        );
    }
    let globs = globs.build().map_err(ResolutionError::Globs)?;
    let by_index = resolution.resolver.starts_with("uv");
    let pages = crate::parallel::map(&resolution.distributions, |d| site.files(&d.name));
    for (d, page) in resolution.distributions.iter().zip(pages) {
        let ours = match page {
            Ok(files) => files,
            Err(e) => return Err(ResolutionError::Site(e)),
        };
        if let Some(files) = ours {
            // uv names the index a distribution came from; pip, the file.
            let from_site = if by_index {
                crate::index::directory_url(&d.source) == site.url
            } else {
                files.iter().any(|f| f.url == d.source)
            };
            if !from_site {
                let hint = if by_index {
                    "; uv searches --extra-index-url first and stops at the first index that has a name: give uv the set's index as --extra-index-url (the release page's uv command; --site-first checks it)"
                } else {
                    ""
                };
                findings.push(Finding {
                    kind: Kind::ResolveUpstream,
                    severity: Severity::Error,
                    message: format!(
                        "{} took {} {} from {}, not from the set's index {} (which has {} of it){hint}",
                        resolution.resolver,
                        d.name,
                        d.version,
                        d.source,
                        site.url,
                        crate::log::plural(files.len(), "file")
                    ),
                    files: Vec::new(),
                });
            }
        }
        let matched = globs.matches(&d.name);
        if let Some(&first) = matched.first() {
            findings.push(Finding {
                kind: Kind::ResolveForbidden,
                severity: Severity::Error,
                message: format!(
                    "{} took {} {} (from {}), which --forbid `{}` rules out; it came in through {}",
                    resolution.resolver,
                    d.name,
                    d.version,
                    d.source,
                    forbid[first],
                    resolution.chain(&d.name).join(" → ")
                ),
                files: Vec::new(),
            });
        }
    }
    Ok(findings)
}

/// An upstream file could meet requirement `r` as pip chooses: its version meets the
/// specifiers, it is not yanked (unless pinned exactly), and it is no pre-release unless the
/// specifiers name one.
pub(super) fn upstream_meets(r: &crate::wheel::requirement::Requirement, f: &crate::upstream::UpstreamFile) -> bool {
    let names_pre = r.specifiers().is_some_and(|s| s.iter().any(|s| s.version().any_prerelease()));
    r.admits(&f.version) && (!f.yanked || r.exact.is_some()) && (!f.version.any_prerelease() || names_pre)
}

/// The set's projects on an upstream index: `upstream-collision` where a requirement of the set
/// (or, for a project nothing requires, `pip install <name>` itself) could be met by an upstream
/// file; `upstream-shadow` where the upstream has the name but every requirement pins the set's
/// own label. An upstream that cannot be reached is an error finding, never a silent pass.
pub(super) fn upstream_findings(
    dists: &[Dist],
    sha256: &BTreeMap<std::path::PathBuf, Option<String>>,
    upstream: &crate::upstream::Upstream,
) -> Vec<Finding> {
    let projects: Vec<&str> = dists.iter().map(|d| d.project.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
    let pages = crate::parallel::map(&projects, |p| upstream.files(p));
    let projects_of_set = by_project(dists);
    // Who requires each project (other than itself), found in one pass.
    let mut required: BTreeMap<&str, Vec<Required>> = BTreeMap::new();
    for d in dists {
        for r in d.metadata.requires_dist.iter().filter(|r| r.package.as_str() != d.project) {
            required.entry(r.package.as_str()).or_default().push((d, r));
        }
    }
    let url = &upstream.url;
    let mut findings = Vec::new();
    let mut unreachable = Vec::new();
    for (project, page) in projects.iter().zip(pages) {
        match page {
            Ok(Some(files)) => {
                let ours = projects_of_set.get(project).cloned().unwrap_or_default();
                // A file the upstream has with the same name and bytes as the set's is the
                // set's own (the set checked against its own index, or a mirror): installers
                // take the same thing from either.
                let same = |f: &crate::upstream::UpstreamFile| {
                    ours.iter().any(|d| {
                        d.file_name == f.filename
                            && f.sha256.is_some()
                            && sha256.get(&d.path).and_then(|h| h.as_deref()) == f.sha256.as_deref()
                    })
                };
                let files: Vec<crate::upstream::UpstreamFile> = files.into_iter().filter(|f| !same(f)).collect();
                if files.is_empty() {
                    continue;
                }
                let requirements = required.get(project).cloned().unwrap_or_default();
                findings.extend(project_findings(project, &files, &ours, &requirements, url));
            }
            Ok(None) => {}
            Err(e) => unreachable.push(e),
        }
    }
    if let Some(first) = unreachable.first() {
        findings.push(Finding {
            kind: Kind::UpstreamUnreachable,
            severity: Severity::Error,
            message: format!(
                "{url}: {} of {} project page(s) could not be read, so nothing was compared for them (first: {first})",
                unreachable.len(),
                projects.len()
            ),
            files: Vec::new(),
        });
    }
    findings
}

/// A requirement of the set on another of its projects, with the file that states it.
type Required<'a> = (&'a Dist, &'a crate::wheel::requirement::Requirement);

/// One project of the set against the upstream's files of the same name.
fn project_findings(
    project: &str,
    files: &[crate::upstream::UpstreamFile],
    ours: &[&Dist],
    requirements: &[Required],
    url: &str,
) -> Vec<Finding> {
    let newest_ours = ours.iter().map(|d| &d.metadata.version.parsed).max();
    let our_files: Vec<String> = ours.iter().map(|d| d.path.display().to_string()).collect();
    let ours_text = newest_ours.map(|v| format!("{project} {v}")).unwrap_or_default();
    let mut findings = Vec::new();
    if requirements.is_empty() {
        // Installed by name: `pip install <project>` takes the highest version of every index.
        let bare = crate::wheel::requirement::Requirement::parse(project);
        if let Some(best) = newest_meeting(files, |f| upstream_meets(&bare, f))
            && newest_ours.is_none_or(|v| best.version > *v)
        {
            findings.push(Finding {
                kind: Kind::UpstreamCollision,
                severity: Severity::Error,
                message: format!(
                    "`pip install {project}` takes {url}'s {project} {} ({}), a higher version than the set's {}",
                    best.version,
                    best.filename,
                    newest_ours.map(|v| v.to_string()).unwrap_or_default()
                ),
                files: our_files.clone(),
            });
        }
    }
    for (d, r) in requirements {
        if let Some(best) = newest_meeting(files, |f| upstream_meets(r, f)) {
            findings.push(Finding {
                kind: Kind::UpstreamCollision,
                severity: Severity::Error,
                message: format!(
                    "{} {} requires `{}`, which {url}'s {project} {} ({}) meets: an installer can take it instead of the set's {ours_text}",
                    d.project, d.version, r.text, best.version, best.filename
                ),
                files: vec![d.path.display().to_string()],
            });
        }
    }
    // The release's pages and `check` print each project pinned exactly (`name==version`), but
    // a project the set holds at several versions can only be printed by name, and then the
    // highest version of every index wins: a command people copy would install another
    // index's build.
    let versions: BTreeSet<&str> = ours.iter().map(|d| d.version.as_str()).collect();
    if findings.is_empty() && versions.len() > 1 && !requirements.is_empty() {
        let bare = crate::wheel::requirement::Requirement::parse(project);
        if let Some(best) = newest_meeting(files, |f| upstream_meets(&bare, f))
            && newest_ours.is_none_or(|v| best.version > *v)
        {
            findings.push(Finding {
                kind: Kind::UpstreamShadow,
                severity: Severity::Error,
                message: format!(
                    "the set holds {project} at {} versions ({}), so the release's install commands name it without one, and they would take {url}'s {project} {} ({}), a higher version than the set's; publish one version of it per index",
                    versions.len(),
                    versions.iter().copied().collect::<Vec<_>>().join(", "),
                    best.version,
                    best.filename
                ),
                files: our_files.clone(),
            });
        }
    }
    if findings.is_empty() {
        let top = files.iter().map(|f| &f.version).max().map(|v| v.to_string()).unwrap_or_default();
        let how = if requirements.is_empty() {
            "the set's version is the higher one, so `pip install` takes it while no upstream release outgrows it"
                .to_string()
        } else {
            format!(
                "every requirement on it ({}) pins the set's own label, and the release's install commands pin it exactly, so installers take the set's",
                requirements.len()
            )
        };
        findings.push(Finding {
            kind: Kind::UpstreamShadow,
            severity: Severity::Warning,
            message: format!(
                "{url} also has {project} ({}, newest {top}): {how}",
                crate::log::plural(files.len(), "file")
            ),
            files: our_files,
        });
    }
    findings
}

/// The upstream file to name among those that meet a requirement: the highest version, a
/// Linux or pure wheel of it before other files.
fn newest_meeting(
    files: &[crate::upstream::UpstreamFile],
    meets: impl Fn(&crate::upstream::UpstreamFile) -> bool,
) -> Option<&crate::upstream::UpstreamFile> {
    let rank = |f: &crate::upstream::UpstreamFile| {
        let n = &f.filename;
        if n.ends_with(".whl") && n.contains("linux") {
            3
        } else if n.ends_with("-any.whl") {
            2
        } else if n.ends_with(".whl") {
            0
        } else {
            1
        }
    };
    files
        .iter()
        .filter(|f| meets(f))
        .max_by(|a, b| (&a.version, rank(a), &a.filename).cmp(&(&b.version, rank(b), &b.filename)))
}
