//! What `check` reads of each distribution, in one pass over each file: the facts its rules
//! judge, and what the release page shows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::site::SitePackages;
use crate::examine::ExamineOptions;
use crate::progress::NoProgress;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{CoreMetadata, RecordFindings, Wheel};

use super::{Finding, Kind, Severity};

/// How a wheel's platform tag is known. Ex) measured: its binaries meet `manylinux_2_28_x86_64`
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagFacts {
    /// The file name's platform tags. Ex) `manylinux_2_28_x86_64`
    pub tag: String,
    /// `measured` when wheelfix read its binaries' symbol versions and they meet the tag;
    /// `claimed` when nothing could be measured (no host binary, a Windows or macOS wheel) or
    /// the binaries need a newer tag than the name claims.
    pub basis: &'static str,
    /// The most compatible tag its binaries meet, when they were judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<String>,
    /// Why, for people. Ex) `no host binary to measure`
    pub note: String,
}

/// What a release page shows of one distribution, read in `check`'s one pass over it.
#[derive(Debug, Clone, Serialize)]
pub struct DistFacts {
    pub path: String,
    pub file_name: String,
    /// Normalised name.
    pub project: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    /// Wheels only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<TagFacts>,
    /// GPU processors its device code is for. Ex) [`gfx950`]
    pub gpu_targets: Vec<String>,
    /// Uncompressed device-code bytes in offload bundles, by processor.
    pub device_bytes: BTreeMap<String, u64>,
    /// Nothing but its `.dist-info`, and requirements: a metapackage.
    pub metapackage: bool,
    /// Projects it requires (normalised), every extra included.
    pub requires: Vec<String>,
    /// Its `Provides-Extra` names. Ex) [`device-gfx950`]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<String>,
    /// A variant wheel (PEP 825): its label and what its variant.json says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<DistVariant>,
}

/// What a variant wheel's page row shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DistVariant {
    /// Ex) `gfx942`
    pub label: String,
    /// Ex) [`amd :: gfx_arch :: gfx942`]; empty for the null variant, or when unreadable.
    pub properties: Vec<String>,
    /// How installers learn a machine's properties, per namespace. Ex) [`amd: plugin amd-variant-provider`]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<String>,
}

/// One distribution of the set, as `check` sees it.
pub(super) struct Dist {
    pub(super) path: PathBuf,
    pub(super) file_name: String,
    /// Normalised name.
    pub(super) project: String,
    pub(super) version: String,
    pub(super) metadata: CoreMetadata,
    /// Platform family of a wheel (`linux_x86_64`, `win_amd64`), `None` for `any` and sdists.
    pub(super) platform: Option<String>,
    /// A wheel with no host binary and no device code.
    pub(super) pure: bool,
    /// Why pip refuses to install it.
    pub(super) installer_problems: Vec<String>,
    /// What only a wheel has, read in the same pass.
    pub(super) wheel: Option<WheelFacts>,
    pub(super) size: u64,
}

