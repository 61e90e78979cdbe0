#!/usr/bin/env python3
"""Round trips of `meshsim fr to-scenario` on Flight Recorder dumps in NCCL's form, of jobs the
Gloo differential test cannot make: Gloo's recorder keeps no sends or recvs, so pipeline
parallelism never shows in its dumps.

Each generated job is a pp x dp x tp DeviceMesh (its groups created dim by dim, as
init_device_mesh does, and listed in pg_config) running a training step per iteration: an FSDP
all-gather over dp, a pipeline schedule (GPipe or 1F1B, with blocking sends and recvs between
stages and a tp all-reduce per microbatch), then a reduce-scatter over dp. One fault is planted
at a random rank and iteration: a skipped collective, a skipped send, another tensor size, or one
stage given another number of microbatches; some jobs run clean. What each rank records is
worked out here, by a small rendezvous model of its own (a collective completes when every member
has called it the same way, a send when its recv is posted), and written as the pickle a
timed-out NCCL job writes, frames included.

For every job:
- `meshsim fr analyze` must see a hang exactly when a fault was planted, and name the planted
  rank (or, for a microbatch count, a rank of that stage) among its culprits or the odd ones of
  the first mismatch;
- `meshsim fr to-scenario` must write the same file twice, and `meshsim run` on it must hold the
  expectations it states (the hang the analysis saw).
One job has 1,024 ranks: its scenario must stay short (ranks with one history share steps).

Usage: fr_replay_test.py MESHSIM [CASES] [SEED]
"""
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fr_replay_check import replay_round_trip  # noqa: E402

CASES = 24
ITERATIONS = 2
FAULTS = ["none", "skip_collective", "skip_send", "size", "microbatches"]
LINES = {"fsdp_all_gather": 41, "recv_forward": 52, "tp_all_reduce_forward": 54,
         "send_forward": 56, "recv_backward": 61, "tp_all_reduce_backward": 63,
         "send_backward": 65, "fsdp_reduce_scatter": 72}


def mesh_groups(pp, dp, tp):
    """The groups init_device_mesh((pp, dp, tp)) creates, in its order: name -> (desc, ranks)."""
    shape = (pp, dp, tp)
    strides = (dp * tp, tp, 1)
    groups, of_rank = {}, {}
    name = 1
    for dim, desc in enumerate(("mesh_pp", "mesh_dp", "mesh_tp")):
        others = [d for d in range(3) if d != dim]
        for a in range(shape[others[0]]):
            for b in range(shape[others[1]]):
                base = a * strides[others[0]] + b * strides[others[1]]
                ranks = [base + i * strides[dim] for i in range(shape[dim])]
                groups[str(name)] = (desc, ranks)
                for r in ranks:
                    of_rank[(r, desc)] = str(name)
                name += 1
    return groups, of_rank


def program(job, rank):
    """The calls rank makes: (kind, group, op, size, line, peer) with kind coll, send or recv."""
    pp, dp, tp = job["shape"]
    of = job["of_rank"]
    stage = rank // (dp * tp)
    calls = []
    for it in range(ITERATIONS):
        faulty = job["fault_iteration"] == it
        mb = job["microbatches"]
        if faulty and job["fault"] == "microbatches" and stage == job["fault_stage"]:
            mb += 1
        step = []
        step.append(("coll", of[(rank, "mesh_dp")], "_all_gather_base", [8 * dp], "fsdp_all_gather",
                     None))

        def forward(m):
            if stage > 0:
                step.append(("recv", "0", "recv", [4], "recv_forward", rank - dp * tp))
            step.append(("coll", of[(rank, "mesh_tp")], "all_reduce", [4], "tp_all_reduce_forward",
                         None))
            if stage < pp - 1:
                step.append(("send", "0", "send", [4], "send_forward", rank + dp * tp))

        def backward(m):
            if stage < pp - 1:
                step.append(("recv", "0", "recv", [4], "recv_backward", rank + dp * tp))
            step.append(("coll", of[(rank, "mesh_tp")], "all_reduce", [4],
                         "tp_all_reduce_backward", None))
            if stage > 0:
                step.append(("send", "0", "send", [4], "send_backward", rank - dp * tp))

        if job["schedule"] == "gpipe":
            for m in range(mb):
                forward(m)
            for m in range(mb):
                backward(m)
        else:  # 1F1B: warm-up forwards, then one forward and one backward, then cool-down
            warmup = min(pp - 1 - stage, mb)
            for m in range(warmup):
                forward(m)
            for m in range(mb - warmup):
                forward(warmup + m)
                backward(m)
            for m in range(mb - warmup, mb):
                backward(m)
        step.append(("coll", of[(rank, "mesh_dp")], "_reduce_scatter_base", [8 * dp],
                     "fsdp_reduce_scatter", None))
        if faulty and rank == job["fault_rank"]:
            kinds = {"skip_collective": ("coll",), "skip_send": ("send",), "size": ("coll",)}
            if job["fault"] in kinds:
                # a fault on a group of one rank changes nothing: those are not picked
                places = [i for i, c in enumerate(step) if c[0] in kinds[job["fault"]] and
                          (c[0] != "coll" or len(job["groups"][c[1]][1]) > 1)]
                if places:
                    i = job["rng"].choice(places)
                    if job["fault"] == "size":
                        c = step[i]
                        step[i] = (c[0], c[1], c[2], [c[3][0] + 2], c[4], c[5])
                    else:
                        del step[i]
        calls += step
    return calls


