"""DTensor parameter initialisation on 4 CPU ranks, seeded three ways.

--case fsdp-tp: PyTorch's FSDP + TP seed test (scenarios/rng_fsdp_tp_meta_init.toml): a meta
    Linear(8, 16), colwise over tp, fully_shard over dp on a (2, 2) mesh, to_empty,
    reset_parameters, seeded 7 on the whole mesh.
--case stages: two pipeline stages of a (pp, tp) mesh, each initialising its own layer
    (layers.0, layers.1) from the model's init_weights; --same-seed seeds both stages alike.
--case replicas: one parameter replicated over dp and sharded over tp on a (dp, tp) mesh;
    --seed-by-dp seeds each dp copy with its own seed, so replicas differ.
--case dropout: F.dropout(p=0.25) in training on an activation sharded over tp, with no seed: the
    first random op makes DTensor's tracker (and its WORLD broadcast).
--case factory: torch.distributed.tensor.rand and randn on the (2, 2) mesh, seeded 1234."""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor._random import manual_seed

p = argparse.ArgumentParser()
p.add_argument("--case", choices=("fsdp-tp", "stages", "replicas", "dropout", "factory"), required=True)
p.add_argument("--same-seed", action="store_true")
p.add_argument("--seed-by-dp", action="store_true")
args = p.parse_args()

dist.init_process_group("nccl")


class Stages(torch.nn.Module):
    """A pipeline stage's part of the model: the layer it owns keeps its name in the whole."""

    def __init__(self, stage):
        super().__init__()
        self.layers = torch.nn.ModuleDict({str(stage): torch.nn.Linear(8, 16)})

    def init_weights(self):
        for layer in self.layers.values():
            layer.reset_parameters()


if args.case == "fsdp-tp":
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    manual_seed(7, mesh)
    with torch.device("meta"):
        fc = torch.nn.Linear(8, 16)
    parallelize_module(fc, mesh["tp"], ColwiseParallel())
    fully_shard(fc, mesh=mesh["dp"])
    fc.to_empty(device="cpu")
    fc.reset_parameters()
elif args.case == "stages":
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "tp"))
    stage = mesh.get_coordinate()[0]
    model = Stages(stage)
    parallelize_module(model, mesh["tp"], {f"layers.{stage}": ColwiseParallel()})
    manual_seed(1234 if args.same_seed else 1234 + stage, mesh["tp"])
    model.init_weights()
elif args.case == "factory":
    import torch.distributed.tensor as dtensor

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    manual_seed(1234, mesh)
    a = dtensor.rand(8, 4, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    b = dtensor.randn(8, 4, device_mesh=mesh, placements=[Replicate(), Shard(0)])
elif args.case == "dropout":
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = distribute_tensor(torch.ones(8, 16), mesh, [Replicate(), Shard(0)])
    y = torch.nn.functional.dropout(x, p=0.25, training=True)
else:
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh.get_coordinate()[0]
    manual_seed(1234 + dp_rank if args.seed_by_dp else 1234, mesh)
    weight = distribute_tensor(torch.empty(16, 8), mesh, [Replicate(), Shard(0)])
    torch.nn.init.uniform_(weight)
dist.barrier()
dist.destroy_process_group()
