"""Per-stage DTensor seeding on a [pp, tp] mesh, on the CPU. --outside seeds the first stage's
tp submesh from every rank, so the ranks of the other stages seed a submesh they are not in."""

import argparse

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor._random import manual_seed

p = argparse.ArgumentParser()
p.add_argument("--outside", action="store_true")
args = p.parse_args()

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("pp", "tp"))
stage = mesh.get_coordinate()[0]
tp_of_stage_0 = mesh["tp"] if stage == 0 else None
if args.outside:
    # Every rank seeds stage 0's tp submesh: stage 1's ranks are outside it.
    from torch.distributed.device_mesh import DeviceMesh

    tp_of_stage_0 = DeviceMesh("cpu", mesh.mesh[0].tolist(), mesh_dim_names=("tp",))
    manual_seed(1234, tp_of_stage_0)
else:
    manual_seed(1234 + stage, mesh["tp"])
dist.barrier()
dist.destroy_process_group()
