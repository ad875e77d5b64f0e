#!/usr/bin/env python3
"""`variants --all-targets` against what it replaces: `thin` once per processor (the same
variant wheels, each from its own analysis of the fat wheel), and against `split --all-targets`
and `retag` on the same fat GPU wheel, interleaved, with medians and the ratios.

    python3 benches/variants.py [WHEEL] [--runs 3]

Without WHEEL, uses (or generates) `benches/thin.py`'s wheel under `target/bench-fat/`. Runs
`target/release/wheelfix` (build it first with `cargo build --release`). The processors are the
labels of a first `variants --json` run. Prints, per command, the median wall time, user and
system CPU and the largest peak RSS; `thin per target` is the sum of its runs. Machines are
noisy: quote medians and ratios.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from thin import BINARY, ROOT, run


def fat_wheel() -> Path:
    work = ROOT / "target" / "bench-fat"
    found = sorted(work.glob("fatpkg-*.whl")) if work.exists() else []
    if found:
        return found[0]
    printed = subprocess.run([sys.executable, str(ROOT / "benches" / "genwheel.py"), "fat", str(work)],
                             check=True, capture_output=True, text=True).stdout
    return Path(printed.strip().splitlines()[-1])


def processors(wheel: Path) -> list:
    with tempfile.TemporaryDirectory(dir=wheel.parent) as out:
        printed = subprocess.run([str(BINARY), "variants", "--json", "--one-index", "--all-targets", "-w", out, str(wheel)],
                                 check=True, capture_output=True, text=True).stdout
    return [v["label"] for v in json.loads(printed)["wheels"][0]["variants"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not BINARY.exists():
        raise SystemExit("build first: cargo build --release")
    wheel = args.wheel or fat_wheel()
    targets = processors(wheel)
    commands = {
        "retag": [["retag", "-q", "-w", "{out}", str(wheel)]],
        "variants --all-targets": [["variants", "-q", "--one-index", "--all-targets", "-w", "{out}", str(wheel)]],
        "thin per target": [["thin", "-q", "--gpu-target", t, "-w", "{out}", str(wheel)] for t in targets],
        "split --all-targets": [["split", "-q", "--all-targets", "-w", "{out}", str(wheel)]],
    }
    results = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmds in commands.items():
            each = [run(cmd, wheel.parent) for cmd in cmds]
            results[name].append((sum(r[0] for r in each), sum(r[1] for r in each), sum(r[2] for r in each),
                                  max(r[3] for r in each)))
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.0f} MB, {len(targets)} processors "
          f"({', '.join(targets)}), {args.runs} runs each, interleaved")
    medians = {}
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        user = statistics.median(r[1] for r in runs)
        system = statistics.median(r[2] for r in runs)
        medians[name] = (wall, user, system)
        print(f"  {name:22}: median {wall:.2f} s wall, {user:.2f} s user + {system:.2f} s system CPU, "
              f"peak RSS {max(r[3] for r in runs):.0f} MB (runs {', '.join(f'{r[0]:.2f}' for r in runs)})")
    base = medians["variants --all-targets"]
    for name in ("thin per target", "split --all-targets", "retag"):
        print(f"  variants / {name}: {base[0] / medians[name][0]:.2f} wall, "
              f"{sum(base[1:]) / sum(medians[name][1:]):.2f} CPU")


if __name__ == "__main__":
    sys.exit(main())
