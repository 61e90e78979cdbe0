#!/usr/bin/env python3
"""Differential test of `meshsim fr analyze` against PyTorch's own Flight Recorder analyzer
(torch.distributed.flight_recorder, what `torchfrtrace` runs), on dumps real jobs write.

Each of CASES random jobs runs on 4 or 8 Gloo processes (forked from one that imported torch,
TORCH_FR_BUFFER_SIZE set). The ranks form a random 2-D mesh whose rows and columns are groups, as
DeviceMesh makes them, and run a generated program: a loop over iterations of random collectives
(all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast, all_to_all_single) on WORLD,
the rank's row or its column, with random sizes and dtypes, one source line per call. One fault
is planted at a random rank, iteration and call: the rank skips the call, calls it with another
size, another dtype or another op, or stops its loop there; some jobs run clean. Some jobs get a
ring buffer smaller than the program (it wraps), and some lose one rank's dump. When every rank
has finished or stopped making progress, each writes its recorder (the pickle a timed-out job
writes) and leaves.

Both analyzers then read the same dumps:
- torch's build_db, given pg_config as NCCL writes it (Gloo's names no group, which makes torch's
  analyzer fail with a KeyError: the test checks that too), --allow-incomplete-ranks when a dump
  is missing; its collectives' missing ranks and mismatches (class and rank) are collected;
- `meshsim fr analyze --json` on the original files.
Checks:
- every (group, seq, rank) torch reports missing, meshsim reports as missing, or without a dump,
  in a call ranks wait in;
- every (group, seq) torch reports mismatched with a type, size or dtype class, meshsim reports
  mismatched with the same class, and every rank torch names culprit is in one of meshsim's
  variants that differ from the first (or tied with it). torch stops matching a group after its
  first mismatch and does not check states in Gloo dumps; meshsim's extra findings are listed;
- clean jobs: both find nothing; faulty jobs: meshsim names the planted rank (a culprit, the odd
  one of the first divergence, or one side of a two-way tie) unless its report says the evidence
  lacks it (the planted rank left no dump).
- both forms of the dumps are replayed: `meshsim fr to-scenario` writes a scenario, the same
  file twice, and `meshsim run` on it holds the expectations it states (the hang fr analyze
  saw), with the same report twice.
Skips (exit 77) without PyTorch.

Usage: fr_analyze_diff_test.py MESHSIM [CASES] [SEED]
"""
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fr_replay_check import fr_analysis, replay_round_trip  # noqa: E402
from torch_fr_analyzer import torch_findings as run_torch_analyzer  # noqa: E402
from torch_python import require_torch  # noqa: E402

CASES = 16
ITERATIONS = 3
# The job is hung when no rank finished a call for this long and every rank still running is
# inside a call: a rank that is only slow (the machine is loaded) is between calls, and is waited
# for, so the dumps never catch a rank that was merely late.
STALL_SECONDS = 1.5
FAULTS = ["none", "skip", "size", "dtype", "op", "stop"]
OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
       "all_to_all_single"]
DTYPES = ["float32", "float64", "int32"]
MISMATCH_CLASSES = {"COLLECTIVE_TYPE_MISMATCH": "op", "SIZE_OR_SYNTAX_MISMATCH": "sizes",
                    "COLLECTIVE_DTYPE_MISMATCH": "dtypes"}


