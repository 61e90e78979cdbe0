#!/usr/bin/env python3
"""Differential test: `meshsim ckpt inspect --json` and `meshsim ckpt plan` against torch 2.15's
own reading and load planning of DCP checkpoints torch wrote.

The committed tests/io/data/dcp_2x2, and CASES random checkpoints written now by dcp.save on 4
Gloo processes (random 1-d and 2-d meshes, random Shard/Replicate placements, dtypes and shapes,
plain tensors and objects):
- inspect: every name, kind, dtype, shape and requires_grad, every chunk's offsets and sizes in
  order, and the file, offset and length of every stored item must be what pickle.load of its
  .metadata says;
- plan, onto PLANS_PER_CASE random target meshes of 1 to 12 ranks with random placements: every
  rank's reads (which saved chunk, and which part of it the rank keeps) must be the ReadItems
  torch's own planner makes for that rank's shard (planner_helpers.create_read_items_for_chunk_list
  on _compute_local_shape_and_global_offset), and the bytes it holds its shard's.
Skips (exit 77) without PyTorch.

Usage: dcp_inspect_diff_test.py MESHSIM
"""
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_python import require_torch  # noqa: E402

CASES = 12
PLANS_PER_CASE = 4
DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"]
MESHES = [(4,), (2, 2), (1, 4), (4, 1)]


def random_state(rng, mesh_shape):
    state = {}
    for i in range(rng.randint(1, 6)):
        ndim = rng.randint(0, 3)
        shape = tuple(rng.choice([0, 1, 2, 3, 4, 5, 8]) if rng.random() < 0.1 else
                      rng.choice([1, 2, 3, 4, 5, 8]) for _ in range(ndim))
        placements = None
        if rng.random() < 0.7 and ndim > 0:
            placements = tuple(f"Shard({rng.randrange(ndim)})" if rng.random() < 0.6
                               else "Replicate()" for _ in mesh_shape)
        state[f"layers.{i}.{rng.choice(['w', 'b', 'exp_avg'])}"] = (rng.choice(DTYPES), shape,
                                                                     placements)
    return state


def torch_view(directory):
    """What torch reads from the .metadata, in the JSON shape meshsim prints."""
    import torch
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        md = pickle.load(f)
    storage = {(k.fqn, tuple(k.offset) if k.offset is not None else None): v
               for k, v in md.storage_data.items()}
    entries = []
    for name, meta in md.state_dict_metadata.items():
        if not isinstance(meta, TensorStorageMetadata):
            info = storage[(name, None)]
            entries.append({"name": name, "kind": "object", "file": info.relative_path,
                            "offset": info.offset, "length": info.length})
            continue
        chunks = []
        for c in meta.chunks:
            info = storage[(name, tuple(c.offsets))]
            chunks.append({"offsets": list(c.offsets), "sizes": list(c.sizes),
                           "file": info.relative_path, "offset": info.offset,
                           "length": info.length})
        dtype = str(meta.properties.dtype).removeprefix("torch.")
        numel = 1
        for d in meta.size:
            numel *= d
        entries.append({"name": name, "kind": "tensor", "dtype": dtype, "shape": list(meta.size),
                        "requires_grad": meta.properties.requires_grad,
                        "bytes": numel * torch.empty((), dtype=meta.properties.dtype).element_size(),
                        "chunks": chunks})
    return {"version": md.version, "save_id": md.storage_meta.save_id, "entries": entries}


