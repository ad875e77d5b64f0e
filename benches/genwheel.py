#!/usr/bin/env python3
"""Generate the large wheels the scale benchmarks and the opt-in scale test run on.

    python3 benches/genwheel.py huge  OUT_DIR [--libs 3] [--lib-size 1100M] [--blob 2400M] [--members 72000]
    python3 benches/genwheel.py tiny  OUT_DIR [--members 300000]
    python3 benches/genwheel.py patch OUT_DIR [--copies 4] [--lib-size 450M]
    python3 benches/genwheel.py fat   OUT_DIR [--libs 7] [--bundles 16] [--object-size 1M] [--targets 8]

`huge`: a zip64 wheel over 4 GiB: `--libs` real ELF extensions (compiled with `cc`, padded with
an unmapped section to `--lib-size`, deflated), a stored `--blob` of random bytes, and `--members`
small Python files. `tiny`: a wheel of `--members` one-line files. `patch`: `--copies` libraries
of `--lib-size` that all need `libwfext.so`, which is built beside the wheel in `OUT_DIR/ext/`:
`wheelfix repair --ldpaths OUT_DIR/ext` vendors it and patches every copy. `fat`: a fat GPU
build, as `thin` takes it: `--libs` extensions whose `.hip_fatbin` holds `--bundles` offload
bundles, each with a host entry and one code object of `--object-size` for each of `--targets`
targets (the first of gfx908 gfx90a gfx942 gfx950 gfx1030 gfx1100 gfx1101 gfx1201), aligned to 4096 as HIP aligns
them (by default about 900 MB of device code, a wheel of about 520 MB), in an allocated section
the loader maps, as a HIP build's is.

The padding is random bytes of a 16-letter alphabet: it deflates to about 58% (so a member of
1.1 GB is 640 MB in the archive, as real GPU libraries are) at about 75 MB/s. Every wheel has a
true RECORD. Prints the path of the wheel written.
"""

import argparse
import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

BLOCK = 64 << 20
ALPHABET = bytes((i % 16) + 65 for i in range(256))


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def compile_extension(work: Path, module: str, needs_ext: bool) -> Path:
    """A Python extension `module` (it defines PyInit_<module>), linked against libwfext.so when
    `needs_ext`."""
    src = work / f"{module}.c"
    src.write_text(
        ("int wfext_value(void);\n" if needs_ext else "")
        + f"int PyInit_{module}(void) {{ return {'wfext_value()' if needs_ext else '0'}; }}\n"
    )
    out = work / f"{module}.so"
    cmd = ["cc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src)]
    if needs_ext:
        cmd += ["-L", str(work / "ext"), "-lwfext"]
    subprocess.run(cmd, check=True)
    return out


def build_ext_library(work: Path) -> Path:
    ext = work / "ext"
    ext.mkdir(parents=True, exist_ok=True)
    (ext / "wfext.c").write_text("int wfext_value(void) { return 7; }\n")
    lib = ext / "libwfext.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libwfext.so", "-o", str(lib), str(ext / "wfext.c")],
                   check=True)
    return lib


def padded(work: Path, elf: Path, total: int) -> Path:
    """`elf` with an unmapped section of filler appended, to about `total` bytes."""
    pad = work / (elf.name + ".pad")
    with open(pad, "wb") as f:
        left = max(total - elf.stat().st_size, 0)
        while left > 0:
            n = min(BLOCK, left)
            f.write(os.urandom(n).translate(ALPHABET))
            left -= n
    out = work / ("big-" + elf.name)
    subprocess.run(["objcopy", "--add-section", f".wheelfix_pad={pad}", str(elf), str(out)], check=True)
    pad.unlink()
    return out


FAT_TARGETS = ["gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1201"]


