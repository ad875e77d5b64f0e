"""One timed run of a command, as the benchmark scripts measure it."""

import os
import subprocess
import time


def timed(cmd, env=None):
    """Run `cmd` (stdout dropped): wall seconds, user and system CPU seconds, and peak RSS in MB
    (wait4's ru_maxrss, what `/usr/bin/time -v` prints). A failing command stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=None if env is None else {**os.environ, **env})
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {proc.stderr.read().decode()}")
    return elapsed, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024
