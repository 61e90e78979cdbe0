#!/usr/bin/env python3
"""Differential test: DTensor.redistribute in meshsim against PyTorch itself.

Gloo processes (four, or eight for the 2 x 2 x 2 mesh) run each case in PyTorch (a tensor of its flat indices laid out in the source
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
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import free_port, quoted, require_torch, write_rank_results  # noqa: E402

SS = "_StridedShard(0, split_factor=2)"
SS3 = "_StridedShard(0, split_factor=3)"
# (name, mesh shape, tensor shape, source placements, target placements): every kind of move,
# even and uneven, FSDP2 + TP's strided layout both ways, and what PyTorch refuses.
CASES = [
    ("S0-R", "4", (9,), ["S(0)"], ["R"]),
    ("S0-R-empty-shard", "4", (3,), ["S(0)"], ["R"]),
    ("R-S1", "4", (6, 5), ["R"], ["S(1)"]),
    ("S0-S1", "4", (6, 5), ["S(0)"], ["S(1)"]),
    ("S1-S0", "4", (6, 5), ["S(1)"], ["S(0)"]),
    ("S0-P", "4", (9,), ["S(0)"], ["P"]),
    ("R-P", "4", (9,), ["R"], ["P"]),
    ("P-R", "4", (6, 5), ["P"], ["R"]),
    ("P-S0", "4", (9, 4), ["P"], ["S(0)"]),
    ("P-S1", "4", (6, 5), ["P"], ["S(1)"]),
    ("SS-S0", "4", (9,), [SS], ["S(0)"]),
    ("SS-R", "4", (9,), [SS], ["R"]),
    ("S0S0-RS0", "2x2", (9, 4), ["S(0)", "S(0)"], ["R", "S(0)"]),
    ("S0S1-S1S0", "2x2", (6, 5), ["S(0)", "S(1)"], ["S(1)", "S(0)"]),
    ("S0S1-RR", "2x2", (6, 5), ["S(0)", "S(1)"], ["R", "R"]),
    ("SSS0-S0S0", "2x2", (9, 4), [SS, "S(0)"], ["S(0)", "S(0)"]),
    ("SSS0-RR", "2x2", (9, 4), [SS, "S(0)"], ["R", "R"]),
    ("SSS0-RS0", "2x2", (9, 4), [SS, "S(0)"], ["R", "S(0)"]),
    ("SSS0-S0R", "2x2", (9, 4), [SS, "S(0)"], ["S(0)", "R"]),
    ("SSS0-RS1", "2x2", (8, 4), [SS, "S(0)"], ["R", "S(1)"]),
    ("S0S0-SSS0", "2x2", (9, 4), ["S(0)", "S(0)"], [SS, "S(0)"]),
    ("RR-SSS0", "2x2", (9, 4), ["R", "R"], [SS, "S(0)"]),
    ("S0R-SSS0", "2x2", (9, 4), ["S(0)", "R"], [SS, "S(0)"]),
    ("RP-RR", "2x2", (6, 5), ["R", "P"], ["R", "R"]),
    ("PP-S0S1", "2x2", (6, 5), ["P", "P"], ["S(0)", "S(1)"]),
    ("PR-S1S0", "2x2", (9, 4), ["P", "R"], ["S(1)", "S(0)"]),
    ("RS1-RP", "2x2", (9, 4), ["R", "S(1)"], ["R", "P"]),
    ("S0S1-PS1", "2x2", (4, 4), ["S(0)", "S(1)"], ["P", "S(1)"]),
    # With a flattened mesh over the dims, PyTorch merges same-kind collectives into one.
    ("flat-S0S0-RR", "2x2+dptp", (8, 3), ["S(0)", "S(0)"], ["R", "R"]),
    ("flat-S0S0-RR-7", "2x2+dptp", (7,), ["S(0)", "S(0)"], ["R", "R"]),
    ("flat-S0S0-RR-5", "2x2+dptp", (5,), ["S(0)", "S(0)"], ["R", "R"]),
    ("flat-S0S0-RR-6", "2x2+dptp", (6,), ["S(0)", "S(0)"], ["R", "R"]),
    ("flat-S1S1-RR", "2x2+dptp", (3, 8), ["S(1)", "S(1)"], ["R", "R"]),
    ("flat-S1S1-RR-6", "2x2+dptp", (2, 6), ["S(1)", "S(1)"], ["R", "R"]),
    ("flat-S0S1-RR", "2x2+dptp", (6, 5), ["S(0)", "S(1)"], ["R", "R"]),
    ("flat-S0S0-RS0", "2x2+dptp", (9, 4), ["S(0)", "S(0)"], ["R", "S(0)"]),
    ("flat-S0S0-S1R", "2x2+dptp", (8, 4), ["S(0)", "S(0)"], ["S(1)", "R"]),
    ("flat-PP-RR", "2x2+dptp", (6, 5), ["P", "P"], ["R", "R"]),
    ("flat-PavgPavg-RR", "2x2+dptp", (6, 5), ["P(avg)", "P(avg)"], ["R", "R"]),
    ("flat-PP-S0S0", "2x2+dptp", (8, 3), ["P", "P"], ["S(0)", "S(0)"]),
    ("flat-PP-S0S0-6", "2x2+dptp", (6, 3), ["P", "P"], ["S(0)", "S(0)"]),
    ("flat-PP-S1S1", "2x2+dptp", (3, 4), ["P", "P"], ["S(1)", "S(1)"]),
    ("flat-PP-S0R", "2x2+dptp", (8, 3), ["P", "P"], ["S(0)", "R"]),
    ("flat-PP-RS0", "2x2+dptp", (8, 3), ["P", "P"], ["R", "S(0)"]),
    ("flat-SSS0-RR", "2x2+dptp", (8, 4), [SS, "S(0)"], ["R", "R"]),
    ("flat-SSSS-RR", "2x2+dptp", (8,), [SS, SS], ["R", "R"]),
    ("flat-PPavg-RR", "2x2+dptp", (6, 5), ["P", "P(avg)"], ["R", "R"]),
    ("PavgPavg-RR", "2x2", (6, 5), ["P(avg)", "P(avg)"], ["R", "R"]),
    ("flat-RR-S0S0", "2x2+dptp", (8,), ["R", "R"], ["S(0)", "S(0)"]),
    ("flat3-RS0S0-RRR", "1x2x2+dptp", (8,), ["R", "S(0)", "S(0)"], ["R", "R", "R"]),
    ("flat3-S0S0S0-RRR", "1x2x2+dptp", (8,), ["S(0)", "S(0)", "S(0)"], ["R", "R", "R"]),
    ("flat3-PPP-RRR", "1x2x2+dptp", (4,), ["P", "P", "P"], ["R", "R", "R"]),
    ("flat3-S0RS0-RRR", "1x2x2+dptp", (8,), ["S(0)", "R", "S(0)"], ["R", "R", "R"]),
    ("flat3-PavgPP-RRR", "1x2x2+dptp", (4,), ["P(avg)", "P", "P"], ["R", "R", "R"]),
    # Shard orders over three mesh dims, planned by PyTorch's min-cost search: a target cut
    # between two gathers, gathers of equal cost in PyTorch's order, a Partial beside them, and
    # an uneven layout that is not its shard order (PyTorch returns misplaced values).
    ("order-cut-between", "2x2x2", (4, 2), [SS, "S(0)", "R"], ["S(1)", "R", "R"]),
    ("order-equal-cost", "2x2x2", (4, 4), ["S(1)", "S(0)", "S(1)"], ["S(1)", SS, "S(0)"]),
    ("order-equal-cost-uneven", "2x2x2", (2, 2), ["S(1)", "S(0)", "S(1)"], ["S(1)", SS, "S(0)"]),
    ("order-partial", "2x2x2", (8, 3), ["P", SS, "S(0)"], ["R", "S(0)", "S(1)"]),
    ("order-uneven-misplaced", "2x2x2", (5,), ["_StridedShard(0, split_factor=4)", SS, "S(0)"],
     ["S(0)", "S(0)", "S(0)"]),
    # Into and out of a _StridedShard that encodes no shard order, from and to every kind, and
    # negative dims: PyTorch makes the whole tensor (all_reduce or gather) and cuts it.
    ("P-SS", "4", (9,), ["P"], [SS]),
    ("P-SS-8", "8", (16,), ["P"], [SS]),
    ("Pmax-SS", "4", (8, 3), ["P(max)"], [SS]),
    ("R-SS", "4", (9,), ["R"], [SS]),
    ("S0-SS", "4", (9,), ["S(0)"], [SS]),
    ("S1-SS", "4", (6, 5), ["S(1)"], [SS]),
    ("SS-SS3", "4", (9,), [SS], [SS3]),
    ("SS-P", "4", (9,), [SS], ["P"]),
    ("SS1-S0", "4", (6, 5), ["_StridedShard(1, split_factor=2)"], ["S(0)"]),
    ("Sm1-R", "4", (6, 5), ["S(-1)"], ["R"]),
    ("R-Sm1", "4", (6, 5), ["R"], ["S(-1)"]),
    ("S0R-SS3R", "4x2", (12,), ["S(0)", "R"], [SS3, "R"]),
    ("PR-SSR", "2x2", (9, 4), ["P", "R"], [SS, "R"]),
    ("RS0-RSS", "2x2", (9, 4), ["R", "S(0)"], ["R", SS]),
    ("RP-RSS", "2x2", (9, 4), ["R", "P"], ["R", SS]),
    ("RSS-S1R", "2x2", (6, 5), ["R", SS], ["S(1)", "R"]),
]
# Meshes by name: shape, dim names, and the dims a flattened mesh is made of (its name is the
# names joined), which lets PyTorch merge collectives over those dims into one.
MESHES = {"4": ((4,), ("w",), None), "8": ((8,), ("w",), None),
          "2x2": ((2, 2), ("dp", "tp"), None), "4x2": ((4, 2), ("dp", "tp"), None),
          "2x2+dptp": ((2, 2), ("dp", "tp"), ("dp", "tp")),
          "1x2x2+dptp": ((1, 2, 2), ("pp", "dp", "tp"), ("dp", "tp")),
          "2x2x2": ((2, 2, 2), ("pp", "dp", "tp"), None)}
# What PyTorch warns of when it cannot merge collectives, and how meshsim says it: (kind, a
# phrase of PyTorch's warning, a phrase of meshsim's).
WARNINGS = [("no flattened mesh", "To optimize, flatten mesh dimensions", "_flatten()) DTensor"),
            ("uneven", "not evenly divisible", "does not split evenly"),
            ("order", "non-ascending order", "only when their mesh dims come")]
# meshsim's words for values PyTorch gets wrong without a warning: a merged gather, or a layout
# that is not the shard order PyTorch plans it as.
SILENTLY_WRONG = ("returns wrong values without a word", "put positions in the wrong places")


def torch_placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    if text == "R":
        return Replicate()
    if text == "P":
        return Partial("sum")
    if text.startswith("P("):
        return Partial(text[2:-1])
    if text.startswith("S("):
        return Shard(int(text[2:-1]))
    dim, factor = text[len("_StridedShard("):-1].split(", split_factor=")
    return _StridedShard(int(dim), split_factor=int(factor))


def world_of(mesh_key):
    return math.prod(MESHES[mesh_key][0])


def torch_worker(rank, world, port, out_dir):
    """One rank of PyTorch: every case of a world size, its local result and the collectives it
    issued."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.distributed_c10d import _resolve_process_group, get_process_group_ranks
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard
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

    import logging
    from torch.distributed.tensor import _redistribute

    class Warnings(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.kinds = set()

        def emit(self, record):
            text = record.getMessage()
            self.kinds |= {kind for kind, theirs, _ in WARNINGS if theirs in text}

    warnings = Warnings()
    logging.getLogger(_redistribute.__name__).addHandler(warnings)

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    meshes = {}
    for key, (mesh_shape, dims, flattened) in MESHES.items():
        if world_of(key) != world:
            continue
        meshes[key] = init_device_mesh("cpu", mesh_shape, mesh_dim_names=dims)
        if flattened:
            meshes[key][flattened]._flatten("".join(flattened))
    results = {}
    for name, mesh_key, shape, source, target in CASES:
        if mesh_key not in meshes:
            continue
        mesh = meshes[mesh_key]
        result = {}
        _redistribute._warned_flatten_issues.clear()  # PyTorch warns once a process
        warnings.kinds = set()
        try:
            whole = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
            placements = [torch_placement(p) for p in source]
            if any(p.is_partial() for p in placements):
                x = DTensor.from_local(whole.clone(), mesh, placements, run_check=False)
            else:
                x = distribute_tensor(whole, mesh, placements, src_data_rank=None)
            targets = [torch_placement(p) for p in target]
            with Collectives() as log:
                local = x.redistribute(mesh, targets).to_local()
                if hasattr(local, "wait"):
                    local = local.wait()
            result = {"local": local.flatten().tolist(), "collectives": log.seen,
                      "warnings": sorted(warnings.kinds)}
            partial = any(p.is_partial() for p in placements)
            sharded = any(p.is_shard() or isinstance(p, _StridedShard) for p in placements)
            # What the values should be, where a formula says: every rank holds `whole` as its
            # partial value (a source that also shards holds it as its piece: left unchecked).
            if not any(p.is_partial() for p in targets) and not (partial and sharded):
                summed = math.prod(mesh.size(m) for m, p in enumerate(placements)
                                   if p.is_partial() and p.reduce_op == "sum")
                correct = distribute_tensor(whole * summed, mesh, targets, src_data_rank=None)
                result["wrong"] = not torch.equal(local, correct.to_local())
        except Exception as e:  # what PyTorch raises is part of the comparison
            result = {"error": f"{type(e).__name__}: {e}"}
        results[name] = result
        dist.barrier()
    write_rank_results(out_dir, rank, results)
    dist.destroy_process_group()



def scenario(name, mesh_key, shape, source, target, expected):
    """The case as a meshsim scenario whose expectations are PyTorch's local values."""
    mesh_shape, dims, flattened = MESHES[mesh_key]
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {world_of(mesh_key)}",
             'device = "cpu"',
             "[[mesh]]", 'name = "m"', f"shape = {list(mesh_shape)}", f"dims = {quoted(dims)}"]
    if flattened:
        lines += ["[[mesh]]", 'name = "flat"', 'from = "m"', f"slice = {quoted(flattened)}",
                  f'flatten = "{"".join(flattened)}"']
    if any(p.startswith("P") for p in source):  # every rank holds the whole tensor as its partial value
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


