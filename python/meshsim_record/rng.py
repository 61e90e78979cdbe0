"""DTensor's random state on a CPU mesh as on a GPU one, recorded for meshsim's RNG checks.

PyTorch keeps DTensor's RNG tracker for CUDA-like meshes only: on a CPU mesh `manual_seed(seed,
mesh)` returns with a warning and random ops make no tracker. The recorder lets PyTorch's own code
take its GPU path (CPU and meta meshes pass `is_rng_supported_mesh`, and the tracker class is a
stand-in), so that what ranks do together is what a GPU job does: manual_seed runs PyTorch's checks
(a rank outside the mesh gets PyTorch's error), and the first random op without a tracker
broadcasts rank 0's generator state over WORLD, a collective every rank must join. The values
drawn stay the CPU's: the record says which op ran on which shard with which seed, and meshsim
computes where on the GPU's Philox stream each rank would draw."""

import contextlib
import numbers
import sys

from . import trace

_original = {}
_seeding = [False]  # inside DTensor's manual_seed, whose torch.manual_seed is not a call of its own
_dispatching = [False]  # inside a random op's dispatch, whose distribute region is recorded there
# Stands for the generator state DTensor's tracker broadcasts (a CUDA generator's 16 bytes).
_STATE_BYTES = 16


class _TrackerStandIn:
    """DTensor's OffsetBasedRNGTracker on a CPU mesh, made where PyTorch makes the real one (a
    mesh's manual_seed, or the first random op or random factory without a tracker): made with
    the state sync, it broadcasts over WORLD as the real one does. Ops run as they are inside its
    distribute region; meshsim places their draws."""

    def __init__(self, device_mesh=None, run_state_sync=True):
        import torch
        import torch.distributed as dist

        del device_mesh
        self.distribute_region_enabled = True
        # Whether a recorded op has said it made this tracker (manual_seed makes it silently).
        self.announced = not run_state_sync
        if run_state_sync:
            dist.broadcast(torch.zeros(_STATE_BYTES, dtype=torch.uint8), 0)

    def _distribute_region(self, spec, generator=None):
        del generator
        if not _dispatching[0] and trace.current() is not None:
            _record_factory(self, spec, sys._getframe(1))
        return contextlib.nullcontext()

    def _manual_seed(self, parallel_seed):
        del parallel_seed


def _rng_supported(mesh):
    """PyTorch's own test, with CPU and meta meshes taken as GPU meshes."""
    return mesh.device_type in ("cpu", "meta") or _original["is_rng_supported_mesh"](mesh)


def _random_module():
    import torch.distributed.tensor._random as random_module

    return random_module


def _mesh_fields(mesh):
    return {
        "mesh_shape": list(mesh.mesh.shape),
        "mesh_ranks": mesh.mesh.flatten().tolist(),
        "dim_names": list(mesh.mesh_dim_names or []),
    }


def _placement_text(p):
    """In meshsim's spelling; Partial draws as if unsharded, so its reduce op does not matter."""
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard, _StridedShard

    if isinstance(p, _StridedShard):
        return f"_StridedShard({p.dim}, split_factor={p.split_factor})"
    if isinstance(p, Shard):
        return f"Shard({p.dim})"
    if isinstance(p, Replicate):
        return "Replicate()"
    if isinstance(p, Partial):
        return "Partial()"
    return str(p)


def _manual_seed(seed, device_mesh):
    coordinate = device_mesh.get_coordinate()
    trace.current().record_rng(dict(
        _mesh_fields(device_mesh),
        call="manual_seed",
        seed=int(seed),
        coordinate=list(coordinate) if coordinate is not None else None,
    ))
    # PyTorch's own manual_seed, which now makes the tracker on a CPU mesh and raises its error
    # on a rank outside the mesh; its torch.manual_seed is part of this call.
    _seeding[0] = True
    try:
        return _original["manual_seed"](seed, device_mesh)
    finally:
        _seeding[0] = False


def _torch_manual_seed(seed):
    if not _seeding[0] and trace.current() is not None:
        trace.current().record_rng({"call": "torch_manual_seed", "seed": int(seed)})
    return _original["torch_manual_seed"](seed)


def _scalar_arguments(op_call, args, kwargs):
    """The op's number arguments after the tensor, by schema name ({"from": -0.1, "to": 0.1})."""
    out = {}
    for i, argument in enumerate(op_call._schema.arguments[1:], start=1):
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, numbers.Number):
            out[argument.name] = float(value) if not isinstance(value, bool) else value
    return out


# Parameter names of the modules met so far: id(module) -> {id(parameter): (parameter, name)}.
_names = {}


def _parameter_name(tensor):
    """The tensor's name as a parameter of the outermost module on the stack that holds it
    ("layers.0.attention.wq.weight"); None for anything else (an activation under dropout).
    Ranks holding the same parameter give the same name, which tells replicas of one parameter
    on different meshes (data-parallel copies) from different parameters (pipeline stages)."""
    import torch.nn as nn

    if not isinstance(tensor, nn.Parameter):
        return None
    modules = []
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if isinstance(owner, nn.Module) and (not modules or modules[-1] is not owner):
            modules.append(owner)
        frame = frame.f_back
    for module in reversed(modules):
        names = _names.get(id(module))
        known = names.get(id(tensor)) if names is not None else None
        if known is None or known[0] is not tensor:  # new, or an id the allocator reused
            names = {id(p): (p, n) for n, p in module.named_parameters(remove_duplicate=False)}
            _names[id(module)] = names
            known = names.get(id(tensor))
        if known is not None and known[0] is tensor:
            return known[1]
    return None


