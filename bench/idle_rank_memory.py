#!/usr/bin/env python3
"""Memory per idle rank, measured so allocator reuse cannot hide it.

Each world size runs in a fresh `meshsim` process (every rank parked in one WORLD barrier); the
cost of a rank is the slope of peak RSS between two world sizes, N and 2N. Three runs per size;
the median and the spread of the slope are printed.

usage: idle_rank_memory.py MESHSIM [N ...]   (default N: 1024 65536)
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile

SCENARIO = """[scenario]
name = "idle-{n}"
world_size = {n}

[[step]]
barrier = "WORLD"
"""


def peak_rss_bytes(meshsim: str, path: str) -> int:
    # RUSAGE_CHILDREN is the largest child so far: run each measurement from a fresh helper.
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "if r.returncode != 0: sys.exit(r.stdout.decode()[-2000:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, meshsim, "run", "--no-time",
                          "--in-process", path], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) * 1024


def main() -> int:
    meshsim = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [1024, 65536]
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            slopes = []
            for _ in range(3):
                rss = {}
                for size in (n, 2 * n):
                    path = os.path.join(tmp, f"idle_{size}.toml")
                    with open(path, "w") as f:
                        f.write(SCENARIO.format(n=size))
                    rss[size] = peak_rss_bytes(meshsim, path)
                slopes.append((rss[2 * n] - rss[n]) / n)
            print(f"idle rank at {n} ranks (slope {n} -> {2 * n}): median "
                  f"{statistics.median(slopes):.0f} B/rank, spread {min(slopes):.0f}-"
                  f"{max(slopes):.0f} B/rank over 3 runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
