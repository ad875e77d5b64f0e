//! CPU architectures and C libraries as platform tags name them.

use std::fmt;

/// An architecture a manylinux or musllinux policy can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    X86_64,
    I686,
    Aarch64,
    Armv7l,
    Ppc64le,
    Ppc64,
    S390x,
    Riscv64,
    Loongarch64,
}

pub const EM_386: u16 = 3;
pub const EM_ARM: u16 = 40;
pub const EM_PPC64: u16 = 21;
pub const EM_S390: u16 = 22;
pub const EM_X86_64: u16 = 62;
pub const EM_CUDA: u16 = 190;
pub const EM_AARCH64: u16 = 183;
pub const EM_AMDGPU: u16 = 224;
pub const EM_RISCV: u16 = 243;
pub const EM_LOONGARCH: u16 = 258;

impl Arch {
    pub const ALL: [Arch; 9] = [
        Arch::X86_64,
        Arch::I686,
        Arch::Aarch64,
        Arch::Armv7l,
        Arch::Ppc64le,
        Arch::Ppc64,
        Arch::S390x,
        Arch::Riscv64,
        Arch::Loongarch64,
    ];

    /// The name used in platform tags and policy files. Ex) `x86_64`
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::I686 => "i686",
            Arch::Aarch64 => "aarch64",
            Arch::Armv7l => "armv7l",
            Arch::Ppc64le => "ppc64le",
            Arch::Ppc64 => "ppc64",
            Arch::S390x => "s390x",
            Arch::Riscv64 => "riscv64",
            Arch::Loongarch64 => "loongarch64",
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// The architecture an ELF header describes, as auditwheel reads it: 32-bit ARM counts as
    /// `armv7l` only with the EABI version 5 hard-float ABI.
    pub fn from_elf(machine: u16, is_64: bool, little_endian: bool, flags: u32) -> Option<Arch> {
        match (machine, is_64) {
            (EM_X86_64, true) => Some(Arch::X86_64),
            (EM_386, false) => Some(Arch::I686),
            (EM_AARCH64, true) => Some(Arch::Aarch64),
            (EM_ARM, false) => {
                const EF_ARM_EABIMASK: u32 = 0xff00_0000;
                const EF_ARM_EABI_VER5: u32 = 0x0500_0000;
                const EF_ARM_ABI_FLOAT_HARD: u32 = 0x400;
                let eabi5 = flags & EF_ARM_EABIMASK == EF_ARM_EABI_VER5;
                (eabi5 && flags & EF_ARM_ABI_FLOAT_HARD != 0).then_some(Arch::Armv7l)
            }
            (EM_PPC64, true) => Some(if little_endian { Arch::Ppc64le } else { Arch::Ppc64 }),
            (EM_S390, true) => Some(Arch::S390x),
            (EM_RISCV, true) => Some(Arch::Riscv64),
            (EM_LOONGARCH, true) => Some(Arch::Loongarch64),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A short human name for an ELF machine no policy covers. Ex) 8 → `mips`
pub fn machine_name(machine: u16) -> String {
    match machine {
        2 => "sparc".into(),
        8 => "mips".into(),
        20 => "ppc".into(),
        43 => "sparcv9".into(),
        EM_ARM => "arm (not EABI5 hard-float)".into(),
        EM_AMDGPU => "amdgpu".into(),
        EM_CUDA => "cuda".into(),
        m => format!("machine {m}"),
    }
}

/// The operating system a platform tag is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Android,
    Windows,
    MacOs,
    Ios,
    /// `any`
    Any,
    /// A tag of no system wheelfix knows.
    Other,
}

impl Os {
    /// Whether wheelfix has policies for this system's binaries.
    pub fn has_policies(self) -> bool {
        matches!(self, Os::Linux | Os::Android | Os::Any | Os::Other)
    }

    pub fn name(self) -> &'static str {
        match self {
            Os::Linux => "Linux",
            Os::Android => "Android",
            Os::Windows => "Windows",
            Os::MacOs => "macOS",
            Os::Ios => "iOS",
            Os::Any => "any",
            Os::Other => "unknown-platform",
        }
    }
}

/// musl's C library, as a binary names it: `libc.so` (what its loader answers to) or
/// `libc.musl-<arch>.so.1`.
pub fn is_musl_libc(soname: &str) -> bool {
    soname == "libc.so" || (soname.starts_with("libc.musl-") && soname.ends_with(".so.1"))
}

/// The C library family a policy file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Libc {
    Glibc,
    Musl,
    /// Android's bionic (`android_<api>_<abi>` tags).
    Android,
}

impl Libc {
    /// Ex) `glibc`
    pub fn as_str(self) -> &'static str {
        match self {
            Libc::Glibc => "glibc",
            Libc::Musl => "musl",
            Libc::Android => "android",
        }
    }

    /// The family of policies for this libc. Ex) `manylinux`
    pub fn policy_family(self) -> &'static str {
        match self {
            Libc::Glibc => "manylinux",
            Libc::Musl => "musllinux",
            Libc::Android => "android",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_needs_eabi5_hard_float() {
        assert_eq!(Arch::from_elf(EM_ARM, false, true, 0x0500_0400), Some(Arch::Armv7l));
        assert_eq!(Arch::from_elf(EM_ARM, false, true, 0x0500_0200), None);
    }
}
