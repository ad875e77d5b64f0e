//! Plans for `retag`: the true platform tags in the file name and WHEEL, and, when asked, a new
//! local version (file name, `.dist-info` and `.data` directories, METADATA) with the batch's
//! exact pins rewritten.

use std::path::{Path, PathBuf};

use crate::analysis::Analysis;
use crate::version::{PinRewrite, rewrite_metadata};
use crate::wheel::Wheel;
use crate::wheel::writer::{NewMember, Plan};

/// What to change in one wheel.
#[derive(Debug, Clone, Default)]
pub struct Changes<'a> {
    pub platform_tags: &'a [String],
    pub new_version: Option<&'a str>,
    pub pins: &'a [PinRewrite],
}

/// The WHEEL `Tag:` lines for `platform_tags`: every `{python}-{abi}` pair the WHEEL file (or,
/// failing that, the file name) names, times every platform tag in sorted order.
pub fn wheel_tag_lines(wheel: &Wheel, platform_tags: &[String]) -> Vec<String> {
    let mut pairs: Vec<String> = Vec::new();
    for tag in &wheel.wheel_info.tags {
        let mut parts = tag.splitn(3, '-');
        if let (Some(py), Some(abi)) = (parts.next(), parts.next()) {
            let pair = format!("{py}-{abi}");
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    if pairs.is_empty() {
        pairs = wheel.filename.python_abi_pairs();
    }
    pairs.iter().flat_map(|pair| platform_tags.iter().map(move |plat| format!("{pair}-{plat}"))).collect()
}

/// The plan that makes these changes; `None` when the wheel already is what they describe.
/// `Root-Is-Purelib` is set to false when a platform-specific wheel claims to be purelib.
pub fn plan_changes(wheel: &Wheel, analysis: &Analysis, changes: &Changes<'_>) -> Option<Plan> {
    let mut filename = wheel.filename.with_platform_tags(changes.platform_tags.to_vec());
    let mut plan = Plan::new(filename.clone());

    // A new version renames the `.dist-info` and `.data` directories.
    if let Some(version) = changes.new_version {
        filename = filename.with_version(&version.replace('-', "_"));
        let name = wheel.dist_info.trim_end_matches(".dist-info").rsplit_once('-').map_or("", |(n, _)| n);
        let old_stem = wheel.dist_info.trim_end_matches(".dist-info").to_string();
        let new_stem = format!("{name}-{}", version.replace('-', "_"));
        for member in wheel.archive.members() {
            for suffix in [".dist-info/", ".data/"] {
                if let Some(rest) = member.name.strip_prefix(&format!("{old_stem}{suffix}")) {
                    plan.renames.insert(member.name.to_string(), format!("{new_stem}{suffix}{rest}"));
                }
            }
        }
        plan.filename = filename.clone();
    }
    let dist_info = plan.output_name(&format!("{}/WHEEL", wheel.dist_info)).trim_end_matches("/WHEEL").to_string();

    let mut lines = wheel_tag_lines(wheel, changes.platform_tags);
    // The same `Tag:` lines in another order are not a change.
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v.dedup();
        v
    };
    if sorted(&lines) == sorted(&wheel.wheel_info.tags) {
        lines = wheel.wheel_info.tags.clone();
    }
    let platform_specific = changes.platform_tags.iter().any(|t| t != "any") && !analysis.binaries.is_empty();
    let purelib = (platform_specific && wheel.wheel_info.root_is_purelib == Some(true)).then_some(false);
    let wheel_text = if lines == wheel.wheel_info.tags && purelib.is_none() {
        wheel.wheel_info.text.clone()
    } else {
        wheel.wheel_info.with_tags(&lines, purelib)
    };
    if wheel_text != wheel.wheel_info.text {
        plan.replace.insert(format!("{dist_info}/WHEEL"), NewMember { data: wheel_text.into_bytes(), mode: None });
    }
    let metadata = rewrite_metadata(&wheel.metadata_text, changes.new_version, changes.pins);
    if metadata != wheel.metadata_text {
        plan.replace.insert(format!("{dist_info}/METADATA"), NewMember { data: metadata.into_bytes(), mode: None });
    }
    let unchanged = filename == wheel.filename && plan.replace.is_empty() && plan.renames.is_empty();
    (!unchanged).then_some(plan)
}

/// Where the output of a wheel goes: `--in-place` beside the input, else into `wheel_dir`.
pub fn output_path(input: &Path, file_name: &str, wheel_dir: Option<&Path>) -> PathBuf {
    match wheel_dir {
        Some(dir) => dir.join(file_name),
        None => input.parent().unwrap_or(Path::new(".")).join(file_name),
    }
}
