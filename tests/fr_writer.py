"""Writes Flight Recorder dumps with torch.distributed itself, on 4 Gloo processes, for the tests
that read real dumps. Each case is a small job; after its calls every rank dumps its recorder as
PyTorch 2.15 does (the pickle of _dump_fr_trace and the JSON of _dump_fr_trace_json, stack
traces included), then leaves at once, so ranks that wait on a collective another rank skipped
are dumped as a hung job's are.

Cases:
- ok: every rank makes the same calls (all_reduce on WORLD, all_gather_into_tensor on a new
  group of all ranks, reduce_scatter_tensor and broadcast on two 2-rank groups);
- skipped: rank 3 skips the second all_reduce (the others enqueue it and wait);
- mismatch: rank 2's all_reduce has 5 elements where the others have 4;
- wrapped: a ring buffer of 4 entries over 7 calls (the dump starts at record 3);
- mesh_skipped: a 2x2 mesh's row and column groups (as DeviceMesh creates them, columns
  first) and a training loop of 3 steps (all_reduce over the row, all_gather_into_tensor over
  the column, all_reduce over WORLD); rank 3 skips the column all-gather of the last step.

Run as a program: fr_writer.py DIR [CASE...] (tests/io/data/fr was made so, by torch 2.15.0).
"""
import os
import sys
import tempfile
import time

WORLD = 4
CASES = ["ok", "skipped", "mismatch", "wrapped"]


def _calls(case, rank, torch, dist):
    works = []
    t = torch.ones(4)
    if case == "wrapped":
        for _ in range(7):
            dist.all_reduce(t)
        return works
    dist.all_reduce(t)
    if case == "ok":
        everyone = dist.new_group(list(range(WORLD)))
        dist.all_gather_into_tensor(torch.zeros(4 * WORLD), t, group=everyone)
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        mine = pairs[rank // 2]
        dist.reduce_scatter_tensor(torch.zeros(2), t, group=mine)
        dist.broadcast(t, src=2 * (rank // 2), group=mine)
    elif case == "skipped":
        if rank != 3:
            works.append(dist.all_reduce(t, async_op=True))
    elif case == "mismatch":
        works.append(dist.all_reduce(torch.ones(5 if rank == 2 else 4), async_op=True))
    elif case == "mesh_skipped":
        columns = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        rows = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        row, column = rows[rank // 2], columns[rank % 2]
        for step in range(3):
            dist.all_reduce(torch.ones(8), group=row)
            # rank 1 waits for rank 3 there at the last step: it does not block on it
            waits = rank == 1 and step == 2
            if not (rank == 3 and step == 2):
                works.append(dist.all_gather_into_tensor(torch.zeros(8), torch.ones(4),
                                                         group=column, async_op=waits))
            dist.all_reduce(torch.ones(2))
    return works


def _rank(rank, init_file, out, case):
    os.environ["TORCH_FR_BUFFER_SIZE"] = "4" if case == "wrapped" else "64"
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD)
    _calls(case, rank, torch, dist)
    with open(os.path.join(out, f"rank{rank}.pkl"), "wb") as f:
        f.write(_dump_fr_trace(True, True, False))
    text = _dump_fr_trace_json(True, False)
    with open(os.path.join(out, f"rank{rank}.json"), "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    # Every rank stays until all have dumped: a rank that left early would fail the collectives
    # the others wait in, and their later encoding would record them finished.
    open(os.path.join(os.path.dirname(init_file), f"dumped{rank}"), "w").close()
    while not all(os.path.exists(os.path.join(os.path.dirname(init_file), f"dumped{r}"))
                  for r in range(WORLD)):
        time.sleep(0.05)
    sys.stdout.flush()
    os._exit(0)  # a hung rank never returns from its collective: leave without tearing down


def write(directory, cases=CASES):
    """Writes directory/<case>/rank<r>.{pkl,json} for each case."""
    import torch.multiprocessing as mp
    for case in cases:
        out = os.path.join(directory, case)
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(_rank, args=(os.path.join(tmp, "init"), out, case), nprocs=WORLD, join=True)


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2:] or CASES)