def meshsim_view(meshsim, directory):
    out = subprocess.run([meshsim, "ckpt", "inspect", "--json", directory], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise AssertionError(f"ckpt inspect {directory} exited {out.returncode}: {out.stderr}")
    got = json.loads(out.stdout)
    return {"version": got["version"], "save_id": got["save_id"], "entries": got["entries"]}


def random_target(rng):
    mesh = rng.choice([(1,), (2,), (3,), (5,), (8,), (2, 2), (2, 3), (3, 4), (4, 2), (1, 6)])
    placements = [rng.choice(["Shard(0)", "Replicate()", "Shard(-1)"]) for _ in mesh]
    return mesh, placements


def torch_plan(directory, mesh, placements):
    """{rank: sorted reads} and {rank: bytes held}, as torch's load planner reads for each rank's
    shard; a 0-d tensor is read whole by every rank."""
    import torch
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, TensorStorageMetadata
    from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
    from torch.distributed.tensor import Replicate, Shard
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        md = pickle.load(f)
    objs = [Replicate() if p == "Replicate()" else Shard(int(p[6:-1])) for p in placements]
    reads, holds = {}, {}
    world = 1
    for m in mesh:
        world *= m
    for rank in range(world):
        coordinate, rest = [], rank
        for m in reversed(mesh):
            coordinate.insert(0, rest % m)
            rest //= m
        got, held = [], 0
        for name, meta in md.state_dict_metadata.items():
            if not isinstance(meta, TensorStorageMetadata):
                got.append((name, None, None, None))
                continue
            esize = torch.empty((), dtype=meta.properties.dtype).element_size()
            if len(meta.size) == 0:
                shape, offset = (), ()
            else:
                ps = [Shard(p.dim % len(meta.size)) if isinstance(p, Shard) else p for p in objs]
                shape, offset = _compute_local_shape_and_global_offset(meta.size, mesh,
                                                                        coordinate, ps)
            n = 1
            for d in shape:
                n *= d
            held += n * esize
            if n == 0:
                continue
            local = ChunkStorageMetadata(torch.Size(offset), torch.Size(shape))
            for item in create_read_items_for_chunk_list(name, meta, [local]):
                base = list(item.storage_index.offset)
                keeps = [b + o for b, o in zip(base, item.storage_offsets)]
                got.append((name, tuple(base), tuple(keeps), tuple(item.lengths)))
        reads[rank] = sorted(got, key=repr)
        holds[rank] = held
    return reads, holds


def meshsim_plan(meshsim, directory, mesh, placements):
    args = [meshsim, "ckpt", "plan", directory, "--json", "--rank", "all",
            "--mesh", ",".join(map(str, mesh))]
    for p in placements:
        args += ["--placement", p]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {out.returncode}: {out.stderr}"
                             f"{out.stdout[-500:]}")
    got = json.loads(out.stdout)
    reads, holds = {}, {}
    for rank in got["ranks"]:
        mine = []
        for r in rank["reads"]:
            if "chunk" not in r:
                mine.append((r["name"], None, None, None))
            else:
                mine.append((r["name"], tuple(r["chunk"]["offsets"]), tuple(r["keeps"]["offsets"]),
                             tuple(r["keeps"]["sizes"])))
        reads[rank["rank"]] = sorted(mine, key=repr)
        holds[rank["rank"]] = rank["holds_bytes"]
    return reads, holds


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("dcp_inspect_diff", lambda: __import__("torch.distributed.checkpoint"))
    import dcp_writer
    rng = random.Random(20261203)
    failures = entries = chunks = plans = planned_reads = 0
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = []
        for case in range(CASES):
            mesh = rng.choice(MESHES)
            checkpoints.append((os.path.join(tmp, f"case{case}"), mesh, random_state(rng, mesh)))
        dcp_writer.write(checkpoints)
        directories = [os.path.join(HERE, "io", "data", "dcp_2x2")] + [c[0] for c in checkpoints]
        for directory in directories:
            want, got = torch_view(directory), meshsim_view(meshsim, directory)
            entries += len(want["entries"])
            chunks += sum(len(e.get("chunks", [])) for e in want["entries"])
            if want != got:
                failures += 1
                print(f"MISMATCH {directory}:\n  torch:   {json.dumps(want)}\n"
                      f"  meshsim: {json.dumps(got)}")
            for _ in range(PLANS_PER_CASE):
                mesh, placements = random_target(rng)
                want_plan = torch_plan(directory, mesh, placements)
                got_plan = meshsim_plan(meshsim, directory, mesh, placements)
                plans += 1
                planned_reads += sum(len(v) for v in want_plan[0].values())
                if want_plan != got_plan:
                    failures += 1
                    print(f"PLAN MISMATCH {directory} onto {mesh} {placements}:\n"
                          f"  torch:   {want_plan}\n  meshsim: {got_plan}")
    print(f"dcp_inspect_diff: {len(directories)} checkpoints ({CASES} generated), "
          f"{entries} entries, {chunks} chunks; {plans} load plans, {planned_reads} reads; "
          f"{failures} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
