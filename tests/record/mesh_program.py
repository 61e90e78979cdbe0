"""A small DeviceMesh program on the CPU: a 2 x (world/2) mesh, an all_reduce on each dim, an
all_gather_into_tensor, all_gather_object and a barrier. Faults for the recorder's tests:
--skip-rank R skips the dp all_reduce on rank R; --raise-rank R raises before it; --swap-rank R
creates two process groups in the other order on rank R; --spin-rank R loops for ever on rank R;
--exit-rank R leaves through os._exit(0) and --crash-rank R dies of SIGSEGV, both before the dp
all_reduce."""

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

p = argparse.ArgumentParser()
p.add_argument("--skip-rank", type=int, default=-1)
p.add_argument("--raise-rank", type=int, default=-1)
p.add_argument("--swap-rank", type=int, default=-1)
p.add_argument("--spin-rank", type=int, default=-1)
p.add_argument("--exit-rank", type=int, default=-1)
p.add_argument("--crash-rank", type=int, default=-1)
args = p.parse_args()

dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
evens, odds = list(range(0, world, 2)), list(range(1, world, 2))
if rank == args.swap_rank:
    odd_group = dist.new_group(odds)
    even_group = dist.new_group(evens)
else:
    even_group = dist.new_group(evens)
    odd_group = dist.new_group(odds)
t = torch.ones(4)
dist.all_reduce(t, group=mesh.get_group("tp"))
if rank == args.raise_rank:
    raise ValueError("a planted failure")
while rank == args.spin_rank:
    time.sleep(0.01)
if rank == args.exit_rank:
    os._exit(0)
if rank == args.crash_rank:
    os.kill(os.getpid(), signal.SIGSEGV)
if rank != args.skip_rank:
    dist.all_reduce(t, group=mesh.get_group("dp"))
out = torch.empty(4 * 2)
dist.all_gather_into_tensor(out, t, group=mesh.get_group("dp"))
dist.all_reduce(t, group=even_group if rank % 2 == 0 else odd_group)
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank})
dist.barrier()
dist.destroy_process_group()
