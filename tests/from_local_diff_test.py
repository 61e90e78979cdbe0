#!/usr/bin/env python3
"""Differential test: DTensor.from_local in meshsim against PyTorch itself.

Eight Gloo processes run each case in PyTorch: every rank makes a local tensor filled with its
rank + 1, calls DTensor.from_local on a mesh that may leave it out, and records the local tensor
it then holds, its full_tensor() and the placements PyTorch normalised. The same case runs as a
meshsim scenario whose expectations are PyTorch's values, rank by rank: negative shard dims,
ranks outside the mesh (an empty local tensor) and every placement kind. An error must be the
same on both sides. Skips (exit 77) without PyTorch, like torch_diff.

Usage: from_local_diff_test.py MESHSIM
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import (  # noqa: E402
    free_port, require_torch, torch_vs_meshsim, write_rank_results)

WORLD = 8
# (name, mesh ranks (nested for 2-D), local shape, placements)
CASES = [
    ("shard-last", [0, 1, 2, 3], (3, 3), ["Shard(-1)"]),
    ("shard-minus-2", [0, 1, 2, 3], (2, 3), ["Shard(-2)"]),
    ("pair-shard", [0, 2], (2,), ["Shard(0)"]),
    ("odd-replicate", [1, 3, 5, 7], (2, 2), ["Replicate()"]),
    ("four-partial", [0, 1, 2, 3], (4,), ["Partial(sum)"]),
    ("strided-last", [0, 1, 2, 3], (2, 4), ["_StridedShard(-1, split_factor=2)"]),
    ("grid-negative", [[0, 2], [4, 6]], (2, 3), ["Shard(-2)", "Shard(-1)"]),
    ("grid-shard-replicate", [[1, 3], [5, 7]], (3,), ["Shard(0)", "Replicate()"]),
    ("whole-world-negative", list(range(8)), (1, 2), ["Shard(-1)"]),
    ("shard-below-range", [0, 1, 2, 3], (2, 2), ["Shard(-3)"]),
    ("shard-above-range", [0, 1, 2, 3], (2, 2), ["Shard(2)"]),
]


def torch_placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    if text == "Replicate()":
        return Replicate()
    if text == "Partial(sum)":
        return Partial("sum")
    if text.startswith("Shard("):
        return Shard(int(text[len("Shard("):-1]))
    dim, factor = text[len("_StridedShard("):-1].split(", split_factor=")
    return _StridedShard(int(dim), split_factor=int(factor))


def torch_worker(rank, port, out_dir):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results = {}
    for name, ranks, shape, placements in CASES:
        mesh = DeviceMesh("cpu", ranks)
        try:
            t = DTensor.from_local(torch.full(shape, float(rank + 1)), mesh,
                                   [torch_placement(p) for p in placements])
            results[name] = {"shape": list(t.shape), "local": t.to_local().flatten().tolist(),
                             "full": t.full_tensor().flatten().tolist()}
        except Exception as e:  # the same on every rank: all raise before any collective
            results[name] = {"error": type(e).__name__}
        dist.barrier()
    write_rank_results(out_dir, rank, results)
    dist.destroy_process_group()


def rows(values):
    return "[" + ", ".join("[" + ", ".join(repr(v) for v in r) + "]" for r in values) + "]"


def scenario(name, ranks, shape, placements, torch_side):
    """The case as a meshsim scenario whose expectations are PyTorch's values."""
    sizes = ", ".join(str(s) for s in shape)
    quoted = "[" + ", ".join(f'"{p}"' for p in placements) + "]"
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {WORLD}", 'device = "cpu"',
             "[[mesh]]", 'name = "m"', f"ranks = {ranks}",
             "[[step]]", f'tensor = {{ name = "mine", value = "full({sizes}, rank + 1)" }}',
             "[[step]]", f'from_local = {{ name = "t", local = "mine", mesh = "m", '
             f"placements = {quoted} }}"]
    errors = {r.get("error") for r in torch_side}
    if errors != {None}:
        lines.append(f'raises = {{ type = "{errors.pop()}" }}')
        return "\n".join(lines) + "\n"
    lines += ["[[step]]", 'full_tensor = { tensor = "t", out = "full" }',
              "[[expect]]", 'tensor = "t"', f"by_rank = {rows(r['local'] for r in torch_side)}",
              "[[expect]]", 'tensor = "full"', f"by_rank = {rows(r['full'] for r in torch_side)}"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = sys.argv[1]
    require_torch("from_local_diff", lambda: __import__("torch.distributed.tensor"))
    return torch_vs_meshsim("from_local_diff", meshsim, torch_worker, WORLD, CASES,
                            lambda case, torch_side: scenario(*case, torch_side))

if __name__ == "__main__":
    sys.exit(main())
