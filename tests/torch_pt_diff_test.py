#!/usr/bin/env python3
"""Differential test: torch.save files of DTensors and DeviceMeshes that torch 2.15 wrote, read
by meshsim.

For CASES random jobs (a world of 1 to 8 ranks, a mesh of 1 to 3 dims over it, named or not,
sometimes a slice of it and sometimes with a flattened mesh registered; a tensor of a random
dtype and shape whose every value is its flat index; Shard, Replicate and _StridedShard
placements, sometimes stored as an explicit shard order), torch, on the fake process group one
rank at a time, builds the mesh and the DTensor (distribute_tensor with src_data_rank=None, so
each rank cuts its own shard) and torch.save's both, per rank. Then:

1. `meshsim ckpt inspect --json --values` of every file must say what torch's live objects say:
   dtype, shape, requires_grad, placements, the shard's shape and values, the mesh's shape, dim
   names and ranks, the saver's rank and coordinate, and the process-group names.
2. A scenario over the same world, creating the same groups in the same order, loads every
   rank's files (`load = { tensor, file }`, `load = { mesh, file }`): the loaded DTensor must
   equal a `fill = "index"` DTensor meshsim lays out itself with those placements, the loaded
   mesh's group names must be torch's, and no name may be stale.

Skips (exit 77) without PyTorch. Usage: torch_pt_diff_test.py MESHSIM
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_python import require_torch  # noqa: E402

CASES = 64
SHAPES = [(8,), (2, 4), (4, 4), (2, 3, 4)]
MESH_SHAPES = [(1,), (2,), (4,), (8,), (2, 2), (2, 4), (4, 2), (2, 2, 2), (1, 2), (3, 2)]
DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"]
DIM_NAMES = ["pp", "dp", "tp", "cp"]


def random_case(rng):
    mesh = rng.choice(MESH_SHAPES)
    named = rng.random() < 0.8
    names = rng.sample(DIM_NAMES, len(mesh)) if named else None
    # The saved mesh: the whole mesh, a slice of two of its dims, and maybe a flattened one.
    used = list(range(len(mesh)))
    if named and len(mesh) == 3 and rng.random() < 0.5:
        used = sorted(rng.sample(used, 2))
    flatten = named and len(used) >= 2 and rng.random() < 0.4
    shape = rng.choice(SHAPES)
    placements = []
    for m in used:
        if rng.random() < 0.6:
            placements.append(("S", rng.randrange(len(shape))))
        else:
            placements.append(("R",))
    # FSDP over TP: the first mesh dim takes its rows before a later one that cuts them too.
    strided = False
    if len(used) >= 2 and rng.random() < 0.35:
        dim = rng.randrange(len(shape))
        placements[0] = ("SS", dim, mesh[used[1]])
        placements[1] = ("S", dim)
        strided = True
    dtype = rng.choice(DTYPES)
    return {
        "mesh": list(mesh), "names": names, "used": used, "flatten": flatten,
        "shape": list(shape), "dtype": dtype, "placements": placements,
        "explicit_order": strided and rng.random() < 0.5,
        "requires_grad": dtype.startswith(("float", "bfloat")) and rng.random() < 0.3,
    }


def meshsim_placement(p):
    if p[0] == "S":
        return f"Shard({p[1]})"
    if p[0] == "SS":
        return f"_StridedShard({p[1]}, sf={p[2]})"
    return "Replicate()"


def write_case(case, directory, tensor_file="dt-{rank}.pt"):
    """Writes dt-<rank>.pt and mesh-<rank>.pt; returns what torch says of each rank's objects."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec
    from torch.distributed.tensor.placement_types import _StridedShard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def placement(p):
        if p[0] == "S":
            return Shard(p[1])
        if p[0] == "SS":
            return _StridedShard(p[1], split_factor=p[2])
        return Replicate()

    world = math.prod(case["mesh"])
    dtype = getattr(torch, case["dtype"])
    full = torch.arange(math.prod(case["shape"])).reshape(case["shape"]).to(dtype)
    seen = []
    for rank in range(world):
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        try:
            root = init_device_mesh("cpu", tuple(case["mesh"]),
                                    mesh_dim_names=tuple(case["names"]) if case["names"] else None)
            mesh = root
            if case["used"] != list(range(len(case["mesh"]))):
                mesh = root[tuple(case["names"][d] for d in case["used"])]
            if case["flatten"]:
                mesh._flatten()
            t = distribute_tensor(full, mesh, [placement(p) for p in case["placements"]],
                                  src_data_rank=None)
            if case["explicit_order"]:
                # The same layout stated as Shard placements plus a shard order.
                placements, order = DTensorSpec._normalize_placements_into_shard_order(
                    t._spec.placements, mesh)
                spec = DTensorSpec(mesh, placements, t._spec.tensor_meta, shard_order=order,
                                   use_strided_shard_as_shard_order=False)
                t = DTensor(t._local_tensor, spec, requires_grad=False)
            if case["requires_grad"]:
                t.requires_grad_(True)
            torch.save(t, os.path.join(directory, tensor_file.format(rank=rank)))
            torch.save(mesh, os.path.join(directory, f"mesh-{rank}.pt"))
            coordinate = mesh.get_coordinate()
            seen.append({
                "dtype": case["dtype"], "shape": case["shape"],
                "requires_grad": case["requires_grad"],
                "placements": [repr(p) for p in (
                    DTensorSpec._convert_shard_order_to_StridedShard(
                        t._spec.shard_order, t._spec.placements, mesh)
                    if case["explicit_order"] else t._spec.placements)],
                "local_shape": list(t._local_tensor.shape),
                "values": [float(v) for v in t._local_tensor.flatten().tolist()],
                "mesh_shape": list(mesh.mesh.shape),
                "dim_names": list(mesh.mesh_dim_names) if mesh.mesh_dim_names else None,
                "ranks": [int(r) for r in mesh.mesh.flatten().tolist()],
                "rank": rank,
                "coordinate": list(coordinate) if coordinate is not None else None,
                "group_names": list(mesh._dim_group_names),
                "flattened": sorted(mesh._get_root_mesh()._flatten_mapping),
            })
        finally:
            dist.destroy_process_group()
    return seen


