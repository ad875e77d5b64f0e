//! The GPUs of this machine as ROCm's runtime sees them: the KFD topology the amdgpu driver
//! publishes in sysfs (`class/kfd/kfd/topology/nodes/<n>/properties`), then what the
//! environment variables the runtime honours make of it (`HSA_OVERRIDE_GFX_VERSION`,
//! `ROCR_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`, `HSA_XNACK`).

use std::path::Path;

use serde::Serialize;

use crate::gpu::targets::{Feature, TargetId};

/// A target feature's mode on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    On,
    Off,
    /// The processor has no such mode.
    Unsupported,
    /// Not known (a GPU named without it): code built for either mode counts.
    Any,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Gpu {
    /// Its KFD node (`None`: named with `--gpu`).
    pub node: Option<u32>,
    /// The processor the hardware is. Ex) `gfx942`
    pub native: String,
    /// The processor the runtime loads code for: `native`, or what `HSA_OVERRIDE_GFX_VERSION`
    /// makes of it.
    pub processor: String,
    pub sramecc: Mode,
    pub xnack: Mode,
    /// The full target id the runtime matches code objects against. Ex) `gfx942:sramecc+:xnack-`
    pub target_id: String,
    /// Its UUID as the runtime names it (`ROCR_VISIBLE_DEVICES` takes it), from the node's
    /// `unique_id`. Ex) `GPU-bf4dfbc2c8e4a5d6`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

impl Gpu {
    fn new(node: Option<u32>, native: &str, sramecc: Option<bool>, xnack: Option<bool>) -> Gpu {
        let mode = |supported: bool, on: Option<bool>| match (supported, on) {
            (false, _) => Mode::Unsupported,
            (true, Some(true)) => Mode::On,
            (true, Some(false)) => Mode::Off,
            (true, None) => Mode::Any,
        };
        let supports = |feature: &str| crate::gpu::targets::supported_features(native).contains(&feature);
        let sramecc = mode(supports("sramecc"), sramecc);
        let xnack = mode(supports("xnack"), xnack);
        let mut gpu = Gpu {
            node,
            native: native.to_string(),
            processor: native.to_string(),
            sramecc,
            xnack,
            target_id: String::new(),
            uuid: None,
        };
        gpu.target_id = gpu.requested().to_string();
        gpu
    }

    /// The device as a target the compatibility rules of [`crate::gpu::targets`] take.
    pub fn requested(&self) -> TargetId {
        let settings = [("sramecc", self.sramecc), ("xnack", self.xnack)];
        let features = settings
            .into_iter()
            .filter(|(_, mode)| matches!(mode, Mode::On | Mode::Off))
            .map(|(name, mode)| Feature { name, on: mode == Mode::On });
        TargetId::of(&self.processor, features)
    }
}

/// The most of a sysfs attribute read: a `properties` file is a few hundred bytes; a FIFO or a
/// device put in its place is not read at all (regular files only, never waited on).
const ATTRIBUTE_MAX: u64 = 64 << 10;

/// A sysfs attribute's text, bounded, or why not.
fn attribute(path: &Path) -> std::io::Result<String> {
    crate::files::read_text_bounded(path, ATTRIBUTE_MAX)
}

/// `HSA_CAP_SRAM_EDCSUPPORTED` in a node's `capability` (the kernel's `kfd_topology.h`).
const CAP_SRAM_EDC: u64 = 0x0400_0000;

/// The GPUs the runtime would use, and how they were found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Machine {
    pub gpus: Vec<Gpu>,
    /// GPUs `ROCR_VISIBLE_DEVICES`/`HIP_VISIBLE_DEVICES` hide.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<Gpu>,
    /// `sysfs DIR` or `--gpu`.
    pub source: String,
    /// The runtime's environment variables that were set, as (name, value).
    pub environment: Vec<(String, String)>,
    /// What was made of them, and what could not be read.
    pub notes: Vec<String>,
}

