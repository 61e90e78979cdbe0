"""One rank's record: the groups it created and the calls it made, as Flight Recorder entries.

The entries follow what PyTorch 2.15's NCCL backend writes (profiling names, per-group sequence
numbers, sizes and dtypes), so meshsim and PyTorch's own analyzer read them as a real job's dumps.
Every call completes at once (no values are exchanged), so each dump is the rank's whole history,
not a snapshot at a hang.
"""

import json
import os
import sys

SCHEMA_VERSION = "2.10"
# Records are stamped on a virtual clock after this instant (2026-01-01 UTC), one microsecond
# apart, so that the same program writes the same dump.
EPOCH_NS = 1_767_225_600_000_000_000
TIMEOUT_MS = 600_000
# Frames kept per call, innermost first: enough to reach the user's line through torch's layers
# (a pipeline schedule's send is about 15 deep), few enough that a long program's dump stays
# within what a reader takes.
MAX_FRAMES = 32
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))

# torch dtype -> the name c10 prints (c10::toString of the ScalarType).
_DTYPE_NAMES = {
    "torch.float32": "Float", "torch.float64": "Double", "torch.float16": "Half",
    "torch.bfloat16": "BFloat16", "torch.int64": "Long", "torch.int32": "Int",
    "torch.int16": "Short", "torch.int8": "Char", "torch.uint8": "Byte", "torch.bool": "Bool",
    "torch.complex64": "ComplexFloat", "torch.complex128": "ComplexDouble",
    "torch.float8_e4m3fn": "Float8_e4m3fn", "torch.float8_e5m2": "Float8_e5m2",
}


def dtype_name(dtype):
    text = str(dtype)
    return _DTYPE_NAMES.get(text, text.replace("torch.", ""))


def python_frames(skip_dirs):
    """The calling Python stack, innermost first, without the recorder's own frames."""
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < MAX_FRAMES:
        filename = f.f_code.co_filename
        if not filename.startswith(skip_dirs) and not filename.startswith("<frozen"):
            frames.append({"name": f.f_code.co_name, "filename": filename, "line": f.f_lineno})
        f = f.f_back
    return frames


class Group:
    def __init__(self, name, desc, ranks, pg_id):
        self.name = name
        self.desc = desc
        self.ranks = list(ranks)
        self.pg_id = pg_id
        self.collectives = 0
        self.p2p = 0
        # Inside a batch (batch_isend_irecv): its sends and recvs share one p2p seq, as NCCL's
        # coalesced calls do, and a closing "coalesced" entry ends it.
        self.batching = False
        self.batch_calls = 0

    def group_rank(self, global_rank):
        return self.ranks.index(global_rank)


class RankTrace:
    def __init__(self, rank, world_size):
        self.rank = rank
        self.world_size = world_size
        self.groups = {}  # c10d name -> Group, in creation order
        self.entries = []
        self.rng = []  # meshsim extension: DTensor RNG calls
        self.skip_dirs = (_OWN_DIR,)

    def add_group(self, name, desc, ranks):
        if name not in self.groups:
            self.groups[name] = Group(name, desc, ranks, len(self.groups))
        return self.groups[name]

    def record(self, group, op, inputs, outputs, peer=None, extra=None):
        """One call on `group`: `op` as NCCL names it, tensors as lists of (sizes, dtype)."""
        if peer is None:
            group.collectives += 1
            profiling = f"nccl:{op}"
        else:
            if not group.batching or group.batch_calls == 0:
                group.p2p += 1
            group.batch_calls += 1
            me = group.group_rank(self.rank)
            profiling = f"nccl:send {me}->{peer}" if op == "send" else f"nccl:recv {me}<-{peer}"
        self._append(group, profiling, inputs, outputs, peer is not None, extra)

    def _append(self, group, profiling, inputs, outputs, is_p2p, extra):
        record_id = len(self.entries)
        entry = {
            "record_id": record_id,
            "pg_id": group.pg_id,
            "process_group": [group.name, group.desc],
            "collective_seq_id": group.collectives,
            "p2p_seq_id": group.p2p,
            "op_id": group.collectives + group.p2p,
            "profiling_name": profiling,
            "time_created_ns": EPOCH_NS + record_id * 1000,
            "input_sizes": [list(s) for s, _ in inputs],
            "input_dtypes": [d for _, d in inputs],
            "output_sizes": [list(s) for s, _ in outputs],
            "output_dtypes": [d for _, d in outputs],
            "state": "completed",
            "time_discovered_started_ns": 0,
            "time_discovered_completed_ns": 0,
            "retired": True,
            "timeout_ms": TIMEOUT_MS,
            "is_p2p": is_p2p,
            "thread_name": "meshsim_record",
            "thread_id": str(self.rank),
            "frames": python_frames(self.skip_dirs),
        }
        if extra:
            entry["meshsim"] = extra
        self.entries.append(entry)

    def record_rng(self, call):
        """A DTensor RNG call (meshsim's extension): kept in order, with the user's frames."""
        self.rng.append(dict(call, record_id=len(self.entries),
                             frames=python_frames(self.skip_dirs)[:16]))

    def start_batch(self, group):
        group.batching = True
        group.batch_calls = 0

    def end_batch(self, group):
        if group.batching and group.batch_calls > 0:
            self._append(group, "nccl:coalesced", [], [], True, None)
        group.batching = False
        group.batch_calls = 0

    def dump(self, header):
        """The rank's Flight Recorder dump, with meshsim's extensions under keys PyTorch ignores."""
        pg_config = {
            g.name: {"name": g.name, "desc": g.desc, "ranks": "[" + ", ".join(map(str, g.ranks)) + "]"}
            for g in self.groups.values()
        }
        pg_status = {
            str(g.pg_id): {
                "last_enqueued_collective": str(g.collectives or -1),
                "last_started_collective": str(g.collectives or -1),
                "last_completed_collective": str(g.collectives or -1),
            }
            for g in self.groups.values()
        }
        return {
            "version": SCHEMA_VERSION,
            "comm_lib_version": "",
            "pg_config": pg_config,
            "pg_status": pg_status,
            "nccl_comm_state": {},
            "entries": self.entries,
            "meshsim_record": dict(header, rank=self.rank,
                                   groups_created=[[g.name, g.desc, g.ranks]
                                                   for g in self.groups.values()],
                                   rng=self.rng),
        }

    def write(self, path, header):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.dump(header), f, indent=None, separators=(",", ":"))
            f.write("\n")
        os.replace(tmp, path)


_current = None


def current():
    return _current


def start(rank, world_size):
    global _current
    _current = RankTrace(rank, world_size)
    return _current
