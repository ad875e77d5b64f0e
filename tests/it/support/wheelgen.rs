//! Test fixtures: wheels assembled in the test, with a correct RECORD unless told otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

/// A wheel to write.
#[derive(Clone, Debug)]
pub struct WheelSpec {
    pub name: String,
    pub version: String,
    pub python: String,
    pub abi: String,
    /// Platform tags of the file name (joined with `.`).
    pub platform: String,
    /// `Tag:` lines of WHEEL; `None` = the file name's tags.
    pub wheel_tags: Option<Vec<String>>,
    pub purelib: bool,
    /// Extra METADATA header lines.
    pub metadata: Vec<String>,
    pub files: Vec<(String, Vec<u8>)>,
    /// Members to leave out of RECORD.
    pub unrecorded: Vec<String>,
    /// Member → a wrong hash to record for it.
    pub bad_hash: Vec<String>,
}

impl WheelSpec {
    pub fn new(name: &str, version: &str, tag: &str) -> Self {
        let mut parts = tag.splitn(3, '-');
        WheelSpec {
            name: name.into(),
            version: version.into(),
            python: parts.next().unwrap().into(),
            abi: parts.next().unwrap().into(),
            platform: parts.next().unwrap().into(),
            wheel_tags: None,
            purelib: false,
            metadata: Vec::new(),
            files: Vec::new(),
            unrecorded: Vec::new(),
            bad_hash: Vec::new(),
        }
    }

    pub fn file(mut self, path: &str, data: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), data.into()));
        self
    }

    pub fn file_name(&self) -> String {
        format!("{}-{}-{}-{}-{}.whl", self.name, self.version, self.python, self.abi, self.platform)
    }

    pub fn dist_info(&self) -> String {
        format!("{}-{}.dist-info", self.name, self.version)
    }

    fn tag_lines(&self) -> Vec<String> {
        if let Some(tags) = &self.wheel_tags {
            return tags.clone();
        }
        let mut out = Vec::new();
        for py in self.python.split('.') {
            for abi in self.abi.split('.') {
                for plat in self.platform.split('.') {
                    out.push(format!("{py}-{abi}-{plat}"));
                }
            }
        }
        out
    }

    /// Every member with its content, RECORD last.
    pub fn members(&self) -> Vec<(String, Vec<u8>)> {
        let di = self.dist_info();
        let mut members = self.files.clone();
        let mut wheel = format!("Wheel-Version: 1.0\nGenerator: wheelfix-tests\nRoot-Is-Purelib: {}\n", self.purelib);
        for t in self.tag_lines() {
            wheel.push_str(&format!("Tag: {t}\n"));
        }
        wheel.push('\n');
        let mut metadata =
            format!("Metadata-Version: 2.1\nName: {}\nVersion: {}\n", self.name.replace('_', "-"), self.version);
        for line in &self.metadata {
            metadata.push_str(line);
            metadata.push('\n');
        }
        metadata.push_str("\nA test wheel made by wheelfix's tests.\n");
        members.push((format!("{di}/METADATA"), metadata.into_bytes()));
        members.push((format!("{di}/WHEEL"), wheel.into_bytes()));
        let mut record = String::new();
        for (path, data) in &members {
            if self.unrecorded.contains(path) {
                continue;
            }
            let mut digest = Sha256::digest(data).to_vec();
            if self.bad_hash.contains(path) {
                digest[0] ^= 0xff;
            }
            let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            record.push_str(&format!("{path},sha256={hash},{}\n", data.len()));
        }
        record.push_str(&format!("{di}/RECORD,,\n"));
        members.push((format!("{di}/RECORD"), record.into_bytes()));
        members
    }

    /// Write the wheel into `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(self.file_name());
        write_zip(&path, &self.members());
        path
    }

    /// [`WheelSpec::write`] with every member stored, not deflated.
    pub fn write_stored(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(self.file_name());
        write_zip_with(&path, &self.members(), zip::CompressionMethod::Stored);
        path
    }
}

/// A deflated zip of `members`, in order, with a fixed timestamp; ELF files get mode 0755.
pub fn write_zip(path: &Path, members: &[(String, Vec<u8>)]) {
    write_zip_with(path, members, zip::CompressionMethod::Deflated)
}

fn write_zip_with(path: &Path, members: &[(String, Vec<u8>)], method: zip::CompressionMethod) {
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    for (name, data) in members {
        let mode = if data.starts_with(b"\x7fELF") { 0o755 } else { 0o644 };
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(zip::DateTime::from_date_and_time(2024, 1, 1, 0, 0, 0).unwrap())
            .unix_permissions(mode);
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
}
