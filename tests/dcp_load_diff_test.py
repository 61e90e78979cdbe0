#!/usr/bin/env python3
"""Differential test: checkpoints torch.distributed.checkpoint writes, loaded by meshsim onto
other world sizes, meshes and placements.

CASES random state dicts (DTensors of random shapes, dtypes and Shard/Replicate placements over
random 1-d and 2-d meshes of 4 ranks, and plain tensors; every value its flat index) are saved by
torch 2.15's dcp.save on 4 Gloo processes. For each, LAYOUTS_PER_CASE scenarios load every tensor
into a world of 1 to 12 ranks with its own mesh and placements (`load = { checkpoint_dir }`), and
expect each rank's shard to equal the saved tensor cut that way (`fill = "index"`, what torch
saved and what its own load would copy in). A scenario that fails is printed with meshsim's
report. Skips (exit 77) without PyTorch.

Usage: dcp_load_diff_test.py MESHSIM
"""
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_python import failing_scenarios, require_torch  # noqa: E402

CASES = 8
LAYOUTS_PER_CASE = 3
# Index values stay exact in every dtype below for fewer than 256 elements.
DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"]


def random_state(rng, mesh_shape):
    state = {}
    for i in range(rng.randint(1, 5)):
        ndim = rng.randint(1, 3)
        while True:
            shape = tuple(rng.choice([1, 2, 3, 4, 5, 6, 8]) for _ in range(ndim))
            numel = 1
            for d in shape:
                numel *= d
            if numel < 256:
                break
        placements = None
        if rng.random() < 0.75:
            placements = tuple(f"Shard({rng.randrange(ndim)})" if rng.random() < 0.6
                               else "Replicate()" for _ in mesh_shape)
        state[f"t{i}"] = (rng.choice(DTYPES), shape, placements)
    return state


def scenario(name, state, world, mesh, placements_of):
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {world}", 'device = "cuda"',
             "[[mesh]]", 'name = "m"', f"shape = [{', '.join(map(str, mesh))}]"]
    names = []
    for key, (dtype, shape, _) in state.items():
        p = ", ".join(f'"{x}"' for x in placements_of[key])
        dims = ", ".join(map(str, shape))
        lines += ["[[step]]",
                  f'dtensor = {{ name = "{key}", mesh = "m", shape = [{dims}], placements = [{p}], '
                  f'dtype = "{dtype}" }}',
                  "[[step]]",
                  f'dtensor = {{ name = "want.{key}", mesh = "m", shape = [{dims}], '
                  f'placements = [{p}], dtype = "{dtype}", fill = "index" }}']
        names.append(f'"{key}"')
    lines += ["[[step]]", f'load = {{ checkpoint_dir = "ckpt", tensors = [{", ".join(names)}] }}']
    for key in state:
        lines += ["[[expect]]", f'same = ["{key}", "want.{key}"]', "equals = true"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("dcp_load_diff", lambda: __import__("torch.distributed.checkpoint"))
    import dcp_writer
    rng = random.Random(20261204)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints, states = [], []
        for case in range(CASES):
            mesh = rng.choice([(4,), (2, 2), (1, 4), (4, 1)])
            state = random_state(rng, mesh)
            checkpoints.append((os.path.join(tmp, f"case{case}", "ckpt"), mesh, state))
            states.append(state)
        dcp_writer.write(checkpoints, fill="index")
        paths, loads = [], 0
        for case, state in enumerate(states):
            for layout in range(LAYOUTS_PER_CASE):
                mesh = rng.choice([(1,), (2,), (3,), (6,), (8,), (2, 3), (3, 2), (2, 4), (4, 3)])
                world = 1
                for m in mesh:
                    world *= m
                placements_of = {}
                for key, (_, shape, _) in state.items():
                    placements_of[key] = [f"Shard({rng.randrange(len(shape))})"
                                          if rng.random() < 0.6 else "Replicate()" for _ in mesh]
                path = os.path.join(tmp, f"case{case}", f"load{layout}.toml")
                with open(path, "w") as f:
                    f.write(scenario(f"dcp-load-{case}-{layout}", state, world, mesh,
                                     placements_of))
                paths.append(path)
                loads += len(state)
        failed = failing_scenarios(meshsim, paths)
    print(f"dcp_load_diff: {CASES} checkpoints torch wrote, {len(paths)} scenarios loading "
          f"{loads} tensors onto other meshes; {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
