"""FSDP2 x TP on a 2-D DeviceMesh, on the CPU: a two-layer MLP built on the meta device, its
layers made colwise/rowwise parallel over "tp" and fully_shard-ed over "dp", materialized with
to_empty + reset_parameters, then one training step. Faults for the recorder's tests:
--swap-rank R creates the mesh's process groups in the other order on rank R (its dims named
the other way round)."""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

p = argparse.ArgumentParser()
p.add_argument("--tp", type=int, default=2)
p.add_argument("--swap-rank", type=int, default=-1)
p.add_argument("--width", type=int, default=16)
args = p.parse_args()

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dp = world // args.tp
if rank == args.swap_rank:
    # The same mesh, its dims' groups created tp first: every group gets another name here.
    other = init_device_mesh("cpu", (args.tp, dp), mesh_dim_names=("tp", "dp"))
mesh = init_device_mesh("cpu", (dp, args.tp), mesh_dim_names=("dp", "tp"))


class MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


with torch.device("meta"):
    model = MLP(args.width)
parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
fully_shard(model, mesh=mesh["dp"])
model.to_empty(device="cpu")
for module in (model.up, model.down):
    module.reset_parameters()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, args.width)
loss = model(x).sum()
loss.backward()
optimizer.step()
dist.barrier()
dist.destroy_process_group()
