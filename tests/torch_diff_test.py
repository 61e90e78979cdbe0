#!/usr/bin/env python3
"""Differential test: meshsim against PyTorch itself.

Usage: torch_diff_test.py MESHSIM SOURCE_ROOT [--cases N] [--seed S] [--only I] [--keep DIR]

It generates random SPMD programs over device meshes (init_device_mesh shapes and explicit rank
tables, meshes smaller than the world so some ranks are non-members, slices valid and invalid,
_flatten, _unflatten) and local shards with random placements (Shard, Replicate, Partial,
_StridedShard, uneven sizes, 1-3 tensor dims), plus a few directed cases. Each program runs

- in PyTorch, rank by rank in this one process, on the fake process group (FakeStore +
  init_process_group("fake"), destroy_process_group between ranks, which also resets the
  group-name counter), and
- in meshsim, as one scenario file per program, all files in one `meshsim run --json` call.

Every rank's view is compared: the outcome of every mesh step (error type and message), and for
every dump the coordinate, shape, dim names, root flag, groups per dim, group names, local ranks
and the mesh tensor, and for local shards compute_local_shape_and_global_offset (shape, offset)
and the indices the rank holds (from the data path: the per-mesh-dim _select_split_tensor that
distribute_tensor(..., src_data_rank=None) runs; checked against distribute_tensor itself for
the directed cases and a sample of the random ones).

Exit status: 0 no mismatch, 1 mismatches (each printed as a compact diff), 77 skipped (no torch).
When `import torch` fails, the script re-executes itself under $MESHSIM_TORCH_PYTHON if that is
set, and skips otherwise. Nothing here depends on where the repository lives.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

from torch_python import require_torch, skip


def _skip(reason):
    skip("torch_diff", reason)


def _check_torch():
    import torch  # noqa: F401
    import torch.distributed as dist

    if not dist.is_available():
        raise ImportError("torch.distributed is not available in this build")
    from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: F401


# --------------------------------------------------------------------------------------------
# Programs. A case is a world size and a list of ops; ops refer to meshes by name.
#   MeshOp: root from a shape (init_device_mesh) or a rank table (DeviceMesh), or derived from
#           another mesh by slice, then _flatten, then _unflatten (meshsim's `from` order).
#   DumpOp: a rank's view of a mesh, or of a local shard when shape and placements are given.
# Placements are tuples: ("S", d), ("R",), ("P", op), ("SS", d, split_factor).
# --------------------------------------------------------------------------------------------


class MeshOp:
    kind = "mesh"

    def __init__(self, name, shape=None, table=None, dims=None, src=None, slice_=None,
                 flatten=None, unflatten=None):
        self.name, self.shape, self.table, self.dims = name, shape, table, dims
        self.src, self.slice, self.flatten, self.unflatten = src, slice_, flatten, unflatten

    def creates_groups(self):
        return self.src is None or self.flatten is not None or self.unflatten is not None

    def label(self):
        if self.src is None:
            return "table" if self.table is not None else "init"
        parts = [p for p, v in (("slice", self.slice), ("flatten", self.flatten),
                                ("unflatten", self.unflatten)) if v is not None]
        return "+".join(parts)

    def python(self):
        if self.shape is not None:
            dims = f", mesh_dim_names={tuple(self.dims)!r}" if self.dims else ""
            return f'{self.name} = init_device_mesh("cpu", {tuple(self.shape)!r}{dims})'
        if self.table is not None:
            dims = f", mesh_dim_names={tuple(self.dims)!r}" if self.dims else ""
            return f'{self.name} = DeviceMesh("cpu", {self.table!r}{dims})'
        expr = self.src
        if self.slice is not None:
            expr += f"[{', '.join(repr(n) for n in self.slice)}]"
        if self.flatten is not None:
            expr += "._flatten()" if self.flatten is True else f"._flatten({self.flatten!r})"
        if self.unflatten is not None:
            dim, sizes, names = self.unflatten
            expr += f"._unflatten({dim!r}, {tuple(sizes)!r}, {tuple(names)!r})"
        return f"{self.name} = {expr}"


class DumpOp:
    kind = "dump"

    def __init__(self, mesh, shape=None, placements=None):
        self.mesh, self.shape, self.placements = mesh, shape, placements

    def label(self):
        return "shard" if self.shape is not None else "dump"

    def python(self):
        if self.shape is None:
            return f"view of {self.mesh} (coordinate, groups, local ranks, mesh)"
        pls = ", ".join(placement_python(p) for p in self.placements)
        return (f"compute_local_shape_and_global_offset({tuple(self.shape)!r}, {self.mesh}, "
                f"[{pls}])  # and distribute_tensor(..., src_data_rank=None)")


class Case:
    def __init__(self, index, world, ops, origin):
        self.index, self.world, self.ops, self.origin = index, world, ops, origin
        self.results = None  # per op, per rank: ("skip",) | ("ok", value) | ("err", type, msg)
        self.lines = {}  # TOML line of a table header -> (op index, "main" | "mesh" | "local_rank")
        self.dropped = 0  # generated ops dropped as not SPMD-valid (see truncate_invalid)
        self.notes = []  # PyTorch-internal inconsistencies found while running it

    def program(self):
        return [op.python() for op in self.ops]


def placement_python(p):
    if p[0] == "S":
        return f"Shard({p[1]})"
    if p[0] == "R":
        return "Replicate()"
    if p[0] == "P":
        return f'Partial("{p[1]}")'
    return f"_StridedShard({p[1]}, split_factor={p[2]})"


def placement_meshsim(p):
    if p[0] == "P":
        return f"Partial({p[1]})"
    return placement_python(p)


# --------------------------------------------------------------------------------------------
# Random generation
# --------------------------------------------------------------------------------------------

DIM_NAMES = ["dp", "tp", "pp", "cp", "ep", "a", "b", "c"]
FLAT_NAMES = ["fa", "fb", "spmd"]
REDUCE_OPS = ["sum", "avg", "min", "max", "product"]


def prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def random_mesh_shape(rng, world):
    for _ in range(100):
        ndim = rng.choice([1, 1, 2, 2, 2, 3, 3])
        shape = [rng.choice([1, 2, 2, 2, 3, 4]) for _ in range(ndim)]
        if prod(shape) <= world:
            return shape
    return [world]


def nested(flat, shape):
    if len(shape) == 1:
        return list(flat)
    step = prod(shape[1:])
    return [nested(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def random_placements(rng, ndim_mesh, tensor_shape):
    tdim = len(tensor_shape)
    out = []
    for _ in range(ndim_mesh):
        r = rng.random()
        d = rng.randrange(tdim)
        if r < 0.03:
            d = tdim + rng.randrange(2)  # out of range: PyTorch's error is the expectation
        if r < 0.38:
            out.append(("S", d))
        elif r < 0.68:
            out.append(("SS", d, rng.choice([1, 2, 2, 2, 3, 3, 4, 5, 7, 1000])))
        elif r < 0.88:
            out.append(("R",))
        else:
            out.append(("P", rng.choice(REDUCE_OPS)))
    # A negative dim now and then, but never mixed with the same dim spelled positively:
    # PyTorch's compute_local_shape_and_global_offset keys offsets by the dim as written, so
    # Shard(0) with Shard(-1) on a 1-d tensor reports a wrong offset (a PyTorch bug, see report).
    # _StridedShard only as -1: for other negative dims compute_local_shape_and_global_offset
    # itself fails (it splits a 1-d index tensor on that dim), another PyTorch bug.
    if rng.random() < 0.08:
        shard_dims = [p[1] for p in out if p[0] in ("S", "SS")]
        for i, p in enumerate(out):
            if p[0] not in ("S", "SS") or p[1] >= tdim or shard_dims.count(p[1]) != 1:
                continue
            if p[0] == "S" or p[1] == tdim - 1:
                out[i] = (p[0], p[1] - tdim, *p[2:])
                break
    return out


def random_tensor_shape(rng):
    ndim = rng.choice([1, 1, 2, 2, 3])
    return [rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17]) for _ in range(ndim)]


def random_case(rng, index):
    world = rng.choice([2, 3, 4, 4, 6, 8, 8, 8, 12, 16, 16])
    shape = random_mesh_shape(rng, world)
    named = rng.random() < 0.9
    dims = rng.sample(DIM_NAMES, len(shape)) if named else None
    ops = []
    if rng.random() < 0.35:
        members = rng.sample(range(world), prod(shape))
        ops.append(MeshOp("m0", table=nested(members, shape), dims=dims))
    else:
        ops.append(MeshOp("m0", shape=shape, dims=dims))
    # What each mesh should look like if its op succeeds: name -> (shape, dim names or None).
    # The prediction only steers generation (sizes for _unflatten, placements per mesh dim);
    # PyTorch decides what happens.
    meshes = {"m0": (shape, dims)}
    flat_sizes = {}  # flatten name -> size, sliceable from the root
    for _ in range(rng.randrange(2)):
        ops.append(DumpOp("m0", *shard_args(rng, len(shape))))
    for k in range(1, rng.choice([1, 2, 3, 3, 4])):
        name = f"m{k}"
        src = rng.choice(sorted(meshes))
        sshape, sdims = meshes[src]
        r = rng.random()
        if sdims is None and r < 0.5:
            op = MeshOp(name, src=src, flatten=True)  # "Cannot flatten ... without names"
            out = flattened((sshape, sdims), True)
        elif sdims is None or r < 0.5:
            extra = flat_sizes if src == "m0" else {}
            names = random_slice(rng, sdims or ["a"], sorted(extra))
            op = MeshOp(name, src=src, slice_=names)
            size_of = dict(zip(sdims or [], sshape), **extra)
            out = ([size_of.get(n, 1) for n in names], list(names))
            if rng.random() < 0.25:
                op.flatten = random_flatten_name(rng, dims, sorted(flat_sizes))
                out = flattened(out, op.flatten)
        elif r < 0.75:
            op = MeshOp(name, src=src, flatten=random_flatten_name(rng, dims, sorted(flat_sizes)))
            out = flattened((sshape, sdims), op.flatten)
        else:
            i = rng.randrange(len(sdims))
            sizes = random_factors(rng, sshape[i])
            new = [n for n in ["u", "v", "w", "a", "b", "c"] if n not in sdims][: len(sizes)]
            op = MeshOp(name, src=src, unflatten=(sdims[i], sizes, new))
            out = (sshape[:i] + sizes + sshape[i + 1:], sdims[:i] + new + sdims[i + 1:])
        if op.flatten is not None and out[1] and out[1][0] not in (dims or []):
            flat_sizes.setdefault(out[1][0], out[0][0])
        ops.append(op)
        meshes[name] = out
        ops.append(DumpOp(name))
        for _ in range(rng.choice([0, 1, 1, 2])):
            ops.append(DumpOp(name, *shard_args(rng, len(out[0]))))
    return Case(index, world, ops, "random")


def flattened(mesh, flatten):
    shape, dims = mesh
    if flatten is True:
        return [prod(shape)], (["_".join(dims)] if dims else None)
    return [prod(shape)], [flatten]


def shard_args(rng, mesh_ndim):
    tshape = random_tensor_shape(rng)
    return tshape, random_placements(rng, mesh_ndim, tshape)


def random_slice(rng, dims, flat_names):
    pool = list(dims) + [n for n in flat_names if n]
    r = rng.random()
    if r < 0.55 or (len(dims) == 1 and r < 0.8):
        k = rng.randint(1, len(dims))
        picked = sorted(rng.sample(range(len(dims)), k))
        names = [dims[i] for i in picked]
        if pool != list(dims) and rng.random() < 0.5:
            names = names[:1] + [rng.choice(pool[len(dims):])]
        return names
    if r < 0.7 and len(dims) > 1:
        names = rng.sample(list(dims), rng.randint(2, len(dims)))
        return names
    if r < 0.85:
        n = rng.choice(pool)
        return [n, n] if rng.random() < 0.7 else [n, rng.choice(pool), n]
    names = [rng.choice(pool)]
    names.insert(rng.randrange(2), "zz")
    return names


def random_flatten_name(rng, root_dims, flat_names):
    r = rng.random()
    if r < 0.4:
        return True
    if r < 0.55 and root_dims:
        return rng.choice(root_dims)
    if r < 0.75 and [n for n in flat_names if n]:
        return rng.choice([n for n in flat_names if n])
    return rng.choice(FLAT_NAMES)


def random_factors(rng, size):
    if size is None:
        size = rng.choice([1, 2, 4])
    if rng.random() < 0.12:
        return [size + 1, 1]  # product mismatch: ValueError
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    a = rng.choice(divisors)
    sizes = [a, size // a]
    if rng.random() < 0.2:
        sizes.append(1)
    return sizes


def directed_cases():
    """The examples of the report: each a minimal program for one behaviour."""
    S = lambda d: ("S", d)  # noqa: E731
    SS = lambda d, k: ("SS", d, k)  # noqa: E731
    R = ("R",)
    cases = []

    def add(world, *ops):
        cases.append(Case(len(cases), world, list(ops), "directed"))

    # Local ranks from an explicit rank table: the group rank is the position in sorted ranks.
    add(4, MeshOp("m0", table=[[3, 1], [0, 2]], dims=["a", "b"]), DumpOp("m0"))
    add(4, MeshOp("m0", table=[[0, 2], [1, 3]], dims=["a", "b"]), DumpOp("m0"))
    # _StridedShard, even and uneven, alone and followed by Shard on the same tensor dim.
    add(4, MeshOp("m0", shape=[4], dims=["x"]), DumpOp("m0", [9], [SS(0, 2)]))
    add(4, MeshOp("m0", shape=[2, 2], dims=["dp", "tp"]), DumpOp("m0", [8], [SS(0, 2), S(0)]))
    add(4, MeshOp("m0", shape=[2, 2], dims=["dp", "tp"]), DumpOp("m0", [7], [SS(0, 2), S(0)]))
    add(4, MeshOp("m0", shape=[2, 2], dims=["dp", "tp"]), DumpOp("m0", [10], [SS(0, 3), S(0)]))
    add(6, MeshOp("m0", shape=[2, 3], dims=["dp", "tp"]),
        DumpOp("m0", [13, 5], [SS(0, 3), S(0)]))
    add(4, MeshOp("m0", shape=[2, 2], dims=["dp", "tp"]), DumpOp("m0", [5], [S(0), SS(0, 2)]))
    add(4, MeshOp("m0", shape=[4], dims=["x"]), DumpOp("m0", [5], [SS(0, 1000)]))
    add(4, MeshOp("m0", shape=[2, 2], dims=["dp", "tp"]), DumpOp("m0", [3, 4], [SS(0, 2), R]))
    # Slicing on ranks outside the root mesh: several replicas raise, one replica succeeds.
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["a"]), DumpOp("m1"))
    add(8, MeshOp("m0", shape=[1, 4], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["b"]), DumpOp("m1"), DumpOp("m1", [8], [S(0)]))
    add(8, MeshOp("m0", shape=[1, 4], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["b", "a"]), DumpOp("m1"))
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["b", "a"]))
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["a", "a"]))
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["b", "zz"]))
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", flatten=True), DumpOp("m1"))
    # The order check is on the coalesced layout and not strict: ("tp", "ep", "tp") coalesces
    # to strides (1, 1), passes it and fails as overlapping; size-1 dims are invisible to both.
    add(4, MeshOp("m0", shape=[2, 2], dims=["ep", "tp"]),
        MeshOp("m1", src="m0", slice_=["tp", "ep", "tp"]))
    add(4, MeshOp("m0", shape=[1, 4], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["a", "b", "a"]), DumpOp("m1"))
    # Explicit table with non-members.
    add(4, MeshOp("m0", table=[[3, 1]], dims=["a", "b"]),
        MeshOp("m1", src="m0", slice_=["b"]), DumpOp("m1"))
    # The spec's worked example: flatten cache, flattened names sliceable from the root.
    add(8, MeshOp("m0", shape=[2, 2, 2], dims=["pp", "dp", "tp"]),
        MeshOp("m1", src="m0", slice_=["dp", "tp"], flatten="spmd"), DumpOp("m1"),
        MeshOp("m2", src="m0", slice_=["dp", "tp"], flatten="spmd"), DumpOp("m2"),
        MeshOp("m3", src="m0", slice_=["pp", "spmd"]), DumpOp("m3"),
        MeshOp("m4", src="m0", slice_=["pp", "tp"], flatten="spmd"),
        MeshOp("m5", src="m0", slice_=["dp", "tp"], flatten="tp"),
        MeshOp("m6", src="m0", slice_=["tp"], flatten=True), DumpOp("m6"))
    add(8, MeshOp("m0", shape=[8], dims=["all"]),
        MeshOp("m1", src="m0", unflatten=("all", [2, 2, 2], ["a", "b", "c"])), DumpOp("m1"),
        MeshOp("m2", src="m0", unflatten=("all", [3, 2], ["a", "b"])))
    add(8, MeshOp("m0", shape=[2, 2], dims=["a", "b"]),
        MeshOp("m1", src="m0", unflatten=("b", [2, 1], ["c", "d"])), DumpOp("m1"))
    return cases


def generate(n_cases, seed):
    rng = random.Random(seed)
    cases = directed_cases()[: max(n_cases, 0)]
    while len(cases) < n_cases:
        cases.append(random_case(rng, len(cases)))
    return cases


# --------------------------------------------------------------------------------------------
# PyTorch side
# --------------------------------------------------------------------------------------------


class Torch:
    def __init__(self):
        import warnings

        warnings.simplefilter("ignore")
        import torch
        import torch.distributed as dist
        from torch.distributed._mesh_layout import _MeshLayout
        from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
        from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
        from torch.distributed.tensor.placement_types import _StridedShard
        from torch.testing._internal.distributed.fake_pg import FakeStore

        self.torch, self.dist, self.FakeStore = torch, dist, FakeStore
        self.DeviceMesh, self.init_device_mesh = DeviceMesh, init_device_mesh
        self._MeshLayout = _MeshLayout
        self.Shard, self.Replicate, self.Partial = Shard, Replicate, Partial
        self._StridedShard = _StridedShard
        self.distribute_tensor = distribute_tensor
        self.clsgo = compute_local_shape_and_global_offset
        self.version = torch.__version__
        self.self_checks = [0, 0]  # shard dumps checked: data path vs clsgo, vs distribute_tensor

    def placement(self, p):
        if p[0] == "S":
            return self.Shard(p[1])
        if p[0] == "R":
            return self.Replicate()
        if p[0] == "P":
            return self.Partial(p[1])
        return self._StridedShard(p[1], split_factor=p[2])

    def run_case(self, case, check_distribute):
        case.results = [[None] * case.world for _ in case.ops]
        for rank in range(case.world):
            self.dist.init_process_group("fake", rank=rank, world_size=case.world,
                                         store=self.FakeStore())
            try:
                meshes = {}
                for i, op in enumerate(case.ops):
                    case.results[i][rank] = self.run_op(case, op, meshes, rank, check_distribute)
            finally:
                self.dist.destroy_process_group()

    def run_op(self, case, op, meshes, rank, check_distribute):
        if op.kind == "mesh":
            if op.src is not None and op.src not in meshes:
                return ("skip",)
            try:
                meshes[op.name] = self.make_mesh(op, meshes)
            except Exception as exc:
                return ("err", *error_of(exc))
            return ("ok", None)
        if op.mesh not in meshes:
            return ("skip",)
        m = meshes[op.mesh]
        if op.shape is None:
            return ("ok", self.view(m))
        pls = [self.placement(p) for p in op.placements]
        try:
            shape, offset = self.clsgo(tuple(op.shape), m, pls)
        except Exception as exc:
            return ("err", *error_of(exc))
        value = {"local_shard": {"shape": list(shape), "offset": list(offset)},
                 "mesh_shape": list(m.shape)}  # for naming categories, not compared
        try:
            owned = self.owned(op.shape, m, op.placements)
            value["owned_indices"] = owned
        except Exception as exc:
            case.notes.append(f"rank {rank}: {op.python()}: data path raised "
                              f"{type(exc).__name__}: {exc} where compute_local_shape_and_"
                              f"global_offset gave {value['local_shard']}")
            return ("ok", value)
        # PyTorch's two answers must agree with each other.
        self.self_checks[0] += 1
        if m.get_coordinate() is not None:
            want_shape = [len(ix) for ix in owned]
            want_off = [ix[0] if ix else op.shape[d] for d, ix in enumerate(owned)]
            if want_shape != list(shape) or want_off != list(offset):
                case.notes.append(f"rank {rank}: {op.python()}: compute_local_shape_and_global_"
                                  f"offset gives {list(shape)}@{list(offset)} but the data path "
                                  f"holds {owned}")
        if check_distribute:
            self.self_checks[1] += 1
            agrees, full = self.distribute_agrees(op.shape, m, op.placements, owned)
            if not agrees:
                case.notes.append(f"rank {rank}: {op.python()}: distribute_tensor holds {full}, "
                                  f"the per-dim _select_split_tensor path {owned}")
        return ("ok", value)

    def make_mesh(self, op, meshes):
        dims = tuple(op.dims) if op.dims else None
        if op.shape is not None:
            return self.init_device_mesh("cpu", tuple(op.shape), mesh_dim_names=dims)
        if op.table is not None:
            return self.DeviceMesh("cpu", op.table, mesh_dim_names=dims)
        m = meshes[op.src]
        if op.slice is not None:
            m = m[tuple(op.slice)]
        if op.flatten is not None:
            m = m._flatten(None if op.flatten is True else op.flatten)
        if op.unflatten is not None:
            dim, sizes, names = op.unflatten
            m = m._unflatten(dim, tuple(sizes), tuple(names))
        return m

    def view(self, m):
        coord = m.get_coordinate()
        groups = [self._MeshLayout([axis]).remap_to_tensor(m._rank_map).tolist()
                  for axis in m._layout]
        v = {
            "coordinate": list(coord) if coord is not None else None,
            "shape": list(m.shape),
            "dim_names": list(m.mesh_dim_names) if m.mesh_dim_names else None,
            "is_root": m._root_mesh is None,
            "groups": groups,
            "group_names": [str(n) for n in getattr(m, "_dim_group_names", [])],
            "local_ranks": None,
        }
        if coord is not None:
            v["local_ranks"] = [m.get_local_rank(d) for d in range(m.ndim)]
        else:
            try:
                v["local_rank_error"] = ("ok", m.get_local_rank(0))
            except Exception as exc:
                v["local_rank_error"] = ("err", *error_of(exc))
        try:
            v["mesh"] = m.mesh.tolist()
        except Exception as exc:
            v["mesh"] = "%s: %s" % error_of(exc)
        return v

    def owned(self, shape, m, placements):
        """The data path of distribute_tensor(src_data_rank=None), one tensor dim at a time:
        each mesh dim's placement runs _select_split_tensor on the indices held so far."""
        coord = m.get_coordinate()
        if coord is None:
            return []
        out = []
        for d, n in enumerate(shape):
            t = self.torch.arange(n)
            for mesh_dim, p in enumerate(placements):
                if p[0] not in ("S", "SS") or norm_dim(p[1], len(shape)) != d:
                    continue
                one = self.Shard(0) if p[0] == "S" else self._StridedShard(0, split_factor=p[2])
                t = one._select_split_tensor(t, m.size(mesh_dim), coord[mesh_dim],
                                             with_padding=False)
            out.append(t.tolist())
        return out

    def distribute_agrees(self, shape, m, placements, owned):
        """distribute_tensor itself on a tensor of flat indices (Partial as Replicate: its
        partition step changes values, not ownership) holds what `owned` says: the same local
        shape and, where the local tensor has elements, the same indices per dim."""
        torch = self.torch
        pls = [self.Replicate() if p[0] == "P" else self.placement(p) for p in placements]
        x = torch.arange(prod(shape)).reshape(shape)
        local = self.distribute_tensor(x, m, pls, src_data_rank=None).to_local()
        if m.get_coordinate() is None:
            return list(local.shape) == [0] and owned == [], list(local.shape)
        if list(local.shape) != [len(ix) for ix in owned]:
            return False, list(local.shape)
        if local.numel() == 0:
            return True, list(local.shape)
        got = []
        for d in range(len(shape)):
            line = local
            for e in range(len(shape)):
                if e != d:
                    line = line.narrow(e, 0, 1)
            flat = line.reshape(-1).tolist()
            got.append([v // prod(shape[d + 1:]) % shape[d] for v in flat])
        return got == owned, got


def norm_dim(d, ndim):
    return d + ndim if d < 0 else d


def error_of(exc):
    """(type name, the message): the first argument when it is a string (KeyError and the
    errors PyTorch raises with several arguments), else str()."""
    if exc.args and isinstance(exc.args[0], str):
        msg = exc.args[0]
    else:
        msg = str(exc)
    return type(exc).__name__, msg


def key_message(msg):
    """The part of a PyTorch message a faithful model must reproduce: up to the repr of a
    DeviceMesh object, if there is one."""
    cut = msg.find("DeviceMesh(")
    if cut > 0:
        msg = msg[:cut]
    return msg.strip()


# --------------------------------------------------------------------------------------------
# Validity: meshsim models group creation as a collective over WORLD, as c10d does. A program
# where a group-creating op runs (or fails) on some ranks only is not SPMD-valid; truncate there.
# Also keep ops whose failing ranks all raise the same error (one `raises` per step).
# --------------------------------------------------------------------------------------------


def truncate_invalid(case):
    case.dropped = 0
    for i, op in enumerate(case.ops):
        res = case.results[i]
        kinds = {r[0] for r in res}
        errors = {(r[1], key_message(r[2])) for r in res if r[0] == "err"}
        bad = len(errors) > 1
        if op.kind == "mesh" and op.creates_groups() and len(kinds) > 1:
            bad = True
        if bad:
            case.dropped = len(case.ops) - i
            case.ops, case.results = case.ops[:i], case.results[:i]
            return


# --------------------------------------------------------------------------------------------
# meshsim side: scenario files
# --------------------------------------------------------------------------------------------


def toml_value(v):
    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def rank_set_expr(ranks, world):
    ranks = sorted(ranks)
    if len(ranks) == world:
        return None
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        lo, hi = ranks[i], ranks[j]
        parts.append(f"rank == {lo}" if lo == hi else f"(rank >= {lo} && rank <= {hi})")
        i = j + 1
    return " || ".join(parts) if parts else "false"


def scenario_text(case):
    lines = [
        f"# torch_diff case {case.index} ({case.origin}); the PyTorch program, run on every rank:",
        *[f"#   {line}" for line in case.program()],
        "[scenario]",
        f'name = "torch-diff-{case.index:04d}"',
        f"world_size = {case.world}",
        'device = "cpu"',
    ]
    case.lines = {}
    for i, op in enumerate(case.ops):
        res = case.results[i]
        runs = [r for r in range(case.world) if res[r][0] != "skip"]
        ok = [r for r in runs if res[r][0] == "ok"]
        err = [r for r in runs if res[r][0] == "err"]
        if not runs:
            continue
        lines.append("")
        header = len(lines) + 1
        if op.kind == "mesh":
            lines.append("[[mesh]]")
            lines.append(f'name = "{op.name}"')
            if op.shape is not None:
                lines.append(f"shape = {toml_value(op.shape)}")
            elif op.table is not None:
                lines.append(f"ranks = {toml_value(op.table)}")
            else:
                lines.append(f'from = "{op.src}"')
                if op.slice is not None:
                    lines.append(f"slice = {toml_value(op.slice)}")
                if op.flatten is not None:
                    lines.append(f"flatten = {toml_value(op.flatten)}")
                if op.unflatten is not None:
                    dim, sizes, names = op.unflatten
                    lines.append("unflatten = " + toml_value(
                        {"dim": dim, "sizes": sizes, "names": names}))
            if op.dims and op.src is None:
                lines.append(f"dims = {toml_value(op.dims)}")
        else:
            lines.append("[[step]]")
            if op.shape is None:
                lines.append(f'dump = "{op.mesh}"')
            else:
                lines.append("dump = " + toml_value({
                    "mesh": op.mesh, "shape": op.shape,
                    "placements": [placement_meshsim(p) for p in op.placements]}))
        case.lines[header] = (i, "main")
        when = rank_set_expr(runs, case.world)
        if when:
            lines.append(f'when = "{when}"')
        if err:
            _, etype, emsg = res[err[0]]
            lines.append("raises = " + toml_value(
                {"type": etype, "contains": key_message(emsg), "on": err}))
        if op.kind == "dump" and op.shape is None and ok:
            # The mesh tensor (the replica holding the rank), as an expectation.
            lines.append("")
            case.lines[len(lines) + 1] = (i, "mesh")
            lines.append("[[expect]]")
            lines.append(f'mesh = "{op.mesh}"')
            by_rank = [res[r][1]["mesh"] if res[r][0] == "ok" else None
                       for r in range(case.world)]
            lines.append(f"by_rank = {toml_value(by_rank)}")
            when = rank_set_expr(ok, case.world)
            if when:
                lines.append(f'when = "{when}"')
            # get_local_rank(0) on ranks outside the mesh: PyTorch's error.
            outside = [r for r in ok if res[r][1]["coordinate"] is None]
            if outside:
                _, etype, emsg = res[outside[0]][1]["local_rank_error"]
                lines.append("")
                case.lines[len(lines) + 1] = (i, "local_rank")
                lines.append("[[step]]")
                lines.append("expect = " + toml_value(
                    {"local_rank": {"mesh": op.mesh, "dim": 0}, "equals": 0}))
                lines.append(f'when = "{rank_set_expr(outside, case.world)}"')
                lines.append("raises = " + toml_value(
                    {"type": etype, "contains": key_message(emsg), "on": outside}))
    return "\n".join(lines) + "\n"


def run_meshsim(meshsim, files, workdir):
    """One meshsim run over all files; if it crashes, file by file so the rest still count."""
    out = os.path.join(workdir, "report.json")
    proc = subprocess.run([meshsim, "run", "--no-time", "--json", out, *files],
                          capture_output=True, text=True, timeout=600)
    reports, crashes = {}, {}
    if proc.returncode in (0, 1, 2) and os.path.exists(out):
        with open(out) as f:
            data = json.load(f)
        for s in data.get("scenarios", []):
            reports[os.path.abspath(s["file"])] = s
        for u in data.get("unusable_inputs", []):
            path = os.path.abspath(u["location"]["file"])
            crashes[path] = "refused the file: " + u["message"]
        return reports, crashes
    for path in files:
        one = os.path.join(workdir, "one.json")
        p = subprocess.run([meshsim, "run", "--no-time", "--json", one, path],
                           capture_output=True, text=True, timeout=120)
        if p.returncode in (0, 1, 2) and os.path.exists(one):
            with open(one) as f:
                data = json.load(f)
            for s in data.get("scenarios", []):
                reports[os.path.abspath(path)] = s
            for u in data.get("unusable_inputs", []):
                crashes[os.path.abspath(path)] = "refused the file: " + u["message"]
        else:
            crashes[os.path.abspath(path)] = (f"meshsim exited {p.returncode}: "
                                              f"{(p.stderr or p.stdout)[-300:]}")
        if os.path.exists(one):
            os.remove(one)
    return reports, crashes


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

MESH_FIELDS = ["coordinate", "shape", "dim_names", "is_root", "groups", "group_names",
               "local_ranks"]


def runs_of(seq):
    """[1,2,3,7] -> [[1,4],[7,8]] (half-open runs, in the given order)."""
    out = []
    for x in seq:
        if out and out[-1][1] == x:
            out[-1][1] = x + 1
        else:
            out.append([x, x + 1])
    return out


def normalise_owned(value):
    """meshsim prints each tensor dim as a list of indices, or as merged half-open intervals
    [[start, stop], ...]; PyTorch gives index lists. Compare as runs of consecutive indices."""
    if value is None:
        return None
    out = []
    for dim in value:
        if dim and isinstance(dim[0], list):
            idx = []
            for start, stop in dim:
                idx.extend(range(start, stop))
            out.append(runs_of(idx))
        else:
            out.append(runs_of(dim))
    return out


def strip_expected(msg, expected):
    """meshsim appends what `raises` asked for to the message of an error that did not match."""
    if expected is not None:
        suffix = f' (expected {expected[1]} containing "{key_message(expected[2])}")'
        if msg.endswith(suffix):
            return msg[: -len(suffix)]
    return msg


class Mismatch:
    def __init__(self, case, rank, op_index, field, torch_value, meshsim_value, category):
        self.case, self.rank, self.op_index, self.field = case, rank, op_index, field
        self.torch, self.meshsim, self.category = torch_value, meshsim_value, category


def fmt(v, limit=160):
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= limit else s[: limit - 3] + "..."


def case_features(case, op_index, rank, field):
    """Words that name the situation of a mismatch, for grouping into categories."""
    op = case.ops[op_index]
    feats = []
    root = case.ops[0]
    shard = op.kind == "dump" and op.shape is not None
    if root.table is not None and not shard and field != "outcome":
        flat = list(flatten_table(root.table))
        feats.append("explicit table" + (" (unsorted)" if flat != sorted(flat) else ""))
    if rank not in root_members(case) and (op.kind == "mesh" or field != "outcome"):
        feats.append("non-member")
    if op.kind == "dump" and op.shape is None:
        src = next(o for o in case.ops if o.kind == "mesh" and o.name == op.mesh)
        if src.src is not None:
            feats.append("of a " + src.label())
    if shard:
        nd = len(op.shape)
        shard_dims = [norm_dim(p[1], nd) for p in op.placements if p[0] in ("S", "SS")]
        if any(not 0 <= d < nd for d in shard_dims):
            feats.append("dim out of range")
        elif field != "outcome":
            strided = [p for p in op.placements if p[0] == "SS"]
            if strided:
                feats.append("_StridedShard")
                if any(p[2] > op.shape[norm_dim(p[1], nd)] for p in strided):
                    feats.append("split_factor > dim size")
            if len(shard_dims) != len(set(shard_dims)):
                feats.append("two shardings of one tensor dim")
            mesh_shape = next((r[1]["mesh_shape"] for r in case.results[op_index]
                               if r[0] == "ok"), None)
            if mesh_shape:
                feats.append("uneven" if uneven(op.shape, mesh_shape, op.placements) else "even")
        if any(p[0] in ("S", "SS") and p[1] < 0 for p in op.placements):
            feats.append("negative dim")
    return feats


def uneven(shape, mesh_shape, placements):
    """Whether some split along the way does not divide (torch.chunk rules matter)."""
    sizes = list(shape)
    for k, p in zip(mesh_shape, placements):
        if p[0] not in ("S", "SS"):
            continue
        d = norm_dim(p[1], len(shape))
        pieces = k * (p[2] if p[0] == "SS" else 1)
        if sizes[d] % pieces:
            return True
        sizes[d] //= k
    return False


def flatten_table(t):
    if isinstance(t, list):
        for x in t:
            yield from flatten_table(x)
    else:
        yield t


def root_members(case):
    root = case.ops[0]
    if root.table is not None:
        return set(flatten_table(root.table))
    return set(range(prod(root.shape)))


def outcome_mismatch(case, rank, i, label, res, fail, part):
    """A rank stopped at this entry in meshsim: compare with what PyTorch did there."""
    mtype, mmsg = fail["type"], fail["message"]
    if mtype != "meshsim":
        mmsg = strip_expected(mmsg, res if res[0] == "err" else None)
    if mtype == "meshsim" and "but the step succeeded" in mmsg:
        mvalue, mkind = "succeeded", "ok"
    else:
        mvalue, mkind = f"{mtype}: {mmsg}", mtype
    tkind = res[1] if res[0] == "err" else "ok"
    tvalue = f"{res[1]}: {res[2]}" if res[0] == "err" else "succeeded"
    if mkind == "aborted":
        cat = "aborted after another rank failed (secondary)"
    else:
        cat = f"{label}: torch {tkind}, meshsim {mkind}"
        if tkind == mkind:
            cat = f"{label}: {tkind} message differs"
        cat = with_feats(cat, case_features(case, i, rank, "outcome"))
    field = "outcome" if part == "main" else part
    return Mismatch(case, rank, i, field, tvalue, mvalue, cat)


def compare_case(case, report, crash):
    """Every rank's first divergence at a mesh step, and every field of every dump it reached."""
    mismatches = []
    compared = 0
    if crash is not None or report is None:
        what = crash or "meshsim produced no report for this file"
        mismatches.append(Mismatch(case, None, None, "run", "a result", what,
                                   what.split(":")[0]))
        return mismatches, 0
    failures = {r["rank"]: r["failure"] for r in report.get("ranks", [])
                if r.get("status") == "failed" and r.get("failure")}
    dumps = {(d["location"]["line"], d["rank"]): d["value"] for d in report.get("dumps", [])}
    expects = {}
    for e in report.get("expectations", []):
        # A record that ranks passed alike lists them as [first, last] ranges.
        ranks = [r for a, b in e["ranks"] for r in range(a, b + 1)] if "ranks" in e else [e["rank"]]
        for r in ranks:
            expects[(e["location"]["line"], r)] = e
    if report.get("hang"):
        h = report["hang"]
        primary = any(f.get("type") != "aborted" for f in failures.values())
        cat = "hang after a rank failed (secondary)" if primary else "meshsim reports a hang"
        mismatches.append(Mismatch(case, None, None, "run", "no hang (PyTorch runs every rank)",
                                   f"{h.get('kind')}: {h.get('cause')}", cat))
    checkpoints = sorted(case.lines.items())
    for rank in range(case.world):
        fail = failures.get(rank)
        fail_line = fail["location"]["line"] if fail else None
        rank_compared = False
        for line, (i, part) in checkpoints:
            op = case.ops[i]
            res = case.results[i][rank]
            if fail_line is not None and fail_line < line:
                break  # the rank stopped earlier; its first divergence is already reported
            if part == "main":
                if res[0] == "skip":
                    continue
                expected = res
                label = op.label()
            elif res[0] != "ok":
                continue
            elif part == "mesh":
                expected = ("ok", None)
                label = "mesh tensor"
            else:  # local_rank on a non-member
                if res[1]["coordinate"] is not None:
                    continue
                expected = res[1]["local_rank_error"]
                label = "get_local_rank on a non-member"
            rank_compared = True
            if fail_line == line:
                mismatches.append(outcome_mismatch(case, rank, i, label, expected, fail, part))
                break
            if part == "mesh":
                e = expects.get((line, rank))
                want = res[1]["mesh"]
                if e is None:
                    mismatches.append(Mismatch(case, rank, i, "mesh", want, "no result",
                                               "mesh tensor: no expectation result"))
                elif e["observed"] != want:
                    mismatches.append(Mismatch(case, rank, i, "mesh", want, e["observed"],
                                               with_feats("mesh", case_features(
                                                   case, i, rank, "mesh"))))
                continue
            if part != "main" or res[0] != "ok" or op.kind != "dump":
                continue
            got = dumps.get((line, rank))
            if got is None:
                mismatches.append(Mismatch(case, rank, i, "dump", "a dump", "no dump recorded",
                                           "dump missing"))
                continue
            if op.shape is None:
                pairs = [(f, res[1].get(f), got.get(f)) for f in MESH_FIELDS]
            else:
                pairs = [("local_shard", res[1]["local_shard"], got.get("local_shard"))]
                if "owned_indices" in res[1]:
                    pairs.append(("owned_indices", res[1]["owned_indices"],
                                  got.get("owned_indices")))
            for field, t, m in pairs:
                if field == "group_names":  # PyTorch: [] outside the mesh; meshsim: null
                    same = (t or []) == (m or [])
                elif field == "owned_indices":
                    same = normalise_owned(t) == normalise_owned(m)
                else:
                    same = t == m
                if not same:
                    mismatches.append(Mismatch(case, rank, i, field, t, m, with_feats(
                        field, case_features(case, i, rank, field))))
        if fail is not None and fail_line not in case.lines:
            mismatches.append(Mismatch(case, rank, None, "failure", "no failure",
                                       f"line {fail_line}: {fail['type']}: {fail['message']}",
                                       "failure at an unknown line"))
        compared += rank_compared
    return mismatches, compared


def with_feats(cat, feats):
    return f"{cat} [{', '.join(feats)}]" if feats else cat


def print_case_diff(case, ms, out):
    out.append(f"--- case {case.index} ({case.origin}, case_{case.index:04d}.toml), "
               f"world {case.world}, PyTorch program:")
    for line in case.program():
        out.append(f"      {line}")
    # Group identical differences across ranks.
    groups = defaultdict(list)
    for m in ms:
        key = (m.op_index, m.field, fmt(m.torch, 400), fmt(m.meshsim, 400))
        groups[key].append(m)
    shown = 0
    def order(kv):
        (op_index, _, _, _), items = kv
        rank = items[0].rank
        return (-1 if op_index is None else op_index, -1 if rank is None else rank)

    for (op_index, field, _, _), items in sorted(groups.items(), key=order):
        if shown == 8:
            out.append(f"    ... {len(groups) - shown} more differences")
            break
        shown += 1
        ranks = [m.rank for m in items if m.rank is not None]
        where = case.ops[op_index].python().split("  #")[0] if op_index is not None else "run"
        rs = ("ranks " + ",".join(map(str, ranks)) if len(ranks) > 1 else
              f"rank {ranks[0]}" if ranks else "all")
        out.append(f"    {rs} | {where} | {field}")
        out.append(f"        torch:   {fmt(items[0].torch)}")
        out.append(f"        meshsim: {fmt(items[0].meshsim)}")


def coverage(cases):
    """What the cases exercised in PyTorch, as rank-level outcomes per kind of step."""
    count = defaultdict(lambda: [0, 0])  # label -> [ranks ok, ranks raising]
    dropped = 0
    for case in cases:
        dropped += getattr(case, "dropped", 0)
        for op, res in zip(case.ops, case.results):
            label = op.label()
            if label == "shard" and any(p[0] == "SS" for p in op.placements):
                label = "shard(_StridedShard)"
            for r in res:
                if r[0] == "ok":
                    if label == "dump" and r[1]["coordinate"] is None:
                        count["dump(non-member)"][0] += 1
                    count[label][0] += 1
                elif r[0] == "err":
                    count[label][1] += 1
    parts = [f"{k} {ok}/{err}" for k, (ok, err) in sorted(count.items())]
    return ("torch_diff: coverage (rank-level PyTorch outcomes, ok/raised): " + ", ".join(parts)
            + f"; {dropped} generated steps dropped as not SPMD-valid")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("meshsim")
    parser.add_argument("source_root", help="unused; accepted like cli_test.py's")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", type=int, default=None, help="run only case I")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="write the scenario files into DIR and keep them")
    parser.add_argument("--max-diffs", type=int, default=40, help="cases printed in full")
    args = parser.parse_args()

    require_torch("torch_diff", _check_torch)
    started = time.monotonic()
    meshsim = os.path.abspath(args.meshsim)
    if not os.access(meshsim, os.X_OK):
        print(f"torch_diff: {meshsim} is not an executable")
        return 2
    try:
        torch = Torch()
    except ImportError as exc:  # a PyTorch without the (private) pieces this test calls
        _skip(f"this PyTorch lacks what the test needs ({exc})")
    cases = generate(args.cases, args.seed)
    if args.only is not None:
        cases = [c for c in cases if c.index == args.only]
    directed = len(directed_cases())
    t0 = time.monotonic()
    for case in cases:
        # distribute_tensor itself for the directed cases and every 10th random one.
        torch.run_case(case, check_distribute=case.index < directed or case.index % 10 == 0)
        truncate_invalid(case)
    torch_s = time.monotonic() - t0

    workdir = args.keep or tempfile.mkdtemp(prefix="torch_diff_")
    os.makedirs(workdir, exist_ok=True)
    files = []
    for case in cases:
        path = os.path.abspath(os.path.join(workdir, f"case_{case.index:04d}.toml"))
        with open(path, "w") as f:
            f.write(scenario_text(case))
        case.path = path
        files.append(path)
    t0 = time.monotonic()
    try:
        reports, crashes = run_meshsim(meshsim, files, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    meshsim_s = time.monotonic() - t0

    all_ms, ranks_compared, notes = [], 0, []
    per_case = []
    for case in cases:
        ms, n = compare_case(case, reports.get(case.path), crashes.get(case.path))
        ranks_compared += n
        all_ms.extend(ms)
        if ms:
            per_case.append((case, ms))
        notes.extend(f"case {case.index}: {n}" for n in case.notes)

    out = []
    for case, ms in per_case[: args.max_diffs]:
        print_case_diff(case, ms, out)
    if len(per_case) > args.max_diffs:
        out.append(f"... {len(per_case) - args.max_diffs} more failing cases "
                   f"(--max-diffs to show them, --only I for one case)")
    if all_ms:
        out.append("")
        out.append("mismatch categories (count of rank-level differences; smallest example):")
        cats = defaultdict(list)
        for m in all_ms:
            cats[m.category].append(m)
        for cat, items in sorted(cats.items(), key=lambda kv: -len(kv[1])):
            ex = min(items, key=lambda m: (len(m.case.ops), m.case.world, m.case.index))
            cases_n = len({m.case.index for m in items})
            out.append(f"  {len(items):5d} in {cases_n:3d} cases: {cat}")
            where = "run"
            if ex.op_index is not None:
                where = ex.case.ops[ex.op_index].python().split("  #")[0]
            out.append(f"        e.g. case {ex.case.index} rank {ex.rank}: {where} | {ex.field}: "
                       f"torch {fmt(ex.torch, 70)} | meshsim {fmt(ex.meshsim, 70)}")
    out.append(f"torch_diff: PyTorch self-checks: {torch.self_checks[0]} shard dumps, "
               f"compute_local_shape_and_global_offset against the data path; "
               f"{torch.self_checks[1]} also against distribute_tensor; {len(notes)} disagree")
    if notes:
        out.append("PyTorch disagrees with itself (not counted as mismatches):")
        out.extend("  " + n for n in notes[:20])
    print("\n".join(out))
    if args.keep:
        print(f"torch_diff: scenario files kept in {workdir}")
    elif all_ms:
        print("torch_diff: rerun with --keep DIR to keep the scenario files (case_NNNN.toml)")
    print(f"torch_diff: torch {torch.version}, seed {args.seed}; torch {torch_s:.1f}s, "
          f"meshsim {meshsim_s:.1f}s, total {time.monotonic() - started:.1f}s")
    print(coverage(cases))
    primary = [m for m in all_ms if not m.category.endswith("(secondary)")]
    secondary = len(all_ms) - len(primary)
    print(f"torch_diff: {len(cases)} cases, {ranks_compared} ranks compared, "
          f"{len(primary)} mismatches" + (f" (+{secondary} secondary: ranks aborted or hung "
                                         f"after another rank failed)" if secondary else ""))
    return 1 if all_ms else 0


if __name__ == "__main__":
    sys.exit(main())