def fat_bundle(object_size: int, seed: int, targets: int = len(FAT_TARGETS)) -> bytes:
    """An offload bundle: the host entry and one code object of filler per target."""
    ids = [b"host-x86_64-unknown-linux-gnu-"] + [f"hipv4-amdgcn-amd-amdhsa--{t}".encode() for t in FAT_TARGETS[:targets]]
    table = 32 + sum(24 + len(i) for i in ids)
    at = (table + 4095) // 4096 * 4096
    head = bytearray(b"__CLANG_OFFLOAD_BUNDLE__" + len(ids).to_bytes(8, "little"))
    offsets = []
    for n, ident in enumerate(ids):
        size_ = 0 if n == 0 else object_size
        offsets.append(at)
        head += at.to_bytes(8, "little") + size_.to_bytes(8, "little") + len(ident).to_bytes(8, "little") + ident
        if n:
            at = (at + object_size + 4095) // 4096 * 4096
    out = bytearray(head)
    for n in range(1, len(ids)):
        out += bytes(offsets[n] - len(out))
        out += os.urandom(object_size).translate(ALPHABET)
    return bytes(out)


def fat_library(work: Path, module: str, bundles: int, object_size: int, targets: int = len(FAT_TARGETS)) -> Path:
    """An extension whose `.hip_fatbin` is loaded, as a HIP build's is: the bundles made an
    object of an allocated read-only section, aligned to 4096, linked in."""
    blob = work / f"{module}.fatbin"
    starts = []
    with open(blob, "wb") as f:
        for i in range(bundles):
            b = fat_bundle(object_size, i, targets)
            starts.append(f.tell())
            f.write(b + bytes((-len(b)) % 4096))
    obj = work / f"{module}.fatbin.o"
    subprocess.run(["objcopy", "-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64",
                    "--rename-section", ".data=.hip_fatbin,alloc,load,readonly,data,contents",
                    "--set-section-alignment", ".hip_fatbin=4096", blob.name, obj.name], check=True, cwd=work)
    blob.unlink()
    src = work / f"{module}.c"
    # One `__hip_fatbin_wrapper` per bundle in `.hipFatBinSegment`, pointing at its start (a
    # relocation), as HIP's compiler emits them: what `split` follows.
    symbol = f"_binary_{module}_fatbin_start"
    wrappers = ", ".join(f"{{0x48495046u, 1u, {symbol} + {at}, 0}}" for at in starts)
    src.write_text(
        f"int PyInit_{module}(void) {{ return 0; }}\n"
        f"extern const char {symbol}[];\n"
        "struct wrapper { unsigned magic, version; const void *binary; void *reserved; };\n"
        f"__attribute__((section(\".hipFatBinSegment\"), used)) const struct wrapper wrappers[{len(starts)}] = {{{wrappers}}};\n"
    )
    out = work / f"fat-{module}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-Wl,-z,noexecstack", "-o", str(out), str(src), str(obj)], check=True)
    obj.unlink()
    return out


