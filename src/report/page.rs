//! The release as people see it: a page per architecture index (`release.html`, written by
//! `index` beside the PEP 503 pages, which stay exactly what installers read) and a landing page
//! across architectures (`site`). Each page is one static HTML file with its CSS inside: no
//! script, no external asset, no timestamp; it reads on a phone (rows become cards below 760 px)
//! and on a desktop.
//!
//! The page is a function of [`ReleasePage`], which `index` also writes as `release.json`: `site`
//! renders every architecture's page again from it, for the URL the whole site is served at.
//!
//! Why one file: the page's data ([`ReleasePage`], also `release.json`) and the views
//! the templates render from it; the HTML itself is in `src/templates/`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::human_bytes;
use crate::check::{DistVariant, Finding, Severity, Survey};
use crate::extra::{DeviceExtra, device_extras};
use crate::wheel::variant::NULL_LABEL;

/// The upstream index installers take everything else from.
pub const PYPI: &str = "https://pypi.org/simple";

/// What one architecture's page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleasePage {
    /// Ex) `gfx950`
    pub title: String,
    /// Where the index is served, as a directory URL. Ex) `https://rocm.example/gfx950/`
    pub site_url: String,
    /// ROCm versions the set's labels and metapackages name. Ex) [`10.1.0`]
    pub rocm: Vec<String>,
    /// The projects to install: the metapackages, else the projects nothing else requires.
    pub install: Vec<String>,
    pub files: Vec<PageFile>,
    pub check: PageCheck,
    /// `index --gpu-names`: the GPUs a processor serves, over `policies/gpu-names.json`; kept
    /// in `release.json` so that `site` renders the page the same.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_names: BTreeMap<String, String>,
    /// A multi-architecture index (`wheelfix split`): per processor, the host with its extra.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRow>,
    /// A multi-architecture index: per processor, what installs the whole release for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuInstall>,
}

/// What installs the whole release for one GPU processor from a multi-architecture index:
/// the selector's extra where a selector gathers the set, else every host with its extra.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInstall {
    /// Ex) `gfx942`
    pub target: String,
    /// Ex) [`rocm[device-gfx942]==7.1.0`]
    pub install: Vec<String>,
    /// The download size of the device wheels it brings.
    pub size: u64,
    /// The projects with device code for other GPUs only, which this GPU's command does not
    /// install. Ex) [`vapoursynth-nlm-hip`]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_for: Vec<String>,
}

/// What installs one processor's device code from a multi-architecture index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRow {
    /// Ex) `gfx942`
    pub target: String,
    /// Ex) `torch[device-gfx942]`
    pub install: String,
    /// The device wheels' download size.
    pub size: u64,
    pub files: Vec<String>,
}

/// One file of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageFile {
    pub project: String,
    pub file_name: String,
    /// The link, relative to the page (or absolute with `--base-url`).
    pub href: String,
    /// The public version. Ex) `2.15.0a0`
    pub public: String,
    /// The local label. Ex) `git31a77fc.rocm10.1.0`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Ex) `manylinux_2_28_x86_64`; `None` for an sdist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `measured` or `claimed` (see [`crate::check::TagFacts`]), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    #[serde(default)]
    pub tag_note: String,
    /// GPU processors, with the uncompressed bytes of their bundled code objects where known.
    pub gpu: Vec<(String, Option<u64>)>,
    pub size: u64,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    pub metapackage: bool,
    /// A variant wheel (PEP 825): its label, properties and providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<DistVariant>,
}

/// `check`'s summary for the directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCheck {
    pub errors: usize,
    pub warnings: usize,
    /// (severity, kind, message)
    pub findings: Vec<(String, String, String)>,
}

