#!/usr/bin/env python3
"""Runs one scale scenario and checks the process's peak memory against a limit.

usage: run_scale.py MESHSIM SCENARIO MAX_GIB [meshsim flags...]

Memory is checked here (the peak RSS of the child, which does not depend on how busy the machine
is); time is only printed: time targets are measured in bench/, against a floor in the same run.
"""
import resource
import subprocess
import sys
import time


def main() -> int:
    meshsim, scenario, max_gib = sys.argv[1], sys.argv[2], float(sys.argv[3])
    flags = sys.argv[4:]
    start = time.monotonic()
    run = subprocess.run([meshsim, "run", "--no-time", "--in-process", *flags, scenario],
                         capture_output=True, text=True)
    seconds = time.monotonic() - start
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(run.stdout[-3000:])
    print(run.stderr[-3000:], file=sys.stderr)
    print(f"{scenario}: exit {run.returncode}, {seconds:.1f} s, peak RSS {peak_gib:.2f} GiB "
          f"(limit {max_gib} GiB)")
    if run.returncode != 0:
        print("FAIL: the scenario did not pass")
        return 1
    if peak_gib > max_gib:
        print(f"FAIL: peak RSS {peak_gib:.2f} GiB is over {max_gib} GiB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
