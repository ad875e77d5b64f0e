#!/usr/bin/env python3
"""Download the real-wheel sweep from PyPI into a directory (kept out of git).

    python3 benches/sweep/fetch.py wheels.txt DIR [--max-mb N]

Each line of the list is `project version regex`: the first wheel file (in PyPI's order) of
that release whose name matches the regex; `version` `latest` takes the newest release. The
sha256 PyPI publishes is checked; files already present with the right hash are kept.
The directory is what the opt-in tests read (`WHEELFIX_REAL_WHEELS=DIR cargo test`).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import sys
import urllib.parse
import urllib.request


def release_files(project, version):
    url = f"https://pypi.org/pypi/{project}/json"
    with urllib.request.urlopen(url, timeout=60) as response:
        data = json.load(response)
    files = data["urls"] if version == "latest" else data["releases"].get(version, [])
    # Some mirrors give file URLs relative to the API page.
    for f in files:
        f["url"] = urllib.parse.urljoin(url, f["url"])
    return files


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(line, out, max_bytes):
    project, version, pattern = line.split(None, 2)
    regex = re.compile(pattern)
    try:
        files = [f for f in release_files(project, version) if f["filename"].endswith(".whl") and regex.search(f["filename"])]
    except Exception as e:  # one bad line must not stop the others
        return f"{project} {version}: {e}"
    if not files:
        return f"{project} {version}: no wheel matches {pattern}"
    f = files[0]
    if f["size"] > max_bytes:
        return f"{f['filename']}: skipped, {f['size'] >> 20} MB is above the limit"
    dest = os.path.join(out, f["filename"])
    if os.path.exists(dest) and sha256(dest) == f["digests"]["sha256"]:
        return None
    part = dest + ".part"
    try:
        urllib.request.urlretrieve(f["url"], part)
    except Exception as e:
        return f"{f['filename']}: {e}"
    if sha256(part) != f["digests"]["sha256"]:
        os.remove(part)
        return f"{f['filename']}: sha256 mismatch"
    os.replace(part, dest)
    return None


def main():
    args = sys.argv[1:]
    max_mb = 1 << 20
    if "--max-mb" in args:
        i = args.index("--max-mb")
        max_mb = int(args[i + 1])
        del args[i : i + 2]
    listing, out = args
    os.makedirs(out, exist_ok=True)
    lines = [l.strip() for l in open(listing) if l.strip() and not l.startswith("#")]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        problems = [p for p in pool.map(lambda l: fetch(l, out, max_mb << 20), lines) if p]
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(lines) - len(problems)} of {len(lines)} wheels in {out}")


if __name__ == "__main__":
    main()
