"""Writes hostile torch.save files of a DeviceMesh and a DTensor without PyTorch: stand-in classes
named as PyTorch 2.15's are pickled (protocol 2, with the memo, as torch.save pickles), inside a
zip archive laid out as torch.save lays it out. Each file breaks one rule a real file keeps; the
tests in tests/io/torch_saved_dtensor_test.cpp expect their refusals.

  layout_bomb.pt   a _FlatLayout whose shape nests one tuple, named 1000 times through the memo,
                   seven deep: a walk that counted only integers would run for ~10^21 steps
  order_1d.pt      a DTensor of two placements on a 1-d mesh with an explicit shard order over
                   mesh dims (1, 0): the order names a mesh dim the mesh does not have
Usage: make.py DIR
"""
import copyreg
import io
import os
import pickle
import struct
import sys
import types
import zipfile


def stand_in(module, name):
    """A class pickle names as module.name; the module is registered (empty) so pickle finds it."""
    cls = type(name, (), {})
    cls.__module__ = module
    cls.__qualname__ = name
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    setattr(sys.modules[module], name, cls)
    return cls


DeviceMesh = stand_in("torch.distributed.device_mesh", "DeviceMesh")
MeshLayout = stand_in("torch.distributed._mesh_layout", "_MeshLayout")
FlatLayout = stand_in("torch.distributed._mesh_layout", "_FlatLayout")
IntStorage = stand_in("torch", "IntStorage")
FloatStorage = stand_in("torch", "FloatStorage")


class Storage:
    def __init__(self, cls, key, numel):
        self.cls, self.key, self.numel = cls, key, numel


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


class Call:
    """An object pickled as REDUCE of a global with arguments."""
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


rebuild_tensor = stand_in("torch._utils", "_rebuild_tensor_v2")
OrderedDict = stand_in("collections", "OrderedDict")


def tensor(storage, shape):
    stride = []
    acc = 1
    for n in reversed(shape):
        stride.insert(0, acc)
        acc *= n
    return Call(rebuild_tensor, storage, 0, tuple(shape), tuple(stride), False, Call(OrderedDict))


def built(cls, state):
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def flat(shape, stride):
    return built(FlatLayout, {"shape": shape, "stride": stride})


def mesh(ranks, layout, names, rank, coordinate):
    return built(DeviceMesh, {
        "_device_type": "cpu",
        "_layout": built(MeshLayout, {"axes": layout}),
        "_rank_map": tensor(Storage(IntStorage, "0", len(ranks)), [len(ranks)]),
        "_mesh_dim_names": names, "_root_mesh": None, "_preserve_rank_order": False,
        "_flatten_rank_map": tuple(ranks), "_thread_id": None, "_flatten_mapping": {},
        "_dim_group_names": ["1"] * len(layout), "_rank": rank,
        "_coordinate_on_dim": coordinate, "_hash": None})


def save(path, obj, storages):
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(obj)
    name = os.path.splitext(os.path.basename(path))[0]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/data.pkl", buffer.getvalue())
        z.writestr(f"{name}/byteorder", "little")
        for key, data in storages.items():
            z.writestr(f"{name}/data/{key}", data)


def main():
    out = sys.argv[1]
    ranks = struct.pack("<2i", 0, 1)
    # One tuple named 1000 times per level, seven levels deep; integers nowhere.
    nested = ()
    for _ in range(7):
        nested = (nested,) * 1000
    save(os.path.join(out, "layout_bomb.pt"),
         mesh([0, 1], [flat(nested, nested)], ("dp",), 0, (0,)), {"0": ranks})

    # A DTensor: (Shard(0), Shard(0)) on a 1-d mesh, shard order over mesh dims (1, 0).
    Shard = stand_in("torch.distributed.tensor.placement_types", "Shard")
    Spec = stand_in("torch.distributed.tensor._dtensor_spec", "DTensorSpec")
    Meta = stand_in("torch.distributed.tensor._dtensor_spec", "TensorMeta")
    Entry = stand_in("torch.distributed.tensor._dtensor_spec", "ShardOrderEntry")
    Size = stand_in("torch", "Size")
    float32 = stand_in("torch", "float32")
    DTensor = stand_in("torch.distributed.tensor", "DTensor")
    rebuild_type = stand_in("torch._tensor", "_rebuild_from_type_v2")
    wrapper = stand_in("torch._utils", "_rebuild_wrapper_subclass")

    def New(cls, *args):
        """An object of `cls` pickled as NEWOBJ with `args` (a NamedTuple's way)."""
        cls.__reduce_ex__ = lambda self, protocol: (copyreg.__newobj__, (type(self), *self._args))
        obj = cls.__new__(cls)
        obj._args = args
        return obj

    spec = built(Spec, {
        "mesh": mesh([0, 1], [flat(2, 1)], ("dp",), 0, (0,)),
        "placements": (built(Shard, {"dim": 0}), built(Shard, {"dim": 0})),
        "tensor_meta": New(Meta, Call(Size, (4,)), (1,), float32),
        "shard_order": (New(Entry, 0, (1, 0)),),
        "use_strided_shard_as_shard_order": False, "_hash": None})
    local = tensor(Storage(FloatStorage, "1", 1), [1])
    obj = Call(rebuild_type, wrapper, DTensor,
               (DTensor, float32, (4,), (1,), 0, None, None, False),
               (None, {"_local_tensor": local, "_spec": spec}))
    save(os.path.join(out, "order_1d.pt"), obj, {"0": ranks, "1": struct.pack("<f", 0.0)})


if __name__ == "__main__":
    main()
