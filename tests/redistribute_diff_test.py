#!/usr/bin/env python3
"""Differential test: DTensor.redistribute in meshsim against PyTorch itself.

Four Gloo processes run each case in PyTorch (a tensor of its flat indices laid out in the source
placements, redistributed to the target) and record every rank's local values and the collectives
it issues (op, group ranks, input shape). The same case runs as a meshsim scenario on a "cpu"
mesh: its expectations are PyTorch's local values, and its Chrome trace gives meshsim's
collectives, compared rank by rank. An error must be the same on both sides. Skips (exit 77)
without PyTorch, like torch_diff.

Usage: redistribute_diff_test.py MESHSIM
"""
import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import require_torch  # noqa: E402

WORLD = 4
SS = "_StridedShard(0, 2)"
# (name, mesh shape, tensor shape, source placements, target placements): every kind of move,
# even and uneven, FSDP2 + TP's strided layout both ways, and what PyTorch refuses.
CASES = [
    ("S0-R", (4,), (9,), ["S(0)"], ["R"]),
    ("S0-R-empty-shard", (4,), (3,), ["S(0)"], ["R"]),
    ("R-S1", (4,), (6, 5), ["R"], ["S(1)"]),
    ("S0-S1", (4,), (6, 5), ["S(0)"], ["S(1)"]),
    ("S1-S0", (4,), (6, 5), ["S(1)"], ["S(0)"]),
    ("S0-P", (4,), (9,), ["S(0)"], ["P"]),
    ("R-P", (4,), (9,), ["R"], ["P"]),
    ("P-R", (4,), (6, 5), ["P"], ["R"]),
    ("P-S0", (4,), (9, 4), ["P"], ["S(0)"]),
    ("P-S1", (4,), (6, 5), ["P"], ["S(1)"]),
    ("SS-S0", (4,), (9,), [SS], ["S(0)"]),
    ("SS-R", (4,), (9,), [SS], ["R"]),
    ("S0S0-RS0", (2, 2), (9, 4), ["S(0)", "S(0)"], ["R", "S(0)"]),
    ("S0S1-S1S0", (2, 2), (6, 5), ["S(0)", "S(1)"], ["S(1)", "S(0)"]),
    ("S0S1-RR", (2, 2), (6, 5), ["S(0)", "S(1)"], ["R", "R"]),
    ("SSS0-S0S0", (2, 2), (9, 4), [SS, "S(0)"], ["S(0)", "S(0)"]),
    ("SSS0-RR", (2, 2), (9, 4), [SS, "S(0)"], ["R", "R"]),
    ("SSS0-RS0", (2, 2), (9, 4), [SS, "S(0)"], ["R", "S(0)"]),
    ("SSS0-S0R", (2, 2), (9, 4), [SS, "S(0)"], ["S(0)", "R"]),
    ("SSS0-RS1", (2, 2), (8, 4), [SS, "S(0)"], ["R", "S(1)"]),
    ("S0S0-SSS0", (2, 2), (9, 4), ["S(0)", "S(0)"], [SS, "S(0)"]),
    ("RR-SSS0", (2, 2), (9, 4), ["R", "R"], [SS, "S(0)"]),
    ("S0R-SSS0", (2, 2), (9, 4), ["S(0)", "R"], [SS, "S(0)"]),
    ("RP-RR", (2, 2), (6, 5), ["R", "P"], ["R", "R"]),
    ("PP-S0S1", (2, 2), (6, 5), ["P", "P"], ["S(0)", "S(1)"]),
    ("PR-S1S0", (2, 2), (9, 4), ["P", "R"], ["S(1)", "S(0)"]),
    ("RS1-RP", (2, 2), (9, 4), ["R", "S(1)"], ["R", "P"]),
    ("S0S1-PS1", (2, 2), (4, 4), ["S(0)", "S(1)"], ["P", "S(1)"]),
]
DIMS = {(4,): ("w",), (2, 2): ("dp", "tp")}


def torch_placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    if text == "R":
        return Replicate()
    if text == "P":
        return Partial("sum")
    if text.startswith("S("):
        return Shard(int(text[2:-1]))
    dim, factor = text[len("_StridedShard("):-1].split(",")
    return _StridedShard(int(dim), split_factor=int(factor))