/// The variables read, in the order the runtime applies them.
pub const VARIABLES: &[&str] =
    &["HSA_OVERRIDE_GFX_VERSION", "HSA_XNACK", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"];

impl Machine {
    /// GPUs named by the user (`--gpu gfx942`, `--gpu gfx90a:xnack+`), with the environment applied.
    pub fn named(targets: &[TargetId], env: &dyn Fn(&str) -> Option<String>) -> Machine {
        let mut machine = Machine { source: "--gpu".into(), ..Machine::default() };
        for t in targets {
            let mode = |name: &str| t.features().find(|f| f.name == name).map(|f| f.on);
            machine.gpus.push(Gpu::new(None, t.processor(), mode("sramecc"), mode("xnack")));
        }
        machine.apply(env, false);
        machine
    }

    /// The GPUs of the KFD topology under `sysfs` (`/sys` on a machine), with the environment
    /// applied.
    pub fn read(sysfs: &Path, env: &dyn Fn(&str) -> Option<String>) -> Machine {
        let nodes_dir = sysfs.join("class/kfd/kfd/topology/nodes");
        let mut machine = Machine { source: format!("{}", nodes_dir.display()), ..Machine::default() };
        let Ok(entries) = std::fs::read_dir(&nodes_dir) else {
            machine.notes.push(format!(
                "no KFD topology at {}: the amdgpu driver is not loaded, or this is a container without /sys/class/kfd",
                nodes_dir.display()
            ));
            return machine;
        };
        let mut nodes: Vec<u32> =
            entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect::<Vec<u32>>();
        nodes.sort();
        let noretry = sysfs.join("module/amdgpu/parameters/noretry");
        let xnack_default = attribute(&noretry)
            .map_err(|e| {
                if noretry.exists() {
                    machine.notes.push(format!("{}: not read ({e}): XNACK taken as off", noretry.display()));
                }
            })
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .and_then(|noretry| match noretry {
                0 => Some(true),
                1 => Some(false),
                _ => None,
            });
        for node in nodes {
            let text = match attribute(&nodes_dir.join(node.to_string()).join("properties")) {
                Ok(text) => text,
                Err(e) => {
                    machine.notes.push(format!("node {node}: properties not read ({e})"));
                    continue;
                }
            };
            let property = |key: &str| -> Option<u64> {
                text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            };
            let version = property("gfx_target_version").unwrap_or(0);
            if version == 0 {
                continue; // a CPU node
            }
            let Some(native) = processor_of_version(version) else {
                machine.notes.push(format!("node {node}: gfx_target_version {version} names no processor"));
                continue;
            };
            let sramecc = property("capability").map(|c| c & CAP_SRAM_EDC != 0);
            // Without `noretry` the driver's default holds: it retries no page faults (XNACK off).
            let mut gpu = Gpu::new(Some(node), &native, sramecc, Some(xnack_default.unwrap_or(false)));
            gpu.uuid = property("unique_id").filter(|id| *id != 0).map(|id| format!("GPU-{id:016x}"));
            machine.gpus.push(gpu);
        }
        machine.apply(env, true);
        machine
    }

    /// The runtime's variables, applied as it applies them.
    fn apply(&mut self, env: &dyn Fn(&str) -> Option<String>, from_hardware: bool) {
        for name in VARIABLES {
            if let Some(value) = env(name) {
                self.environment.push((name.to_string(), value));
            }
        }
        let set = self.environment.clone();
        let var = |name: &str| set.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        if let Some(value) = var("HSA_XNACK") {
            let on = value.trim() == "1";
            for gpu in self.gpus.iter_mut().filter(|g| g.xnack != Mode::Unsupported) {
                gpu.xnack = if on { Mode::On } else { Mode::Off };
            }
        }
        if let Some(value) = var("HSA_OVERRIDE_GFX_VERSION") {
            match override_processor(&value) {
                Some(processor) => {
                    for gpu in &mut self.gpus {
                        gpu.processor = processor.clone();
                    }
                    self.notes.push(format!(
                        "HSA_OVERRIDE_GFX_VERSION={value}: the runtime loads {processor} code on every GPU, whatever it is"
                    ));
                }
                None => self.notes.push(format!(
                    "HSA_OVERRIDE_GFX_VERSION={value} is not MAJOR.MINOR.STEPPING: the runtime cannot use it"
                )),
            }
        }
        // Device selection applies to hardware the runtime enumerates, not to named GPUs.
        if from_hardware {
            for name in ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"] {
                if let Some(value) = var(name) {
                    self.select(name, &value);
                }
            }
        }
        for gpu in &mut self.gpus {
            gpu.target_id = gpu.requested().to_string();
        }
    }

    /// Keep the GPUs a `*_VISIBLE_DEVICES` list names: indices among those still visible, or
    /// UUIDs (`GPU-<unique id in hex>`, as `rocminfo` prints them). The runtime stops at the
    /// first item that names no GPU.
    fn select(&mut self, name: &str, value: &str) {
        let mut keep = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let by_uuid =
                || self.gpus.iter().position(|g| g.uuid.as_deref().is_some_and(|u| u.eq_ignore_ascii_case(item)));
            let found = match item.parse::<usize>() {
                Ok(i) => (i < self.gpus.len()).then_some(i),
                Err(_) => by_uuid(),
            };
            match found {
                Some(i) => keep.push(i),
                None => {
                    self.notes.push(format!("{name}: `{item}` names no GPU (the runtime ignores it and the rest)"));
                    break;
                }
            }
        }
        let all = std::mem::take(&mut self.gpus);
        for (i, gpu) in all.into_iter().enumerate() {
            if keep.contains(&i) { self.gpus.push(gpu) } else { self.hidden.push(gpu) }
        }
        self.notes.push(format!("{name}={value}: {} GPU(s) visible", self.gpus.len()));
    }
}

/// The processor of a KFD `gfx_target_version` (`major*10000 + minor*100 + stepping`, the last
/// two printed in hex). Ex) 90402 → `gfx942`, 90010 → `gfx90a`, 110501 → `gfx1151`
pub fn processor_of_version(version: u64) -> Option<String> {
    let (major, minor, stepping) = (version / 10000, version / 100 % 100, version % 100);
    (major > 0 && minor < 16 && stepping < 16).then(|| format!("gfx{major}{minor:x}{stepping:x}"))
}