/// The facts `check` lints a wheel for.
pub(super) struct WheelFacts {
    pub(super) filename_tags: Vec<PlatformTag>,
    pub(super) python_abi_pairs: Vec<String>,
    pub(super) tag_lines: Vec<String>,
    pub(super) root_is_purelib: Option<bool>,
    pub(super) gpu_targets: Vec<String>,
    /// Its device code in offload bundles, per file: what coverage of an architecture is judged on.
    pub(super) bundled: Vec<crate::gpu::GpuCode>,
    pub(super) record_findings: RecordFindings,
    /// Libraries it needs from other wheels.
    pub(super) cross: Vec<crate::analysis::linkage::CrossNeed>,
    /// Every file's install path (for the libraries other wheels need from it).
    pub(super) install_paths: std::collections::HashSet<String>,
    /// It holds nothing but its `.dist-info` (a metapackage, when it requires something).
    pub(super) metadata_only: bool,
    pub(super) tag: TagFacts,
    pub(super) device_bytes: BTreeMap<String, u64>,
    /// The ROCm libraries each of its binaries links that `policies/rocm-abi.json` knows, by
    /// SONAME (binaries that link none left out). Ex) [{`libamdhip64.so.7`, `librocblas.so.5`}]
    pub(super) rocm_sonames: Vec<BTreeSet<String>>,
    /// Its kpack-split binaries: install path and the search paths of their archives.
    pub(super) kpack_refs: Vec<(String, Vec<String>)>,
    /// Its kpack archives by install path, with the processors their tables of contents list.
    pub(super) kpack_archives: BTreeMap<String, Vec<crate::gpu::TargetId>>,
    /// Its kpack-split binaries with their kernel name and wrapper count: (install path, kernel
    /// name, wrappers).
    pub(super) kpack_kernels: Vec<(String, String, usize)>,
    /// Its kpack archives' tables of contents: install path → key → target ids.
    pub(super) kpack_tocs: BTreeMap<String, BTreeMap<String, Vec<crate::gpu::TargetId>>>,
    /// Its kpack archives read back whole ([`crate::gpu::kpack_read`]): install path →
    /// what is wrong with it (archives with nothing wrong are not listed).
    pub(super) kpack_damage: Vec<(String, Vec<String>)>,
    /// Split hosts (installed path) whose HIPK wrappers or kpack markers the runtime cannot
    /// use, and why.
    pub(super) kpack_marker_problems: Vec<(String, Vec<String>)>,
    /// Host binaries the loader would refuse or misload, and the rule each breaks.
    pub(super) not_loadable: Vec<(String, crate::elf::lint::LintFinding)>,
    /// A variant wheel's label and its variant.json, read (PEP 825), or why it cannot be.
    pub(super) variant:
        Option<(String, Result<crate::wheel::variant::VariantMetadata, crate::wheel::variant::VariantReadError>)>,
}

/// What reading one file gave: its sha256 (when the file could be read at all), the
/// distribution, and a finding when it could not be read as one.
pub(super) struct Read {
    pub(super) path: PathBuf,
    pub(super) sha256: Option<String>,
    pub(super) dist: Option<Dist>,
    pub(super) unreadable: Option<Finding>,
}

pub(super) fn dist_facts(d: &Dist, sha256: Option<String>) -> DistFacts {
    let mut requires: Vec<String> = d.metadata.requires_dist.iter().map(|r| r.package.to_string()).collect();
    requires.sort();
    requires.dedup();
    DistFacts {
        path: d.path.display().to_string(),
        file_name: d.file_name.clone(),
        project: d.project.clone(),
        version: d.version.clone(),
        sha256,
        size: d.size,
        requires_python: d.metadata.requires_python.clone(),
        tag: d.wheel.as_ref().map(|w| w.tag.clone()),
        gpu_targets: d.wheel.as_ref().map(|w| w.gpu_targets.clone()).unwrap_or_default(),
        device_bytes: d.wheel.as_ref().map(|w| w.device_bytes.clone()).unwrap_or_default(),
        metapackage: is_metapackage(d),
        requires,
        extras: d.metadata.provides_extra.clone(),
        variant: d.wheel.as_ref().and_then(|w| w.variant.as_ref()).map(|(label, read)| {
            let metadata = read.as_ref().ok();
            DistVariant {
                label: label.clone(),
                properties: metadata
                    .and_then(|m| m.variants.get(label))
                    .map(crate::wheel::variant::VariantMetadata::property_lines)
                    .unwrap_or_default(),
                providers: metadata
                    .map(|m| m.providers.iter().map(|(ns, p)| format!("{ns}: {}", p.describe())).collect())
                    .unwrap_or_default(),
            }
        }),
    }
}

pub(super) fn is_metapackage(d: &Dist) -> bool {
    d.wheel.as_ref().is_some_and(|w| w.metadata_only) && !d.metadata.requires_dist.is_empty()
}