def meshsim_collectives(trace_path, world):
    """Each rank's collectives in time order, as [op, group ranks, input shape]. A group's ranks
    are the ranks that met in it: a collective that completes has every member."""
    events = [e for e in json.load(open(trace_path))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "collective"]
    members = {}
    for e in events:
        members.setdefault(e["args"]["group"], set()).add(e["tid"])
    out = {r: [] for r in range(world)}
    for e in sorted(events, key=lambda e: (e.get("ts", 0), e["args"]["seq"])):
        m = re.match(r"(\w+)\(\w+\[([^\]]*)\]", e["args"]["signature"])
        shape = [int(x) for x in m.group(2).split(",") if x.strip()]
        out[e["tid"]].append([m.group(1), sorted(members[e["args"]["group"]]), shape])
    return out


def main():
    meshsim = sys.argv[1]
    require_torch("redistribute_diff", lambda: __import__("torch.distributed.tensor"))
    import torch
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        worlds = sorted({world_of(case[1]) for case in CASES})
        ranks = {}
        for world in worlds:
            out = os.path.join(tmp, str(world))
            os.makedirs(out)
            mp.spawn(torch_worker, args=(world, free_port(), out), nprocs=world, join=True)
            ranks[world] = [json.load(open(os.path.join(out, f"torch_{r}.json")))
                            for r in range(world)]
        mismatches = []
        for name, mesh_key, shape, source, target in CASES:
            world = world_of(mesh_key)
            torch_side = [ranks[world][r][name] for r in range(world)]
            error = torch_side[0].get("error")
            expected = None if error else [t["local"] for t in torch_side]
            path = os.path.join(tmp, f"{name}.toml")
            trace = os.path.join(tmp, f"{name}.json")
            with open(path, "w") as f:
                f.write(scenario(name, mesh_key, shape, source, target, expected))
            report = os.path.join(tmp, f"{name}.report.json")
            run = subprocess.run([meshsim, "run", "--no-time", "--trace", trace, "--json", report,
                                  path], capture_output=True, text=True)
            if error:
                if error not in run.stdout:
                    mismatches.append(f"{name}: PyTorch raised {error!r}; meshsim:\n{run.stdout}")
                continue
            if run.returncode != 0:
                mismatches.append(f"{name}: local values differ from PyTorch's:\n{run.stdout}")
                continue
            ours = meshsim_collectives(trace, world)
            for r in range(world):
                if ours[r] != torch_side[r]["collectives"]:
                    mismatches.append(f"{name}: rank {r} collectives: PyTorch "
                                      f"{torch_side[r]['collectives']}, meshsim {ours[r]}")
            said = json.load(open(report))["scenarios"][0]["warnings"]
            kinds = sorted({kind for kind, _, ours in WARNINGS for w in said if ours in w})
            if kinds != torch_side[0]["warnings"]:
                mismatches.append(f"{name}: PyTorch warns of {torch_side[0]['warnings']}, "
                                  f"meshsim of {kinds}: {said}")
            wrong = any(t.get("wrong") for t in torch_side)
            if wrong != any(phrase in w for phrase in SILENTLY_WRONG for w in said):
                mismatches.append(f"{name}: PyTorch's values are {'' if wrong else 'not '}wrong, "
                                  f"meshsim's warnings: {said}")
    for m in mismatches:
        print("MISMATCH " + m)
    print(f"redistribute_diff: torch {torch.__version__}: {len(CASES)} cases on "
          f"{' and '.join(map(str, worlds))} ranks, values and collectives compared, "
          f"{len(mismatches)} mismatches")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
