#!/usr/bin/env python3
"""Part of scripts/gpu-check: `meshsim rng predict` against torch.rand / torch.randn / uniform_ and
F.dropout (of ones) on this machine's GPU, over a matrix of sizes (crossing one wave), dtypes, seeds and offsets, for the
GPU profile torch reports. Prints one summary line per case; exit 0 when uniform values are equal
bit for bit and normals are within docs/rng.md's tolerance, 1 otherwise, 77 when torch or CUDA is absent.
"""
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"skipped: python3 cannot import torch and numpy ({e})")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: torch sees no CUDA device")
    sys.exit(77)

MESHSIM = sys.argv[1]
props = torch.cuda.get_device_properties(0)
SMS = props.multi_processor_count
THREADS = props.max_threads_per_multi_processor
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
# Normal tolerance (docs/rng.md 2.6: the GPU's __sincosf): as tests/gpu/kernel uses, times std.
NORMAL_TOL = {"float64": 1e-12}


def wave(dtype):
    unroll = 2 if dtype == "float64" else 4
    return SMS * (THREADS // 256) * 256 * unroll


def predicted(seed, offset, numel, dtype, op, a, b):
    cmd = [MESHSIM, "rng", "predict", "--seed", str(seed), "--offset", str(offset), "--numel",
           str(numel), "--dtype", dtype, "--sms", str(SMS), "--max-threads-per-sm", str(THREADS),
           "--op", op]
    cmd += ["--p", repr(a)] if op == "dropout" else ["--from", repr(a), "--to", repr(b)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split("\n")
    assert out[-2].startswith("offset "), out[-2:]
    values = np.array(out[:-2], dtype=np.float64)  # printed with round-trip precision
    return torch.from_numpy(values).to(DTYPES[dtype]), int(out[-2].split()[1])


def on_device(seed, offset, numel, dtype, op, a, b):
    if op == "dropout":
        # F.dropout takes no generator: the default one, seeded and moved as the others.
        gen = torch.cuda.default_generators[0]
        gen.manual_seed(seed)
        gen.set_offset(offset)
        ones = torch.ones(numel, dtype=DTYPES[dtype], device="cuda")
        return torch.nn.functional.dropout(ones, a).cpu(), gen.get_offset()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    gen.set_offset(offset)
    t = torch.empty(numel, dtype=DTYPES[dtype], device="cuda")
    if op == "uniform":
        t.uniform_(a, b, generator=gen)
    else:
        t.normal_(a, b, generator=gen)
    return t.cpu(), gen.get_offset()


def main():
    print(f"GPU: {props.name} ({SMS} SMs, {THREADS} threads/SM), torch {torch.__version__}")
    failures = 0
    cases = 0
    worst_normal = {}
    seeds = [0, 42, 2**63 + 5]
    offsets = [0, 4, 4000]
    for dtype in DTYPES:
        w = wave(dtype)
        sizes = [1, 5, 1000, w - 1, w, w + 1, w * 5 // 2]
        for k, numel in enumerate(sizes):
            seed = seeds[k % len(seeds)]
            offset = offsets[(k // len(seeds) + k) % len(offsets)]
            for op, a, b in [("uniform", 0.0, 1.0), ("uniform", -2.0, 3.0), ("normal", 0.0, 1.0),
                             ("dropout", 0.2, 0.0)]:
                cases += 1
                want, want_offset = predicted(seed, offset, numel, dtype, op, a, b)
                got, got_offset = on_device(seed, offset, numel, dtype, op, a, b)
                if op in ("uniform", "dropout"):
                    bad = int((want.view(-1) != got.view(-1)).sum())
                    detail = f"{bad} mismatches"
                else:
                    err = (want.double() - got.double()).abs()
                    ulp = torch.finfo(DTYPES[dtype]).eps * want.double().abs().clamp(min=1.0)
                    tol = NORMAL_TOL.get(dtype, 2e-5) * b + ulp
                    bad = int((err > tol).sum())
                    worst = float(err.max())
                    worst_normal[dtype] = max(worst_normal.get(dtype, 0.0), worst)
                    detail = f"max err {worst:.2e}, {bad} out of tolerance"
                if want_offset != got_offset:
                    bad += 1
                    detail += f"; offset {want_offset} predicted, {got_offset} on the GPU"
                status = "PASS" if bad == 0 else "FAIL"
                failures += bad != 0
                print(f"  {op:<8} {a:>4g},{b:<4g} {dtype:<9} {numel:>9} seed {seed:<20} "
                      f"offset {offset:<5} {detail:<40} {status}")
    for dtype, worst in worst_normal.items():
        print(f"measured normal-path error, {dtype}: max {worst:.3e}")
    print(f"torch: {cases - failures}/{cases} cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
