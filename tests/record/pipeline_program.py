"""A pipeline-parallel training step with torch.distributed.pipelining, on the CPU: one linear
layer per stage, a schedule chosen by --schedule. Faults for the recorder's tests: --skew-rank R
gives rank R's stages twice the n_microbatches; --skip-rank R makes rank R skip the final
all_reduce of the loss."""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B)

p = argparse.ArgumentParser()
p.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "interleaved"])
p.add_argument("--microbatches", type=int, default=4)
p.add_argument("--skew-rank", type=int, default=-1)
p.add_argument("--skip-rank", type=int, default=-1)
args = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
width, batch = 8, 8
stages_per_rank = 2 if args.schedule == "interleaved" else 1
n_stages = world * stages_per_rank
microbatches = args.microbatches * (2 if rank == args.skew_rank else 1)

stages = []
for local in range(stages_per_rank):
    index = rank + local * world
    layer = torch.nn.Linear(width, width)
    # Shapes given, as a real job with fixed shapes gives them: no shape exchange between stages.
    example = torch.empty(batch // microbatches, width)
    stages.append(PipelineStage(layer, index, n_stages, torch.device("cpu"), input_args=example,
                                output_args=example, output_grads=example,
                                input_grads=example))

loss_fn = torch.nn.MSELoss()
if args.schedule == "gpipe":
    schedule = ScheduleGPipe(stages[0], microbatches, loss_fn=loss_fn)
elif args.schedule == "1f1b":
    schedule = Schedule1F1B(stages[0], microbatches, loss_fn=loss_fn)
else:
    schedule = ScheduleInterleaved1F1B(stages, microbatches, loss_fn=loss_fn)

x = torch.randn(batch, width)
target = torch.randn(batch, width)
losses = []
if rank == 0:
    schedule.step(x)
elif rank == world - 1:
    schedule.step(target=target, losses=losses)
else:
    schedule.step()

total = torch.zeros(1)
if rank != args.skip_rank:
    dist.all_reduce(total)
dist.destroy_process_group()
