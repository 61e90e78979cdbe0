#!/usr/bin/env python3
"""Differential test: views (basic indexing, permute, .contiguous()) against PyTorch itself.

Random bases (1 to 5 dims) take a chain of one to three views: indices of integers (negative and
out of range ones too), slices (steps 1 to 3, bounds past the ends and 2^40 away, some steps below
1), None and an ellipsis, lone entries with a trailing comma, and permutations (some with a
repeated dim); the chains reach 0-dim views and dims of size 0. torch 2.15 gives each view's shape,
stride, storage offset, is_contiguous() and values, or the error it raises; then whether NCCL
would take the last view in a collective (contiguous in its suggested memory format), and what
an in-place all_reduce over two ranks holding the same values leaves in the base (the view's
places doubled). Each case becomes a meshsim scenario expecting exactly that. Skips (exit 77)
without PyTorch.

Usage: view_diff_test.py MESHSIM
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import failing_scenario_texts, require_torch  # noqa: E402

CASES = 300


def random_index(rng, ndim):
    """A Python index tuple and its text, with at most one ellipsis."""
    entries = []
    dims_left = ndim
    ellipsis = rng.random() < 0.25
    count = rng.randint(1, max(1, ndim + (1 if rng.random() < 0.1 else 0)))
    for _ in range(count):
        r = rng.random()
        if r < 0.15:
            entries.append(None)
        elif r < 0.45 and dims_left > 0:
            entries.append(rng.randint(-4, 4))
            dims_left -= 1
        else:
            far = rng.choice([-2**40, 2**40])  # bounds far past the ends clamp
            start = rng.choice([None, None, rng.randint(-5, 5), rng.randint(-5, 5), far])
            stop = rng.choice([None, None, rng.randint(-5, 5), rng.randint(-5, 5), far])
            step = rng.choice([None, None, 1, 2, 3] + ([0, -1] if rng.random() < 0.05 else []))
            entries.append(slice(start, stop, step))
            dims_left -= 1
    if ellipsis:
        entries.insert(rng.randint(0, len(entries)), Ellipsis)

    def spelled(e):
        if e is None:
            return "None"
        if e is Ellipsis:
            return "..."
        if isinstance(e, int):
            return str(e)
        parts = ["" if e.start is None else str(e.start), "" if e.stop is None else str(e.stop)]
        if e.step is not None:
            parts.append(str(e.step))
        return ":".join(parts)
    # A trailing comma makes a lone entry a tuple, which a 0-dim tensor answers differently.
    trailing = len(entries) == 1 and rng.random() < 0.2
    text = "[" + ", ".join(spelled(e) for e in entries) + ("," if trailing else "") + "]"
    return tuple(entries), text, trailing


def make_case(rng, number):
    import torch
    from torch._prims_common import suggest_memory_format
    # One case in four is a channels-last tensor: an NHWC (or NDHWC) storage seen as NCHW, which
    # NCCL takes although it is not row-major.
    channels_last = number % 4 == 0
    ndim = rng.choice([4, 5]) if channels_last else rng.randint(1, 5)
    shape = [rng.randint(1, 4) for _ in range(ndim)]
    base = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.int64).reshape(shape)
    case = {"shape": shape, "base": base.tolist(), "views": []}
    current = base
    for step in range(rng.randint(1, 3)):
        op = {}
        if channels_last and step == 0:
            op["permute"] = [0, ndim - 1] + list(range(1, ndim - 1))
            make = lambda t, dims=op["permute"]: t.permute(dims)
        elif rng.random() < 0.65:
            index, text, trailing = random_index(rng, current.dim())
            op["index"] = text
            # "[::2]" is t[::2], not t[(slice(None, None, 2),)]: a lone entry is no tuple.
            key = index[0] if len(index) == 1 and not trailing else index
            make = lambda t, key=key: t[key]
        else:
            dims = list(range(current.dim()))
            rng.shuffle(dims)
            dims = [d - current.dim() if rng.random() < 0.3 else d for d in dims]
            if dims and rng.random() < 0.05:
                dims[0] = dims[-1]
            op["permute"] = dims
            make = lambda t, dims=dims: t.permute(dims)
        if rng.random() < 0.15:
            op["contiguous"] = True
        try:
            view = make(current)
            if op.get("contiguous"):
                view = view.contiguous()
        except Exception as e:
            op["error"] = [type(e).__name__, str(e)]
            case["views"].append(op)
            return case
        op["layout"] = {"shape": list(view.shape), "stride": list(view.stride()),
                        "storage_offset": view.storage_offset(),
                        "is_contiguous": view.is_contiguous(), "dtype": "int64"}
        op["values"] = view.flatten().tolist()
        case["views"].append(op)
        current = view
    if current.is_contiguous(memory_format=suggest_memory_format(current)):
        current.mul_(2)  # what the in-place all_reduce of two equal ranks writes
        case["after"] = base.flatten().tolist()
        case["dense_not_row_major"] = not current.is_contiguous()
    return case


def scenario(index, case):
    lines = ["[scenario]", f'name = "view-{index}"', "world_size = 2",
             "[[step]]", f'tensor = {{ name = "v0", value = {json.dumps(case["base"])} }}']
    for k, op in enumerate(case["views"], start=1):
        args = [f'name = "v{k}"', f'of = "v{k - 1}"']
        if "index" in op:
            args.append(f'index = "{op["index"]}"')
        if "permute" in op:
            args.append(f"permute = {op['permute']}")
        if op.get("contiguous"):
            args.append("contiguous = true")
        lines += ["[[step]]", "view = { " + ", ".join(args) + " }"]
        if "error" in op:
            kind, text = op["error"]
            lines.append(f"raises = {{ type = {json.dumps(kind)}, contains = {json.dumps(text)} }}")
            return "\n".join(lines) + "\n"
        lines += ["[[expect]]", f'layout = "v{k}"',
                  "equals = " + json.dumps(op["layout"]).replace('": ', ' = ').replace('"', '')
                  .replace("dtype = int64", 'dtype = "int64"'),
                  "[[expect]]", f'tensor = "v{k}"', f"equals = {json.dumps(op['values'])}"]
    last = f"v{len(case['views'])}"
    lines += ["[[step]]", f'all_reduce = {{ tensor = "{last}" }}']
    if "after" not in case:
        lines.append('raises = { type = "ValueError", contains = "Tensors must be contiguous" }')
    else:
        lines += ["[[expect]]", 'tensor = "v0"', f"equals = {json.dumps(case['after'])}"]
    return "\n".join(lines) + "\n"


def main():
    meshsim = sys.argv[1]
    require_torch("view_diff", lambda: __import__("torch._prims_common"))
    import torch
    rng = random.Random(2026)
    cases = [make_case(rng, i) for i in range(CASES)]
    failed = failing_scenario_texts(meshsim, [scenario(i, c) for i, c in enumerate(cases)])
    views = sum(len(c["views"]) for c in cases)
    errors = sum("error" in c["views"][-1] for c in cases)
    refused = sum("error" not in c["views"][-1] and "after" not in c for c in cases)
    channels_last = sum(c.get("dense_not_row_major", False) for c in cases)
    made = [v["layout"] for c in cases for v in c["views"] if "layout" in v]
    scalars = sum(len(v["shape"]) == 0 for v in made)
    empty = sum(0 in v["shape"] for v in made)
    print(f"view_diff: torch {torch.__version__}: {len(cases)} cases, {views} views ({errors} "
          f"raising, {scalars} 0-dim, {empty} empty; {refused} refused by NCCL's contiguity "
          f"check, {channels_last} taken by it although not row-major), {len(failed)} mismatches")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