def inspect_problems(meshsim, directory, seen):
    problems = []
    for want in seen:
        rank = want["rank"]
        r = subprocess.run([meshsim, "ckpt", "inspect", "--json", "--values",
                            os.path.join(directory, f"dt-{rank}.pt")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            problems.append(f"rank {rank}: inspect failed: {r.stderr.strip()}")
            continue
        got = json.loads(r.stdout)
        mesh = got["mesh"]
        have = {
            "dtype": got["dtype"], "shape": got["shape"], "requires_grad": got["requires_grad"],
            "placements": got["placements"], "local_shape": got["local"]["shape"],
            "values": got["local"]["values"], "mesh_shape": mesh["shape"],
            "dim_names": mesh["dim_names"], "ranks": mesh["ranks"], "rank": mesh["rank"],
            "coordinate": mesh["coordinate"], "group_names": mesh["group_names"],
            "flattened": sorted(mesh["flattened"]),
        }
        for key, value in want.items():
            if have[key] != value:
                problems.append(f"rank {rank}: {key}: meshsim {have[key]}, torch {value}")
        r = subprocess.run([meshsim, "ckpt", "inspect", "--json",
                            os.path.join(directory, f"mesh-{rank}.pt")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or json.loads(r.stdout)["mesh"]["ranks"] != want["ranks"]:
            problems.append(f"rank {rank}: mesh file: {r.stdout[-300:]}{r.stderr.strip()}")
    return problems


def scenario(name, case, seen):
    world = math.prod(case["mesh"])
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {world}", 'device = "cpu"',
             "[[mesh]]", 'name = "root"', f"shape = {case['mesh']}"]
    if case["names"]:
        lines.append("dims = [" + ", ".join(f'"{n}"' for n in case["names"]) + "]")
    mesh = "root"
    if case["used"] != list(range(len(case["mesh"]))):
        sliced = ", ".join(f'"{case["names"][d]}"' for d in case["used"])
        lines += ["[[mesh]]", 'name = "m"', 'from = "root"', f"slice = [{sliced}]"]
        mesh = "m"
    if case["flatten"]:
        flat = "_".join(case["names"][d] for d in case["used"])
        lines += ["[[mesh]]", 'name = "flat"', f'from = "{mesh}"', f'flatten = "{flat}"']
    placements = ", ".join(f'"{meshsim_placement(p)}"' for p in case["placements"])
    lines += [
        "[[step]]", 'load = { tensor = "loaded", file = "dt-{rank}.pt" }',
        "[[step]]", 'load = { mesh = "saved", file = "mesh-{rank}.pt" }',
        "[[step]]", f'dtensor = {{ name = "want", mesh = "{mesh}", shape = {case["shape"]}, '
        f'placements = [{placements}], dtype = "{case["dtype"]}", fill = "index", '
        f'requires_grad = {"true" if case["requires_grad"] else "false"} }}',
        "[[expect]]", 'same = ["loaded", "want"]', "equals = true",
        "[[expect]]", 'stale_group_names = "saved"', "equals = []",
        "[[expect]]", 'warning = { contains = "group names", count = 0 }',
    ]
    if case["names"]:
        dim = case["names"][case["used"][-1]]
        names = ", ".join(f'"{s["group_names"][-1]}"' for s in seen)
        lines += ["[[expect]]", f'group_name = {{ mesh = "saved", dim = "{dim}" }}',
                  f"by_rank = [{names}]"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("torch_pt_diff", lambda: __import__("torch.distributed.tensor"))
    rng = random.Random(20261204)
    failed = files = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(CASES):
            case = random_case(rng)
            directory = os.path.join(tmp, f"case{index}")
            os.makedirs(directory)
            seen = write_case(case, directory)
            files += 2 * len(seen)
            problems = inspect_problems(meshsim, directory, seen)
            text = scenario(f"torch-pt-{index}", case, seen)
            path = os.path.join(directory, "load.toml")
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([meshsim, "run", "--no-time", path], capture_output=True,
                               text=True, timeout=120)
            if r.returncode != 0:
                problems.append(f"scenario failed:\n{text}{r.stdout[-3000:]}{r.stderr[-2000:]}")
            if problems:
                failed += 1
                print(f"case {index} {json.dumps(case)}:\n" + "\n".join(problems[:12]))
    print(f"torch_pt_diff: {CASES} jobs, {files} torch.save files of DTensors and meshes torch "
          f"wrote, read by meshsim; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
