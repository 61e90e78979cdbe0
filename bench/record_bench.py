#!/usr/bin/env python3
"""meshsim_record at scale: the FSDP2 x TP program (tests/record/fsdp_tp_program.py) recorded over
N ranks, against a floor in the same run: the same N ranks running a program that only joins the
default group and leaves (the cost of forking and writing the dumps). Three runs of each; the
median and the spread (max - min) of the wall time, and the time per rank above the floor.
Then `meshsim fr analyze` reads the N dumps (one run: its time is printed).

usage: record_bench.py MESHSIM [N [JOBS]]   (default N 256, JOBS the cores)
Skips (exit 77) without torch; fails when a run fails, the program's median passes 120 s, or
fr analyze finds a hang or replicas that differ."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from torch_python import require_torch  # noqa: E402

FLOOR_PROGRAM = """import torch.distributed as dist
dist.init_process_group("nccl")
dist.destroy_process_group()
"""
LIMIT_S = 120


def _import_torch():
    import torch.distributed  # noqa: F401


def record(program, world, jobs, out, args=()):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "meshsim_record", "--world-size", str(world),
                        "-j", str(jobs), "-o", out, "--", program, *args],
                       capture_output=True, text=True, env=env)
    took = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"record_bench: {program} over {world} ranks failed:\n{r.stdout[-2000:]}"
                 f"\n{r.stderr[-2000:]}")
    return took


def summary(times):
    return f"median {statistics.median(times):.1f} s, spread {max(times) - min(times):.1f} s"


def main():
    meshsim = os.path.abspath(sys.argv[1])
    world = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else (os.cpu_count() or 1)
    require_torch("record_bench", _import_torch)
    program = os.path.join(ROOT, "tests", "record", "fsdp_tp_program.py")
    with tempfile.TemporaryDirectory() as tmp:
        floor_program = os.path.join(tmp, "floor.py")
        with open(floor_program, "w") as f:
            f.write(FLOOR_PROGRAM)
        out = os.path.join(tmp, "dumps")
        floor, real = [], []
        for _ in range(3):  # interleaved, so that noise falls on both
            floor.append(record(floor_program, world, jobs, out))
            real.append(record(program, world, jobs, out, ("--tp", "8")))
        start = time.monotonic()
        r = subprocess.run([meshsim, "fr", "analyze", "--json", out], capture_output=True,
                           text=True)
        analyze_s = time.monotonic() - start
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = {}
    # FSDP over TP makes PyTorch's init draws overlap (docs/rng.md 3.3): an RNG finding, which
    # sets the exit status; the job itself must not hang, and its ranks must agree.
    rng = report.get("rng", {})
    clean = report.get("verdict") == "no hang" and rng.get("replicas_differ_count") == 0
    per_rank_ms = (statistics.median(real) - statistics.median(floor)) / world * 1000 * jobs
    print(f"record_bench: {world} ranks, -j {jobs}")
    print(f"  floor (join and leave):  {summary(floor)}")
    print(f"  FSDP2 x TP (tp 8):       {summary(real)}")
    print(f"  above the floor: {per_rank_ms:.0f} ms of one core per rank")
    print(f"  fr analyze of the {world} dumps: {analyze_s:.1f} s, {report.get('verdict')}, "
          f"{rng.get('random_ops')} random ops, {rng.get('overlap_count')} overlapping draws")
    if not clean or statistics.median(real) > LIMIT_S:
        print(f"record_bench: FAIL (limit {LIMIT_S} s; fr analyze must find no hang)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
