//! `retag`: the plan that writes a wheel's true platform tags into its file name and WHEEL file.

use std::path::{Path, PathBuf};

use crate::analysis::Analysis;
use crate::tags::{TagRequest, true_tags};
use crate::wheel::Wheel;
use crate::wheel::writer::{NewMember, Plan};

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

/// The plan for a wheel with these platform tags; `None` when nothing would change.
/// `Root-Is-Purelib` is set to false when a platform-specific wheel claims to be purelib.
pub fn plan_tags(wheel: &Wheel, analysis: &Analysis, platform_tags: &[String]) -> Option<Plan> {
    let filename = wheel.filename.with_platform_tags(platform_tags.to_vec());
    let lines = wheel_tag_lines(wheel, platform_tags);
    let platform_specific = platform_tags.iter().any(|t| t != "any") && !analysis.binaries.is_empty();
    let purelib = (platform_specific && wheel.wheel_info.root_is_purelib == Some(true)).then_some(false);
    let text = wheel.wheel_info.with_tags(&lines, purelib);
    if filename == wheel.filename && text == wheel.wheel_info.text {
        return None;
    }
    let mut plan = Plan::new(filename);
    if text != wheel.wheel_info.text {
        plan.replace.insert(format!("{}/WHEEL", wheel.dist_info), NewMember { data: text.into_bytes(), mode: None });
    }
    Some(plan)
}

/// The tags retag writes for a wheel.
pub fn retag_tags(
    wheel: &Wheel,
    analysis: &Analysis,
    request: &TagRequest,
) -> Result<Vec<String>, crate::tags::TagError> {
    true_tags(analysis, &wheel.filename.platform_tags, request)
}

/// Where the output of a wheel goes: `--in-place` beside the input, else into `wheel_dir`.
pub fn output_path(input: &Path, file_name: &str, wheel_dir: Option<&Path>) -> PathBuf {
    match wheel_dir {
        Some(dir) => dir.join(file_name),
        None => input.parent().unwrap_or(Path::new(".")).join(file_name),
    }
}
