#!/usr/bin/env python3
"""Differential test: checkpoints saved over a process group (dcp.save(..., process_group=g)), as
pipeline stages save their own, against torch 2.15 doing the same on 8 Gloo processes.

Each of CASES random jobs has a world of 8 ranks split into pipeline stages (meshes (2, 4),
(4, 2), (2, 2, 2)); every stage holds its own random state dict (DTensors of random shapes, dtypes
and Shard/Replicate placements over the stage's mesh, plain tensors, and one name every stage
holds with its own shape) and saves it over its stage's group into a directory of its own. torch
saves each stage with dcp.save over the stage's group (its flattened mesh); meshsim runs the same
job as a scenario (`save = { checkpoint = "step1-pp{coord(world, pp)}", group, format = "dcp" }`)
with --keep-checkpoints. Then, per stage:
- the files are the same, and torch's read_metadata of both directories gives the same names,
  shapes, dtypes, chunks and the same file for every chunk (the group's rank 0 coordinates, files
  are numbered by group rank, a replicated chunk goes to the group rank DCP's planner picks);
- torch's dcp.load (no process group) of meshsim's directory gives the saved values;
- the same scenario loads torch's directory stage by stage over the stage's group
  (`checkpoint_dir = "torch/step1-pp{coord(world, pp)}"`) onto other placements, and expects the
  saved values.
Skips (exit 77) without PyTorch.

Usage: dcp_group_save_diff_test.py MESHSIM
"""
import os
import random
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dcp_load_diff_test import random_state  # noqa: E402
from dcp_save_diff_test import load_problems  # noqa: E402
from torch_python import require_torch  # noqa: E402

CASES = 10
WORLD = 8
MESHES = [((2, 4), ("pp", "dp")), ((4, 2), ("pp", "dp")), ((2, 2, 2), ("pp", "dp", "tp"))]


def stage_states(rng, shape):
    """One state dict per stage: name -> (dtype, shape, placements or None)."""
    out = []
    for s in range(shape[0]):
        state = {f"s{s}.{k}": v for k, v in random_state(rng, shape[1:]).items()}
        state["shared.w"] = ("float32", (4 + s, 3),
                             tuple(rng.choice(["Shard(0)", "Replicate()"]) for _ in shape[1:]))
        out.append(state)
    return out


def group_name(shape):
    return "stage" if len(shape) == 2 else "stage_ranks"


def literal(dtype, shape):
    """The nested list of a plain tensor's values (its flat index), as a scenario writes it."""
    numel = 1
    for d in shape:
        numel *= d
    flat = list(range(numel))
    for d in reversed(shape[1:]):
        flat = [flat[i:i + d] for i in range(0, len(flat), d)]
    return str(flat) if shape else str(flat[0])


def quoted(items):
    return ", ".join(f'"{x}"' for x in items)


def scenario(name, shape, dims, states, reload_as):
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {WORLD}", 'device = "cuda"',
             "[[mesh]]", 'name = "world"', f"shape = [{', '.join(map(str, shape))}]",
             f"dims = [{quoted(dims)}]",
             "[[mesh]]", 'name = "stage"', 'from = "world"', f"slice = [{quoted(dims[1:])}]"]
    if len(shape) > 2:
        lines += ["[[mesh]]", 'name = "stage_ranks"', 'from = "world"',
                  f"slice = [{quoted(dims[1:])}]", 'flatten = "stage_ranks"']
    group = group_name(shape)

    def dtensor(name, dtype, tshape, placements):
        return (f'dtensor = {{ name = "{name}", mesh = "stage", shape = [{", ".join(map(str, tshape))}], '
                f'placements = [{quoted(placements)}], dtype = "{dtype}", fill = "index" }}')
    names = set()
    for s, state in enumerate(states):
        when = f'when = "coord(world, pp) == {s}"'
        for key, (dtype, tshape, placements) in state.items():
            names.add(key)
            if placements is None:
                step = f'tensor = {{ name = "{key}", value = {literal(dtype, tshape)}, dtype = "{dtype}" }}'
            else:
                step = dtensor(key, dtype, tshape, placements)
            lines += ["[[step]]", when, step]
    lines += ["[[step]]",
              f'save = {{ checkpoint = "step1-pp{{coord(world, pp)}}", tensors = [{quoted(sorted(names))}], '
              f'group = "{group}", format = "dcp" }}']
    for s, state in enumerate(states):
        when = f'when = "coord(world, pp) == {s}"'
        for key, (dtype, tshape, _) in state.items():
            lines += ["[[step]]", when,
                      f'load = {{ checkpoint_dir = "torch/step1-pp{{coord(world, pp)}}", '
                      f'tensor = "back.{key}", from = "{key}", mesh = "stage", '
                      f'placements = [{quoted(reload_as[s][key])}], group = "{group}" }}',
                      "[[step]]", when, dtensor(f"want.{key}", dtype, tshape, reload_as[s][key]),
                      "[[expect]]", when, f'same = ["back.{key}", "want.{key}"]', "equals = true"]
    return "\n".join(lines) + "\n"


