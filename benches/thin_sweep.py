#!/usr/bin/env python3
"""`thin` (compacting) on every wheel of a directory with offload bundles in a host binary, and
what the output is worth: download and installed size before and after, the independent
checks of `benches/thin_check.py` on every rewritten bundle, the dynamic loader mapping every
changed ELF file as it maps the original (`ldd`, which loads the file and lists what it needs:
the same list, and no error of the file's own) and `eu-elflint --gnu-ld` saying nothing new of
it, and, for wheels up to `--pip-max`,
pip installing the output into a fresh venv and importing its top-level module as it imports
the original (a module that needs a GPU fails both ways: that is said, not counted).

    python3 benches/thin_sweep.py DIR [--target gfx942] [--out OUT] [--pip-max 400M]

Runs `target/release/wheelfix` (build it first). The target is kept where the wheel has code
for it, else the wheel's first target (`--allow-missing`). Prints one line per wheel and the
totals; exits 1 if a check failed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = Path(os.environ.get("WHEELFIX_BIN", ROOT / "target" / "release" / "wheelfix"))


def wheelfix(*args):
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True)


def size(text):
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)


def top_level(wheel: Path):
    """The module to import: top_level.txt's first, else the first package directory."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for name in names:
            if name.endswith(".dist-info/top_level.txt"):
                lines = [l.strip() for l in z.read(name).decode().splitlines() if l.strip()]
                if lines:
                    return lines[0]
    dirs = sorted({n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n and ".data" not in n})
    return dirs[0] if dirs else None


def ldd(path: Path) -> str:
    """What the loader says loading `path`, load addresses left out."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    lines = [line.split(" (0x")[0].strip() for line in (out.stdout + out.stderr).splitlines()]
    return "\n".join(sorted(line for line in lines if "linux-vdso" not in line))


def elflint(path: Path):
    """What eu-elflint says, program header numbers left out (a split renumbers them)."""
    out = subprocess.run(["eu-elflint", "--gnu-ld", str(path)], capture_output=True, text=True)
    lines = (out.stdout + out.stderr).replace(str(path), "").splitlines()
    lines = [re.sub(r"loadable segment \[\d+\]", "loadable segment [#]", l) for l in lines]
    return {l.split(" program header entry ")[0] for l in lines if l and l != "No errors"}


def loads_the_same(original: Path, thinned: Path, work: Path):
    """The changed ELF members whose `ldd` or eu-elflint differs from the original's, and how many
    were loaded."""
    before, after = zipfile.ZipFile(original), zipfile.ZipFile(thinned)
    differ, loaded = [], 0
    for name in after.namelist():
        if name not in before.namelist():
            continue
        old, new = before.read(name), after.read(name)
        if old == new or not old.startswith(b"\x7fELF"):
            continue
        (work / "a").mkdir(exist_ok=True)
        (work / "b").mkdir(exist_ok=True)
        a, b = work / "a" / Path(name).name, work / "b" / Path(name).name
        a.write_bytes(old)
        b.write_bytes(new)
        a.chmod(0o755)
        b.chmod(0o755)
        if ldd(a).replace(str(work / "a"), "") != ldd(b).replace(str(work / "b"), ""):
            differ.append(f"{name} (ldd)")
        new_lint = elflint(b) - elflint(a)
        if new_lint:
            differ.append(f"{name} (eu-elflint: {sorted(new_lint)[0]})")
        loaded += 1
        a.unlink()
        b.unlink()
    return differ, loaded


def imports(wheel: Path, module: str, work: Path) -> str:
    env = work / "venv"
    shutil.rmtree(env, ignore_errors=True)
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        return "pip failed: " + pip.stderr.strip().splitlines()[-1]
    run = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    return "ok" if run.returncode == 0 else "fails: " + (run.stderr.strip().splitlines() or ["?"])[-1][:100]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--pip-max", default="400M")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="wheelfix-thin-sweep-"))
    totals, failed = [0, 0, 0, 0], 0
    for wheel in sorted(args.dir.glob("*.whl")):
        shown = json.loads(wheelfix("show", "--json", str(wheel)).stdout or "[{}]")
        shown = shown[0] if isinstance(shown, list) and shown else {}
        gpu = [g for g in shown.get("gpu", []) if g.get("container") == "hip-fatbin" and g.get("objects")]
        if not gpu:
            continue
        targets = shown.get("gpu_targets", [])
        target = args.target if args.target in targets else targets[0]
        dest = out / wheel.stem
        shutil.rmtree(dest, ignore_errors=True)
        thinned = wheelfix("thin", "--json", "--allow-missing", "--gpu-target", target, "-w", str(dest), str(wheel))
        try:
            result = json.loads(thinned.stdout)[0]
        except (ValueError, IndexError):
            result = {}
        if thinned.returncode != 0 or "error" in result:
            print(f"{wheel.name}: thin failed: {thinned.stderr.strip()[:200]}")
            failed += 1
            continue
        sizes = [result["size_before"], result["size_after"], result["installed_before"], result["installed_after"]]
        totals = [t + s for t, s in zip(totals, sizes)]
        kept = [n["file"] + ": " + n["reason"] for n in result.get("not_compacted", [])]
        line = (f"{wheel.name} ({target}): download {sizes[0] / 1e6:.1f} -> {sizes[1] / 1e6:.1f} MB, "
                f"installed {sizes[2] / 1e6:.1f} -> {sizes[3] / 1e6:.1f} MB")
        output = Path(result["output"]) if result.get("output") else None
        if output and result.get("changed"):
            check = subprocess.run([sys.executable, str(ROOT / "benches" / "thin_check.py"), str(wheel), str(output),
                                    target], capture_output=True, text=True)
            if check.returncode != 0:
                failed += 1
                line += f"; CHECK FAILED: {(check.stderr.strip().splitlines() or ['?'])[-1][:200]}"
            else:
                line += "; " + check.stdout.strip().split(": ", 1)[-1]
            with tempfile.TemporaryDirectory() as tmp:
                differ, loaded = loads_the_same(wheel, output, Path(tmp))
            if differ:
                failed += 1
                line += f"; DIFFERS: {', '.join(differ)}"
            else:
                line += f"; ldd and eu-elflint the same on {loaded} files"
            module = top_level(wheel)
            if module and wheel.stat().st_size <= size(args.pip_max):
                with tempfile.TemporaryDirectory() as tmp:
                    before, after = imports(wheel, module, Path(tmp)), imports(output, module, Path(tmp))
                if before == after:
                    line += f"; import {module}: {after}" + (" (both)" if after != "ok" else "")
                else:
                    failed += 1
                    line += f"; IMPORT DIFFERS: original {before}, thinned {after}"
        for k in kept:
            line += f"\n    not compacted: {k}"
        print(line, flush=True)
    print(f"total: download {totals[0] / 1e6:.0f} -> {totals[1] / 1e6:.0f} MB, "
          f"installed {totals[2] / 1e6:.0f} -> {totals[3] / 1e6:.0f} MB; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
