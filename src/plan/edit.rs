//! A plan as data: every change to one wheel, named, and nothing done yet. The writer
//! ([`crate::writer`]) applies it: it reads the sources the plan names, strips and patches them,
//! deflates what is new and copies the rest as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::repair::sbom::SbomPlan;
use super::thin::ThinChange;
use crate::elf::patch::ElfEdit;
use crate::wheel::WheelFilename;

/// A new file for the output wheel.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub content: Content,
    /// Unix permission bits; `None` keeps the replaced member's.
    pub mode: Option<u32>,
}

/// What a new member holds, as the plan knows it.
#[derive(Debug, Clone)]
pub enum Content {
    /// Bytes made by the plan: WHEEL, METADATA, a script shim.
    Bytes(Vec<u8>),
    /// An ELF file, changed: a wheel member or a library of this machine, stripped when asked,
    /// then patched.
    Elf(ElfChange),
    /// The bill of materials of the vendored libraries, rendered once their copies exist (it
    /// names the sha256 of each).
    Sbom(Box<SbomPlan>),
    /// A member whose offload bundles keep only some targets' code objects (`thin`).
    Thin(Box<ThinChange>),
}

/// One ELF file to write changed.
#[derive(Debug, Clone)]
pub struct ElfChange {
    pub source: ElfSource,
    /// `strip -s` it first (`repair --strip`).
    pub strip: bool,
    /// What to change (may change nothing: a file only stripped).
    pub edit: ElfEdit,
}

/// Where an ELF file to change comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfSource {
    /// A member of the input wheel, by its input path.
    Member(String),
    /// A file on this machine: `path` as the library search found it (the name errors give),
    /// `real` with its symlinks resolved (what is read).
    File { path: String, real: PathBuf },
}

impl ElfSource {
    /// How errors name it: the member's path, or the file as it was found.
    pub fn name(&self) -> &str {
        match self {
            ElfSource::Member(path) => path,
            ElfSource::File { path, .. } => path,
        }
    }
}

impl NewMember {
    pub fn new(data: Vec<u8>, mode: Option<u32>) -> NewMember {
        NewMember { content: Content::Bytes(data), mode }
    }

    /// The bytes, when the plan holds them.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.content {
            Content::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// What to change in a wheel. Everything not named here is copied unchanged.
#[derive(Debug, Clone)]
pub struct Plan {
    pub filename: WheelFilename,
    /// Old member path → new member path (a version change renames `.dist-info`).
    pub renames: BTreeMap<String, String>,
    /// Members whose content changes, by their *output* path.
    pub replace: BTreeMap<String, NewMember>,
    /// Members added, by output path (written before the `.dist-info` directory).
    pub add: BTreeMap<String, NewMember>,
    /// Members dropped, by input path.
    pub remove: BTreeSet<String>,
    /// Deflate level for new members (zlib levels 0–9).
    pub compression_level: u32,
}

impl Plan {
    pub fn new(filename: WheelFilename) -> Self {
        Plan {
            filename,
            renames: BTreeMap::new(),
            replace: BTreeMap::new(),
            add: BTreeMap::new(),
            remove: BTreeSet::new(),
            compression_level: 6,
        }
    }

    /// The output path of an input member.
    pub fn output_name<'a>(&'a self, input: &'a str) -> &'a str {
        self.renames.get(input).map(String::as_str).unwrap_or(input)
    }

    /// The output's `.dist-info` directory, given the input's. Ex) `torch-2.15.0+rocm10.1.0.dist-info`
    pub fn output_dist_info(&self, input_dist_info: &str) -> String {
        let prefix = format!("{input_dist_info}/");
        self.renames
            .iter()
            .find(|(old, _)| old.starts_with(&prefix))
            .and_then(|(_, new)| new.split_once('/'))
            .map_or_else(|| input_dist_info.to_string(), |(dir, _)| dir.to_string())
    }

    /// Whether the plan changes any member (a file name change alone changes none).
    pub fn changes_members(&self) -> bool {
        !self.replace.is_empty() || !self.add.is_empty() || !self.remove.is_empty() || !self.renames.is_empty()
    }

    /// The new member at output path `name`, replaced or added.
    pub fn new_member(&self, name: &str) -> Option<&NewMember> {
        self.replace.get(name).or_else(|| self.add.get(name))
    }

    /// Put `member` at output path `path`: it replaces the input's member of that path, which
    /// `input_has` says exists (a wheel repaired before already holds
    /// `<pkg>.libs/<lib-hash>.so`), or is added.
    pub fn add_or_replace(&mut self, path: &str, member: NewMember, input_has: impl Fn(&str) -> bool) {
        if input_has(path) && self.output_name(path) == path {
            self.replace.insert(path.to_string(), member);
        } else {
            self.add.insert(path.to_string(), member);
        }
    }
}