def simulate(job):
    """How far each rank gets: the index of the call it is blocked in (len: it finished)."""
    world = job["world"]
    programs = [program(job, r) for r in range(world)]
    head = [0] * world
    coll_seq = [dict() for _ in range(world)]  # rank -> group -> seq of its head collective
    arrived = {}  # (group, seq) -> {rank: signature}
    queue = deque(range(world))
    order = []  # (rank, call index) in the order calls completed

    def seq_of(rank, index):
        group = programs[rank][index][1]
        return sum(1 for c in programs[rank][:index] if c[0] == "coll" and c[1] == group) + 1

    while queue:
        r = queue.popleft()
        if head[r] >= len(programs[r]):
            continue
        kind, group, op, size, line, peer = programs[r][head[r]]
        if kind == "coll":
            key = (group, seq_of(r, head[r]))
            here = arrived.setdefault(key, {})
            if r in here:
                continue
            here[r] = (op, tuple(size))
            members = job["groups"][group][1]
            if len(here) == len(members) and len(set(here.values())) == 1:
                for m in members:
                    order.append((m, head[m]))
                    head[m] += 1
                    queue.append(m)
        else:
            p = peer
            if head[p] >= len(programs[p]):
                continue
            other = programs[p][head[p]]
            want = "recv" if kind == "send" else "send"
            if other[0] == want and other[5] == r and other[3] == size:
                order.append((r, head[r]))
                order.append((p, head[p]))
                head[r] += 1
                head[p] += 1
                queue.append(r)
                queue.append(p)
    return programs, head, order


def frames(line_name, op):
    return [{"name": op, "filename": "/venv/lib/python3.11/site-packages/torch/distributed/"
             "distributed_c10d.py", "line": 2800},
            {"name": "train_step", "filename": "train.py", "line": LINES[line_name]}]