/// The processor `HSA_OVERRIDE_GFX_VERSION` names. Ex) `9.4.2` → `gfx942`, `11.0.0` → `gfx1100`
pub fn override_processor(value: &str) -> Option<String> {
    let parts: Vec<u64> = value.trim().split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [major, minor, stepping] = parts[..] else { return None };
    processor_of_version(major * 10000 + minor * 100 + stepping)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(dir: &Path, n: u32, properties: &str) {
        let d = dir.join("class/kfd/kfd/topology/nodes").join(n.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("properties"), properties).unwrap();
    }

    #[test]
    fn versions_name_processors_as_the_runtime_does() {
        assert_eq!(processor_of_version(90402).as_deref(), Some("gfx942"));
        assert_eq!(processor_of_version(90010).as_deref(), Some("gfx90a"));
        assert_eq!(processor_of_version(110501).as_deref(), Some("gfx1151"));
        assert_eq!(processor_of_version(120001).as_deref(), Some("gfx1201"));
        assert_eq!(override_processor("11.0.0").as_deref(), Some("gfx1100"));
        assert_eq!(override_processor("9.4"), None);
    }

    #[test]
    fn the_topology_gives_gpus_their_modes_and_the_environment_changes_them() {
        let dir = tempfile::tempdir().unwrap();
        node(dir.path(), 0, "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n");
        node(dir.path(), 1, "simd_count 1216\ngfx_target_version 90402\ncapability 67119744\n");
        node(dir.path(), 2, "gfx_target_version 90010\ncapability 0\n");
        let none = |_: &str| None;
        let m = Machine::read(dir.path(), &none);
        let ids: Vec<&str> = m.gpus.iter().map(|g| g.target_id.as_str()).collect();
        assert_eq!(ids, ["gfx942:sramecc+:xnack-", "gfx90a:sramecc-:xnack-"]);
        let env = |name: &str| match name {
            "HSA_XNACK" => Some("1".to_string()),
            "ROCR_VISIBLE_DEVICES" => Some("1".to_string()),
            "HSA_OVERRIDE_GFX_VERSION" => Some("9.4.2".to_string()),
            _ => None,
        };
        let m = Machine::read(dir.path(), &env);
        assert_eq!(m.gpus.len(), 1);
        assert_eq!((m.gpus[0].native.as_str(), m.gpus[0].target_id.as_str()), ("gfx90a", "gfx942:sramecc-:xnack+"));
        assert_eq!(m.hidden.len(), 1);
        let m = Machine::read(&dir.path().join("nothing"), &none);
        assert!(m.gpus.is_empty() && m.notes[0].contains("no KFD topology"), "{:?}", m.notes);
    }

    #[test]
    fn uuids_select_gpus_as_the_runtime_takes_them() {
        let dir = tempfile::tempdir().unwrap();
        node(dir.path(), 1, "gfx_target_version 90402\nunique_id 13784950848463611350\n");
        node(dir.path(), 2, "gfx_target_version 110000\nunique_id 42\n");
        let env = |name: &str| (name == "ROCR_VISIBLE_DEVICES").then(|| "GPU-000000000000002A".to_string());
        let m = Machine::read(dir.path(), &env);
        assert_eq!(m.gpus.iter().map(|g| g.native.as_str()).collect::<Vec<_>>(), ["gfx1100"]);
        assert_eq!(m.hidden[0].uuid.as_deref(), Some("GPU-bf4dfbc2c8e4a5d6"));
        let env = |name: &str| (name == "ROCR_VISIBLE_DEVICES").then(|| "GPU-ffff,0".to_string());
        let m = Machine::read(dir.path(), &env);
        assert!(m.gpus.is_empty() && m.notes.iter().any(|n| n.contains("names no GPU")), "{:?}", m.notes);
    }

    #[test]
    fn sysfs_files_that_are_not_files_are_noted_never_waited_on_or_read_whole() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        node(dir.path(), 1, "gfx_target_version 90402\n");
        let nodes = dir.path().join("class/kfd/kfd/topology/nodes");
        // A FIFO as a node's properties (no writer: a plain read would block forever), and
        // /dev/zero as another's (a plain read would grow without end).
        std::fs::create_dir_all(nodes.join("2")).unwrap();
        let fifo = std::ffi::CString::new(nodes.join("2/properties").as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::create_dir_all(nodes.join("3")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", nodes.join("3/properties")).unwrap();
        let params = dir.path().join("module/amdgpu/parameters");
        std::fs::create_dir_all(&params).unwrap();
        let noretry = std::ffi::CString::new(params.join("noretry").as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(noretry.as_ptr(), 0o600) }, 0);
        let m = Machine::read(dir.path(), &|_| None);
        assert_eq!(m.gpus.len(), 1);
        let notes = m.notes.join("\n");
        assert!(notes.contains("node 2: properties not read (a FIFO"), "{notes}");
        assert!(notes.contains("node 3: properties not read (a device"), "{notes}");
        assert!(notes.contains("noretry: not read (a FIFO"), "{notes}");
    }
}