def torch_worker(rank, port, out_dir):
    """One rank of PyTorch: every case, its local result and the collectives it issued."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.distributed_c10d import _resolve_process_group, get_process_group_ranks
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    class Collectives(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            # Collectives only: not waits, nor the autograd wrapper around a result.
            if func.namespace == "_c10d_functional" and func.overloadpacket.__name__ not in (
                    "wait_tensor", "_wrap_tensor_autograd"):
                group = None
                for a in [*args, *kwargs.values()]:
                    if isinstance(a, str):
                        try:
                            group = get_process_group_ranks(_resolve_process_group(a))
                            break
                        except Exception:
                            pass
                op = func.overloadpacket.__name__.replace("reduce_scatter_tensor", "reduce_scatter")
                self.seen.append([op, group, list(args[0].shape)])
            return func(*args, **kwargs)

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    meshes = {shape: init_device_mesh("cpu", shape, mesh_dim_names=DIMS[shape]) for shape in DIMS}
    results = {}
    for name, mesh_shape, shape, source, target in CASES:
        mesh = meshes[mesh_shape]
        result = {}
        try:
            whole = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
            placements = [torch_placement(p) for p in source]
            if any(p.is_partial() for p in placements):
                x = DTensor.from_local(whole.clone(), mesh, placements, run_check=False)
            else:
                x = distribute_tensor(whole, mesh, placements, src_data_rank=None)
            with Collectives() as log:
                local = x.redistribute(mesh, [torch_placement(p) for p in target]).to_local()
                if hasattr(local, "wait"):
                    local = local.wait()
            result = {"local": local.flatten().tolist(), "collectives": log.seen}
        except Exception as e:  # what PyTorch raises is part of the comparison
            result = {"error": f"{type(e).__name__}: {e}"}
        results[name] = result
        dist.barrier()
    with open(os.path.join(out_dir, f"torch_{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quoted(placements):
    return "[" + ", ".join(f'"{p}"' for p in placements) + "]"


def scenario(name, mesh_shape, shape, source, target, expected):
    """The case as a meshsim scenario whose expectations are PyTorch's local values."""
    dims = ", ".join(f'"{d}"' for d in DIMS[mesh_shape])
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {WORLD}", 'device = "cpu"',
             "[[mesh]]", 'name = "m"', f"shape = {list(mesh_shape)}", f"dims = [{dims}]"]
    if "P" in source:  # every rank holds the whole tensor as its partial value
        lines += ["[[step]]", f'dtensor = {{ name = "whole", mesh = "m", shape = {list(shape)}, '
                  'fill = "index" }', "[[step]]", 'to_local = { tensor = "whole", out = "mine" }',
                  "[[step]]", f'from_local = {{ name = "w", local = "mine", mesh = "m", '
                  f'placements = {quoted(source)} }}']
    else:
        lines += ["[[step]]", f'dtensor = {{ name = "w", mesh = "m", shape = {list(shape)}, '
                  f'placements = {quoted(source)}, fill = "index" }}']
    lines += ["[[step]]", f'redistribute = {{ tensor = "w", placements = {quoted(target)}, '
              'out = "moved" }', "[[step]]", 'to_local = { tensor = "moved", out = "local" }']
    if expected is not None:
        rows = ", ".join("[" + ", ".join(repr(v) for v in values) + "]" for values in expected)
        lines += ["[[expect]]", 'tensor = "local"', f"by_rank = [{rows}]"]
    return "\n".join(lines) + "\n"


def meshsim_collectives(trace_path, groups):
    """Each rank's collectives in time order, as [op, group ranks, input shape]."""
    events = json.load(open(trace_path))["traceEvents"]
    out = {r: [] for r in range(WORLD)}
    for e in sorted(events, key=lambda e: (e.get("ts", 0), e.get("args", {}).get("seq", 0))):
        if e.get("ph") != "X" or e.get("cat") != "collective":
            continue
        m = re.match(r"(\w+)\(\w+\[([^\]]*)\]", e["args"]["signature"])
        shape = [int(x) for x in m.group(2).split(",") if x.strip()]
        out[e["tid"]].append([m.group(1), groups[e["args"]["group"]], shape])
    return out


def main():
    meshsim = sys.argv[1]
    require_torch("redistribute_diff", lambda: __import__("torch.distributed.tensor"))
    import torch
    import torch.multiprocessing as mp

    # What meshsim calls the groups of the meshes above.
    groups = {"WORLD": [0, 1, 2, 3], "m.dp#0": [0, 2], "m.dp#1": [1, 3], "m.tp#0": [0, 1],
              "m.tp#1": [2, 3]}
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(torch_worker, args=(free_port(), tmp), nprocs=WORLD, join=True)
        ranks = [json.load(open(os.path.join(tmp, f"torch_{r}.json"))) for r in range(WORLD)]
        mismatches = []
        for name, mesh_shape, shape, source, target in CASES:
            torch_side = [ranks[r][name] for r in range(WORLD)]
            error = torch_side[0].get("error")
            expected = None if error else [t["local"] for t in torch_side]
            path = os.path.join(tmp, f"{name}.toml")
            trace = os.path.join(tmp, f"{name}.json")
            with open(path, "w") as f:
                f.write(scenario(name, mesh_shape, shape, source, target, expected))
            run = subprocess.run([meshsim, "run", "--no-time", "--trace", trace, path],
                                 capture_output=True, text=True)
            if error:
                if error not in run.stdout:
                    mismatches.append(f"{name}: PyTorch raised {error!r}; meshsim:\n{run.stdout}")
                continue
            if run.returncode != 0:
                mismatches.append(f"{name}: local values differ from PyTorch's:\n{run.stdout}")
                continue
            ours = meshsim_collectives(trace, groups)
            for r in range(WORLD):
                if ours[r] != torch_side[r]["collectives"]:
                    mismatches.append(f"{name}: rank {r} collectives: PyTorch "
                                      f"{torch_side[r]['collectives']}, meshsim {ours[r]}")
    for m in mismatches:
        print("MISMATCH " + m)
    print(f"redistribute_diff: torch {torch.__version__}: {len(CASES)} cases x {WORLD} ranks, "
          f"values and collectives compared, {len(mismatches)} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
