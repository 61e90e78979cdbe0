#!/usr/bin/env python3
"""meshsim's DTensor RNG offsets against PyTorch's own functions, on random cases.

usage: rng_offsets_diff_test.py MESHSIM [--cases N] [--seed S]

For random global shapes, meshes and placements (Shard with positive and negative dims,
Replicate, Partial, _StridedShard), every rank's shard index, first-shard numel and pre/post
offset increments from `meshsim rng offsets` are compared with what
torch.distributed.tensor._random computes (_calc_shard_info, _calc_shard_linear_idx,
_calc_first_shard_size, and _compute_rng_offsets' rounding). These functions only read the
mesh's shape and the placements, so no process group is needed.

Exit status: 0 no mismatch, 1 mismatches, 77 skipped (no torch). Without `import torch`, the
script re-executes itself under $MESHSIM_TORCH_PYTHON when that is set.
"""
import argparse
import itertools
import random
import re
import subprocess
import sys
import types
from math import prod

from torch_python import require_torch


def _check_torch():
    from torch.distributed.tensor import _random  # noqa: F401


class Mesh:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(shape)

    def size(self, i):
        return self.shape[i]


def torch_offsets(shape, mesh, coordinate, placements):
    from torch.distributed.tensor._random import (_calc_first_shard_size, _calc_shard_info,
                                                  _calc_shard_linear_idx)
    spec = types.SimpleNamespace(mesh=Mesh(mesh), placements=placements, shape=shape,
                                 ndim=len(shape))
    index, total = _calc_shard_info(coordinate, spec)
    j = _calc_shard_linear_idx(index, total)
    first = prod(_calc_first_shard_size(spec))
    return j, first, (j * first + 3) // 4 * 4, (prod(shape) + 3) // 4 * 4


def random_case(rng):
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard, _StridedShard
    ndim = rng.randint(1, 3)
    shape = [rng.randint(0, 20) for _ in range(ndim)]
    mesh = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
    placements, texts = [], []
    for _ in mesh:
        kind = rng.choice("SSSRPT")
        dim = rng.randint(-ndim, ndim - 1)
        if kind == "S":
            placements.append(Shard(dim))
            texts.append(f"Shard({dim})")
        elif kind == "R":
            placements.append(Replicate())
            texts.append("Replicate()")
        elif kind == "P":
            placements.append(Partial())
            texts.append("Partial()")
        else:
            sf = rng.randint(2, 3)
            dim = rng.randint(0, ndim - 1)
            placements.append(_StridedShard(dim, split_factor=sf))
            texts.append(f"_StridedShard({dim}, sf={sf})")
    return shape, mesh, placements, texts


LINE = re.compile(r"rank (\d+): coordinate \[([\d, ]*)\], shard (\d+), first_shard_numel (\d+), "
                  r"pre \+(\d+), post \+(\d+)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("meshsim")
    parser.add_argument("root", nargs="?")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    require_torch("rng_offsets_diff", _check_torch)
    import torch
    rng = random.Random(args.seed)
    mismatches = ranks = 0
    for case in range(args.cases):
        shape, mesh, placements, texts = random_case(rng)
        cmd = [args.meshsim, "rng", "offsets", "--shape", ",".join(map(str, shape)), "--mesh",
               ",".join(map(str, mesh))]
        for t in texts:
            cmd += ["--placement", t]
        run = subprocess.run(cmd, capture_output=True, text=True)
        got = [tuple(int(x) for x in m.groups()[2:]) for m in LINE.finditer(run.stdout)]
        for r, coordinate in enumerate(itertools.product(*[range(m) for m in mesh])):
            ranks += 1
            want = torch_offsets(shape, mesh, list(coordinate), placements)
            if run.returncode != 0 or r >= len(got) or got[r] != want:
                mismatches += 1
                print(f"MISMATCH case {case}: shape {shape} mesh {mesh} placements {texts} "
                      f"rank {r}: meshsim {got[r] if r < len(got) else run.stderr.strip()} "
                      f"torch {want}")
                break
    print(f"rng_offsets_diff: torch {torch.__version__}, seed {args.seed}: {args.cases} cases, "
          f"{ranks} ranks compared, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
