#!/usr/bin/env python3
"""Runs one scale scenario and checks the process's peak memory against a limit.

usage: run_scale.py MESHSIM SCENARIO MAX_GIB [--world N] [meshsim flags...]

--world N runs tests/scale/training_step.toml (or a scenario written the same way) at N ranks:
its world_size line and the dp_shard size of its mesh (N / 512) are rewritten in a copy.

Memory is checked here (the peak RSS of the child, which does not depend on how busy the machine
is); time is only printed: time targets are measured in bench/, against a floor in the same run.
"""
import os
import re
import resource
import subprocess
import sys
import tempfile
import time


def at_world_size(text: str, world: int) -> str:
    """The training step scenario at `world` ranks: [8, 8, world / 512, 8]."""
    if world % 512 != 0 or world < 512:
        raise SystemExit(f"--world {world}: the training step needs a multiple of 512 ranks")
    text, n = re.subn(r"(?m)^world_size = \d+$", f"world_size = {world}", text, count=1)
    text, m = re.subn(r"(?m)^shape = \[8, 8, \d+, 8\]$", f"shape = [8, 8, {world // 512}, 8]",
                      text, count=1)
    if n != 1 or m != 1:
        raise SystemExit("the scenario has no 'world_size = N' and 'shape = [8, 8, D, 8]' lines")
    return text


def main() -> int:
    meshsim, scenario, max_gib = sys.argv[1], sys.argv[2], float(sys.argv[3])
    flags = sys.argv[4:]
    if flags[:1] == ["--world"]:
        with open(scenario, encoding="utf-8") as f:
            text = at_world_size(f.read(), int(flags[1]))
        flags = flags[2:]
        copy = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        with copy:
            copy.write(text)
        try:
            return run(meshsim, copy.name, max_gib, flags)
        finally:
            os.unlink(copy.name)
    return run(meshsim, scenario, max_gib, flags)


def run(meshsim: str, scenario: str, max_gib: float, flags: list) -> int:
    start = time.monotonic()
    child = subprocess.run([meshsim, "run", "--no-time", "--in-process", *flags, scenario],
                           capture_output=True, text=True)
    seconds = time.monotonic() - start
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(child.stdout[-3000:])
    print(child.stderr[-3000:], file=sys.stderr)
    print(f"{scenario}: exit {child.returncode}, {seconds:.1f} s, peak RSS {peak_gib:.2f} GiB "
          f"(limit {max_gib} GiB)")
    if child.returncode != 0:
        print("FAIL: the scenario did not pass")
        return 1
    if peak_gib > max_gib:
        print(f"FAIL: peak RSS {peak_gib:.2f} GiB is over {max_gib} GiB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