def _torch_rank(rank, init_file, jobs):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    sys.path.insert(0, HERE)
    import dcp_writer
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    for root, shape, dims, states in jobs:
        world = init_device_mesh("cpu", shape, mesh_dim_names=dims)
        stage = world[dims[1:]]
        group = stage.get_group() if len(dims) == 2 else stage._flatten("stage_ranks").get_group()
        s = world.get_coordinate()[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sd = dcp_writer.state_dict(torch, stage, states[s], "index")
        del sd[dcp_writer.EXTRA_OBJECT[0]]
        dcp.save(sd, checkpoint_id=os.path.join(root, "torch", f"step1-pp{s}"), process_group=group)
    dist.destroy_process_group()


def torch_saves(jobs):
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_torch_rank, args=(os.path.join(tmp, "init"), jobs), nprocs=WORLD, join=True)


def layout(metadata):
    """name -> (size, dtype, {(offsets, sizes): file}) from a DCP checkpoint's metadata."""
    files = {(index.fqn, tuple(index.offset)): info.relative_path
             for index, info in metadata.storage_data.items()}
    out = {}
    for name, entry in metadata.state_dict_metadata.items():
        chunks = {(tuple(c.offsets), tuple(c.sizes)): files.get((name, tuple(c.offsets)))
                  for c in entry.chunks}
        out[name] = (tuple(entry.size), entry.properties.dtype, chunks)
    return out


def compare(ours, theirs, state):
    """Problems of meshsim's stage checkpoint `ours` against torch's `theirs`."""
    from torch.distributed.checkpoint import FileSystemReader
    problems = []
    our_files = sorted(os.listdir(ours))
    their_files = sorted(os.listdir(theirs))
    if our_files != their_files:
        problems.append(f"files {our_files}, torch wrote {their_files}")
    a = layout(FileSystemReader(ours).read_metadata())
    b = layout(FileSystemReader(theirs).read_metadata())
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            problems.append(f"{name}: meshsim {a.get(name)}, torch {b.get(name)}")
    return problems + load_problems(ours, state)


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("dcp_group_save_diff", lambda: __import__("torch.distributed.checkpoint"))
    rng = random.Random(20261204)
    failed = tensors = 0
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for case in range(CASES):
            shape, dims = rng.choice(MESHES)
            jobs.append((os.path.join(tmp, f"case{case}"), shape, dims, stage_states(rng, shape)))
        torch_saves(jobs)
        for case, (root, shape, dims, states) in enumerate(jobs):
            reload_as = [{key: [f"Shard({rng.randrange(len(v[1]))})" if v[1] and rng.random() < 0.6
                                else "Replicate()" for _ in shape[1:]]
                          for key, v in state.items()} for state in states]
            name = f"dcp-group-save-{case}"
            text = scenario(name, shape, dims, states, reload_as)
            path = os.path.join(root, f"{name}.toml")
            with open(path, "w") as f:
                f.write(text)
            keep = os.path.join(root, "keep")
            r = subprocess.run([meshsim, "run", "--no-time", "--keep-checkpoints", keep, path],
                               capture_output=True, text=True, timeout=300)
            problems = [] if r.returncode == 0 else [f"meshsim failed:\n{r.stdout}{r.stderr}"]
            for s, state in enumerate(states):
                tensors += len(state)
                if not problems:
                    problems += [f"stage {s}: {p}" for p in
                                 compare(os.path.join(keep, name, f"step1-pp{s}"),
                                         os.path.join(root, "torch", f"step1-pp{s}"), state)]
            if problems:
                failed += 1
                print(f"case {case} (mesh {shape}):\n{text}" + "\n".join(problems))
    print(f"dcp_group_save_diff: {CASES} jobs of {WORLD} ranks whose stages each saved over their "
          f"own group ({tensors} tensors), against torch's dcp.save on Gloo; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
