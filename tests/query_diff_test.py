#!/usr/bin/env python3
"""Differential test: the collectives and dtensor queries against PyTorch itself.

Four Gloo processes run each case in PyTorch under CommDebugMode: a redistribute, a full_tensor
or a DTensor.from_local (with shape= and stride=, or run_check=True), recording what CommDebugMode
counted and the result's metadata (shape, stride, placements, local shape) and local values. The
same case runs as a meshsim scenario whose `collectives` and `dtensor` expectations are PyTorch's
values, rank by rank; an error must be PyTorch's error type. Skips (exit 77) without PyTorch.

CommDebugMode names functional collectives "c10d_functional.<op>" and c10d ops "c10d.<op>_";
all_gather_object is two c10d all-gathers there and one object collective in meshsim.

Usage: query_diff_test.py MESHSIM
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import (  # noqa: E402
    free_port, quoted, require_torch, torch_vs_meshsim, write_rank_results)

WORLD = 4
MESHES = {"2x2": ((2, 2), ("dp", "tp")), "4": ((4,), ("x",))}
# (name, mesh, kind, arguments)
#   redistribute: (global shape, source placements, target placements)
#   full_tensor: (global shape, placements)
#   from_local: (local shape, an expression of the rank in both languages; placements; keyword
#     arguments)
CASES = [
    ("rr-from-s0s1", "2x2", "redistribute", ((8, 4), ["S(0)", "S(1)"], ["R", "R"])),
    ("s1s0-from-s0s1", "2x2", "redistribute", ((8, 4), ["S(0)", "S(1)"], ["S(1)", "S(0)"])),
    ("s0r-from-rs0", "2x2", "redistribute", ((8, 4), ["R", "S(0)"], ["S(0)", "R"])),
    ("s1-from-s0", "4", "redistribute", ((8, 4), ["S(0)"], ["S(1)"])),
    ("r-from-uneven-s0", "4", "redistribute", ((6,), ["S(0)"], ["R"])),
    ("s0r-from-pr", "2x2", "redistribute", ((4,), ["P", "R"], ["S(0)", "R"])),
    ("rr-from-pr", "2x2", "redistribute", ((4,), ["P", "R"], ["R", "R"])),
    ("s0-from-p", "4", "redistribute", ((8,), ["P"], ["S(0)"])),
    ("full-s0s1", "2x2", "full_tensor", ((8, 4), ["S(0)", "S(1)"])),
    ("full-uneven", "4", "full_tensor", ((5, 3), ["S(1)"])),
    ("from-local-uneven-shape", "4", "from_local",
     ("3 * (rank < 3) + (rank == 3), 2", ["S(0)"], {"shape": (10, 2), "stride": (2, 1)})),
    ("from-local-run-check-replicate", "4", "from_local", ("2", ["R"], {"run_check": True})),
    ("from-local-run-check-grid", "2x2", "from_local", ("2, 3", ["R", "S(1)"], {"run_check": True})),
    ("from-local-run-check-shard", "4", "from_local", ("2", ["S(0)"], {"run_check": True})),
    ("from-local-run-check-uneven", "4", "from_local",
     ("2 + (rank == 1)", ["S(0)"], {"run_check": True})),
    ("from-local-shape-only", "4", "from_local", ("2", ["S(0)"], {"shape": (8,)})),
]


def torch_placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard
    if text == "R":
        return Replicate()
    if text == "P":
        return Partial()
    return Shard(int(text[2:-1]))


def counts(mode):
    out = {}
    for op, n in mode.get_comm_counts().items():
        name = str(op).split(".")[-1].strip("_")
        if name == "allgather_base":  # all_gather_object: sizes, then the pickles
            name, n = "all_gather_object", n // 2
        out[name] = out.get(name, 0) + n
    return out


def torch_worker(rank, port, out_dir):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    meshes = {k: init_device_mesh("cpu", shape, mesh_dim_names=dims)
              for k, (shape, dims) in MESHES.items()}
    results = {}
    for name, mesh_key, kind, args in CASES:
        mesh = meshes[mesh_key]
        try:
            if kind == "from_local":
                local_shape, placements, kwargs = args
                local = torch.full(eval(f"({local_shape},)", {"rank": rank}), float(rank + 1))
                with CommDebugMode() as mode:
                    t = DTensor.from_local(local, mesh, [torch_placement(p) for p in placements],
                                           **kwargs)
            else:
                shape, source = args[0], args[1]
                n = 1
                for s in shape:
                    n *= s
                whole = torch.arange(float(n)).reshape(shape)
                if source[0] == "P":
                    t = DTensor.from_local(whole, mesh, [torch_placement(p) for p in source])
                else:
                    t = distribute_tensor(whole, mesh, [torch_placement(p) for p in source])
                with CommDebugMode() as mode:
                    if kind == "redistribute":
                        t = t.redistribute(mesh, [torch_placement(p) for p in args[2]])
                    else:
                        full = t.full_tensor()
            if kind == "full_tensor":
                results[name] = {"counts": counts(mode), "local": full.flatten().tolist()}
            else:
                results[name] = {"counts": counts(mode), "shape": list(t.shape),
                                 "stride": list(t.stride()),
                                 "placements": [str(p) for p in t.placements],
                                 "local_shape": list(t.to_local().shape),
                                 "local": t.to_local().flatten().tolist()}
        except Exception as e:
            results[name] = {"error": type(e).__name__}
        dist.barrier()
    write_rank_results(out_dir, rank, results)
    dist.destroy_process_group()



def by_rank(values):
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def toml_table(d):
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(d.items())) + " }" \
        if d else "{}"


def scenario(name, mesh_key, kind, args, torch_side):
    """The case as a meshsim scenario whose expectations are PyTorch's values."""
    mesh_shape, dims = MESHES[mesh_key]
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {WORLD}", 'device = "cpu"',
             "[[mesh]]", 'name = "m"', f"shape = {list(mesh_shape)}", f"dims = {quoted(dims)}"]
    if kind == "from_local":
        local_shape, placements, kwargs = args
        extra = "".join(f", {k} = {json.dumps(list(v) if isinstance(v, tuple) else v)}"
                        for k, v in kwargs.items())
        lines += ["[[step]]", f'tensor = {{ name = "mine", value = "full({local_shape}, rank + 1)" }}',
                  "[[step]]", 'count_collectives = "start"',
                  "[[step]]", f'from_local = {{ name = "t", local = "mine", mesh = "m", '
                  f"placements = {quoted(placements)}{extra} }}"]
    else:
        shape, source = args[0], args[1]
        if source[0] == "P":
            lines += ["[[step]]", f'dtensor = {{ name = "whole", mesh = "m", shape = {list(shape)}, '
                      'fill = "index" }', "[[step]]", 'to_local = { tensor = "whole", out = "mine" }',
                      "[[step]]", f'from_local = {{ name = "w", local = "mine", mesh = "m", '
                      f"placements = {quoted(source)} }}"]
        else:
            lines += ["[[step]]", f'dtensor = {{ name = "w", mesh = "m", shape = {list(shape)}, '
                      f'placements = {quoted(source)}, fill = "index" }}']
        lines += ["[[step]]", 'count_collectives = "start"']
        if kind == "redistribute":
            lines += ["[[step]]", f'redistribute = {{ tensor = "w", placements = {quoted(args[2])}, '
                      'out = "t" }']
        else:
            lines += ["[[step]]", 'full_tensor = { tensor = "w", out = "t" }']
    errors = {r.get("error") for r in torch_side}
    if errors != {None}:
        lines.append(f'raises = {{ type = "{errors.pop()}" }}')
        return "\n".join(lines) + "\n"
    lines += ["[[step]]", 'count_collectives = "stop"',
              "[[expect]]", 'collectives = "counts"',
              f"by_rank = [{', '.join(toml_table(r['counts']) for r in torch_side)}]"]
    for field in ("shape", "stride", "placements", "local_shape") if kind != "full_tensor" else ():
        lines += ["[[expect]]", f'dtensor = {{ name = "t", field = "{field}" }}',
                  f"by_rank = {by_rank(r[field] for r in torch_side)}"]
    lines += ["[[expect]]", 'tensor = "t"', f"by_rank = {by_rank(r['local'] for r in torch_side)}"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = sys.argv[1]
    require_torch("query_diff", lambda: __import__("torch.distributed.tensor.debug"))
    return torch_vs_meshsim("query_diff", meshsim, torch_worker, WORLD, CASES,
                            lambda case, torch_side: scenario(*case, torch_side))

if __name__ == "__main__":
    sys.exit(main())
