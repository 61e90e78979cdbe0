#!/usr/bin/env python3
"""A Chrome trace of a 1,024-rank scenario stays small enough to open: runs it with --trace and
checks the file's size (deterministic) against a limit; the time is printed, not checked (time
targets belong in bench/).

usage: trace_size.py MESHSIM SCENARIO MAX_MIB
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> int:
    meshsim, scenario, max_mib = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        start = time.monotonic()
        run = subprocess.run([meshsim, "run", "--no-time", "--trace", path, scenario],
                             capture_output=True, text=True)
        seconds = time.monotonic() - start
        mib = os.path.getsize(path) / 2**20 if os.path.exists(path) else float("inf")
        events = len(json.load(open(path))["traceEvents"]) if os.path.exists(path) else 0
    print(f"{scenario}: exit {run.returncode}, {seconds:.1f} s, trace {mib:.1f} MiB, "
          f"{events} events (limit {max_mib} MiB)")
    if run.returncode != 0:
        print("FAIL: the scenario did not pass\n" + run.stdout[-2000:])
        return 1
    if mib > max_mib:
        print(f"FAIL: the trace is {mib:.1f} MiB, over {max_mib} MiB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
