#!/usr/bin/env python3
"""A hang report at scale leads with its root cause: runs a hang scenario with -v and checks that
a line naming the culprit comes within the first lines of the output, that no per-rank line comes
before it, and that the output stays short (ranks with the same story share a line); and that
its wait-for graph stays a few boxes, the culprit in a red box of its own.

usage: hang_report_scale.py MESHSIM SCENARIO KEY_TEXT [MAX_LINE]
"""
import os
import re
import subprocess
import sys
import tempfile
import time


def main() -> int:
    meshsim, scenario, key = sys.argv[1], sys.argv[2], sys.argv[3]
    max_line = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    start = time.monotonic()
    graph_dir = tempfile.mkdtemp()
    graph = os.path.join(graph_dir, "g.dot")
    run = subprocess.run([meshsim, "run", "--no-time", "-v", "--graph", graph, scenario],
                         capture_output=True, text=True)
    seconds = time.monotonic() - start
    lines = run.stdout.splitlines()
    print("\n".join(lines[:12]))
    print(f"{scenario}: exit {run.returncode}, {seconds:.1f} s, {len(lines)} lines")
    failures = []
    if run.returncode != 0:
        failures.append(f"exit status {run.returncode}: {run.stderr[-2000:]}")
    hit = next((i for i, line in enumerate(lines) if key in line), None)
    if hit is None or hit >= max_line:
        failures.append(f"'{key}' is not within the first {max_line} lines (line {hit})")
    per_rank = next((i for i, line in enumerate(lines) if "per rank:" in line), len(lines))
    if hit is not None and per_rank < hit:
        failures.append("the per-rank detail comes before the root cause")
    if len(lines) > 60:
        failures.append(f"{len(lines)} lines: ranks with the same story should share a line")
    # The culprit named in KEY_TEXT ("rank 517 skipped ...") has a red box of its own.
    dot = open(graph).read() if os.path.exists(graph) else ""
    culprit = re.match(r"(rank \d+)", key)
    boxes = [line for line in dot.splitlines() if "[label=" in line]
    if culprit and not any(culprit.group(1) + "\\n" in b and "color=red" in b for b in boxes):
        failures.append(f"no red box of its own for {culprit.group(1)} in the graph:\n{dot}")
    if len(boxes) > 10:
        failures.append(f"{len(boxes)} boxes in the graph: it should stay readable")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
