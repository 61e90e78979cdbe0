"""A Python with PyTorch for the differential tests: the running one if torch imports here, else
the test re-executes itself under $MESHSIM_TORCH_PYTHON, else it is skipped (exit 77, as meson
expects) with the reason."""
import os
import shutil
import socket
import sys

SKIP = 77
_REEXEC_FLAG = "_MESHSIM_TORCH_REEXEC"


def skip(test, reason):
    print(f"{test}: skipped: {reason}")
    sys.exit(SKIP)


def require_torch(test, try_import):
    """Returns once `try_import()` succeeds, possibly after re-executing the calling script."""
    try:
        try_import()
        return
    except Exception as exc:  # ImportError, or a broken installation
        error = f"{type(exc).__name__}: {exc}"
    alt = os.environ.get("MESHSIM_TORCH_PYTHON")
    if alt and os.environ.get(_REEXEC_FLAG) != "1":
        os.environ[_REEXEC_FLAG] = "1"
        sys.stdout.flush()
        exe = shutil.which(alt) or alt
        try:
            os.execv(exe, [exe, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
        except OSError as exc:
            skip(test, f"cannot run MESHSIM_TORCH_PYTHON={alt} ({exc})")
    if alt:
        skip(test, f"PyTorch is not importable under MESHSIM_TORCH_PYTHON={alt} ({error})")
    skip(test, f"PyTorch is not importable ({error}); set MESHSIM_TORCH_PYTHON to a Python with "
               "torch")


def free_port():
    """A TCP port for a Gloo rendezvous on this host."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def failing_scenarios(meshsim, paths, flags=()):
    """Runs meshsim on scenario files that state PyTorch's values; prints each file that did not
    pass with meshsim's report, and returns their paths."""
    import json
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        r = subprocess.run([meshsim, "run", "--no-time", "-v", *flags, "--json", report, *paths],
                           capture_output=True, text=True, timeout=300)
        passed = {s["file"] for s in json.load(open(report))["scenarios"] if s["result"] == "pass"}
    failed = [p for p in paths if p not in passed]  # an unusable file is not in the list
    for path in failed:
        print(f"MISMATCH: {os.path.basename(path)}:\n{open(path).read()}")
    if failed:
        print(r.stdout[-6000:])
    return failed


def failing_scenario_texts(meshsim, texts):
    """failing_scenarios over scenario texts, written to case_<i>.toml files of a temporary
    directory."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, text in enumerate(texts):
            path = os.path.join(tmp, f"case_{i}.toml")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        return failing_scenarios(meshsim, paths)


def write_rank_results(out_dir, rank, results):
    """What a Gloo worker found, as torch_<rank>.json for torch_vs_meshsim to read."""
    import json
    with open(os.path.join(out_dir, f"torch_{rank}.json"), "w") as f:
        json.dump(results, f)


def quoted(items):
    """A TOML array of strings."""
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def torch_vs_meshsim(test, meshsim, worker, world, cases, scenario_of):
    """The loop of a differential test: `worker(rank, port, out_dir)` runs every case on `world`
    Gloo processes, each writing torch_<rank>.json keyed by case name (case[0]); each case becomes
    the scenario `scenario_of(case, per-rank results)`, and meshsim runs them all. Prints the
    mismatches and a count; returns the exit code."""
    import json
    import tempfile
    import torch
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(free_port(), tmp), nprocs=world, join=True)
        ranks = [json.load(open(os.path.join(tmp, f"torch_{r}.json"))) for r in range(world)]
        paths = []
        for case in cases:
            path = os.path.join(tmp, f"{case[0]}.toml")
            with open(path, "w") as f:
                f.write(scenario_of(case, [ranks[r][case[0]] for r in range(world)]))
            paths.append(path)
        failed = failing_scenarios(meshsim, paths)
    print(f"{test}: torch {torch.__version__}: {len(cases)} cases on {world} ranks, "
          f"{len(failed)} mismatches")
    return 1 if failed else 0