def make_job(rng, index):
    world = rng.choice([4, 8])
    rows = rng.choice([r for r in (2, 4) if world % r == 0 and world // r >= 2])
    calls = []
    for _ in range(rng.randint(2, 4)):
        op = rng.choice(OPS)
        calls.append({"op": op, "group": rng.choice(["world", "row", "col"]),
                      "n": rng.randint(1, 3) * 2, "dtype": rng.choice(DTYPES)})
    fault = FAULTS[index % len(FAULTS)]
    at = (rng.randrange(ITERATIONS), rng.randrange(len(calls)))
    if fault == "op":  # another op with the same tensors: all_reduce <-> broadcast
        swappable = [j for j, c in enumerate(calls) if c["op"] in ("all_reduce", "broadcast")]
        if not swappable:
            calls[0]["op"] = "all_reduce"
            swappable = [0]
        at = (at[0], rng.choice(swappable))
    total = ITERATIONS * len(calls)
    return {"world": world, "rows": rows, "calls": calls, "fault": fault,
            "rank": rng.randrange(world), "at": at,
            "buffer": rng.choice([64, 64, max(3, total // 2)]),
            "drop_dump": rng.random() < 0.2}


def program_source(job):
    """The job's program: one line per call, so that the frames tell the calls apart."""
    lines = ["def program(c, dist):", f"    for i in range({ITERATIONS}):"]
    for j, call in enumerate(job["calls"]):
        g = f'c.group("{call["group"]}")'
        t = f'c.tensor(i, {j}, {call["n"]}, "{call["dtype"]}")'
        size = f'c.size("{call["group"]}")'
        op = call["op"]
        if op == "all_reduce":
            text = f"dist.all_reduce({t}, group={g})"
        elif op == "broadcast":
            text = f'dist.broadcast({t}, group_src=0, group={g})'
        elif op == "all_gather_into_tensor":
            text = f'dist.all_gather_into_tensor(c.zeros({call["n"]} * {size}, "{call["dtype"]}"), {t}, group={g})'
        elif op == "reduce_scatter_tensor":
            text = f'dist.reduce_scatter_tensor(c.zeros({call["n"]}, "{call["dtype"]}"), c.tensor(i, {j}, {call["n"]} * {size}, "{call["dtype"]}"), group={g})'
        else:
            text = f'dist.all_to_all_single(c.zeros({call["n"]} * {size}, "{call["dtype"]}"), c.tensor(i, {j}, {call["n"]} * {size}, "{call["dtype"]}"), group={g})'
        lines.append(f"        if c.go(i, {j}): {text}")
        if op in ("all_reduce", "broadcast"):
            other = (f"dist.broadcast({t}, group_src=0, group={g})" if op == "all_reduce"
                     else f"dist.all_reduce({t}, group={g})")
            lines.append(f"        if c.swapped(i, {j}): {other}")
        lines.append("        c.done()")
    return "\n".join(lines) + "\n"


class Calls:
    """What the generated program asks of its rank: groups, tensors, and the planted fault."""

    def __init__(self, job, rank, groups, torch, progress, inside):
        self.job, self.rank, self.groups, self.torch, self.progress = job, rank, groups, torch, progress
        self.inside = inside
        self.mine = rank == job["rank"]
        self.stopped = False

    def planted(self, i, j):
        return self.mine and (i, j) == tuple(self.job["at"])

    def go(self, i, j):
        fault = self.job["fault"]
        if self.mine and fault == "stop" and (i, j) >= tuple(self.job["at"]):
            self.stopped = True
        if self.stopped:
            return False
        return self.entering(not (self.planted(i, j) and fault in ("skip", "op")))

    def swapped(self, i, j):
        return self.entering(self.planted(i, j) and self.job["fault"] == "op")

    def entering(self, calls):
        if calls:
            self.inside[self.rank] = 1
        return calls

    def group(self, kind):
        return self.groups[kind][0]

    def size(self, kind):
        return self.groups[kind][1]

    def tensor(self, i, j, n, dtype):
        if self.planted(i, j) and self.job["fault"] == "size":
            n += 1
        if self.planted(i, j) and self.job["fault"] == "dtype":
            dtype = "float64" if dtype != "float64" else "float32"
        return self.torch.ones(n, dtype=getattr(self.torch, dtype))

    def zeros(self, n, dtype):
        return self.torch.zeros(n, dtype=getattr(self.torch, dtype))

    def done(self):
        self.inside[self.rank] = 0
        with self.progress.get_lock():
            self.progress.value += 1


def run_rank(job, rank, directory, init_file, progress, inside, finished):
    import threading
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace
    torch.set_num_threads(1)
    world, rows = job["world"], job["rows"]
    cols = world // rows
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    groups = {"world": (dist.group.WORLD, world)}
    names = {"0": ("default_pg", list(range(world)))}
    for r in range(rows):  # rows: ranks r*cols .. r*cols+cols-1
        ranks = list(range(r * cols, (r + 1) * cols))
        g = dist.new_group(ranks)
        if rank in ranks:
            groups["row"] = (g, cols)
            names[g.group_name] = ("undefined", ranks)
    for c in range(cols):
        ranks = list(range(c, world, cols))
        g = dist.new_group(ranks)
        if rank in ranks:
            groups["col"] = (g, rows)
            names[g.group_name] = ("undefined", ranks)
    with open(os.path.join(directory, f"groups{rank}.json"), "w") as f:
        json.dump(names, f)
    namespace = {}
    exec(compile(program_source(job), os.path.join(directory, "program.py"), "exec"), namespace)
    calls = Calls(job, rank, groups, torch, progress, inside)

    def body():
        try:
            namespace["program"](calls, dist)
        except Exception as exc:  # Gloo refuses some mismatches: the rank stops there
            print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        inside[rank] = 0
        finished[rank] = 1

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    last, since = -1, time.monotonic()
    while worker.is_alive():
        worker.join(0.1)
        if progress.value != last:
            last, since = progress.value, time.monotonic()
        elif time.monotonic() - since > STALL_SECONDS and all(
                inside[r] or finished[r] for r in range(world)):
            break
    with open(os.path.join(directory, f"rank{rank}.pkl"), "wb") as f:
        f.write(_dump_fr_trace(True, True, False))
    # Stay until every rank has dumped: one that left would fail the calls others wait in.
    open(os.path.join(directory, f"dumped{rank}"), "w").close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(directory, f"dumped{r}")) for r in range(world)):
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_job(job, directory):
    import multiprocessing
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(job["buffer"])
    ctx = multiprocessing.get_context("fork")
    progress = ctx.Value("q", 0)
    inside = ctx.Array("b", job["world"])  # per rank: in a call now
    finished = ctx.Array("b", job["world"])  # per rank: its program returned
    init_file = os.path.join(directory, "init")
    procs = [ctx.Process(target=run_rank,
                         args=(job, r, directory, init_file, progress, inside, finished))
             for r in range(job["world"])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        if p.is_alive():
            p.kill()


def torch_findings(directory, job):
    """torch's analyzer on the dumps, pg_config as NCCL writes it: (missing, mismatches, log)."""
    torch_dir = os.path.join(directory, "torch")
    os.makedirs(torch_dir)
    present = []
    for r in range(job["world"]):
        path = os.path.join(directory, f"rank{r}.pkl")
        if not os.path.exists(path):
            continue
        present.append(r)
        dump = pickle.load(open(path, "rb"))
        names = json.load(open(os.path.join(directory, f"groups{r}.json")))
        dump["pg_config"] = {name: {"name": name, "desc": desc, "ranks": str(ranks)}
                             for name, (desc, ranks) in names.items()}
        with open(os.path.join(torch_dir, f"rank_{r}"), "wb") as f:
            pickle.dump(dump, f)
    return run_torch_analyzer(torch_dir, allow_incomplete=len(present) < job["world"])


def gloo_pg_config_breaks_torch(directory, job):
    """torch's analyzer on the dumps as Gloo wrote them: True when it fails."""
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir
    import logging
    raw = os.path.join(directory, "raw")
    os.makedirs(raw)
    for r in range(job["world"]):
        path = os.path.join(directory, f"rank{r}.pkl")
        if os.path.exists(path):
            shutil.copy(path, os.path.join(raw, f"rank_{r}"))
    logger = logging.getLogger("Flight Recorder")
    saved, logger.handlers = logger.handlers[:], [logging.NullHandler()]
    try:
        args = JobConfig().parse_args([raw, "--allow-incomplete-ranks"])
        details, version = read_dir(args)
        build_db(details, args, version)
    except Exception:
        return True
    finally:
        logger.handlers = saved
    return False


def replay_problems(meshsim, dumps, report, form, world):
    """The replay round trip (fr_replay_check.py) on one form of the job's dumps."""
    scenario = os.path.join(os.path.dirname(dumps), f"replay-{form.split()[0][:4].lower()}.toml")
    # The job's size, as its engineer would give it: Gloo's dumps do not say it when the last
    # rank's dump is lost.
    return replay_round_trip(meshsim, dumps, scenario, report, ("--world-size", str(world)),
                             form)[0]


def check_case(meshsim, job, directory):
    problems = []
    missing, mismatches, log = torch_findings(directory, job)
    # meshsim reads the files torch's analyzer read (pg_config as NCCL writes it) ...
    dumps = os.path.join(directory, "torch")
    report = fr_analysis(meshsim, dumps)
    # ... and, on the files as Gloo wrote them, still sees whether the job hung
    raw = fr_analysis(meshsim, os.path.join(directory, "raw"))
    if (raw["verdict"] == "no hang") != (report["verdict"] == "no hang"):
        problems.append(f"with Gloo's pg_config meshsim says {raw['verdict']}, with NCCL's "
                        f"{report['verdict']}")
    meshsim_missing = set()
    for c in report["open_calls"]:
        for r in c["missing"] + c["no_dump"]:
            meshsim_missing.add((c["group"], c["seq"], r))
    for t in sorted(missing):
        if t not in meshsim_missing:
            problems.append(f"torch reports rank {t[2]} missing from group {t[0]} seq {t[1]}; "
                            "meshsim does not")
    by_key = {(m["group"], m["seq"]): m for m in report["mismatches"]}
    for g, seq, r, kind in sorted(mismatches):
        if kind not in MISMATCH_CLASSES:
            continue  # states: Gloo dumps have one state only, and torch checks it last
        m = by_key.get((g, seq))
        if m is None:
            problems.append(f"torch reports a {kind} at group {g} seq {seq}; meshsim does not")
            continue
        if m["kind"] != MISMATCH_CLASSES[kind] and not (
                kind == "SIZE_OR_SYNTAX_MISMATCH" and m["kind"] == "op"):
            problems.append(f"group {g} seq {seq}: torch says {kind}, meshsim {m['kind']}")
        first = m["variants"][0]["ranks"]
        tied = len(m["variants"]) > 1 and len(m["variants"][1]["ranks"]) == len(first)
        if r in first and not tied and r not in m["culprits"]:
            # torch names every rank that differs from its first rank; when that rank is the odd
            # one, torch's culprits are the majority, and meshsim's culprit is torch's first rank
            others = [x for v in m["variants"][1:] for x in v["ranks"]]
            if not others:
                problems.append(f"group {g} seq {seq}: torch names rank {r}; meshsim's variants "
                                f"{m['variants']}")
    extra = [m for m in report["mismatches"]
             if not any((m["group"], m["seq"]) == (g, s) for g, s, _, _ in mismatches)]
    problems += replay_problems(meshsim, dumps, report, "NCCL's pg_config", job["world"])
    problems += replay_problems(meshsim, os.path.join(directory, "raw"), raw, "Gloo's pg_config",
                                job["world"])
    faulty = job["fault"] != "none"
    if not faulty:
        if report["verdict"] != "no hang" or missing or mismatches:
            problems.append(f"a clean job: meshsim says {report['verdict']}, torch reports "
                            f"{len(missing)} missing and {len(mismatches)} mismatches")
    else:
        f = job["rank"]
        named = set(report["culprits"])
        for d in report["divergences"][:1]:
            named.update(d["sites"][0]["ranks"])
        for m in report["mismatches"][:1]:
            if len(m["variants"]) == 2 and len(m["variants"][0]["ranks"]) == len(
                    m["variants"][1]["ranks"]):
                named.update(m["variants"][0]["ranks"])
        # the evidence lacks the fault when the planted rank's dump, or the dump of a rank the
        # analysis then names (it waits for it), is the one lost
        lost = any(not os.path.exists(os.path.join(dumps, f"rank_{r}")) for r in named | {f})
        if report["verdict"] == "no hang":
            problems.append("a planted fault, and meshsim finds no hang")
        elif f not in named and not lost:
            problems.append(f"the fault was planted on rank {f}; meshsim names {sorted(named)}")
    if problems:
        problems.append("torch's log:\n" + log)
        problems.append("meshsim's report:\n" + subprocess.run(
            [meshsim, "fr", "analyze", dumps], capture_output=True, text=True).stdout)
    return problems, {"torch_missing": len(missing), "torch_mismatches": len(mismatches),
                      "meshsim_extra_mismatches": len(extra), "verdict": report["verdict"],
                      "cause": report["cause"]}


def main():
    require_torch("fr_analyze_diff", lambda: __import__("torch.distributed.flight_recorder"))
    import torch  # noqa: F401  (imported once, before the ranks fork)
    import torch.distributed  # noqa: F401
    meshsim = os.path.abspath(sys.argv[1])
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else CASES
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2615
    rng = random.Random(seed)
    failed = 0
    torch_breaks = 0
    summary = {}
    for index in range(cases):
        job = make_job(rng, index)
        with tempfile.TemporaryDirectory() as directory:
            run_job(job, directory)
            if job["drop_dump"]:
                victim = rng.randrange(job["world"])
                path = os.path.join(directory, f"rank{victim}.pkl")
                if os.path.exists(path):
                    os.remove(path)
            torch_breaks += gloo_pg_config_breaks_torch(directory, job)
            problems, facts = check_case(meshsim, job, directory)
            keep = os.environ.get("MESHSIM_FR_DIFF_KEEP")  # for a look at a case's dumps
            if keep:
                shutil.copytree(directory, os.path.join(keep, f"case{index}"), dirs_exist_ok=True)
        label = (f"case {index}: world {job['world']} ({job['rows']} rows), fault {job['fault']}"
                 f" on rank {job['rank']} at {tuple(job['at'])}, buffer {job['buffer']}"
                 f"{', one dump dropped' if job['drop_dump'] else ''}")
        if problems:
            failed += 1
            print(f"FAIL {label}")
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
            print("  program:\n    " + program_source(job).replace("\n", "\n    "))
        else:
            print(f"ok   {label}: {facts}")
            key = f"{facts['verdict']}: {facts['cause']}"
            summary[key] = summary.get(key, 0) + 1
    print(f"fr_analyze_diff: {cases} jobs, {failed} failed; meshsim verdicts {summary}; torch's "
          f"analyzer failed on {torch_breaks} of {cases} jobs' dumps as Gloo writes them "
          "(pg_config names no group)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
