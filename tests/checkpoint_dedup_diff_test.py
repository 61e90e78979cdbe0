#!/usr/bin/env python3
"""Differential test: which rank writes each item of a whole-world save, against PyTorch itself.

For random worlds (2 to 24 ranks) where each of several plain tensors (random sizes and dtypes) is
held by a random set of ranks, torch 2.15's own planner builds every rank's write items
(planner_helpers._create_write_items) and deduplicates them as DefaultSavePlanner does
(_dedup_save_plans.dedup_save_plans: load balancing by bytes, ties in CPython's set order, which
is not always the lowest rank; empty tensors count too). meshsim runs the same state dicts as a scenario with
--keep-checkpoints, and the rank whose shard file holds each tensor must be torch's pick. Pure
planning: no process group. Skips (exit 77) without PyTorch.

Usage: checkpoint_dedup_diff_test.py MESHSIM
"""
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import require_torch  # noqa: E402

CASES = 60
DTYPES = {"float32": 4, "int64": 8, "uint8": 1, "bfloat16": 2}


def torch_writers(world, tensors):
    """{name: rank} as torch 2.15's default planner deduplicates the ranks' plans."""
    import torch
    from torch.distributed.checkpoint._dedup_save_plans import dedup_save_plans
    from torch.distributed.checkpoint.planner import SavePlan
    from torch.distributed.checkpoint.planner_helpers import _create_write_items
    plans = []
    for r in range(world):
        items = []
        for name, numel, dtype, holders in tensors:
            if r in holders:
                items += _create_write_items(name, torch.zeros(numel, dtype=getattr(torch, dtype)))
        plans.append(SavePlan(items))
    out = {}
    for r, plan in enumerate(dedup_save_plans(plans, save_to_lowest_rank=False)):
        for item in plan.items:
            out[item.index.fqn] = r
    return out


def scenario(world, tensors):
    lines = ["[scenario]", 'name = "dedup"', f"world_size = {world}", 'device = "cuda"']
    for name, numel, dtype, holders in tensors:
        ranks = " or ".join(f"rank == {r}" for r in sorted(holders))
        lines += ["[[step]]", f'when = "{ranks}"',
                  f'tensor = {{ name = "{name}", value = [{", ".join(["0"] * numel)}], '
                  f'dtype = "{dtype}" }}']
    names = ", ".join(f'"{t[0]}"' for t in tensors)
    lines += ["[[step]]", f'save = {{ checkpoint = "c", tensors = [{names}] }}']
    return "\n".join(lines) + "\n"


def meshsim_writers(meshsim, tmp, world, tensors):
    """{name: rank} from the shard files meshsim wrote: a chunk record names its tensor."""
    path = os.path.join(tmp, "dedup.toml")
    with open(path, "w") as f:
        f.write(scenario(world, tensors))
    keep = os.path.join(tmp, "keep")
    r = subprocess.run([meshsim, "run", "--no-time", "--keep-checkpoints", keep, path],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"meshsim failed:\n{r.stdout}{r.stderr}\n{scenario(world, tensors)}")
    out = {}
    for rank in range(world):
        with open(os.path.join(keep, "dedup", "c", f"shard-{rank}.ckpt"), "rb") as f:
            data = f.read()
        for name, *_ in tensors:
            if name.encode() in data:
                out.setdefault(name, []).append(rank)
    return {name: ranks[0] if len(ranks) == 1 else ranks for name, ranks in out.items()}


def main():
    meshsim = sys.argv[1]
    require_torch("checkpoint_dedup_diff", lambda: __import__("torch.distributed.checkpoint"))
    rng = random.Random(20261203)
    mismatches = ties = not_lowest = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(CASES):
            world = rng.randint(2, 24)
            tensors = []
            for t in range(rng.randint(1, 10)):
                holders = set(rng.sample(range(world), rng.randint(1, world)))
                # Equal sizes make ties, which CPython's set order breaks; empty tensors are items too.
                numel = rng.choice([0, 4, 4, 16, rng.randint(1, 64)])
                tensors.append((f"k{t:03d}_", numel, rng.choice(list(DTYPES)), holders))
            ties += sum(len(t[3]) > 1 for t in tensors)
            want = torch_writers(world, tensors)
            not_lowest += sum(want[t[0]] != min(t[3]) for t in tensors)
            got = meshsim_writers(meshsim, tmp, world, tensors)
            if got != want:
                mismatches += 1
                print(f"MISMATCH case {case}: world {world}\n  torch   {want}\n  meshsim {got}")
    # A rule of "the lowest holder writes" fails wherever torch picked another rank.
    print(f"checkpoint_dedup_diff: {CASES} cases ({ties} replicated tensors, {not_lowest} written "
          f"by a holder other than the lowest), {mismatches} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