def _dropout_probability():
    """F.dropout on a CPU tensor draws its mask with bernoulli_(1 - p), where a GPU runs the fused
    native_dropout(p): the p of the F.dropout call on the stack, or None when there is none."""
    frame = sys._getframe(3)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "dropout" and code.co_filename.endswith("nn/functional.py"):
            return frame.f_locals.get("p")
        frame = frame.f_back
    return None


def _record_random_op(op_call, args, op_info):
    from torch.distributed.tensor import DTensor

    mesh = op_info.compute_mesh
    if not args or not isinstance(args[0], DTensor) or not mesh._is_current_rank_part_of_mesh():
        return
    random_module = _random_module()
    tracker = random_module._rng_tracker
    spec = args[0]._spec
    local = args[0]._local_tensor
    op = op_call._schema.name.split("::")[-1]
    overload = op_call._overloadname
    arguments = _scalar_arguments(op_call, args, op_info.local_kwargs)
    p = _dropout_probability() if (op, overload) == ("bernoulli_", "float") else None
    if p is not None:
        op, overload, arguments = "native_dropout", "default", {"p": float(p), "train": True}
    trace.current().record_rng(dict(
        _mesh_fields(mesh),
        call="random_op",
        op=op,
        overload=overload,
        arguments=arguments,
        parameter=_parameter_name(args[0]),
        placements=[_placement_text(p) for p in spec.placements],
        shape=list(spec.shape),
        dtype=str(local.dtype).replace("torch.", ""),
        local_numel=local.numel(),
        meta=local.is_meta,
        region=bool(tracker.distribute_region_enabled) if tracker else True,
        # PyTorch makes the tracker in this call (_TrackerStandIn broadcasts where it would).
        tracker_created=not tracker,
        user_generator=op_info.local_kwargs.get("generator") is not None,
        coordinate=list(mesh.get_coordinate()),
    ))


def _record_factory(tracker, spec, caller):
    """torch.distributed.tensor.rand / randn: DTensor's factory draws the rank's shard inside the
    tracker's distribute region, which is where this is called from."""
    import math

    import torch

    mesh = spec.mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None and tracker.distribute_region_enabled:
        # What PyTorch's offset computation does on a GPU mesh for a rank outside it.
        raise AssertionError("a random DTensor factory on a rank outside its mesh: DTensor's "
                             "RNG offsets need the rank's coordinate in the mesh")
    init_op = caller.f_locals.get("init_op")
    local_shape = caller.f_locals.get("local_shape") or ()
    created = not tracker.announced
    tracker.announced = True
    trace.current().record_rng(dict(
        _mesh_fields(mesh),
        call="random_op",
        op=getattr(init_op, "__name__", "rand"),
        overload="default",
        arguments={},
        parameter=None,
        placements=[_placement_text(p) for p in spec.placements],
        shape=list(spec.shape),
        dtype=str(spec.tensor_meta.dtype or torch.get_default_dtype()).replace("torch.", ""),
        local_numel=math.prod(local_shape),
        meta=False,
        region=bool(tracker.distribute_region_enabled),
        tracker_created=created,
        user_generator=False,
        factory=True,
        coordinate=list(coordinate) if coordinate is not None else None,
    ))


def _dispatch_slow_path(self, op_call, args, op_info):
    if op_call not in self._random_ops or trace.current() is None:
        return _original["slow_path"](self, op_call, args, op_info)
    _record_random_op(op_call, args, op_info)
    _dispatching[0] = True
    try:
        return _original["slow_path"](self, op_call, args, op_info)
    finally:
        _dispatching[0] = False
        tracker = _random_module()._rng_tracker
        if isinstance(tracker, _TrackerStandIn):
            tracker.announced = True


def install():
    import torch
    import torch.distributed.tensor as tensor_module
    import torch.distributed.tensor._dispatch as dispatch_module
    from torch.distributed.tensor._dispatch import OpDispatcher

    if _original:
        return
    random_module = _random_module()
    _original["is_rng_supported_mesh"] = random_module.is_rng_supported_mesh
    random_module.is_rng_supported_mesh = _rng_supported
    dispatch_module.is_rng_supported_mesh = _rng_supported
    random_module.OffsetBasedRNGTracker = _TrackerStandIn
    _original["manual_seed"] = random_module.manual_seed
    random_module.manual_seed = _manual_seed
    if getattr(tensor_module, "manual_seed", None) is _original["manual_seed"]:
        tensor_module.manual_seed = _manual_seed
    _original["torch_manual_seed"] = torch.manual_seed
    torch.manual_seed = _torch_manual_seed
    # DTensor's C++ dispatch hands random ops to this method (PyTorch 2.15).
    _original["slow_path"] = OpDispatcher._dispatch_get_local_results_slow_path
    OpDispatcher._dispatch_get_local_results_slow_path = _dispatch_slow_path
