#!/usr/bin/env python3
"""Differential test: mesh identity (==, hash, _get_root_mesh, DeviceMesh.from_group) against
PyTorch itself.

Eight Gloo processes build the same meshes in PyTorch as a meshsim scenario does: meshes made
twice, with other dim names, sliced, flattened, unflattened, taken as their root, and made from
existing groups with DeviceMesh.from_group (one group, WORLD, a list of groups with a mesh). For
every pair compared, PyTorch's `==` (and whether the hashes agree) become the scenario's `same`
expectations; each from_group mesh's rank table, coordinate and group name become `mesh`,
`coordinate` and `group_name` expectations, rank by rank. The ways from_group refuses its
arguments run as scenarios of their own, which must raise PyTorch's error type. Skips (exit 77)
without PyTorch.

Usage: mesh_identity_diff_test.py MESHSIM
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import (  # noqa: E402
    free_port, require_torch, torch_vs_meshsim, write_rank_results)

WORLD = 8
# The program, in file order: (name, torch expression over the meshes so far, scenario table).
# `stage` is rank // 4, the pp coordinate; `group(m, d)` is m.get_group(d).
MESHES = [
    ("w", 'init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))',
     'shape = [2, 2, 2], dims = ["pp", "dp", "tp"]'),
    ("w_again", 'init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))',
     'shape = [2, 2, 2], dims = ["pp", "dp", "tp"]'),
    ("w_renamed", 'init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("a", "b", "c"))',
     'shape = [2, 2, 2], dims = ["a", "b", "c"]'),
    ("flat", 'init_device_mesh("cpu", (8,))', "shape = [8]"),
    ("tp", 'w["tp"]', 'from = "w", slice = ["tp"]'),
    ("tp_again", 'w_again["tp"]', 'from = "w_again", slice = ["tp"]'),
    ("dp_tp", 'w["dp", "tp"]', 'from = "w", slice = ["dp", "tp"]'),
    ("tp_root", 'w["tp"]._get_root_mesh()', 'from = "w", slice = ["tp"], root = true'),
    ("dp_tp_flat", 'w["dp", "tp"]._flatten()', 'from = "w", slice = ["dp", "tp"], flatten = true'),
    ("dp_tp_flat_root", "dp_tp_flat._get_root_mesh()", 'from = "dp_tp_flat", root = true'),
    ("w_root", "w._get_root_mesh()", 'from = "w", root = true'),
    ("flat_named", 'init_device_mesh("cpu", (8,), mesh_dim_names=("all",))',
     'shape = [8], dims = ["all"]'),
    ("flat_split", 'flat_named._unflatten(0, (2, 4), ("x", "y"))',
     'from = "flat_named", unflatten = { dim = 0, sizes = [2, 4], names = ["x", "y"] }'),
    ("flat_split_root", "flat_split._get_root_mesh()", 'from = "flat_split", root = true'),
    ("from_tp", 'DeviceMesh.from_group(w.get_group("tp"), "cpu")',
     'from_group = { mesh = "w", dim = "tp" }'),
    ("from_world", 'DeviceMesh.from_group(dist.group.WORLD, "cpu")', 'from_group = "WORLD"'),
    ("from_world_named", 'DeviceMesh.from_group(dist.group.WORLD, "cpu", mesh_dim_names=("all",))',
     'from_group = "WORLD", dims = ["all"]'),
    ("from_dp_tp",
     'DeviceMesh.from_group([w.get_group("dp"), w.get_group("tp")], "cpu", '
     'mesh=[[4 * stage, 4 * stage + 1], [4 * stage + 2, 4 * stage + 3]], '
     'mesh_dim_names=("dp", "tp"))',
     'from_group = [{ mesh = "w", dim = "dp" }, { mesh = "w", dim = "tp" }], '
     'ranks = [["4 * (rank / 4)", "4 * (rank / 4) + 1"], ["4 * (rank / 4) + 2", '
     '"4 * (rank / 4) + 3"]], dims = ["dp", "tp"]'),
    ("grid", 'init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))',
     'shape = [2, 4], dims = ["dp", "tp"]'),
    ("from_grid",
     'DeviceMesh.from_group([grid.get_group("dp"), grid.get_group("tp")], "cpu", mesh=grid.mesh, '
     'mesh_dim_names=("dp", "tp"))',
     'from_group = [{ mesh = "grid", dim = "dp" }, { mesh = "grid", dim = "tp" }], '
     'ranks = [[0, 1, 2, 3], [4, 5, 6, 7]], dims = ["dp", "tp"]'),
]
PAIRS = [("w", "w_again"), ("w", "w_renamed"), ("w", "flat"), ("tp", "tp_again"),
         ("tp", "dp_tp"), ("tp_root", "w"), ("tp_root", "w_again"), ("dp_tp_flat_root", "w"),
         ("w_root", "w"), ("flat_split_root", "flat_named"), ("flat_split", "flat_named"),
         ("flat_named", "flat"),
         ("from_world", "flat"), ("from_world_named", "flat"), ("from_tp", "tp"),
         ("from_dp_tp", "dp_tp"), ("from_tp", "from_tp"), ("from_grid", "grid")]
FROM_GROUP = ["from_tp", "from_world", "from_world_named", "from_dp_tp", "from_grid"]
# Refusals: (name, torch call, scenario table), after the meshes above.
REFUSALS = [
    ("unflatten-unnamed", 'flat._unflatten(0, (2, 4), ("x", "y"))',
     'from = "flat", unflatten = { dim = 0, sizes = [2, 4], names = ["x", "y"] }'),
    ("wrong-mesh", 'DeviceMesh.from_group(w.get_group("tp"), "cpu", mesh=[0, 1, 2])',
     'from_group = { mesh = "w", dim = "tp" }, ranks = [0, 1, 2]'),
    ("list-without-mesh",
     'DeviceMesh.from_group([w.get_group("dp"), w.get_group("tp")], "cpu", '
     'mesh_dim_names=("dp", "tp"))',
     'from_group = [{ mesh = "w", dim = "dp" }, { mesh = "w", dim = "tp" }], dims = ["dp", "tp"]'),
    ("list-without-names",
     'DeviceMesh.from_group([w.get_group("dp"), w.get_group("tp")], "cpu", mesh=[[0, 1], [2, 3]])',
     'from_group = [{ mesh = "w", dim = "dp" }, { mesh = "w", dim = "tp" }], '
     'ranks = [[0, 1], [2, 3]]'),
    ("list-mesh-of-other-ndim",
     'DeviceMesh.from_group([w.get_group("dp"), w.get_group("tp")], "cpu", mesh=[0, 1, 2, 3], '
     'mesh_dim_names=("dp", "tp"))',
     'from_group = [{ mesh = "w", dim = "dp" }, { mesh = "w", dim = "tp" }], '
     'ranks = [0, 1, 2, 3], dims = ["dp", "tp"]'),
]
CASES = [("identity",)] + [(name,) for name, _, _ in REFUSALS]


def torch_worker(rank, port, out_dir):
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    scope = {"init_device_mesh": init_device_mesh, "DeviceMesh": DeviceMesh, "dist": dist,
             "stage": rank // 4}
    for name, expression, _ in MESHES:
        scope[name] = eval(expression, scope)
    results = {"identity": {
        "pairs": {f"{a}={b}": scope[a] == scope[b] and hash(scope[a]) == hash(scope[b])
                  for a, b in PAIRS},
        "meshes": {name: {"mesh": scope[name].mesh.tolist(),
                          "coordinate": scope[name].get_coordinate(),
                          "group_name": scope[name].get_group(0).group_name,
                          "last_dim": scope[name].ndim - 1,
                          "group_name_last": scope[name].get_group(scope[name].ndim - 1).group_name}
                   for name in FROM_GROUP}}}
    for name, call, _ in REFUSALS:
        try:
            eval(call, scope)
            results[name] = {"error": None}
        except Exception as e:
            results[name] = {"error": type(e).__name__}
    write_rank_results(out_dir, rank, results)
    dist.barrier()
    dist.destroy_process_group()


def by_rank(values):
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def mesh_table(name, table):
    return ["[[step]]", f'mesh = {{ name = "{name}", {table} }}']


def scenario(case, torch_side):
    name = case[0]
    lines = ["[scenario]", f'name = "mesh-identity-{name}"', f"world_size = {WORLD}",
             'device = "cpu"']
    for mesh_name, _, table in MESHES:
        lines += mesh_table(mesh_name, table)
    if name != "identity":
        (error,) = {r["error"] for r in torch_side}
        table = next(t for n, _, t in REFUSALS if n == name)
        raises = [f'raises = {{ type = "{error}" }}'] if error else []
        return "\n".join(lines + mesh_table("refused", table) + raises) + "\n"
    results = torch_side
    for a, b in PAIRS:
        lines += ["[[expect]]", f'same = ["{a}", "{b}"]',
                  f"by_rank = {by_rank(r['pairs'][f'{a}={b}'] for r in results)}"]
    for mesh_name in FROM_GROUP:
        last = results[0]["meshes"][mesh_name]["last_dim"]
        for field, query in (("mesh", f'"{mesh_name}"'), ("coordinate", f'"{mesh_name}"'),
                             ("group_name", f'{{ mesh = "{mesh_name}", dim = 0 }}'),
                             ("group_name_last", f'{{ mesh = "{mesh_name}", dim = {last} }}')):
            lines += ["[[expect]]", f"{field.replace('_last', '')} = {query}",
                      f"by_rank = {by_rank(r['meshes'][mesh_name][field] for r in results)}"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = sys.argv[1]
    require_torch("mesh_identity_diff", lambda: __import__("torch.distributed.device_mesh"))
    return torch_vs_meshsim("mesh_identity_diff", meshsim, torch_worker, WORLD, CASES, scenario)


if __name__ == "__main__":
    sys.exit(main())