impl ReleasePage {
    /// The page of an index built from `survey`'s distributions; `href` gives each file's link.
    pub fn new(title: &str, site_url: &str, survey: &Survey, href: impl Fn(&str, &str) -> String) -> ReleasePage {
        let mut files: Vec<PageFile> = survey
            .dists
            .iter()
            .map(|d| {
                let (public, local) = match d.version.split_once('+') {
                    Some((p, l)) => (p.to_string(), Some(l.to_string())),
                    None => (d.version.clone(), None),
                };
                let gpu = d.gpu_targets.iter().map(|t| (t.clone(), d.device_bytes.get(t).copied())).collect();
                PageFile {
                    project: d.project.clone(),
                    href: href(&d.project, &d.file_name),
                    file_name: d.file_name.clone(),
                    public,
                    local,
                    tag: d.tag.as_ref().map(|t| t.tag.clone()),
                    basis: d.tag.as_ref().map(|t| t.basis.to_string()),
                    tag_note: d.tag.as_ref().map(|t| t.note.clone()).unwrap_or_default(),
                    gpu,
                    size: d.size,
                    sha256: d.sha256.clone().unwrap_or_default(),
                    requires_python: d.requires_python.clone(),
                    metapackage: d.metapackage,
                    variant: d.variant.clone(),
                }
            })
            .collect();
        files.sort_by(|a, b| (&a.project, &a.file_name).cmp(&(&b.project, &b.file_name)));
        files.dedup_by(|a, b| a.file_name == b.file_name && a.sha256 == b.sha256);
        let devices = device_rows(survey);
        let gpus = gpu_installs(survey, &devices);
        let mut install = to_install(survey);
        if install.is_empty() || (!devices.is_empty() && !survey.dists.iter().any(|d| d.metapackage)) {
            // A split set: every host with all its device code (the table names each GPU's).
            let hosts: BTreeSet<String> = devices
                .iter()
                .filter_map(|r| r.install.split_once('['))
                .map(|(h, _)| pinned(survey, h, Some(&DeviceExtra::All)))
                .collect();
            if !hosts.is_empty() {
                install = hosts.into_iter().collect();
            }
        }
        ReleasePage {
            title: title.to_string(),
            site_url: site_url.to_string(),
            rocm: rocm_versions(survey),
            install,
            files,
            check: page_check(&survey.findings),
            gpu_names: BTreeMap::new(),
            devices,
            gpus,
        }
    }

    /// The page, as HTML; `landing`: the landing page's URL relative to this page, when it is
    /// one architecture of a site (`../index.html`).
    pub fn to_html(&self, landing: Option<&str>) -> String {
        let projects: BTreeSet<&str> = self.files.iter().map(|f| f.project.as_str()).collect();
        let files: Vec<FileView> = self.files.iter().map(FileView::new).collect();
        // With variant wheels, the processors that have a variant: the fat wheels (the null
        // variant, the plain copy) list every processor, and only the variants choose one.
        let has_variants = self.files.iter().any(|f| f.variant.as_ref().is_some_and(|v| v.label != NULL_LABEL));
        let targets: BTreeSet<&str> = self
            .files
            .iter()
            .filter(|f| !has_variants || f.variant.as_ref().is_some_and(|v| v.label != NULL_LABEL))
            .flat_map(|f| f.gpu.iter().map(|(t, _)| crate::gpu::targets::processor_of(t)))
            .collect();
        let devices: Vec<serde_json::Value> = self
            .devices
            .iter()
            .map(|r| {
                serde_json::json!({
                    "target": r.target,
                    "serves": self.serves(&r.target),
                    "pip": pip_command(&self.site_url, std::slice::from_ref(&r.install)),
                    "size": human_bytes(r.size),
                })
            })
            .collect();
        let gpus: Vec<serde_json::Value> = crate::gpu::targets::natural_order(targets)
            .into_iter()
            .map(|t| serde_json::json!({"target": t, "serves": self.serves(t)}))
            .collect();
        let mut used_anchors: BTreeSet<String> = self.gpus.iter().map(|g| g.target.clone()).collect();
        let gpu_rows: Vec<serde_json::Value> = self
            .gpus
            .iter()
            .map(|g| {
                let mut view = self.gpu_view(g);
                view["anchors"] = serde_json::json!(product_anchors(self.serves(&g.target), &mut used_anchors));
                view["family"] = serde_json::json!(crate::plan::kpack::family(&g.target));
                view
            })
            .collect();
        crate::html::render_page(
            "release.html",
            STYLE,
            serde_json::json!({
                "page_title": format!("{} — release", self.title),
                "landing": landing,
                "gpus": gpus,
                "has_variants": has_variants,
                "title": self.title,
                "rocm": self.rocm,
                "projects": projects.len(),
                "files": files,
                "check": CheckView::new(&self.check),
                "pip": pip_command(&self.site_url, &self.install),
                "devices": devices,
                "gpu_rows": gpu_rows,
                "glibc": glibc_floor(&self.files),
                "pythons": pythons(&self.files),
                "uv": uv_command(&self.site_url, &self.install),
                "variants": self.variant_views(),
            }),
        )
    }

