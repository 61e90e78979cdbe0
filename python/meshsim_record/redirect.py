"""Points the program's process groups at the recording backend, whatever backend and rendezvous
it asks for: a recorded rank runs alone, so there is no one to rendezvous with."""

import os

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import FakeStore

from . import backend as recording


def _init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                        store=None, group_name="", pg_options=None, device_id=None, **kwargs):
    # The backend, rendezvous, options and device the program names are replaced, not used.
    del backend, init_method, world_size, rank, store, pg_options, device_id
    kwargs.pop("_ranks", None)
    return _original["init_process_group"](
        backend=recording.BACKEND_NAME,
        timeout=timeout,
        world_size=int(os.environ["WORLD_SIZE"]),
        rank=int(os.environ["RANK"]),
        store=FakeStore(),
        group_name=group_name,
        **kwargs,
    )


def _new_group(*args, **kwargs):
    # Every group is served by the recorder, whichever backend the program names.
    kwargs.pop("backend", None)
    kwargs.pop("pg_options", None)
    if len(args) > 2:  # new_group(ranks, timeout, backend, pg_options, ...)
        args = args[:2]
    return _original["new_group"](*args, **kwargs)


_original = {}


def install():
    recording.register()
    if _original:
        return
    _original["init_process_group"] = c10d.init_process_group
    _original["new_group"] = c10d.new_group
    import torch.distributed.device_mesh as device_mesh

    for module in (c10d, dist, device_mesh):
        if getattr(module, "init_process_group", None) is _original["init_process_group"]:
            module.init_process_group = _init_process_group
        if getattr(module, "new_group", None) is _original["new_group"]:
            module.new_group = _new_group
    for device in list(dist.Backend.default_device_backend_map):
        dist.Backend.default_device_backend_map[device] = recording.BACKEND_NAME