def write_dumps(job, directory):
    programs, head, order = simulate(job)
    world = job["world"]
    created = {}
    clock = 1_000_000
    for r, i in order:  # completed calls were created in the order they completed, roughly
        clock += 1000
        created[(r, i)] = clock
    pg_ids = {name: i for i, name in enumerate(["0"] + list(job["groups"]))}
    for r in range(world):
        entries = []
        seqs, p2p = {}, {}
        config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
        for name, (desc, ranks) in job["groups"].items():
            if r in ranks:
                config[name] = {"name": name, "desc": desc, "ranks": str(ranks)}
        last = min(head[r], len(programs[r]) - 1)
        for i in range(last + 1):
            kind, group, op, size, line, peer = programs[r][i]
            done = i < head[r]
            desc = config[group]["desc"]
            if kind == "coll":
                seqs[group] = seqs.get(group, 0) + 1
                p2p_seq, seq = 0, seqs[group]
                name = f"nccl:{op}"
                out = size if "all_reduce" in op else (
                    [size[0] * len(job["groups"][group][1])] if "allgather" in op
                    else [size[0] // len(job["groups"][group][1])])
            else:
                p2p[group] = p2p.get(group, 0) + 1
                p2p_seq, seq = p2p[group], seqs.get(group, 0)
                name = f"nccl:send {r}->{peer}" if kind == "send" else f"nccl:recv {r}<-{peer}"
                out = size
            entries.append({
                "record_id": i, "pg_id": pg_ids[group], "process_group": [group, desc],
                "collective_seq_id": seq, "p2p_seq_id": p2p_seq, "op_id": i + 1,
                "profiling_name": name, "time_created_ns": created.get((r, i), clock + 10 * r + i),
                "duration_ms": None, "input_sizes": [size], "input_dtypes": ["Float"],
                "output_sizes": [out], "output_dtypes": ["Float"],
                "state": "completed" if done else "started",
                "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
                "retired": done, "timeout_ms": 600000, "is_p2p": kind != "coll",
                "frames": frames(line, op)})
        dump = {"version": "2.10", "comm_lib_version": "2.27.5", "pg_config": config,
                "pg_status": {}, "entries": entries}
        with open(os.path.join(directory, f"nccl_trace_rank_{r}"), "wb") as f:
            pickle.dump(dump, f, protocol=2)
    return head, programs


def make_job(rng, index, shape=None):
    pp, dp, tp = shape or (rng.choice([2, 4]), rng.choice([1, 2]), rng.choice([1, 2]))
    groups, of_rank = mesh_groups(pp, dp, tp)
    world = pp * dp * tp
    fault = FAULTS[index % len(FAULTS)]
    rank = rng.randrange(world)
    if fault == "skip_send" and rank // (dp * tp) in (0, pp - 1) and pp > 2:
        pass  # first and last stages send one way only; still a send to skip
    return {"shape": (pp, dp, tp), "world": world, "groups": groups, "of_rank": of_rank,
            "schedule": "gpipe", "microbatches": rng.choice([2, 3, 4]),
            "fault": fault, "fault_rank": rank, "fault_stage": rank // (dp * tp),
            "fault_iteration": rng.randrange(ITERATIONS), "rng": random.Random(rng.random())}


def meshsim(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)


def check_job(binary, job, directory):
    head, programs = write_dumps(job, directory)
    problems = []
    hung = any(head[r] < len(programs[r]) for r in range(job["world"]))
    a = meshsim(binary, "fr", "analyze", "--json", directory)
    if a.returncode not in (0, 1):
        return [f"fr analyze exited {a.returncode}: {a.stderr}"], None
    report = json.loads(a.stdout)
    if hung != (report["verdict"] != "no hang"):
        problems.append(f"the model {'hangs' if hung else 'finishes'}; fr analyze says "
                        f"{report['verdict']}")
    if job["fault"] == "none" and hung:
        problems.append("a clean job hangs in the model")
    if hung:
        named = set(report["culprits"]).union(*report["cycles"])
        for m in report["mismatches"][:1]:
            for v in m["variants"][1:]:
                named.update(v["ranks"])
            if len(m["variants"]) == 2 and len(m["variants"][0]["ranks"]) == len(
                    m["variants"][1]["ranks"]):
                named.update(m["variants"][0]["ranks"])
        pp, dp, tp = job["shape"]
        planted = ({r for r in range(job["world"]) if r // (dp * tp) == job["fault_stage"]}
                   if job["fault"] == "microbatches" else {job["fault_rank"]})
        if not named & planted:
            problems.append(f"the fault was planted on {sorted(planted)}; fr analyze names "
                            f"{sorted(named)}")
    replay, text = replay_round_trip(binary, directory, os.path.join(directory, "replay.toml"),
                                     report)
    problems += replay
    if not text:
        return problems, None
    steps = text.count("[[step]]")
    return problems, {"verdict": report["verdict"], "cause": report["cause"], "steps": steps,
                      "bytes": len(text)}


def main():
    binary = os.path.abspath(sys.argv[1])
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else CASES
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2026
    rng = random.Random(seed)
    failed = 0
    verdicts = {}
    jobs = [make_job(rng, i) for i in range(cases)]
    big = make_job(rng, 1, shape=(4, 32, 8))  # a skipped collective on one of 1,024 ranks
    jobs.append(big)
    for index, job in enumerate(jobs):
        with tempfile.TemporaryDirectory() as directory:
            problems, facts = check_job(binary, job, directory)
        if job is big and facts and facts["steps"] > 150:
            problems.append(f"the 1,024-rank replay has {facts['steps']} steps: ranks with one "
                            "history should share them")
        pp, dp, tp = job["shape"]
        label = (f"job {index}: {pp}x{dp}x{tp} {job['schedule']}, {job['microbatches']} "
                 f"microbatches, fault {job['fault']} on rank {job['fault_rank']} in iteration "
                 f"{job['fault_iteration']}")
        if problems:
            failed += 1
            print(f"FAIL {label}")
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
        else:
            print(f"ok   {label}: {facts}")
            key = f"{facts['verdict']}: {facts['cause']}"
            verdicts[key] = verdicts.get(key, 0) + 1
    print(f"fr_replay: {len(jobs)} jobs, {failed} failed; verdicts {verdicts}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