    /// Per project and version with variant wheels: the uv command that chooses among them, how
    /// uv learns the machine's GPU, and what each variant holds (the null variant last).
    fn variant_views(&self) -> Vec<serde_json::Value> {
        let version_of = |f: &PageFile| match &f.local {
            Some(l) => format!("{}+{l}", f.public),
            None => f.public.clone(),
        };
        let mut releases: BTreeMap<(&str, String), Vec<&PageFile>> = BTreeMap::new();
        for f in self.files.iter().filter(|f| f.variant.is_some()) {
            releases.entry((&f.project, version_of(f))).or_default().push(f);
        }
        let plain: BTreeSet<(&str, String)> =
            self.files.iter().filter(|f| f.variant.is_none()).map(|f| (f.project.as_str(), version_of(f))).collect();
        releases
            .into_iter()
            .map(|((project, version), mut files)| {
                files.sort_by_key(|f| {
                    let label = &f.variant.as_ref().expect("variant files").label;
                    (label == NULL_LABEL, label.clone())
                });
                let providers: BTreeSet<&String> =
                    files.iter().flat_map(|f| f.variant.as_ref().expect("variant files").providers.iter()).collect();
                let rows: Vec<serde_json::Value> = files
                    .iter()
                    .map(|f| {
                        let v = f.variant.as_ref().expect("variant files");
                        serde_json::json!({
                            "label": v.label,
                            "properties": v.properties,
                            "gpu": f.gpu.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
                            "size": human_bytes(f.size),
                            "file_name": f.file_name,
                        })
                    })
                    .collect();
                let requirement = format!("{project}=={version}");
                let has_null = files.iter().any(|f| f.variant.as_ref().is_some_and(|v| v.label == NULL_LABEL));
                serde_json::json!({
                    "project": project,
                    "version": version,
                    "uv": uv_variants_command(&self.site_url, &requirement),
                    "providers": providers,
                    "plain": plain.contains(&(project, version.clone())),
                    "null": has_null,
                    "rows": rows,
                })
            })
            .collect()
    }

    /// The AMD GPUs a processor serves: `index --gpu-names`, else `policies/gpu-names.json`.
    fn serves(&self, target: &str) -> Option<&String> {
        self.gpu_names.get(target).or_else(|| gpu_names().get(target))
    }

    /// The files one GPU's command installs, as far as the page knows them: every file but the
    /// device wheels of other GPUs and the projects that have device code for other GPUs only
    /// (which its extra does not pull). Their tags give the command's glibc floor and Pythons.
    fn pulled_for(&self, target: &str) -> Vec<PageFile> {
        let not_for: BTreeSet<&str> = self
            .gpus
            .iter()
            .filter(|g| g.target == target)
            .flat_map(|g| g.not_for.iter().map(String::as_str))
            .collect();
        // The device wheels of this GPU's rows (`true`) or of the other GPUs' (`false`).
        let devices = |own: bool| -> BTreeSet<&str> {
            let rows = self.devices.iter().filter(|r| (r.target == target) == own);
            rows.flat_map(|r| r.files.iter().map(String::as_str)).collect()
        };
        let (own_devices, other_devices) = (devices(true), devices(false));
        self.files
            .iter()
            .filter(|f| !not_for.contains(f.project.as_str()))
            .filter(|f| own_devices.contains(f.file_name.as_str()) || !other_devices.contains(f.file_name.as_str()))
            .cloned()
            .collect()
    }

    /// What one GPU's command needs of the machine, for its row or card.
    fn gpu_view(&self, g: &GpuInstall) -> serde_json::Value {
        let pulled = self.pulled_for(&g.target);
        serde_json::json!({
            "target": g.target,
            "serves": self.serves(&g.target),
            "pip": pip_command(&self.site_url, &g.install),
            "uv": uv_command(&self.site_url, &g.install),
            "size": human_bytes(g.size),
            "glibc": glibc_floor(&pulled)["version"],
            "pythons": command_pythons(&pulled),
            "not_for": g.not_for,
        })
    }

    /// Each GPU's command on the landing page, with its anchors.
    fn gpu_cards(&self, used: &mut BTreeSet<String>) -> Vec<serde_json::Value> {
        self.gpus
            .iter()
            .map(|g| {
                let id = (!used.contains(&g.target)).then(|| g.target.clone());
                if let Some(id) = &id {
                    used.insert(id.clone());
                }
                let mut view = self.gpu_view(g);
                view["id"] = serde_json::json!(id);
                view["anchors"] = serde_json::json!(product_anchors(self.serves(&g.target), used));
                view
            })
            .collect()
    }

    /// The machine-readable page (`release.json`), which `site` renders again.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serialises") + "\n"
    }
}

