"""Run a command, then append its wall time and peak RSS to $OUT/timings.txt: timed_run.py NAME CMD..."""

import os
import resource
import subprocess
import sys
import time

name, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
rc = subprocess.call(cmd)
wall = time.perf_counter() - t0
rss_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
line = f"{name}: rc={rc} wall={wall:.1f}s peak_rss={rss_gib:.2f}GiB  $ {' '.join(cmd)}"
sys.stdout.write(line + "\n")
with open(os.path.join(os.environ.get("OUT", "."), "timings.txt"), "a") as f:
    f.write(line + "\n")
sys.exit(rc)
