#!/usr/bin/env python3
"""Time and peak RSS of `show`, `show --verify`, `retag` and `repair` on large wheels.

    python3 benches/scale.py WHEEL... [--runs 3] [--memory 512M] [--ldpaths DIR] [--commands show,retag]

Runs `target/release/wheelfix` (build it first). Peak RSS is wait4's ru_maxrss of each run,
what `/usr/bin/time -v` prints as "Maximum resident set size"; the largest of the runs is shown
beside the median time. Outputs go to a temporary directory beside the first wheel (same file
system, as a release job's would) and are removed. Make the scale wheels with
`benches/genwheel.py`; a `patch` wheel needs `--ldpaths OUT_DIR/ext`.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(cmd):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status), err


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", type=Path, nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory", help="pass --memory to every command")
    parser.add_argument("--ldpaths", help="pass --ldpaths to repair")
    parser.add_argument("--commands", default="show,verify,retag,repair")
    parser.add_argument("--wheelfix", type=Path, default=ROOT / "target" / "release" / "wheelfix")
    args = parser.parse_args()
    wf = str(args.wheelfix)
    extra = ["--memory", args.memory] if args.memory else []
    print(f"{os.cpu_count()} cores, {args.runs} runs each; peak RSS is the largest of the runs")
    for wheel in args.wheels:
        wheel = wheel.resolve()
        print(f"{wheel.name} ({wheel.stat().st_size / 2**20:.0f} MiB)")
        work = Path(tempfile.mkdtemp(prefix=".wheelfix-scale-", dir=wheel.parent))
        try:
            commands = {
                "show": [wf, "show", "-q", *extra, str(wheel)],
                "verify": [wf, "show", "-q", "--verify", *extra, str(wheel)],
                "retag": [wf, "retag", "-q", *extra, "-w", str(work / "out"), str(wheel)],
                "repair": [wf, "repair", "-q", *extra, *(["--ldpaths", args.ldpaths] if args.ldpaths else []),
                           "-w", str(work / "out"), str(wheel)],
            }
            for name in args.commands.split(","):
                times, peak, codes = [], 0, set()
                for _ in range(args.runs):
                    took, rss, code, err = measure(commands[name])
                    shutil.rmtree(work / "out", ignore_errors=True)
                    times.append(took)
                    peak = max(peak, rss)
                    codes.add(code)
                    if code not in (0, 1):
                        print(f"    ! exit {code}: {err.decode()[-400:]}")
                label = {"verify": "show --verify"}.get(name, name)
                runs = ", ".join(f"{t:.2f}" for t in times)
                print(f"  {label:<14} median {statistics.median(times):7.2f} s  peak RSS {peak / 2**20:7.0f} MiB"
                      f"  exit {sorted(codes)}  runs {runs}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
