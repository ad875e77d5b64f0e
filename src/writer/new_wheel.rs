//! The one builder of the wheels wheelfix makes from nothing (`metapackage`, `selector`,
//! `split`'s device wheels): their METADATA, WHEEL and RECORD composed in one place, written
//! reproducibly (sorted as given, fixed timestamps from `SOURCE_DATE_EPOCH`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::WriteError;
use crate::wheel::filename::escape_version;
use crate::zip::Spilled;

/// A wheel to write: its metadata, its tags, and the members beside its `.dist-info`.
#[derive(Debug, Clone, Default)]
pub struct NewWheel {
    /// The project name as METADATA gives it. Ex) `rocm-torch`
    pub name: String,
    /// As METADATA gives it. Ex) `10.1.0+gfx942.1a2b3c4d`
    pub version: String,
    pub summary: String,
    /// `Provides-Extra` names, in order. Ex) `device-gfx942`
    pub provides_extra: Vec<String>,
    /// `Requires-Dist` lines, in order. Ex) `torch==2.9.0; extra == "device-gfx942"`
    pub requires_dist: Vec<String>,
    /// The index the release is published in (`--index-url`): a `Project-URL` line.
    pub index_url: Option<String>,
    /// The file name's tag triple, each part compressed. Ex) `py3-none-manylinux_2_28_x86_64`
    pub file_tags: String,
    /// WHEEL's `Tag:` lines, in order. Ex) `py3-none-manylinux_2_28_x86_64`
    pub tags: Vec<String>,
    pub root_is_purelib: bool,
    /// WHEEL ends with an empty line. Metapackages have always been written so (as bdist_wheel
    /// writes WHEEL) and the other kinds never were; each keeps its bytes, since a changed byte
    /// under an unchanged file name conflicts with what an index already holds.
    pub wheel_ends_with_empty_line: bool,
    /// Members outside the `.dist-info`, compressed (or stored) into files of their own, in the
    /// order written. Ex) (`pkg/.kpack/libk.so_gfx942.kpack`, its archive)
    pub members: Vec<(String, Arc<Spilled>)>,
    /// `SOURCE_DATE_EPOCH`: the members' time (else 1980-01-01).
    pub source_date_epoch: Option<i64>,
}

impl NewWheel {
    /// The name as wheel file names and `.dist-info` write it. Ex) `rocm-torch` → `rocm_torch`
    pub fn distribution(&self) -> String {
        self.name.replace(['-', '.'], "_")
    }

    /// Ex) `rocm_torch-10.1.0+gfx942.1a2b3c4d-py3-none-manylinux_2_28_x86_64.whl`
    pub fn file_name(&self) -> String {
        format!("{}-{}-{}.whl", self.distribution(), escape_version(&self.version), self.file_tags)
    }

    /// Ex) `rocm_torch-10.1.0+gfx942.1a2b3c4d.dist-info`
    pub fn dist_info(&self) -> String {
        format!("{}-{}.dist-info", self.distribution(), escape_version(&self.version))
    }

    /// Core metadata 2.1: name, version, summary, extras, requirements.
    pub fn metadata(&self) -> String {
        let mut text = format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {}\nSummary: {}\n",
            self.name, self.version, self.summary
        );
        for extra in &self.provides_extra {
            text.push_str(&format!("Provides-Extra: {extra}\n"));
        }
        for requirement in &self.requires_dist {
            text.push_str(&format!("Requires-Dist: {requirement}\n"));
        }
        if let Some(url) = &self.index_url {
            text.push_str(&format!("Project-URL: {}, {url}\n", crate::wheel::metadata::INDEX_LABEL));
        }
        text
    }

    /// The WHEEL file, naming wheelfix as its generator.
    pub fn wheel_file(&self) -> String {
        let mut text = format!(
            "Wheel-Version: 1.0\nGenerator: wheelfix {}\nRoot-Is-Purelib: {}\n",
            env!("CARGO_PKG_VERSION"),
            self.root_is_purelib
        );
        for tag in &self.tags {
            text.push_str(&format!("Tag: {tag}\n"));
        }
        if self.wheel_ends_with_empty_line {
            text.push('\n');
        }
        text
    }

    /// Write it into `dir` under [`NewWheel::file_name`]: the members, METADATA, WHEEL, then
    /// RECORD naming every one's digest.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, WriteError> {
        let dist_info = self.dist_info();
        let own = vec![
            (format!("{dist_info}/METADATA"), self.metadata().into_bytes()),
            (format!("{dist_info}/WHEEL"), self.wheel_file().into_bytes()),
        ];
        super::write_new_wheel_with(
            &dist_info,
            &self.members,
            &own,
            &dir.join(self.file_name()),
            self.source_date_epoch,
        )
    }
}
