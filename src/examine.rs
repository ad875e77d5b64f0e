//! One wheel through the first stages, as every command starts: opened, scanned, its libraries
//! resolved (beside the wheels installed with it), judged by the policies that apply. `show`,
//! `retag`, `repair`, `thin`, `check` and `index` all examine through here, with the run's
//! settings, so a flag means the same to each.

use std::path::Path;

use crate::analysis::site::SitePackages;
use crate::analysis::{self, Analysis, AnalyzeOptions};
use crate::policy::Policies;
use crate::policy::judgement::{Claims, Judgement};
use crate::progress::Progress;
use crate::wheel::platform_tag::PlatformTag;
use crate::wheel::{Wheel, WheelError};

/// What examining a wheel depends on: the parts of a run's settings the first stages read.
#[derive(Clone, Copy)]
pub struct ExamineOptions<'a> {
    pub analyze: &'a AnalyzeOptions,
    pub policies: &'a Policies,
    /// `--plat`: the policy to judge for, when one is asked for.
    pub plat: Option<&'a PlatformTag>,
    /// `--strict-record`: a RECORD that disagrees with its archive fails the wheel.
    pub strict_record: bool,
    /// `--disable-isa-ext-check`.
    pub disable_isa_check: bool,
}

/// One wheel through the first three stages: opened, analysed, judged.
pub struct Examined {
    pub wheel: Wheel,
    pub analysis: Analysis,
    /// What the policies make of it: nothing to judge (a pure wheel), binaries no policy covers
    /// (a Windows wheel, binaries of no covered architecture), or their verdict.
    pub judgement: Judgement,
}

/// Open, analyse and judge one wheel; `site` holds the wheels installed beside it.
pub fn examine(
    path: &Path,
    options: &ExamineOptions<'_>,
    site: &SitePackages,
    progress: &dyn Progress,
) -> Result<Examined, WheelError> {
    let wheel = Wheel::open(path)?;
    let mut analysis = analysis::scan(&wheel, options.analyze, progress)?;
    if options.strict_record
        && let Some(first) = analysis.record_findings.first()
    {
        return Err(WheelError::StrictRecord {
            summary: analysis.record_findings.summarize(),
            first: first.file.clone(),
        });
    }
    let selection = options.policies.select(&Claims::of(&wheel), &mut analysis, options.plat);
    for problem in &site.problems {
        analysis.notes.push(analysis::Note { file: "--with-wheels".into(), message: problem.clone() });
    }
    if let Some(rules) = selection.linkage_rules() {
        analysis::linkage::resolve(&wheel, &mut analysis, rules, options.analyze, site);
    }
    let judgement = selection.judge(&analysis, options.disable_isa_check);
    if let Some(j) = judgement.judged() {
        let v = &j.verdict;
        crate::debug!(
            "{}: symbol versions allow {}; without external libraries {}; blacklist {}; ISA {}; as it is {}; once repaired {}",
            wheel.filename,
            j.tag(v.symbol),
            j.tag(v.reference),
            j.tag(v.blacklist),
            j.tag(v.machine),
            j.tag(v.overall),
            j.tag(v.repairable)
        );
    }
    Ok(Examined { wheel, analysis, judgement })
}

/// Installed files through the same stages: `path` is a directory (every file under it) or one
/// file; what was read, analysed and judged as a wheel's members would be, the files named
/// relative to `path` (a file by its name), with their sizes. Libraries resolve as the loader
/// would find them from where the files lie.
pub fn examine_installed(
    path: &Path,
    options: &ExamineOptions<'_>,
) -> Result<InstalledExamined, analysis::installed::InstalledError> {
    let files = if path.is_dir() {
        analysis::installed::files_under(path)?
    } else {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        vec![(name, path.to_path_buf())]
    };
    let mut analysis = analysis::installed::analyse_files(&files);
    let claims = Claims { filename: &[], wheel: Vec::new() };
    let selection = options.policies.select(&claims, &mut analysis, options.plat);
    if let Some(rules) = selection.linkage_rules() {
        analysis::linkage::resolve_installed(&mut analysis, rules, options.analyze);
    }
    let judgement = selection.judge(&analysis, options.disable_isa_check);
    let sized: Vec<(String, u64)> = files
        .into_iter()
        .map(|(name, path)| {
            let size = std::fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
            (name, size)
        })
        .collect();
    Ok(InstalledExamined { files: sized, analysis, judgement })
}

/// Installed files examined: their names (relative to the path shown) and sizes, what they hold
/// and what the policies make of it.
pub struct InstalledExamined {
    pub files: Vec<(String, u64)>,
    pub analysis: Analysis,
    pub judgement: Judgement,
}
