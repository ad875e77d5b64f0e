//! The problems wheelfix names, each once: its name (the `kind` of `check --json` and
//! `doctor --json`), how bad it is by default, which command reports it, and what to do about
//! it where one thing does it. `check` judges a release set and `doctor` an installed
//! environment; where they find the same problem (a kpack marker the runtime cannot use, an
//! archive that does not read back, two ROCm ABIs), they call it by the same name.
//!
//! The JSON schemas list these names (`schemas/check.schema.json`, `doctor.schema.json`);
//! `tests/it/schemas.rs` holds each list to [`Kind::reported_by`].

use std::fmt;

/// How bad a problem is: errors fail the command (exit 1); warnings only with `--strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// An install fails, a kernel launch fails, or an upload destroys something.
    Error,
    /// Something may fail, or works by accident.
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which command reports a kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporter {
    /// `check` (and `index`, which checks a set before it publishes it).
    Check,
    /// `doctor`.
    Doctor,
    Both,
}

impl Reporter {
    pub fn includes_check(self) -> bool {
        matches!(self, Reporter::Check | Reporter::Both)
    }

    pub fn includes_doctor(self) -> bool {
        matches!(self, Reporter::Doctor | Reporter::Both)
    }
}

/// Every kind of problem, with its name, default severity, reporter and fix: one table.
macro_rules! kinds {
    ($( $(#[doc = $doc:literal])* $variant:ident = $name:literal, $severity:ident, $reporter:ident, $fix:expr; )*) => {
        /// A kind of problem: what `check` and `doctor` print as a finding's `kind`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Kind {
            /// Every kind, in the table's order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// Its name, as the JSON documents and the text reports print it. Ex) `path-conflict`
            pub fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* }
            }

            /// How bad it is unless the finding says otherwise (a stale RECORD is an error with
            /// `--strict-record`, a loose pin a warning where a marker confines it).
            pub fn severity(self) -> Severity {
                match self { $(Kind::$variant => Severity::$severity,)* }
            }

            /// Which command reports it.
            pub fn reported_by(self) -> Reporter {
                match self { $(Kind::$variant => Reporter::$reporter,)* }
            }

            /// What to do about it, where one thing does it: the advice `check` prints once per
            /// kind (its findings' messages say the rest). `doctor` gives each problem a fix of
            /// its own, a command for that environment.
            pub fn fix(self) -> Option<&'static str> {
                match self { $(Kind::$variant => $fix,)* }
            }
        }
    };
}