class Writer:
    """A zip64 wheel written member by member, its RECORD kept as it goes."""

    def __init__(self, path: Path, name: str, version: str, tag: str):
        self.zip = zipfile.ZipFile(path, "w", allowZip64=True)
        self.name, self.version, self.tag = name, version, tag
        self.rows = []

    def add_file(self, arcname: str, source: Path, compress: bool):
        digest = hashlib.sha256()
        info = zipfile.ZipInfo(arcname, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        # Level 1: the filler deflates as well as at 6, three times faster (3.13 names it compress_level).
        setattr(info, "compress_level" if hasattr(info, "compress_level") else "_compresslevel", 1)
        info.external_attr = 0o755 << 16
        with open(source, "rb") as src, self.zip.open(info, "w", force_zip64=True) as dst:
            while chunk := src.read(BLOCK):
                digest.update(chunk)
                dst.write(chunk)
        self.rows.append((arcname, digest.digest(), source.stat().st_size))

    def add_bytes(self, arcname: str, data: bytes):
        info = zipfile.ZipInfo(arcname, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, data)
        self.rows.append((arcname, hashlib.sha256(data).digest(), len(data)))

    def add_random(self, arcname: str, total: int):
        """Stored random bytes: incompressible, so the archive really grows by `total`."""
        digest = hashlib.sha256()
        info = zipfile.ZipInfo(arcname, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        with self.zip.open(info, "w", force_zip64=True) as dst:
            left = total
            while left > 0:
                chunk = os.urandom(min(BLOCK, left))
                digest.update(chunk)
                dst.write(chunk)
                left -= len(chunk)
        self.rows.append((arcname, digest.digest(), total))

    def close(self):
        dist = f"{self.name}-{self.version}.dist-info"
        self.add_bytes(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n".encode())
        wheel = f"Wheel-Version: 1.0\nGenerator: wheelfix-genwheel\nRoot-Is-Purelib: false\nTag: {self.tag}\n"
        self.add_bytes(f"{dist}/WHEEL", wheel.encode())
        lines = []
        for arcname, digest, n in self.rows:
            b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            lines.append(f"{arcname},sha256={b64},{n}")
        lines.append(f"{dist}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist}/RECORD", date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, "\n".join(lines) + "\n")
        self.zip.close()


def small_members(writer: Writer, package: str, count: int):
    for i in range(count):
        writer.add_bytes(f"{package}/m{i // 1000}/m{i}.py", f"VALUE = {i}\n".encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["huge", "tiny", "patch", "fat"])
    parser.add_argument("--bundles", type=int, default=16)
    parser.add_argument("--object-size", type=size, default=size("1M"))
    parser.add_argument("--targets", type=int, default=len(FAT_TARGETS))
    parser.add_argument("out", type=Path)
    parser.add_argument("--libs", type=int, default=3)
    parser.add_argument("--lib-size", type=size, default=None)
    parser.add_argument("--blob", type=size, default=size("2400M"))
    parser.add_argument("--members", type=int, default=None)
    parser.add_argument("--copies", type=int, default=4)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "cp311-cp311-linux_x86_64"
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        work = Path(tmp)
        if args.kind == "huge":
            path = args.out / f"hugepkg-1.0-{tag}.whl"
            w = Writer(path, "hugepkg", "1.0", tag)
            for i in range(args.libs):
                elf = padded(work, compile_extension(work, f"_core{i}", False), args.lib_size or size("1100M"))
                w.add_file(f"hugepkg/_core{i}.so", elf, compress=True)
                elf.unlink()
            w.add_random("hugepkg/data/blob.bin", args.blob)
            small_members(w, "hugepkg", args.members if args.members is not None else 72000)
        elif args.kind == "fat":
            path = args.out / f"fatpkg-1.0-{tag}.whl"
            w = Writer(path, "fatpkg", "1.0", tag)
            for i in range(args.libs if args.libs != 3 else 7):
                elf = fat_library(work, f"_kernels{i}", args.bundles, args.object_size, args.targets)
                w.add_file(f"fatpkg/_kernels{i}.so", elf, compress=True)
                elf.unlink()
        elif args.kind == "tiny":
            path = args.out / f"tinypkg-1.0-py3-none-any.whl"
            w = Writer(path, "tinypkg", "1.0", "py3-none-any")
            small_members(w, "tinypkg", args.members if args.members is not None else 300000)
        else:
            build_ext_library(args.out)
            (work / "ext").symlink_to(args.out / "ext")
            path = args.out / f"patchpkg-1.0-{tag}.whl"
            w = Writer(path, "patchpkg", "1.0", tag)
            for i in range(args.copies):
                elf = padded(work, compile_extension(work, f"_lib{i}", True), args.lib_size or size("450M"))
                w.add_file(f"patchpkg/_lib{i}.so", elf, compress=True)
                elf.unlink()
        w.close()
    print(path)


if __name__ == "__main__":
    sys.exit(main())