/// The landing page across architecture indexes: each architecture's ROCm version, install
/// commands and check summary, linked to its page, and every project's version per architecture.
pub fn landing_html(title: &str, sites: &[(String, ReleasePage)]) -> String {
    let rocm: BTreeSet<&String> = sites.iter().flat_map(|(_, p)| p.rocm.iter()).collect();
    let mut rocm: Vec<&String> = rocm.into_iter().collect();
    rocm.sort_by(|a, b| crate::policy::verdict::compare_versions(a, b));
    let mut used_anchors: BTreeSet<String> = BTreeSet::new();
    let views: Vec<serde_json::Value> = sites
        .iter()
        .map(|(dir, page)| {
            let targets: BTreeSet<&str> =
                page.files.iter().flat_map(|f| f.gpu.iter().map(|(t, _)| t.as_str())).collect();
            let targets = if targets.is_empty() {
                "none".to_string()
            } else {
                let named = targets.into_iter().map(|t| match page.serves(t) {
                    Some(gpus) => format!("{t} (AMD {gpus})"),
                    None => t.to_string(),
                });
                named.collect::<Vec<_>>().join(", ")
            };
            // A per-architecture index is its GPU's anchor (`#gfx942`, `#mi300x`).
            let arch = crate::gpu::targets::is_known_processor(dir)
                && page.gpus.is_empty()
                && used_anchors.insert(dir.clone());
            let site_anchors = if arch { product_anchors(page.serves(dir), &mut used_anchors) } else { Vec::new() };
            // The command for every GPU, said so, with what it downloads.
            let every =
                !page.gpus.is_empty() && page.install.iter().any(|i| i.contains(&format!("[{}]", DeviceExtra::All)));
            let all_size: u64 = page.gpus.iter().map(|g| g.size).sum();
            serde_json::json!({
                "path": crate::index::url_quote(dir),
                "title": page.title,
                "rocm": page.rocm,
                "files": page.files.len(),
                "targets": targets,
                "check": CheckView::new(&page.check),
                "gpus": page.gpu_cards(&mut used_anchors),
                "id": arch.then_some(dir),
                "anchors": site_anchors,
                "every": every.then(|| serde_json::json!({"gpus": page.gpus.len(), "size": human_bytes(all_size)})),
                "pip": pip_command(&page.site_url, &page.install),
                "uv": uv_command(&page.site_url, &page.install),
            })
        })
        .collect();
    // Every project's version per architecture: a mismatch stands out.
    let mut versions: BTreeMap<&str, BTreeMap<&str, BTreeSet<String>>> = BTreeMap::new();
    for (dir, page) in sites {
        for f in &page.files {
            let version = match &f.local {
                Some(l) => format!("{}+{l}", f.public),
                None => f.public.clone(),
            };
            versions.entry(&f.project).or_default().entry(dir.as_str()).or_default().insert(version);
        }
    }
    let matrix: Vec<serde_json::Value> = versions
        .iter()
        .map(|(project, by_site)| {
            let cells: Vec<Option<String>> = sites
                .iter()
                .map(|(dir, _)| by_site.get(dir.as_str()).map(|v| v.iter().cloned().collect::<Vec<_>>().join(", ")))
                .collect();
            serde_json::json!({"project": project, "cells": cells})
        })
        .collect();
    crate::html::render_page(
        "landing.html",
        STYLE,
        serde_json::json!({
            "page_title": title,
            "title": title,
            "rocm": rocm,
            "sites": views,
            "matrix": matrix,
        }),
    )
}

use crate::policy::gpus::names as gpu_names;

/// Anchors for the products a GPU row serves, each once on a page. Ex) `Instinct MI300X,
/// Instinct MI300A` → [`instinct-mi300x`, `mi300x`, `instinct-mi300a`, `mi300a`]
fn product_anchors(serves: Option<&String>, used: &mut BTreeSet<String>) -> Vec<String> {
    let mut anchors = Vec::new();
    for product in serves.map(|s| s.split(", ").collect::<Vec<_>>()).unwrap_or_default() {
        let slug = |text: &str| -> String {
            let words: Vec<String> = text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_ascii_lowercase)
                .collect();
            words.join("-")
        };
        let last = product.rsplit(' ').next().unwrap_or(product);
        for id in [slug(product), slug(last)] {
            if !id.is_empty() && used.insert(id.clone()) {
                anchors.push(id);
            }
        }
    }
    anchors
}

/// A file's row, as the template writes it.
#[derive(Serialize)]
struct FileView<'a> {
    file_name: &'a str,
    href: &'a str,
    /// The project's page of the index, relative to the release page: people browse to it;
    /// a file is installed by pip, never downloaded by hand (seed 003).
    project_href: String,
    project: &'a str,
    metapackage: bool,
    public: &'a str,
    local: Option<&'a str>,
    tag: Option<&'a str>,
    basis: Option<&'a str>,
    tag_note: &'a str,
    gpu: Vec<GpuView<'a>>,
    size: String,
    sha256: &'a str,
    python: Vec<PythonView>,
}

#[derive(Serialize)]
struct GpuView<'a> {
    target: &'a str,
    size: Option<String>,
}

/// One line of the Python cell: a wheel's Python tags, or its Requires-Python.
#[derive(Serialize)]
struct PythonView {
    label: Option<&'static str>,
    code: String,
}

