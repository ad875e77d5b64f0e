#!/usr/bin/env python3
"""`retag` against `show` (and `show --verify`) on the same wheel: what writing the true tags
costs beyond reading them.

    python3 benches/retag_show.py WHEEL [--runs 7] [--binary target/release/wheelfix]

The commands run interleaved; after each run its output is removed and the page cache flushed
(`sync`), then a second's pause, so that no earlier run's disk writes compete with the next
(on a 2-core machine the writeback of a 539 MB output costs the next run a tenth of a second).
Prints each command's median wall time, user and system CPU and largest peak RSS (wait4's
ru_maxrss, what `/usr/bin/time -v` prints), and retag / show. Machines are noisy: quote medians
and ratios.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from timing import timed

ROOT = Path(__file__).resolve().parent.parent


def run(binary, args, out_parent):
    out = tempfile.mkdtemp(prefix="wheelfix-retag-show-", dir=out_parent)
    try:
        return timed([str(binary)] + [a.replace("{out}", out) for a in args])
    finally:
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        time.sleep(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "wheelfix")
    args = parser.parse_args()
    if not args.binary.exists():
        raise SystemExit(f"no {args.binary}: build first (cargo build --release)")
    commands = {
        "show": ["show", str(args.wheel)],
        "show --verify": ["show", "--verify", str(args.wheel)],
        "retag": ["retag", "-q", "-w", "{out}", str(args.wheel)],
    }
    results = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            results[name].append(run(args.binary, cmd, args.wheel.parent))
    print(f"{args.wheel.name}: {args.wheel.stat().st_size / 1e6:.0f} MB, {args.runs} runs each, interleaved")
    wall = {}
    for name, runs in results.items():
        wall[name] = statistics.median(r[0] for r in runs)
        user = statistics.median(r[1] for r in runs)
        system = statistics.median(r[2] for r in runs)
        rss = max(r[3] for r in runs)
        print(f"  {name:14}: median {wall[name]:.2f} s wall, {user:.2f} s user, {system:.2f} s system, "
              f"peak RSS {rss:.0f} MB (runs {', '.join(f'{r[0]:.2f}' for r in runs)})")
    print(f"  retag / show: {wall['retag'] / wall['show']:.2f}; show --verify / show: "
          f"{wall['show --verify'] / wall['show']:.2f}")


if __name__ == "__main__":
    main()
