//! GPU targets as people name them, one rule for every command: `--gpu-target`,
//! `--expect-gpu-target` and `gpu-targets` of `[tool.wheelfix]` take an AMDGPU processor LLVM
//! knows, and a product name (`mi300`, `MI300X`, `7900 XTX`) or a misspelt processor
//! (`gfx-942`) gets the processor it means in the same message, from
//! `policies/gpu-names.json` (which GPUs each processor serves, as AMD's support pages list
//! them).

use std::collections::BTreeMap;

use crate::gpu::targets::{TargetError, TargetId};

/// The AMD GPUs each processor serves. Ex) `gfx942` → `Instinct MI300X, MI300A, MI325X`
pub fn names() -> &'static BTreeMap<String, String> {
    static NAMES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| serde_json::from_str(GPU_NAMES).expect("policies/gpu-names.json is a map of names"))
}

const GPU_NAMES: &str = include_str!("../../policies/gpu-names.json");

/// A target a person named, or why not, with the processor they most likely meant.
/// Ex) `mi300` → "`mi300` is not an AMDGPU processor LLVM knows (e.g. gfx942, gfx90a,
/// gfx1100): AMD Instinct MI300X, MI300A are gfx942"
pub fn parse(text: &str) -> Result<TargetId, GpuTargetError> {
    TargetId::parse(text).map_err(|error| GpuTargetError { error, hint: meant(text) })
}

/// A GPU target that is not one, and the processor the person most likely meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}{}", hint.as_ref().map(|h| format!(": {h}")).unwrap_or_default())]
pub struct GpuTargetError {
    pub error: TargetError,
    /// Ex) `AMD Instinct MI300X is gfx942, the name to give`
    pub hint: Option<String>,
}

/// Lowercase letters and digits only. Ex) `Instinct MI300X` → `instinctmi300x`
fn squeeze(text: &str) -> String {
    text.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// Every product of `policies/gpu-names.json` with its processor, each name whole: a list's
/// later entries share the first one's leading words (`Radeon RX 7900 XTX, 7900 XT` →
/// `Radeon RX 7900 XT`). Returns (full name, model without the shared words, processor).
fn products() -> Vec<(String, String, &'static str)> {
    let mut out = Vec::new();
    for (processor, list) in names() {
        for group in list.split(';') {
            let items: Vec<&str> = group.split(',').map(str::trim).filter(|i| !i.is_empty()).collect();
            let Some(first) = items.first() else { continue };
            // The words before the first that holds a digit: the brand the list shares.
            let brand: Vec<&str> =
                first.split_whitespace().take_while(|w| !w.contains(|c: char| c.is_ascii_digit())).collect();
            for item in &items {
                let shares = brand.first().is_some_and(|b| !item.starts_with(b));
                let full = if shares { format!("{} {item}", brand.join(" ")) } else { item.to_string() };
                let model = full.split_whitespace().skip(brand.len()).collect::<Vec<_>>().join(" ");
                out.push((full, model, processor.as_str()));
            }
        }
    }
    out
}

/// What a name that is not a processor most likely means: a processor written with other
/// characters (`gfx-942`, `GFX_942`), or AMD products (`mi300`, `AMD Instinct MI300X`).
fn meant(text: &str) -> Option<String> {
    let said = squeeze(text);
    let said = said.strip_prefix("amd").unwrap_or(&said);
    if said.is_empty() {
        return None;
    }
    if said != text.trim() && TargetId::parse(said).is_ok() {
        return Some(format!("did you mean {said}?"));
    }
    let found: Vec<(String, &str)> = products()
        .into_iter()
        .filter(|(full, model, _)| {
            let (full, model) = (squeeze(full), squeeze(model));
            said == full || said == model || (said.len() >= 4 && (model.starts_with(said) || full.starts_with(said)))
        })
        .map(|(full, _, processor)| (full, processor))
        .collect();
    let mut processors: Vec<&str> = found.iter().map(|(_, p)| *p).collect();
    processors.dedup();
    let [processor] = processors.as_slice() else {
        return (!found.is_empty()).then(|| {
            let each: Vec<String> = found.iter().map(|(name, p)| format!("AMD {name} is {p}")).collect();
            format!("{} (`rocminfo | grep gfx` names yours)", each.join(", "))
        });
    };
    let gpus: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
    let verb = if gpus.len() == 1 { "is" } else { "are" };
    Some(format!("AMD {} {verb} {processor}, the name to give", gpus.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn product_names_and_misspellings_say_the_processor() {
        let said = |t: &str| parse(t).unwrap_err().to_string();
        assert!(
            said("mi300").ends_with("AMD Instinct MI300X, Instinct MI300A are gfx942, the name to give"),
            "{}",
            said("mi300")
        );
        assert!(said("MI300X").ends_with("AMD Instinct MI300X is gfx942, the name to give"), "{}", said("MI300X"));
        assert!(
            said("AMD Instinct MI250X").ends_with("is gfx90a, the name to give"),
            "{}",
            said("AMD Instinct MI250X")
        );
        assert!(said("7900 XTX").contains("AMD Radeon RX 7900 XTX is gfx1100"), "{}", said("7900 XTX"));
        assert!(said("gfx-942").ends_with("did you mean gfx942?"), "{}", said("gfx-942"));
        assert!(said("gfx9999").starts_with("`gfx9999` is not an AMDGPU processor LLVM knows"));
        assert!(!said("gfx9999").contains("is gfx"), "{}", said("gfx9999"));
        assert_eq!(parse("GFX942").unwrap().to_string(), "gfx942");
    }
}