kinds! {
    // A release set (`check`).
    /// One file name with different contents where both would be uploaded to one place.
    FilenameConflict = "filename-conflict", Error, Check, Some("give each build its own file name (a per-architecture or per-platform label), or publish each in its own index (a per-architecture upload directory or base URL)");
    /// A selector or metapackage without the `device-<target>` extra for a device package of the set.
    MissingExtra = "missing-extra", Error, Check, Some(REBUILD_SELECTOR);
    /// A selector's `device-all` that leaves out a device package of the set.
    DeviceAllIncomplete = "device-all-incomplete", Error, Check, Some(REBUILD_SELECTOR);
    /// A GPU's extra (or the selector itself, so every GPU's) pulls a project whose device
    /// wheels are for other GPUs only: its tags and floor stand in that GPU's way for nothing.
    ExtraPullsOtherGpu = "extra-pulls-other-gpu", Error, Check, Some("rebuild the selector with `wheelfix selector`: each GPU's extra then pulls only the projects that serve it");
    /// One project raises the glibc a GPU's command needs above what the rest of what it pulls needs.
    FloorRaisedBy = "floor-raised-by", Warning, Check, Some("build that project on the older glibc the rest of the set is built on (its manylinux image), or say on the page that those GPUs need the newer one");
    /// An extra that requires a project the set does not hold.
    AbsentPin = "absent-pin", Error, Check, None;
    /// An extra whose requirement exists for some platforms only, with no marker saying so.
    PlatformMarker = "platform-marker", Error, Check, None;
    /// An extra that requires platform wheels for some operating systems of the set only.
    UnmarkedPlatformExtra = "unmarked-platform-extra", Error, Check, Some("add the platform marker (`; sys_platform == \"linux\"`) to the extra's requirements, or publish the missing platform's files");
    /// A distribution without a local version label.
    NoLocalVersion = "no-local-version", Warning, Check, Some("`wheelfix retag --rocm-version X.Y.Z` labels every wheel of the set (`--mark-pure` for pure ones); a selector is labelled when it is made: `wheelfix selector --version 1.0+rocmX.Y.Z`");
    /// A requirement between projects of the set that a same-named PyPI release could meet.
    LoosePin = "loose-pin", Error, Check, Some("pin exactly, with the local label (`wheelfix retag --rocm-version` rewrites the pins of the set)");
    /// Local labels whose string order contradicts their ROCm order (ROCm/TheRock#7183).
    LocalLabelOrder = "local-label-order", Error, Check, Some("label with wheelfix's `+rocmX.Y.Z`, whose order follows ROCm's");
    /// A wheel in an architecture's index whose device code is for other processors.
    WrongArchitecture = "wrong-architecture", Error, Check, Some(BUILD_FOR_ARCHITECTURE);
    /// A wheel in an architecture's index with a binary that has no code for it.
    NoCodeForArchitecture = "no-code-for-architecture", Error, Check, Some(BUILD_FOR_ARCHITECTURE);
    /// A distribution that requires itself.
    SelfRequirement = "self-requirement", Error, Check, Some("drop the requirement on itself; an extra that gathers others is `name[a,b]; extra == \"all\"`");
    /// A platform wheel whose WHEEL says `Root-Is-Purelib: true`.
    PurelibPlatformWheel = "purelib-platform-wheel", Error, Check, None;
    /// A file name whose tags WHEEL does not list.
    TagMismatch = "tag-mismatch", Error, Check, Some("`wheelfix retag` makes the file name and WHEEL agree");
    /// A platform tag the binaries do not meet.
    TagNotMet = "tag-not-met", Error, Check, Some("`wheelfix retag` writes the tag the binaries meet (or `repair` vendors what keeps them from it)");
    /// A file that cannot be read at all.
    Unreadable = "unreadable", Error, Check, None;
    /// A RECORD that disagrees with its archive.
    StaleRecord = "stale-record", Warning, Check, Some("`wheelfix retag` writes a true RECORD");
    /// A host binary whose layout the loader refuses.
    NotLoadable = "not-loadable", Error, Check, Some("rebuild or relink the file (the tool that last rewrote its layout broke it); `readelf -lW` shows its segments");
    /// A library a wheel takes from another wheel that does not require it.
    UndeclaredProvider = "undeclared-provider", Error, Check, Some("add the providing project to the wheel's Requires-Dist, so installers bring it");
    /// A library a wheel takes from another wheel that the set does not hold.
    UnresolvedProvider = "unresolved-provider", Error, Check, Some("publish the wheel that provides the library in the same index, vendor it (`wheelfix repair`), or `--exclude` it if every environment provides it");
    /// Nothing under the directories given.
    NothingToCheck = "nothing-to-check", Error, Check, None;
    /// A file pip refuses to install.
    InstallerRefuses = "installer-refuses", Error, Check, None;
    /// A requirement between distributions of the set that no file of the set meets.
    UnmetRequirement = "unmet-requirement", Error, Check, None;
    /// Exact pins no one Python can install together.
    NoCommonPython = "no-common-python", Error, Check, None;
    /// Two metapackages of one name in one directory.
    DuplicateMetapackage = "duplicate-metapackage", Error, Check, Some("keep one metapackage of each name in an index: the build you mean to publish");
    /// A file of the set that an upstream index serves with other contents.
    UpstreamCollision = "upstream-collision", Error, Check, None;
    /// A project an upstream index serves a newer release of, which a resolver may take.
    UpstreamShadow = "upstream-shadow", Error, Check, None;
    /// An upstream index that could not be read.
    UpstreamUnreachable = "upstream-unreachable", Error, Check, None;
    /// A resolver that takes an upstream release over the set's.
    ResolveUpstream = "resolve-upstream", Error, Check, Some("for uv: the release page's uv command (the set's index as --extra-index-url); check it with --site-first");
    /// A resolver that refuses the set.
    ResolveForbidden = "resolve-forbidden", Error, Check, None;
    /// A resolver that could not be run or failed.
    ResolveFailed = "resolve-failed", Error, Check, None;
    /// A distribution whose local label names another ROCm than its binaries need.
    RocmAbiLabel = "rocm-abi-label", Error, Check, None;
    /// A split host's extra whose device wheels do not require the host back, exactly.
    DevicePinOneWay = "device-pin-one-way", Error, Check, None;
    /// Code objects of a split host that no archive an extra installs holds, nor any of the set.
    KpackKernelMissing = "kpack-kernel-missing", Error, Both, None;
    /// Code objects of a split host built without a target (other processors have them).
    KpackKernelNotBuilt = "kpack-kernel-not-built", Warning, Check, None;
    /// A processor's per-target-ID archives that serve one mode of a feature only.
    KpackModeUnserved = "kpack-mode-unserved", Warning, Check, None;
    /// Two projects that install one path.
    PathConflict = "path-conflict", Error, Check, None;
    /// A variant wheel whose variant metadata installers cannot read.
    VariantMetadata = "variant-metadata", Error, Check, Some(REWRITE_VARIANTS);
    /// Variant wheels of one version that disagree.
    VariantInconsistent = "variant-inconsistent", Error, Check, Some(REWRITE_VARIANTS);
    /// Two variants of one version with the same properties.
    VariantDuplicateProperties = "variant-duplicate-properties", Error, Check, Some(REWRITE_VARIANTS);
    /// A variant without device code for a processor its properties name.
    VariantCodeMismatch = "variant-code-mismatch", Error, Check, Some(REWRITE_VARIANTS);
    /// A variant with device code for processors its properties do not name.
    VariantExtraCode = "variant-extra-code", Warning, Check, None;
    /// Variant wheels without a null variant or a plain wheel.
    VariantNoFallback = "variant-no-fallback", Warning, Check, Some("publish the fat wheel as the null variant (`wheelfix variants --null`) or plain (`--plain`) beside the variants");
    /// A release's variant set with wheels missing: a part an interrupted run left, or a build
    /// without labels another build has.
    VariantSetIncomplete = "variant-set-incomplete", Error, Check, Some("write the release's variants again into an empty directory (`wheelfix variants … -w DIR`), which publishes a release whole, and index that directory");
    /// Provider data no installer may act on: a requirement that is not PEP 508 or names a
    /// URL, a plugin-api not of the form `module:object`.
    VariantProviderInvalid = "variant-provider-invalid", Error, Check, Some(REWRITE_VARIANTS);
    /// Static properties that declare every machine one GPU, with variants for others beside
    /// them that no machine can then choose.
    VariantStaticHides = "variant-static-hides", Error, Check, Some("declare static GPU targets (`--static-gpu-target`) only on an index that serves that kind of machine alone, with its variants only; for an index of every GPU, leave them out");

    // Both.
    /// A kpack-split binary whose archive for a GPU no file installs.
    KpackUnresolved = "kpack-unresolved", Error, Both, None;
    /// A kpack-split binary whose markers or wrappers the runtime cannot use.
    KpackMarkerUnusable = "kpack-marker-unusable", Error, Both, None;
    /// A kpack archive that does not read back as its table of contents says.
    KpackArchiveDamaged = "kpack-archive-damaged", Error, Both, None;
    /// Binaries built for several ROCm ABIs (`libamdhip64.so.6` beside `.so.7`).
    RocmAbiMixed = "rocm-abi-mixed", Error, Both, None;

    // An installed environment (`doctor`).
    /// No GPU the runtime would use.
    NoGpu = "no-gpu", Error, Doctor, None;
    /// A binary with device code, none of which runs on the GPU.
    NoCodeForGpu = "no-code-for-gpu", Error, Doctor, None;
    /// `HSA_OVERRIDE_GFX_VERSION` set although the GPU's own code is installed.
    OverrideHidesNative = "override-hides-native", Warning, Doctor, None;
    /// A library's kernel databases, none of which is for the GPU.
    NoDatabaseForGpu = "no-database-for-gpu", Error, Doctor, None;
    /// A library the loader finds nowhere.
    LibraryNotFound = "library-not-found", Error, Doctor, None;
    /// A distribution whose METADATA or RECORD cannot be read: the verdict is "cannot tell".
    DistributionUnreadable = "distribution-unreadable", Error, Doctor, None;
    /// A host binary that cannot be read: the verdict is "cannot tell".
    BinaryUnreadable = "binary-unreadable", Error, Doctor, None;
    /// Device wheels for another GPU installed where this GPU's are missing.
    WrongGpuInstalled = "wrong-gpu-installed", Error, Doctor, None;
    /// An exact pin between installed distributions that no longer holds.
    PinNotHeld = "pin-not-held", Error, Doctor, None;
}

