#!/usr/bin/env python3
"""`thin` (compacting, the default, and `--no-compact`) and `split --all-targets` against
`retag` on the same fat GPU wheel, interleaved, with medians and the ratios.

    python3 benches/thin.py [WHEEL] [--runs 5] [--target gfx942] [--memory 256M]

Without WHEEL, generates one with `benches/genwheel.py fat` (seven libraries whose
`.hip_fatbin` holds 16 bundles of 8 targets each, about 900 MB of device code, a 520 MB wheel)
under `target/bench-fat/`. Runs `target/release/wheelfix` (build it first with `cargo build
--release`). Each run writes into a fresh directory beside the wheel, after a `sync` and a second's pause. Prints, per command, the
median wall time, user and system CPU and the largest peak RSS (wait4's ru_maxrss, what `/usr/bin/time`
prints), then thin / retag. Machines are noisy: quote medians and ratios.
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

from timing import timed

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "wheelfix"


def run(args, out_parent: Path):
    out = Path(tempfile.mkdtemp(prefix="wheelfix-thin-bench-", dir=out_parent))
    try:
        # No earlier run's disk writes compete (retag writes the whole wheel, thin a seventh).
        os.sync()
        time.sleep(1)
        wall, user, system, rss = timed([str(BINARY)] + [a.replace("{out}", str(out / "o")) for a in args])
        return wall, user, system, rss
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="gfx942")
    parser.add_argument("--memory", help="passed to thin and split (a wheel with one huge code object: 256M)")
    args = parser.parse_args()
    if not BINARY.exists():
        raise SystemExit("build first: cargo build --release")
    wheel = args.wheel
    if wheel is None:
        work = ROOT / "target" / "bench-fat"
        found = sorted(work.glob("fatpkg-*.whl")) if work.exists() else []
        if found:
            wheel = found[0]
        else:
            printed = subprocess.run([sys.executable, str(ROOT / "benches" / "genwheel.py"), "fat", str(work)],
                                     check=True, capture_output=True, text=True).stdout
            wheel = Path(printed.strip().splitlines()[-1])
    commands = {
        "retag": ["retag", "-q", "-w", "{out}", str(wheel)],
        "thin": ["thin", "-q", "--gpu-target", args.target, "-w", "{out}", str(wheel)],
        "thin --no-compact": ["thin", "-q", "--no-compact", "--gpu-target", args.target, "-w", "{out}", str(wheel)],
        "split --all-targets": ["split", "-q", "--all-targets", "-w", "{out}", str(wheel)],
    }
    if args.memory:
        for name in ("thin", "thin --no-compact", "split --all-targets"):
            commands[name][1:1] = ["--memory", args.memory]
    results = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            results[name].append(run(cmd, wheel.parent))
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.0f} MB, {args.runs} runs each, interleaved")
    medians = {}
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        user = statistics.median(r[1] for r in runs)
        system = statistics.median(r[2] for r in runs)
        rss = max(r[3] for r in runs)
        medians[name] = (wall, user, system)
        print(f"  {name:19}: median {wall:.2f} s wall, {user:.2f} s user + {system:.2f} s system CPU, "
              f"peak RSS {rss:.0f} MB "
              f"(runs {', '.join(f'{r[0]:.2f}' for r in runs)})")
    for name in ("thin", "thin --no-compact", "split --all-targets"):
        print(f"  {name} / retag: {medians[name][0] / medians['retag'][0]:.2f} wall, "
              f"{medians[name][1] / medians['retag'][1]:.2f} user CPU, "
              f"{sum(medians[name][1:]) / sum(medians['retag'][1:]):.2f} user + system CPU")


if __name__ == "__main__":
    sys.exit(main())
