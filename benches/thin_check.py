#!/usr/bin/env python3
"""Check `wheelfix thin`'s output on real wheels with readers that are not wheelfix's.

    python3 benches/thin_check.py ORIGINAL.whl THINNED.whl TARGET

For every host library that changed, the `.hip_fatbin` section is taken out with `objcopy`, and
every bundle in it is checked: plain bundles and CCOB v2 with `clang-offload-bundler-19 --list`
(exactly the kept targets: TARGET's, or generic ones) and `--unbundle` of each kept target against
the original's; CCOB v3 (which clang 19 cannot read) by decoding with the `zstd` tool, checking
the header's sizes and hash (the low 64 bits of the MD5, hashlib), and each kept entry's bytes
against the original's. Prints a count per wheel; exits 1 on the first difference.
"""

import hashlib
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

BUNDLER = "clang-offload-bundler-19"


def fatbin(work: Path, data: bytes) -> bytes:
    (work / "lib.so").write_bytes(data)
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(work / "lib.so"), str(work / "fb")],
                   check=True)
    return (work / "fb").read_bytes()


def bundles(section: bytes):
    """(kind, bytes) of every bundle, each cut to its own length."""
    found, at = [], 0
    while at < len(section):
        rest = section[at:]
        if rest.startswith(b"CCOB"):
            version = struct.unpack("<H", rest[4:6])[0]
            total = struct.unpack("<I", rest[8:12])[0] if version == 2 else struct.unpack("<Q", rest[8:16])[0]
            found.append((f"ccob{version}", rest[:total]))
            at += total
        elif rest.startswith(b"__CLANG_OFFLOAD_BUNDLE__"):
            count, p, end = struct.unpack("<Q", rest[24:32])[0], 32, 0
            for _ in range(count):
                offset, size, id_len = struct.unpack("<QQQ", rest[p:p + 24])
                end, p = max(end, offset + size), p + 24 + id_len
            found.append(("plain", rest[:max(end, p)]))
            at += max(end, p)
        else:
            # Padding between bundles: on to the next magic.
            nexts = [i for i in (section.find(b"CCOB", at), section.find(b"__CLANG_OFFLOAD_BUNDLE__", at)) if i >= 0]
            if not nexts:
                break
            at = min(nexts)
    return found


def entries(raw: bytes):
    count, p, out = struct.unpack("<Q", raw[24:32])[0], 32, {}
    for _ in range(count):
        offset, size, id_len = struct.unpack("<QQQ", raw[p:p + 24])
        out[raw[p + 24:p + 24 + id_len].decode()] = raw[offset:offset + size]
        p += 24 + id_len
    return out


def decode_v3(bundle: bytes) -> bytes:
    _, _, total, size, digest = struct.unpack("<HHQQQ", bundle[4:32])
    raw = subprocess.run(["zstd", "-dc"], input=bundle[32:total], capture_output=True, check=True).stdout
    assert len(raw) == size, f"decodes to {len(raw)}, header says {size}"
    assert struct.unpack("<Q", hashlib.md5(raw).digest()[:8])[0] == digest, "header hash"
    return raw


def listed(work: Path, bundle: bytes):
    """What the bundler lists in a bundle."""
    (work / "b").write_bytes(bundle)
    return subprocess.run([BUNDLER, "--list", "--type=o", f"--input={work / 'b'}"], capture_output=True, text=True,
                          check=True).stdout.split()


def with_bundler(work: Path, bundle: bytes, targets):
    """The code objects of `targets` (host entries, empty, left out), as the bundler unbundles
    them. Only these: clang 19 cannot unbundle targets it does not know (gfx950)."""
    (work / "b").write_bytes(bundle)
    out = {}
    for target in targets:
        if target.startswith("host-"):
            out[target] = b""
            continue
        subprocess.run([BUNDLER, "--unbundle", "--type=o", f"--input={work / 'b'}", f"--output={work / 'o'}",
                        f"--targets={target}"], check=True)
        out[target] = (work / "o").read_bytes()
    return out


def runs_on(entry: str, target: str) -> bool:
    # `hipv4-amdgcn-amd-amdhsa--gfx942:xnack-`, or ROCm 4 and earlier `hip-amdgcn-amd-amdhsa-gfx906`.
    target_id = entry.split("--")[-1] if "--" in entry else entry.rsplit("-", 1)[-1]
    processor = target_id.split(":")[0]
    return processor == target or processor.endswith("-generic")


def main():
    original, thinned, target = sys.argv[1], sys.argv[2], sys.argv[3]
    before, after = zipfile.ZipFile(original), zipfile.ZipFile(thinned)
    checked = {"plain": 0, "ccob2": 0, "ccob3": 0}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in after.namelist():
            if name not in before.namelist() or before.read(name) == after.read(name):
                continue
            if not before.read(name).startswith(b"\x7fELF"):
                continue  # RECORD
            old, new = bundles(fatbin(work, before.read(name))), bundles(fatbin(work, after.read(name)))
            assert len(old) == len(new), f"{name}: {len(old)} bundles became {len(new)}"
            for (kind, o), (_, n) in zip(old, new):
                if kind == "ccob3":
                    eo, en = entries(decode_v3(o)), entries(decode_v3(n))
                else:
                    kept_ids = listed(work, n)
                    assert set(kept_ids) <= set(listed(work, o)), f"{name}: {kept_ids} not all in the original"
                    eo, en = with_bundler(work, o, kept_ids), with_bundler(work, n, kept_ids)
                kept = [e for e in en if not e.startswith("host-")]
                assert kept and all(runs_on(e, target) for e in kept), f"{name}: kept {kept}"
                assert all(en[e] == eo[e] for e in en), f"{name}: a kept code object differs"
                checked[kind] += 1
    print(f"{Path(thinned).name}: {checked['plain']} plain, {checked['ccob2']} CCOB v2, {checked['ccob3']} CCOB v3 "
          f"bundles checked")


if __name__ == "__main__":
    main()
