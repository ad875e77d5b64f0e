#!/usr/bin/env python3
"""`split --all-targets` on every wheel of a directory with offload bundles in a host binary:
host and device wheel sizes, `check` on each split set (errors by kind, the version lints of
wheels without a `+rocm` label left out), and the dynamic loader and eu-elflint on every changed
host binary as on the original (`benches/thin_sweep.py`'s checks).

    python3 benches/split_sweep.py DIR [--out OUT]

Runs `target/release/wheelfix` (build it first; WHEELFIX_BIN overrides). Prints one line per
wheel and the totals; exits 1 if a split failed or a loader check differs.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thin_sweep import loads_the_same, wheelfix  # noqa: E402

# What `check` says of a split set itself; the rest (versions without a `+rocm` label, pins on
# projects outside the set, tags) is of the original wheel, and is left out.
SPLIT_KINDS = {"kpack-unresolved", "kpack-kernel-missing", "device-pin-one-way", "path-conflict", "missing-extra",
               "device-all-incomplete", "installer-refuses", "stale-record", "not-loadable", "self-requirement",
               "unmet-requirement", "kpack-archive-damaged", "kpack-marker-unusable"}


def has_bundles(wheel: Path) -> bool:
    out = wheelfix("show", "--json", str(wheel))
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        return False
    entries = report if isinstance(report, list) else [report]
    return any(g.get("container") == "hip-fatbin" and g.get("objects", 0) > 0
               for e in entries for g in e.get("gpu", []))


def mb(n):
    return f"{(n or 0) / 1e6:.1f} MB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="wheelfix-split-sweep-"))
    failed = 0
    totals = {"wheels": 0, "before": 0, "host": 0, "devices": 0, "device_wheels": 0, "installed_before": 0,
              "installed_host": 0}
    for wheel in sorted(args.dir.glob("*.whl")):
        if not has_bundles(wheel):
            continue
        dest = out / wheel.stem
        run = wheelfix("split", "--all-targets", "--json", "-q", "-w", str(dest), str(wheel))
        if run.returncode != 0:
            print(f"{wheel.name}: split failed: {run.stderr.strip().splitlines()[-1:]}")
            failed += 1
            continue
        outcome = json.loads(run.stdout)[0]
        devices = outcome["devices"]
        check = json.loads(wheelfix("check", "--json", str(dest)).stdout)
        errors = {}
        for f in check["findings"]:
            if f["severity"] == "error" and f["kind"] in SPLIT_KINDS:
                errors[f["kind"]] = errors.get(f["kind"], 0) + 1
        differ, loaded = loads_the_same(wheel, Path(outcome["host"]), dest)
        if differ:
            failed += 1
        device_bytes = sum(d["size"] or 0 for d in devices)
        totals["wheels"] += 1
        totals["before"] += outcome["size_before"] or 0
        totals["host"] += outcome["size_after"] or 0
        totals["devices"] += device_bytes
        totals["device_wheels"] += len(devices)
        totals["installed_before"] += outcome["installed_before"] or 0
        totals["installed_host"] += outcome["installed_after"] or 0
        print(
            f"{wheel.name}: {mb(outcome['size_before'])} -> host {mb(outcome['size_after'])} "
            f"(installed {mb(outcome['installed_before'])} -> {mb(outcome['installed_after'])}), "
            f"{len(devices)} device wheels {mb(device_bytes)} "
            f"[{', '.join(d['target'] + ' ' + mb(d['size']) for d in devices)}]; "
            f"check errors: {errors or 'none'}; {loaded} binaries loaded{', DIFFER: ' + '; '.join(differ) if differ else ''}"
        )
    print(
        f"\n{totals['wheels']} wheels: {mb(totals['before'])} -> hosts {mb(totals['host'])} + "
        f"{totals['device_wheels']} device wheels {mb(totals['devices'])}; installed hosts "
        f"{mb(totals['installed_before'])} -> {mb(totals['installed_host'])}; {failed} failed"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
