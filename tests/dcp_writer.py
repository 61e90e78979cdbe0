"""Writes DCP checkpoints with torch.distributed.checkpoint itself, on 4 Gloo processes, for the
tests that read real DCP files. A checkpoint is (directory, mesh shape, state) where state maps
each name to (dtype, global shape, placements or None for a plain tensor); STATE below is the
one tests/io/data/dcp_2x2 holds.

Run as a program it writes STATE on a 2 x 2 mesh into DIR (tests/io/data/dcp_2x2 was made so, by
torch 2.15.0), or with `train` TRAIN_STATE (scenarios/checkpoints/torch-dcp-train-2x2); the
differential tests import it to write many at once (one process spawn).
Usage: dcp_writer.py DIR [train]
"""
import os
import sys
import tempfile

WORLD = 4

# name -> (dtype, global shape, placements on the 2 x 2 mesh, or None for a plain tensor). Values
# are arange(numel) * 0.5 + 1 (cast to the dtype), so every element is distinct where it can be.
STATE = {
    "model.w": ("float32", (8, 4), ("Shard(0)", "Shard(1)")),
    "model.b": ("bfloat16", (6,), ("Replicate()", "Shard(0)")),
    "model.emb": ("int32", (4, 6), ("Shard(1)", "Replicate()")),
    "optim.exp_avg": ("float64", (8, 4), ("Shard(0)", "Replicate()")),
    "optim.empty": ("float32", (0, 4), ("Shard(0)", "Shard(1)")),
    "step": ("int64", (), None),
    "rng.cuda": ("uint8", (16,), None),
    "mask": ("bool", (5,), None),
    "half": ("float16", (3,), None),
}
EXTRA_OBJECT = ("epoch", 3)  # a non-tensor value: DCP saves it with torch.save, as bytes


def values(torch, dtype, shape, fill="affine"):
    """arange(numel) * 0.5 + 1 ("affine") or arange(numel) ("index", as a scenario's fill =
    "index"), in `dtype`."""
    numel = 1
    for d in shape:
        numel *= d
    base = torch.arange(numel, dtype=torch.float64)
    if fill == "affine":
        base = base * 0.5 + 1
    if dtype == "bool":
        return (torch.arange(numel) % 2 == 0).reshape(shape)
    return base.to(getattr(torch, dtype)).reshape(shape)


def placement(text):
    from torch.distributed.tensor import Replicate, Shard
    if text == "Replicate()":
        return Replicate()
    return Shard(int(text[len("Shard("):-1]))


def state_dict(torch, mesh, state, fill):
    from torch.distributed.tensor import distribute_tensor
    out = {}
    for name, (dtype, shape, placements) in state.items():
        full = values(torch, dtype, shape, fill)
        if placements is None:
            out[name] = full
        else:
            out[name] = distribute_tensor(full, mesh, [placement(p) for p in placements])
    out[EXTRA_OBJECT[0]] = EXTRA_OBJECT[1]
    return out


def _rank(rank, init_file, checkpoints, fill):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD)
    for directory, mesh_shape, state in checkpoints:
        mesh = init_device_mesh("cpu", mesh_shape)
        dcp.save(state_dict(torch, mesh, state, fill), checkpoint_id=directory)
    dist.destroy_process_group()


def write(checkpoints, fill="affine"):
    """Saves each (directory, mesh shape, state) with DCP from 4 Gloo processes."""
    import torch.multiprocessing as mp
    for directory, _, _ in checkpoints:
        os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank, args=(os.path.join(tmp, "init"), checkpoints, fill), nprocs=WORLD,
                 join=True)


# What scenarios/checkpoints/torch-dcp-train-2x2 holds: a training job's state on a 2 x 2 mesh
# (FSDP over dp, TP over tp), every value its flat index.
TRAIN_STATE = {
    "layers.0.weight": ("float32", (16, 8), ("Shard(0)", "Shard(1)")),
    "layers.0.exp_avg": ("float64", (16, 8), ("Shard(0)", "Shard(1)")),
    "layers.0.bias": ("bfloat16", (8,), ("Replicate()", "Shard(0)")),
    "optim.step": ("int64", (1,), None),
}

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "train":
        write([(sys.argv[1], (2, 2), TRAIN_STATE)], fill="index")
    else:
        write([(sys.argv[1], (2, 2), STATE)])