impl<'a> FileView<'a> {
    fn new(f: &'a PageFile) -> FileView<'a> {
        let tags = crate::wheel::WheelFilename::parse(&f.file_name).ok().map(|n| n.python_tags.join("."));
        let mut python: Vec<PythonView> = tags.into_iter().map(|code| PythonView { label: None, code }).collect();
        python
            .extend(f.requires_python.iter().map(|rp| PythonView { label: Some("Requires-Python"), code: rp.clone() }));
        FileView {
            file_name: &f.file_name,
            href: &f.href,
            project_href: format!("{}/", crate::index::url_quote(&f.project)),
            project: &f.project,
            metapackage: f.metapackage,
            public: &f.public,
            local: f.local.as_deref(),
            tag: f.tag.as_deref(),
            basis: f.basis.as_deref(),
            tag_note: &f.tag_note,
            gpu: f.gpu.iter().map(|(t, b)| GpuView { target: t, size: b.map(human_bytes) }).collect(),
            size: human_bytes(f.size),
            sha256: &f.sha256,
            python,
        }
    }
}

/// The check summary, with its badge's class.
#[derive(Serialize)]
struct CheckView<'a> {
    class: &'static str,
    errors: usize,
    warnings: usize,
    findings: &'a [(String, String, String)],
}

