#!/usr/bin/env python3
"""Compare two wheelfix binaries on the same command, interleaved, and print medians and the ratio.

    python3 benches/ab.py OLD_BINARY NEW_BINARY [--runs 5] -- retag -q -w {out} WHEEL

`{out}` is replaced by a fresh temporary directory for every run (so outputs never pile up).
Runs alternate between the two binaries, so that a machine getting busier or quieter affects both
alike; quote the medians and the ratio, not single runs. User CPU time is printed beside the wall
time: on a machine short of free huge pages the kernel's time (page faults, compaction) varies
several-fold from run to run for the same binary, and user time is what the code changes. Peak
RSS (from wait4) is printed too.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def run(binary, args):
    out = tempfile.mkdtemp(prefix="wheelfix-ab-")
    try:
        cmd = [binary] + [a.replace("{out}", os.path.join(out, "o")) for a in args]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} exited {os.waitstatus_to_exitcode(status)}")
        return elapsed, usage.ru_maxrss / 1024, usage.ru_utime
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    import sys
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--runs", type=int, default=5)
    a = parser.parse_args(argv[:split])
    args = argv[split + 1:]
    run(a.old, args)  # warm the page cache
    run(a.new, args)
    results = {"old": [], "new": []}
    for _ in range(a.runs):
        for key, binary in (("old", a.old), ("new", a.new)):
            results[key].append(run(binary, args))
    med = {k: statistics.median(t for t, _, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, _, c in v) for k, v in results.items()}
    rss = {k: max(r for _, r, _ in v) for k, v in results.items()}
    print(f"{' '.join(args)}  ({a.runs} runs each, interleaved)")
    for k in ("old", "new"):
        times = ", ".join(f"{t:.2f}" for t, _, _ in results[k])
        print(f"  {k}: median {med[k]:.3f} s wall, {cpu[k]:.3f} s user CPU, peak RSS {rss[k]:.0f} MB  (runs {times})")
    print(f"  new / old: {med['new'] / med['old']:.3f} wall, {cpu['new'] / cpu['old']:.3f} user CPU")


if __name__ == "__main__":
    main()
