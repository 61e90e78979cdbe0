"""The recording process-group backend: every call is recorded on this rank's trace and completes
at once with outputs of the right shape, as PyTorch's fake backend does.

Outputs are filled from this rank's own inputs (a gather holds this rank's tensor in every slot),
so that code reading them (all_gather_object unpickling what it gathered) keeps working, and a
received buffer holds zeros; values are not what a real job would compute.
"""

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from . import trace

BACKEND_NAME = "meshsim_record"


def _tensors(ts):
    return [(tuple(t.shape), trace.dtype_name(t.dtype)) for t in ts]


def _done(result=None):
    fut = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _fill(dst, src):
    # Meta tensors hold no values; anything else takes the source's.
    if dst.device.type != "meta" and src.device.type != "meta" and dst.numel() == src.numel():
        with torch.no_grad():
            dst.copy_(src.reshape(dst.shape))


def _zero(tensors):
    # Nothing arrives: a received buffer holds zeros, not what the allocator left (which would
    # make the program's later control flow differ from run to run).
    with torch.no_grad():
        for t in tensors:
            if t.device.type != "meta":
                t.zero_()


class RecordingProcessGroup(dist.ProcessGroup):
    def __init__(self, rank, size, name, ranks):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        self._name = name
        self._ranks = list(ranks) if ranks else list(range(size))
        self._desc = "undefined"
        self._group = None

    # c10d names a group after creating its backend; a Python group keeps both itself.
    @property
    def group_name(self):
        return self._name

    @property
    def group_desc(self):
        return self._desc

    def _set_group_name(self, name):
        self._name = name

    def _set_group_desc(self, desc):
        # The last thing c10d does to a new group: the group is recorded as created here.
        self._desc = desc
        self._rec()

    # The group's record, made on its first call: its name and description are set by c10d after
    # the backend is created.
    def _rec(self):
        if self._group is None:
            t = trace.current()
            self._group = t.add_group(self._name, self._desc or "undefined", self._ranks)
        return self._group

    def _record(self, op, inputs, outputs, peer=None, extra=None):
        trace.current().record(self._rec(), op, _tensors(inputs), _tensors(outputs), peer, extra)

    def size(self):
        return self._size

    # The group is its own backend on every device, and batches sends and recvs as NCCL does.
    def _get_backend(self, device=None):
        return self

    @property
    def supports_coalescing(self):
        return True

    def _start_coalescing(self, device=None):
        trace.current().start_batch(self._rec())

    def _end_coalescing(self, device=None):
        trace.current().end_batch(self._rec())
        return _done()

    def getBackendName(self):
        return BACKEND_NAME

    def __repr__(self):
        return f"RecordingProcessGroup(rank={self._rank}, size={self._size}, name={self._name})"

    # Collectives.
    def allreduce(self, tensors, opts=None):
        self._record("all_reduce", tensors, tensors, extra=_reduce_op(opts))
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        self._record("allreduce_coalesced", tensors, tensors, extra=_reduce_op(opts))
        return _done(tensors)

    def barrier(self, opts=None):
        one = torch.empty(1)
        self._record("all_reduce_barrier", [one], [one])
        return _done()

    def broadcast(self, tensors, opts=None):
        self._record("broadcast", tensors, tensors, extra=_root(opts))
        return _done(tensors)

    def reduce(self, tensors, opts=None):
        self._record("reduce", tensors, tensors, extra=_root(opts))
        return _done(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        flat = [t for lst in output_lists for t in lst]
        self._record("all_gather", inputs, flat)
        for lst, src in zip(output_lists, inputs):
            for out in lst:
                _fill(out, src)
        return _done(output_lists)

    def all_gather_single(self, output, input, opts=None):
        self._record("_all_gather_base", [input], [output])
        for chunk in output.chunk(self._size):
            _fill(chunk, input)
        return _done([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        self._record("allgather_into_tensor_coalesced", inputs, outputs)
        for out, src in zip(outputs, inputs):
            for chunk in out.chunk(self._size):
                _fill(chunk, src)
        return _done(outputs)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        flat = [t for lst in input_lists for t in lst]
        self._record("reduce_scatter", flat, outputs, extra=_reduce_op(opts))
        for out, lst in zip(outputs, input_lists):
            _fill(out, lst[self._rank])
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts=None):
        self._record("_reduce_scatter_base", [input], [output], extra=_reduce_op(opts))
        _fill(output, input.chunk(self._size)[self._rank])
        return _done([output])

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        self._record("reduce_scatter_tensor_coalesced", inputs, outputs, extra=_reduce_op(opts))
        for out, src in zip(outputs, inputs):
            _fill(out, src.chunk(self._size)[self._rank])
        return _done(outputs)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def alltoall(self, outputs, inputs, opts=None):
        self._record("all_to_all", inputs, outputs)
        for out, src in zip(outputs, inputs):
            _fill(out, src)
        return _done(outputs)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        self._record("all_to_all", [input], [output],
                     extra={"input_splits": list(input_splits or []),
                            "output_splits": list(output_splits or [])})
        _fill(output, input)
        return _done([output])

    def alltoall_base(self, output, input, output_splits, input_splits, opts=None):
        return self.all_to_all_single(output, input, output_splits, input_splits, opts)

    def gather(self, output_lists, inputs, opts=None):
        flat = [t for lst in output_lists for t in lst]
        self._record("gather", inputs, flat, extra=_root(opts))
        for lst, src in zip(output_lists, inputs):
            for out in lst:
                _fill(out, src)
        return _done(output_lists)

    def scatter(self, outputs, input_lists, opts=None):
        flat = [t for lst in input_lists for t in lst]
        self._record("scatter", flat, outputs, extra=_root(opts))
        for out, lst in zip(outputs, input_lists):
            if lst:
                _fill(out, lst[self._rank])
        return _done(outputs)

    # Point to point: peers are group ranks, as NCCL names them.
    def send(self, tensors, dst, tag=0):
        self._record("send", tensors, tensors, peer=dst)
        return _done(tensors)

    def recv(self, tensors, src, tag=0):
        self._record("recv", tensors, tensors, peer=src)
        _zero(tensors)
        return _done(tensors)

    def recv_anysource(self, tensors, tag=0):
        self._record("recv", tensors, tensors, peer="?")
        _zero(tensors)
        return _done(tensors)


def _reduce_op(opts):
    op = getattr(opts, "reduceOp", None)
    return {"reduce_op": str(op).split(".")[-1]} if op is not None else None


def _root(opts):
    root = getattr(opts, "rootRank", None)
    return {"root": root} if root is not None else None


def _create(common_opts, backend_opts):
    return RecordingProcessGroup(common_opts.group_rank, common_opts.group_size,
                                 common_opts.group_id, common_opts.global_ranks_in_group)


def register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                      devices=["cpu", "cuda", "meta"])