const REBUILD_SELECTOR: &str = "rebuild it from the set as it is: `wheelfix selector` for a selector, `wheelfix metapackage` for a per-architecture metapackage";
const BUILD_FOR_ARCHITECTURE: &str = "build with `--offload-arch` for the index's architecture, or publish the wheel only in indexes of the architectures it has code for";
const REWRITE_VARIANTS: &str =
    "write the variants again from the fat wheel, all at once: `wheelfix variants --all-targets --null -w DIR fat.whl`";

impl Kind {
    /// The kind of a name, if it is one.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// The kinds a command reports, in the table's order: what its JSON schema lists.
    pub fn reported_by_check() -> impl Iterator<Item = Kind> {
        Kind::ALL.iter().copied().filter(|k| k.reported_by().includes_check())
    }

    pub fn reported_by_doctor() -> impl Iterator<Item = Kind> {
        Kind::ALL.iter().copied().filter(|k| k.reported_by().includes_doctor())
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kinds sort by name, so that findings are listed as they were when kinds were strings.
impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<str> for Kind {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Kind {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let name = String::deserialize(d)?;
        Kind::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown problem kind `{name}`")))
    }
}

impl std::str::FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(name: &str) -> Result<Kind, UnknownKind> {
        Kind::from_name(name).ok_or_else(|| UnknownKind(name.to_string()))
    }
}

/// A name that is no kind of problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a kind of problem wheelfix reports")]
pub struct UnknownKind(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_name_of_lowercase_words() {
        let mut names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        for name in &names {
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{name}");
            assert_eq!(Kind::from_name(name).map(Kind::name), Some(*name));
        }
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "two kinds of one name");
    }

    #[test]
    fn problems_both_commands_find_have_one_name() {
        for kind in [Kind::KpackMarkerUnusable, Kind::KpackArchiveDamaged, Kind::RocmAbiMixed, Kind::KpackUnresolved] {
            assert_eq!(kind.reported_by(), Reporter::Both, "{kind}");
        }
        for gone in ["rocm-abi-mix", "archive-damaged", "kpack-marker", "kpack-missing-code"] {
            assert_eq!(Kind::from_name(gone), None, "{gone}");
        }
    }

    #[test]
    fn kinds_read_back_from_json_and_sort_by_name() {
        let json = serde_json::to_string(&[Kind::PathConflict, Kind::NoGpu]).unwrap();
        assert_eq!(json, r#"["path-conflict","no-gpu"]"#);
        let back: Vec<Kind> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, [Kind::PathConflict, Kind::NoGpu]);
        assert!(serde_json::from_str::<Kind>(r#""rocm-abi-mix""#).is_err());
        assert!(Kind::AbsentPin < Kind::FilenameConflict);
    }
}