/// How the wheel's platform tag is known: measured from its binaries, or only claimed.
pub(super) fn tag_facts(
    wheel: &Wheel,
    analysis: &crate::analysis::Analysis,
    judgement: &crate::policy::judgement::Judgement,
) -> TagFacts {
    use crate::policy::judgement::Judgement;
    let tag = wheel.filename.platform_tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(".");
    let claimed = |note: String| TagFacts { tag: tag.clone(), basis: "claimed", measured: None, note };
    match judgement {
        Judgement::Pure if wheel.filename.platform_tags.iter().all(PlatformTag::is_any) => {
            claimed("pure: no platform".into())
        }
        Judgement::Pure => claimed("no host binary to measure".into()),
        Judgement::Unaudited(reason) => claimed(reason.clone()),
        Judgement::Judged(j) => {
            let (overall, repairable) = (j.verdict.overall, j.verdict.repairable);
            // The least compatible policy the name claims (a name lists one policy's aliases).
            let claim = wheel.filename.platform_tags.iter().filter_map(|t| j.set.index_of(t)).max();
            let measured = |basis: &'static str, note: String, index: usize| TagFacts {
                tag: tag.clone(),
                basis,
                measured: Some(j.tag(index).to_string()),
                note,
            };
            match claim {
                Some(index) if index >= overall => measured(
                    "measured",
                    if overall == j.linux() {
                        // `linux_<arch>`, measured: say what keeps it from the next tag (the one
                        // its symbol versions allow, else the least compatible policy).
                        let next =
                            if j.verdict.symbol < overall { j.verdict.symbol } else { overall.saturating_sub(1) };
                        let blockers = j.verdict.blockers(&j.set, analysis, next);
                        format!("its binaries meet no more compatible tag; {}: {}", blockers.policy, blockers.summary())
                    } else if index == overall {
                        "its binaries' symbol versions meet it".into()
                    } else {
                        format!("its binaries meet {}, more than the name says", j.tag(overall))
                    },
                    overall,
                ),
                // Libraries from outside the wheel (other wheels, the system) keep it from the tag
                // as it stands; its own symbol versions meet it.
                Some(index) if index >= repairable => {
                    let outside = &j.verdict.grafted[index];
                    let first = outside.iter().next().map(|l| format!(" ({l}…)")).unwrap_or_default();
                    measured(
                        "measured",
                        format!(
                            "its symbol versions meet it; {} librar{} it needs{first} must come from other wheels or the system",
                            outside.len(),
                            if outside.len() == 1 { "y" } else { "ies" }
                        ),
                        repairable,
                    )
                }
                _ => measured("claimed", format!("its binaries need {}", j.tag(repairable)), repairable),
            }
        }
    }
}