impl<'a> CheckView<'a> {
    fn new(check: &'a PageCheck) -> CheckView<'a> {
        let class = if check.errors > 0 {
            "bad"
        } else if check.warnings > 0 {
            "warn"
        } else {
            "ok"
        };
        CheckView { class, errors: check.errors, warnings: check.warnings, findings: &check.findings }
    }
}

/// ROCm versions named by the set: `rocmX.Y.Z` in local labels, and metapackages' versions
/// (`wheelfix metapackage` versions them `<rocm>+<target>.<digest>`).
fn rocm_versions(survey: &Survey) -> Vec<String> {
    let mut found = BTreeSet::new();
    for d in &survey.dists {
        let Some((public, local)) = d.version.split_once('+') else { continue };
        // A selector (also a metapackage here) is versioned as its project is, with a `+rocm`
        // label of its own: its public version is no ROCm version.
        if d.metapackage && !local.contains("rocm") {
            found.insert(public.to_string());
        }
        if let Some(at) = local.find("rocm") {
            let rest = &local[at + 4..];
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
            let version = rest[..end].trim_end_matches('.');
            if !version.is_empty() {
                found.insert(version.to_string());
            }
        }
    }
    let mut list: Vec<String> = found.into_iter().collect();
    list.sort_by(|a, b| crate::policy::verdict::compare_versions(a, b));
    list
}

/// What a person installs: each metapackage with the extra that brings its pins (`wheelfix
/// metapackage` pins every wheel under `device-<target>`, so the bare name installs nothing),
/// one entry per extra; without a metapackage, the projects no other project of the set
/// requires; each pinned exactly ([`pinned`]). Ex) [`rocm-torch[device-gfx950]==7.1.0+gfx950.1a2b`]
fn to_install(survey: &Survey) -> Vec<String> {
    let metas: BTreeSet<String> = survey
        .dists
        .iter()
        .filter(|d| d.metapackage)
        .flat_map(|d| {
            // A selector's `device-all` brings every other extra: one entry, not one per GPU.
            let mut device: Vec<DeviceExtra> = device_extras(&d.extras).collect();
            if device.contains(&DeviceExtra::All) {
                device = vec![DeviceExtra::All];
            }
            if device.is_empty() {
                vec![pinned(survey, &d.project, None)]
            } else {
                device.iter().map(|e| pinned(survey, &d.project, Some(e))).collect()
            }
        })
        .collect();
    if !metas.is_empty() {
        return metas.into_iter().collect();
    }
    let required: BTreeSet<&str> = survey
        .dists
        .iter()
        .flat_map(|d| d.requires.iter().filter(move |r| **r != d.project).map(String::as_str))
        .collect();
    let roots: BTreeSet<&str> =
        survey.dists.iter().map(|d| d.project.as_str()).filter(|p| !required.contains(p)).collect();
    roots.into_iter().map(|p| pinned(survey, p, None)).collect()
}

/// `project[extra]==version`: the set's release of the project exactly, local label included,
/// so that no other index a command names (PyPI's newer same-named release, which lacks the
/// set's extras) can serve it instead. Unpinned where the set holds several versions of it.
fn pinned(survey: &Survey, project: &str, extra: Option<&DeviceExtra>) -> String {
    let versions: BTreeSet<&str> =
        survey.dists.iter().filter(|d| d.project == project).map(|d| d.version.as_str()).collect();
    let extra = extra.map(|e| format!("[{e}]")).unwrap_or_default();
    match versions.iter().collect::<Vec<_>>().as_slice() {
        [version] => format!("{project}{extra}=={version}"),
        _ => format!("{project}{extra}"),
    }
}

/// A multi-architecture index's rows: for each host's `device-<target>` extra, the device wheels
/// of that target that require the host (what the extra brings), in the order people read
/// targets.
fn device_rows(survey: &Survey) -> Vec<DeviceRow> {
    let mut rows = Vec::new();
    for host in survey.dists.iter().filter(|d| !d.metapackage) {
        for extra in device_extras(&host.extras) {
            let Some(target) = extra.target() else { continue };
            let devices: Vec<&crate::check::DistFacts> = survey
                .dists
                .iter()
                .filter(|d| crate::extra::device_project_target(&d.project) == Some(target))
                .filter(|d| d.requires.contains(&host.project))
                .collect();
            if devices.is_empty() {
                continue;
            }
            rows.push(DeviceRow {
                target: target.to_string(),
                install: pinned(survey, &host.project, Some(&extra)),
                size: devices.iter().map(|d| d.size).sum(),
                files: devices.iter().map(|d| d.file_name.clone()).collect(),
            });
        }
    }
    rows.sort_by(|a, b| a.install.cmp(&b.install));
    rows.dedup();
    let order: Vec<String> = crate::gpu::targets::natural_order(rows.iter().map(|r| r.target.as_str()))
        .into_iter()
        .map(str::to_string)
        .collect();
    rows.sort_by_key(|r| (order.iter().position(|t| *t == r.target), r.install.clone()));
    rows
}

/// Per processor of a multi-architecture index's rows, one entry that installs the whole
/// release for it: the selector's `device-<target>` extra (every project's device wheels for
/// it), or, without a selector, every host with its extra.
fn gpu_installs(survey: &Survey, devices: &[DeviceRow]) -> Vec<GpuInstall> {
    let mut targets: Vec<&str> = devices.iter().map(|r| r.target.as_str()).collect();
    targets.dedup();
    targets
        .into_iter()
        .map(|target| {
            let extra = DeviceExtra::of(target);
            let rows: Vec<&DeviceRow> = devices.iter().filter(|r| r.target == target).collect();
            let selectors: BTreeSet<String> = survey
                .dists
                .iter()
                .filter(|d| d.metapackage && d.extras.iter().any(|e| extra == *e))
                .map(|d| pinned(survey, &d.project, Some(&extra)))
                .collect();
            let install = if selectors.is_empty() {
                rows.iter().map(|r| r.install.clone()).collect()
            } else {
                selectors.into_iter().collect()
            };
            let serving: BTreeSet<&str> =
                rows.iter().filter_map(|r| r.install.split_once('[')).map(|(h, _)| h).collect();
            let not_for: BTreeSet<String> = devices
                .iter()
                .filter_map(|r| r.install.split_once('[').map(|(h, _)| h))
                .filter(|h| !serving.contains(h))
                .map(str::to_string)
                .collect();
            let size = rows.iter().map(|r| r.size).sum();
            GpuInstall { target: target.to_string(), install, size, not_for: not_for.into_iter().collect() }
        })
        .collect()
}

/// The glibc the set needs: the newest a wheel's tags allow it (a wheel needs the oldest its
/// tags name), with that wheel, and how many Linux wheels promise none (`linux_<arch>`).
fn glibc_floor(files: &[PageFile]) -> serde_json::Value {
    use crate::wheel::platform_tag::PlatformTag;
    let mut floor: Option<((u32, u32), &str)> = None;
    let mut unpromised = 0;
    for f in files {
        let Some(tag) = &f.tag else { continue };
        let tags: Vec<PlatformTag> = tag.split('.').map(PlatformTag::parse).collect();
        if !tags.iter().any(|t| t.os() == crate::platform::Os::Linux) {
            continue;
        }
        match tags.iter().filter_map(PlatformTag::glibc).min() {
            Some(needs) if floor.is_none_or(|(at, _)| needs > at) => floor = Some((needs, &f.file_name)),
            Some(_) => {}
            None if tags.iter().any(|t| matches!(t, PlatformTag::Linux { .. })) => unpromised += 1,
            None => {}
        }
    }
    serde_json::json!({
        "version": floor.map(|((major, minor), _)| format!("{major}.{minor}")),
        "file": floor.map(|(_, file)| file),
        "unpromised": unpromised,
    })
}

/// The Python versions the wheels serve, read from their file names. Ex) [`CPython 3.11`,
/// `CPython 3.12`, `any Python 3`]
fn pythons(files: &[PageFile]) -> Vec<String> {
    let mut cpython: BTreeSet<(u32, u32, bool)> = BTreeSet::new();
    let mut other = BTreeSet::new();
    for f in files {
        let Ok(name) = crate::wheel::WheelFilename::parse(&f.file_name) else { continue };
        let abi3 = name.abi_tags.iter().any(|a| a == "abi3");
        for tag in &name.python_tags {
            let minor = tag.strip_prefix("cp3").and_then(|m| m.parse::<u32>().ok());
            match (minor, tag.as_str()) {
                (Some(minor), _) => {
                    cpython.insert((3, minor, abi3));
                }
                (None, "py3" | "py2.py3") => {
                    other.insert("any Python 3".to_string());
                }
                (None, t) => {
                    other.insert(t.to_string());
                }
            }
        }
    }
    let mut list: Vec<String> = cpython
        .into_iter()
        .map(|(x, y, abi3)| format!("CPython {x}.{y}{}", if abi3 { " or newer (abi3)" } else { "" }))
        .collect();
    list.extend(other);
    list
}

/// The Pythons one command can install on: those every project it pulls has a wheel for (a
/// project with wheels for CPython 3.11 only holds the whole command to 3.11). Ex)
/// [`CPython 3.11`, `CPython 3.12`]; [`any Python 3`] when no wheel names a CPython; empty when
/// no one Python serves every project.
fn command_pythons(files: &[PageFile]) -> Vec<String> {
    /// What one project's wheels serve: CPython minors exactly, abi3 from a minor on, any.
    #[derive(Default)]
    struct Serves {
        exact: BTreeSet<u32>,
        abi3_from: Option<u32>,
        any: bool,
    }
    let mut projects: BTreeMap<&str, Serves> = BTreeMap::new();
    let mut minors = BTreeSet::new();
    for f in files {
        let Ok(name) = crate::wheel::WheelFilename::parse(&f.file_name) else { continue };
        let serves = projects.entry(&f.project).or_default();
        let abi3 = name.abi_tags.iter().any(|a| a == "abi3");
        for tag in &name.python_tags {
            match tag.strip_prefix("cp3").and_then(|m| m.parse::<u32>().ok()) {
                Some(minor) if abi3 => {
                    serves.abi3_from = Some(serves.abi3_from.map_or(minor, |m| m.min(minor)));
                    minors.insert(minor);
                }
                Some(minor) => {
                    serves.exact.insert(minor);
                    minors.insert(minor);
                }
                None => serves.any = true,
            }
        }
    }
    if minors.is_empty() {
        return if projects.is_empty() { Vec::new() } else { vec!["any Python 3".to_string()] };
    }
    let newest = *minors.last().expect("not empty");
    let serves =
        |m: u32| projects.values().all(|s| s.any || s.exact.contains(&m) || s.abi3_from.is_some_and(|from| from <= m));
    // Every project serves the Pythons after the newest one named too (abi3, py3): say so.
    let open_ended = serves(newest + 1);
    minors
        .into_iter()
        .filter(|m| serves(*m))
        .map(|m| format!("CPython 3.{m}{}", if open_ended && m == newest { " or newer" } else { "" }))
        .collect()
}

fn page_check(findings: &[Finding]) -> PageCheck {
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    PageCheck {
        errors,
        warnings: findings.len() - errors,
        findings: findings
            .iter()
            .map(|f| (f.severity.as_str().to_string(), f.kind.to_string(), f.message.clone()))
            .collect(),
    }
}

/// pip treats every index alike and takes the highest version; the exact local labels of the
/// set's pins decide. Ex) `pip install --index-url https://h/gfx950/ --extra-index-url https://pypi.org/simple rocm-torch`
pub fn pip_command(site_url: &str, install: &[String]) -> String {
    command(&["pip", "install", "--index-url", site_url, "--extra-index-url", PYPI], install)
}

/// uv searches `--extra-index-url` first and stops at the first index that has a name, so the
/// set's index must be the extra one and PyPI the default; the order pip takes fails with uv
/// ("was found on https://pypi.org/simple, but not at the requested version").
pub fn uv_command(site_url: &str, install: &[String]) -> String {
    command(&["uv", "pip", "install", "--index-url", PYPI, "--extra-index-url", site_url], install)
}

/// uv choosing among variant wheels (PEP 825), a preview feature of uv 0.13: the index order is
/// [`uv_command`]'s.
pub fn uv_variants_command(site_url: &str, requirement: &str) -> String {
    let words = [
        "uv",
        "pip",
        "install",
        "--preview-features",
        "wheel-variants",
        "--index-url",
        PYPI,
        "--extra-index-url",
        site_url,
    ];
    command(&words, &[requirement.to_string()])
}

/// The words, then the projects to install (`PROJECT` where the set names none), each quoted
/// as a shell needs it: what a person pastes runs as these words and nothing else.
fn command(words: &[&str], install: &[String]) -> String {
    let mut all: Vec<&str> = words.to_vec();
    if install.is_empty() {
        all.push("PROJECT");
    } else {
        all.extend(install.iter().map(String::as_str));
    }
    crate::html::shell_words(&all)
}

const STYLE: &str = r#":root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --code: #f6f8fa; --accent: #b3261e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9da7b3; --line: #30363d; --bg: #0d1117; --code: #161b22; --accent: #ff7b72; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.6rem; margin: 0.2rem 0; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; border-bottom: 1px solid var(--line); padding-bottom: 0.2rem; margin-top: 1.6rem; }
h3 { margin: 0.2rem 0; }
a { color: inherit; }
.sub, .note, small { color: var(--muted); }
small, .file, td, li, p { overflow-wrap: anywhere; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; padding: 0.6rem 0.8rem; white-space: pre-wrap; overflow-wrap: anywhere; overflow-x: auto; margin: 0.2rem 0 0.8rem; }
.cmd { user-select: all; white-space: pre; }
td pre.scroll { width: 0; min-width: 100%; }
@media (min-width: 761px) { table.files td[data-label="install"] { width: 62%; } }
.copy { float: right; font: inherit; font-size: 0.8em; margin: 0.2rem 0 0 0.4rem; padding: 0.1rem 0.6rem; border: 1px solid var(--line); border-radius: 6px; background: var(--code); color: var(--fg); cursor: pointer; }
.gpu-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 26rem), 1fr)); gap: 0.6rem; }
.gpu-card { border: 1px solid var(--line); border-radius: 8px; padding: 0.4rem 0.7rem; }
.gpu-card:target, tr:target { outline: 2px solid var(--accent); }
.label { margin: 0.6rem 0 0; font-weight: 600; }
.local { color: var(--fg); background: var(--code); border: 1px solid var(--line); border-radius: 4px; padding: 0 0.25em; font-weight: 600; }
.gpus { margin: 0.4rem 0; padding-left: 1.2rem; }
.back { margin: 0; }
.nolabel, .meta { font-size: 0.75em; border: 1px solid var(--line); border-radius: 4px; padding: 0 0.3em; }
.basis { font-size: 0.75em; border-radius: 4px; padding: 0 0.35em; border: 1px solid var(--line); }
.basis.measured { background: #dafbe1; color: #116329; }
.basis.claimed { background: #fff8c5; color: #7d4e00; }
.badge { border-radius: 4px; padding: 0 0.4em; font-weight: 600; }
.badge.ok { background: #dafbe1; color: #116329; }
.badge.warn { background: #fff8c5; color: #7d4e00; }
.badge.bad { background: #ffebe9; color: #a40e26; }
.sha { display: inline-block; max-width: 13ch; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; user-select: all; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 0.45rem 0.5rem; border-bottom: 1px solid var(--line); }
th { font-size: 0.85em; color: var(--muted); }
.scroll { overflow-x: auto; }
td > div { min-width: 0; }
td.size { white-space: nowrap; }
.site { border: 1px solid var(--line); border-radius: 8px; padding: 0.6rem 0.9rem; margin: 0.8rem 0; }
.findings { padding-left: 1.2rem; }
.findings .error b { color: #a40e26; }
.findings .warning b { color: #7d4e00; }
@media (max-width: 760px) {
  table.files thead { display: none; }
  table.files, table.files tbody, table.files tr, table.files td { display: block; width: 100%; }
  table.files tr { border: 1px solid var(--line); border-radius: 8px; margin: 0 0 0.8rem; padding: 0.3rem 0; }
  table.files td { display: grid; grid-template-columns: 6.5rem minmax(0, 1fr); gap: 0.5rem; border: 0; padding: 0.2rem 0.7rem; }
  table.files td::before { content: attr(data-label); color: var(--muted); font-size: 0.85em; }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn file(project: &str, file_name: &str) -> PageFile {
        PageFile {
            project: project.into(),
            file_name: file_name.into(),
            href: String::new(),
            public: "1.0".into(),
            local: None,
            tag: None,
            basis: None,
            tag_note: String::new(),
            gpu: Vec::new(),
            size: 0,
            sha256: String::new(),
            requires_python: None,
            metapackage: false,
            variant: None,
        }
    }

    #[test]
    fn a_command_serves_the_pythons_every_project_it_pulls_serves() {
        let any = file("sel", "sel-1.0-py3-none-any.whl");
        let a311 = file("a", "a-1.0-cp311-cp311-manylinux_2_28_x86_64.whl");
        let a312 = file("a", "a-1.0-cp312-cp312-manylinux_2_28_x86_64.whl");
        let b312 = file("b", "b-1.0-cp312-cp312-manylinux_2_28_x86_64.whl");
        let abi3 = file("c", "c-1.0-cp310-abi3-manylinux_2_28_x86_64.whl");
        assert_eq!(command_pythons(std::slice::from_ref(&any)), ["any Python 3"]);
        assert_eq!(command_pythons(&[any.clone(), a311.clone(), a312.clone()]), ["CPython 3.11", "CPython 3.12"]);
        assert_eq!(command_pythons(&[a311.clone(), a312, b312.clone()]), ["CPython 3.12"]);
        assert_eq!(command_pythons(&[abi3.clone(), any]), ["CPython 3.10 or newer"]);
        assert_eq!(command_pythons(&[abi3, b312.clone()]), ["CPython 3.12"]);
        assert!(command_pythons(&[a311, b312]).is_empty(), "no one Python serves both");
    }
}
