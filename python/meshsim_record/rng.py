"""DTensor seeding on a CPU mesh as on a GPU one: PyTorch skips `manual_seed(seed, mesh)` with a
warning unless the mesh is on a CUDA-like device, so the recorder runs PyTorch's own checks (a
rank outside the mesh gets PyTorch's error) and records each call on the rank's trace."""

import contextlib

from . import trace

_original = {}


class _TrackerStandIn:
    """Stands for DTensor's RNG tracker while PyTorch's manual_seed runs its checks."""


@contextlib.contextmanager
def _as_if_on_gpu(random_module):
    supported = random_module.is_rng_supported_mesh
    tracker = random_module._rng_tracker
    random_module.is_rng_supported_mesh = lambda mesh: True
    if not tracker:
        random_module._rng_tracker = _TrackerStandIn()
    try:
        yield
    finally:
        random_module.is_rng_supported_mesh = supported
        if not tracker:
            random_module._rng_tracker = tracker


def _manual_seed(seed, device_mesh):
    import torch.distributed.tensor._random as random_module

    coordinate = device_mesh.get_coordinate()
    trace.current().record_rng({
        "call": "manual_seed",
        "seed": int(seed),
        "mesh": device_mesh.mesh.tolist(),
        "dim_names": list(device_mesh.mesh_dim_names or []),
        "coordinate": list(coordinate) if coordinate is not None else None,
    })
    if device_mesh.device_type in ("cpu", "meta"):
        with _as_if_on_gpu(random_module):
            return _original["manual_seed"](seed, device_mesh)
    return _original["manual_seed"](seed, device_mesh)


def install():
    import torch.distributed.tensor as tensor_module
    import torch.distributed.tensor._random as random_module

    if _original:
        return
    _original["manual_seed"] = random_module.manual_seed
    random_module.manual_seed = _manual_seed
    if getattr(tensor_module, "manual_seed", None) is _original["manual_seed"]:
        tensor_module.manual_seed = _manual_seed