/// Read one file once: a wheel opened whole and its members scanned (device code, RECORD), or
/// an sdist's PKG-INFO; the file's sha256 from the same open file.
pub(super) fn read_dist(path: &Path, options: &ExamineOptions<'_>, site: &SitePackages) -> Read {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unreadable = |message: String| Finding {
        kind: Kind::Unreadable,
        severity: Severity::Error,
        message: format!("{file_name}: {message}"),
        files: vec![path.display().to_string()],
    };
    let opened = if file_name.ends_with(".whl") {
        crate::examine::examine(path, options, site, &NoProgress)
            .map(|e| (e.wheel, e.analysis, e.judgement))
            .map_err(|e| e.to_string())
    } else {
        Err(String::new())
    };
    match opened {
        Ok((wheel, analysis, judgement)) => {
            let pure = analysis.has_no_code();
            let sha256 = wheel.archive.zip.sha256().ok();
            Read {
                path: path.to_path_buf(),
                sha256,
                dist: Some(Dist {
                    path: path.to_path_buf(),
                    project: wheel.metadata.package.to_string(),
                    version: wheel.metadata.version.text.clone(),
                    platform: crate::distribution::platform_family(&wheel.filename.platform_tags),
                    file_name: file_name.clone(),
                    pure,
                    installer_problems: wheel.installer_problems.clone(),
                    wheel: Some(wheel_facts(&wheel, analysis, &judgement, options)),
                    size: wheel.archive.zip.identity.len,
                    metadata: wheel.metadata,
                }),
                unreadable: None,
            }
        }
        // An sdist; or a wheel that cannot be opened whole, whose metadata the set's other
        // findings may still use.
        Err(wheel_error) => {
            let dist = crate::distribution::Distribution::read(path);
            let message = if file_name.ends_with(".whl") {
                Some(wheel_error)
            } else {
                dist.as_ref().err().map(|e| e.to_string())
            };
            let sha256 = match &dist {
                Ok(d) => Some(d.sha256.clone()),
                Err(_) => crate::wheel::digest::file_sha256_hex(path).ok(),
            };
            let dist = dist.ok().map(|d| Dist {
                path: path.to_path_buf(),
                project: d.metadata.package.to_string(),
                version: d.metadata.version.text.clone(),
                platform: d.wheel.as_ref().and_then(|f| crate::distribution::platform_family(&f.platform_tags)),
                metadata: d.metadata,
                file_name: file_name.clone(),
                pure: false,
                installer_problems: d.installer_problems,
                wheel: None,
                size: d.size,
            });
            Read { path: path.to_path_buf(), sha256, dist, unreadable: message.map(unreadable) }
        }
    }
}

/// Every kpack archive of the wheel read back whole: each frame decoded against its table's
/// size and key, its processor read from the code object's own ELF header. A stored archive
/// (as split writes them) is read in place; a deflated one is inflated to a temporary file
/// first. Memory stays a buffer's worth whatever the archive's size.
fn archive_damage(wheel: &Wheel, analysis: &crate::analysis::Analysis) -> Vec<(String, Vec<String>)> {
    use crate::gpu::kpack_read;
    let archives = analysis.gpu.iter().filter(|g| g.container == crate::gpu::Container::KpackArchive);
    let mut damaged = Vec::new();
    for code in archives {
        let Some(member) = wheel.archive.member(&code.file) else { continue };
        let zip = &wheel.archive.zip;
        let read = match member.method {
            crate::zip::Method::Stored => match zip.data_offset(member) {
                Ok(start) => {
                    let read_at =
                        |buf: &mut [u8], at: u64| zip.read_at(member, buf, start + at).map_err(std::io::Error::other);
                    kpack_read::read_archive(&read_at, member.size)
                }
                Err(e) => {
                    damaged.push((code.file.clone(), vec![format!("cannot be read: {e}")]));
                    continue;
                }
            },
            _ => {
                let inflated = tempfile::tempfile().and_then(|mut file| {
                    let mut stream = zip.stream(member).map_err(std::io::Error::other)?;
                    std::io::copy(&mut stream, &mut std::io::BufWriter::new(&mut file))?;
                    Ok(file)
                });
                match inflated {
                    Ok(file) => {
                        let read_at =
                            |buf: &mut [u8], at: u64| std::os::unix::fs::FileExt::read_exact_at(&file, buf, at);
                        kpack_read::read_archive(&read_at, member.size)
                    }
                    Err(e) => {
                        damaged.push((code.file.clone(), vec![format!("cannot be inflated: {e}")]));
                        continue;
                    }
                }
            }
        };
        // A file named `.kpack` without the `KPAK` header is no archive wheelfix can judge
        // (fixtures, placeholders): only archives are read back.
        let not_an_archive = matches!(read.problems[..], [kpack_read::ArchiveProblem::NotAnArchive]);
        if !read.problems.is_empty() && !not_an_archive {
            let path = wheel.install_path(&code.file).unwrap_or_else(|| code.file.clone());
            damaged.push((path, read.problems.iter().map(ToString::to_string).collect()));
        }
    }
    damaged
}

