#!/usr/bin/env python3
"""Differential test: checkpoints meshsim writes in DCP's layout (`save = { format = "dcp" }`),
read by torch 2.15 itself.

CASES random state dicts (DTensors of random shapes, dtypes and Shard/Replicate placements over
random 1-d and 2-d meshes of 1 to 12 ranks, every value its flat index) are saved by meshsim with
--keep-checkpoints; the scenario also loads each tensor back onto another layout and checks it.
Then torch reads every checkpoint: FileSystemReader.read_metadata() must list, for each name, the
global shape, the dtype and exactly the chunks torch's own _compute_local_shape_and_global_offset
gives the ranks of that mesh (replicas once), and dcp.load (no process group: every tensor whole,
each item read back with torch.load(weights_only=True)) must give the saved values. Skips
(exit 77) without PyTorch.

Usage: dcp_save_diff_test.py MESHSIM
"""
import itertools
import os
import random
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dcp_load_diff_test import random_state  # noqa: E402
from torch_python import require_torch  # noqa: E402

CASES = 24
MESHES = [(1,), (2,), (3,), (4,), (6,), (2, 2), (2, 3), (3, 2), (4, 3), (1, 4)]


def layout(rng, state, mesh):
    return {key: [f"Shard({rng.randrange(len(shape))})" if rng.random() < 0.6 else "Replicate()"
                  for _ in mesh] for key, (_, shape, _) in state.items()}


def scenario(name, state, mesh, saved_as, reload_as):
    world = 1
    for m in mesh:
        world *= m
    lines = ["[scenario]", f'name = "{name}"', f"world_size = {world}", 'device = "cuda"',
             "[[mesh]]", 'name = "m"', f"shape = [{', '.join(map(str, mesh))}]"]

    def dtensor(name, key, placements):
        dtype, shape, _ = state[key]
        p = ", ".join(f'"{x}"' for x in placements)
        return ["[[step]]", f'dtensor = {{ name = "{name}", mesh = "m", shape = '
                f'[{", ".join(map(str, shape))}], placements = [{p}], dtype = "{dtype}", '
                'fill = "index" }']
    for key in state:
        lines += dtensor(key, key, saved_as[key])
    names = ", ".join(f'"{k}"' for k in state)
    lines += ["[[step]]", f'save = {{ checkpoint = "c", tensors = [{names}], format = "dcp" }}']
    for key in state:
        p = ", ".join(f'"{x}"' for x in reload_as[key])
        lines += ["[[step]]", f'load = {{ checkpoint = "c", tensor = "back.{key}", from = "{key}", '
                  f'mesh = "m", placements = [{p}] }}']
        lines += dtensor(f"want.{key}", key, reload_as[key])
    for key in state:
        lines += ["[[expect]]", f'same = ["back.{key}", "want.{key}"]', "equals = true"]
    return "\n".join(lines) + "\n"


def torch_placements(texts):
    from torch.distributed.tensor import Replicate, Shard
    return [Shard(int(t[6:-1])) if t.startswith("Shard") else Replicate() for t in texts]


def check(path, state, mesh, saved_as):
    """Problems torch finds reading the checkpoint at `path`."""
    import torch
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
    problems = []
    metadata = FileSystemReader(path).read_metadata()
    if set(metadata.state_dict_metadata) != set(state):
        return [f"names {sorted(metadata.state_dict_metadata)}, saved {sorted(state)}"]
    for key, (dtype, shape, _) in state.items():
        entry = metadata.state_dict_metadata[key]
        if tuple(entry.size) != shape or entry.properties.dtype != getattr(torch, dtype):
            problems.append(f"{key}: {entry.size} {entry.properties.dtype}, saved {shape} {dtype}")
        want = set()
        for coord in itertools.product(*[range(m) for m in mesh]):
            size, offset = _compute_local_shape_and_global_offset(
                shape, mesh, list(coord), torch_placements(saved_as[key]))
            want.add((tuple(offset), tuple(size)))
        got = [(tuple(c.offsets), tuple(c.sizes)) for c in entry.chunks]
        if sorted(got) != sorted(want):
            problems.append(f"{key}: chunks {sorted(got)}, torch's layout {sorted(want)}")
    return problems + load_problems(path, state)


def load_problems(path, state):
    """What torch's dcp.load (no process group: every tensor whole) of the checkpoint at `path`
    gets wrong: each name of `state` must hold its flat index."""
    import torch
    import torch.distributed.checkpoint as dcp
    problems = []
    loaded = {key: torch.full(shape, 7, dtype=getattr(torch, dtype))
              for key, (dtype, shape, _) in state.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled ... single process"
        dcp.load(loaded, checkpoint_id=path, no_dist=True)
    for key, (dtype, shape, _) in state.items():
        numel = 1
        for d in shape:
            numel *= d
        want = torch.arange(numel).reshape(shape).to(getattr(torch, dtype))
        if not torch.equal(loaded[key], want):
            problems.append(f"{key}: torch loaded {loaded[key].flatten().tolist()}")
    return problems


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("dcp_save_diff", lambda: __import__("torch.distributed.checkpoint"))
    rng = random.Random(20261205)
    failed = tensors = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(CASES):
            mesh = rng.choice(MESHES)
            state = random_state(rng, mesh)
            saved_as, reload_as = layout(rng, state, mesh), layout(rng, state, mesh)
            name = f"dcp-save-{case}"
            text = scenario(name, state, mesh, saved_as, reload_as)
            path = os.path.join(tmp, f"{name}.toml")
            with open(path, "w") as f:
                f.write(text)
            keep = os.path.join(tmp, "keep")
            r = subprocess.run([meshsim, "run", "--no-time", "--keep-checkpoints", keep, path],
                               capture_output=True, text=True, timeout=120)
            problems = [] if r.returncode == 0 else [f"meshsim failed:\n{r.stdout}{r.stderr}"]
            if not problems:
                problems = check(os.path.join(keep, name, "c"), state, mesh, saved_as)
            tensors += len(state)
            if problems:
                failed += 1
                print(f"case {case} (mesh {mesh}):\n{text}" + "\n".join(problems))
    print(f"dcp_save_diff: {CASES} checkpoints meshsim wrote in DCP's layout ({tensors} tensors) "
          f"read by torch; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
