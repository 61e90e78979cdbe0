#!/usr/bin/env python3
"""Differential test: explicit shard orders against PyTorch itself.

For random meshes (1 to 4 dims), placements and orders in which each sharded tensor dim is cut
by its mesh dims, torch 2.15's own DTensorSpec._convert_shard_order_to_StridedShard gives the
placements that encode the order, and DTensorSpec._maybe_convert_StridedShard_to_shard_order
decodes them back (and decodes random _StridedShard split factors, most of which encode no order).
Each case becomes a meshsim scenario that builds the DTensor with `shard_order` (or the raw
placements) and expects torch's placements and shard order from the `dtensor` query, or torch's
error type. Both helpers only ask the mesh for its sizes, so no process group is needed. Skips
(exit 77) without PyTorch.

Usage: shard_order_diff_test.py MESHSIM
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import failing_scenario_texts, require_torch  # noqa: E402

CASES = 120


class Sizes:
    """What the two helpers ask of a DeviceMesh."""

    def __init__(self, shape):
        self.shape = shape

    def size(self, dim):
        return self.shape[dim]


def spelled(p):
    from torch.distributed.tensor.placement_types import Replicate, Shard, _StridedShard
    if isinstance(p, _StridedShard):
        return f"_StridedShard({p.dim}, sf={p.split_factor})"
    if isinstance(p, Shard):
        return f"Shard({p.dim})"
    assert isinstance(p, Replicate)
    return "Replicate()"


def make_case(rng, index):
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry
    from torch.distributed.tensor.placement_types import Replicate, Shard, _StridedShard
    shape = [rng.choice([1, 2, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
    ndim = rng.randint(1, 3)
    tensor = [2 * 24 for _ in range(ndim)]
    if index % 3 == 2:  # raw _StridedShards: decode only
        placements = []
        for _ in shape:
            d = rng.randrange(ndim)
            placements.append(rng.choice([Replicate(), Shard(d),
                                          _StridedShard(d, split_factor=rng.choice([2, 3, 4, 6]))]))
        order = None
    else:
        placements = [rng.choice([Replicate(), Shard(rng.randrange(ndim))]) for _ in shape]
        by_dim = {}
        for m, p in enumerate(placements):
            if isinstance(p, Shard):
                by_dim.setdefault(p.dim, []).append(m)
        order = []
        for d, dims in sorted(by_dim.items()):
            rng.shuffle(dims)
            order.append((d, dims))
        if index % 10 == 1 and any(isinstance(p, Replicate) for p in placements):
            order.append((0, [placements.index(Replicate())]))  # refused: not a Shard
    result = {"shape": shape, "tensor": tensor, "placements": [spelled(p) for p in placements],
              "order": order}
    try:
        encoded = tuple(placements) if order is None else DTensorSpec._convert_shard_order_to_StridedShard(
            tuple(ShardOrderEntry(tensor_dim=d, mesh_dims=tuple(m)) for d, m in order),
            tuple(placements), Sizes(shape))
        decoded = DTensorSpec._maybe_convert_StridedShard_to_shard_order(tuple(encoded), Sizes(shape))
        result["encoded"] = [spelled(p) for p in encoded]
        result["decoded"] = None if decoded is None else [
            {"tensor_dim": e.tensor_dim, "mesh_dims": list(e.mesh_dims)} for e in decoded]
    except Exception as e:
        result["error"] = type(e).__name__
    return result


def scenario(index, case):
    world = 1
    for s in case["shape"]:
        world *= s
    order = ""
    if case["order"] is not None:
        entries = ", ".join(f"{{ tensor_dim = {d}, mesh_dims = {m} }}" for d, m in case["order"])
        order = f", shard_order = [{entries}]"
    lines = ["[scenario]", f'name = "shard-order-{index}"', f"world_size = {world}",
             "[[mesh]]", 'name = "m"', f"shape = {case['shape']}",
             "[[step]]", f'dtensor = {{ name = "t", mesh = "m", shape = {case["tensor"]}, '
             f"placements = {json.dumps(case['placements'])}{order}, meta = true }}"]
    if "error" in case:
        return "\n".join(lines + [f'raises = {{ type = "{case["error"]}" }}']) + "\n"
    lines += ["[[expect]]", 'dtensor = { name = "t", field = "placements" }',
              f"equals = {json.dumps(case['encoded'])}",
              "[[expect]]", 'dtensor = { name = "t", field = "shard_order" }']
    if case["decoded"] is None:
        lines.append('equals = "none"')
    else:
        entries = ", ".join(f"{{ tensor_dim = {e['tensor_dim']}, mesh_dims = {e['mesh_dims']} }}"
                            for e in case["decoded"])
        lines.append(f"equals = [{entries}]")
    return "\n".join(lines) + "\n"


def main():
    meshsim = sys.argv[1]
    require_torch("shard_order_diff", lambda: __import__("torch.distributed.tensor._dtensor_spec"))
    import torch
    rng = random.Random(2026)
    cases = [make_case(rng, i) for i in range(CASES)]
    failed = failing_scenario_texts(meshsim, [scenario(i, c) for i, c in enumerate(cases)])
    errors = sum("error" in c for c in cases)
    undecodable = sum(c.get("decoded", 0) is None for c in cases)
    print(f"shard_order_diff: torch {torch.__version__}: {len(cases)} cases ({errors} refused, "
          f"{undecodable} encoding no order), {len(failed)} mismatches")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