/// What the rules need of a wheel that opened whole.
fn wheel_facts(
    wheel: &Wheel,
    analysis: crate::analysis::Analysis,
    judgement: &crate::policy::judgement::Judgement,
    options: &ExamineOptions<'_>,
) -> WheelFacts {
    WheelFacts {
        variant: wheel
            .filename
            .variant
            .as_ref()
            .map(|label| (label.clone(), crate::wheel::variant::read(&wheel.archive, label))),
        filename_tags: wheel.filename.platform_tags.clone(),
        python_abi_pairs: wheel.filename.python_abi_pairs(),
        tag_lines: wheel.wheel_info.tags.clone(),
        root_is_purelib: wheel.wheel_info.root_is_purelib,
        gpu_targets: analysis.gpu_targets(),
        bundled: analysis.gpu.iter().filter(|g| g.container.holds_bundles()).cloned().collect(),
        cross: crate::analysis::linkage::cross_wheel_needs(wheel, &analysis)
            .into_iter()
            .filter(|n| {
                !options.policies.system_library(&n.soname)
                    && options.analyze.exclude.reason(&n.soname, None).is_none()
                    && analysis.external.get(&n.soname).is_none_or(|e| e.provided_by.is_none())
                    && !crate::analysis::linkage::found_on_system(&analysis, &n.soname, options.analyze)
            })
            .collect(),
        install_paths: wheel
            .archive
            .members()
            .iter()
            .filter(|m| !m.is_dir())
            .filter_map(|m| wheel.install_path(&m.name))
            .collect(),
        metadata_only: wheel
            .archive
            .members()
            .iter()
            .filter(|m| !m.is_dir())
            .all(|m| m.name.split('/').next().is_some_and(|top| top.ends_with(".dist-info"))),
        tag: tag_facts(wheel, &analysis, judgement),
        device_bytes: crate::gpu::device_bytes(&analysis.gpu),
        kpack_refs: analysis
            .gpu
            .iter()
            .filter(|g| !g.kpack_search_paths.is_empty())
            .filter_map(|g| Some((wheel.install_path(&g.file)?, g.kpack_search_paths.clone())))
            .collect(),
        kpack_archives: analysis
            .gpu
            .iter()
            .filter(|g| g.container == crate::gpu::Container::KpackArchive)
            .filter_map(|g| Some((wheel.install_path(&g.file)?, g.targets.clone())))
            .collect(),
        kpack_kernels: analysis
            .gpu
            .iter()
            .filter_map(|g| {
                let (kernel, wrappers) = g.kpack_kernel.clone()?;
                Some((wheel.install_path(&g.file)?, kernel, wrappers))
            })
            .collect(),
        kpack_tocs: analysis
            .gpu
            .iter()
            .filter(|g| g.container == crate::gpu::Container::KpackArchive)
            .filter_map(|g| Some((wheel.install_path(&g.file)?, g.kpack_toc.clone())))
            .collect(),
        kpack_damage: archive_damage(wheel, &analysis),
        kpack_marker_problems: analysis
            .gpu
            .iter()
            .filter(|g| !g.kpack_marker_problems.is_empty())
            .filter_map(|g| Some((wheel.install_path(&g.file)?, g.kpack_marker_problems.clone())))
            .collect(),
        rocm_sonames: analysis
            .elf
            .iter()
            .map(|e| {
                let known = e.facts.needed.iter().filter(|n| crate::check::abi::AbiTable::builtin().knows(n));
                known.cloned().collect::<BTreeSet<String>>()
            })
            .filter(|set| !set.is_empty())
            .collect(),
        not_loadable: analysis
            .elf
            .iter()
            .flat_map(|e| crate::elf::lint::loadability(&e.facts).into_iter().map(|f| (e.path.clone(), f)))
            .collect(),
        record_findings: analysis.record_findings,
    }
}
