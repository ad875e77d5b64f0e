#!/usr/bin/env python3
"""`show` at each thread count, with one large member inflated on several threads and without,
beside the floor: the ELF members inflated (zlib, Python's, which releases the GIL) on as many
threads, the largest first, nothing else done.

    python3 benches/scaling.py WHEEL... [--threads 1,2] [--runs 5] [--command show|retag]

Runs `target/release/wheelfix` (build it first). Thread counts are `RAYON_NUM_THREADS`; the run
without parallel inflate sets `WHEELFIX_PARALLEL_INFLATE_MIN=off`. Prints per wheel and thread
count the median wall time of each, the largest peak RSS (wait4's ru_maxrss, what `/usr/bin/time
-v` prints), and the ratio. Machines are noisy: the runs are interleaved, quote medians.
"""

import argparse
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "wheelfix"


def run(args, env):
    out = tempfile.mkdtemp(prefix="wheelfix-scaling-")
    try:
        cmd = [str(BINARY)] + [a.replace("{out}", out) for a in args]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **env})
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()}")
        return elapsed, usage.ru_maxrss / 1024
    finally:
        shutil.rmtree(out, ignore_errors=True)


def inflate_member(path, name):
    with zipfile.ZipFile(path) as z, z.open(name) as f:
        while f.read(1 << 20):
            pass


def floor(path, threads):
    """Seconds to inflate every ELF member, largest first, on `threads` threads."""
    with zipfile.ZipFile(path) as z:
        elf = []
        for info in z.infolist():
            with z.open(info) as f:
                if f.read(4) == b"\x7fELF":
                    elf.append(info)
    elf.sort(key=lambda i: -i.file_size)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: inflate_member(path, i.filename), elf))
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default="show", choices=["show", "retag"])
    args = parser.parse_args()
    if not BINARY.exists():
        raise SystemExit("build first: cargo build --release")
    print(f"{'wheel':<58} {'thr':>3} {'parallel':>9} {'one-stream':>10} {'ratio':>6} {'floor':>6} {'RSS par/one MB':>15}")
    for wheel in args.wheels:
        command = ["show", str(wheel)] if args.command == "show" else ["retag", "-w", "{out}", str(wheel)]
        for threads in [int(t) for t in args.threads.split(",")]:
            base = {"RAYON_NUM_THREADS": str(threads)}
            par, one, rss_par, rss_one = [], [], 0.0, 0.0
            for _ in range(args.runs):
                t, r = run(command, base)
                par.append(t)
                rss_par = max(rss_par, r)
                t, r = run(command, {**base, "WHEELFIX_PARALLEL_INFLATE_MIN": "off"})
                one.append(t)
                rss_one = max(rss_one, r)
            low = statistics.median(floor(wheel, threads) for _ in range(min(args.runs, 3)))
            p, o = statistics.median(par), statistics.median(one)
            print(f"{wheel.name[:58]:<58} {threads:>3} {p:>8.2f}s {o:>9.2f}s {o / p:>6.2f} {low:>5.2f}s {rss_par:>7.0f}/{rss_one:<7.0f}")


if __name__ == "__main__":
    main()
