"""meshsim_record (python/) on real torch.distributed programs: each program runs once per rank
with the recording backend, and `meshsim fr analyze` reads the dumps. Clean programs (a DeviceMesh
program, torch.distributed.pipelining's GPipe, 1F1B and interleaved 1F1B schedules, FSDP2 x TP
on a 2-D mesh) must be clean; a planted fault (a skipped collective, a rank that raises, groups
created in another order, a stage with another n_microbatches, a submesh seeded from outside)
must be found, with the rank and the Python line
where the tool can tell them. Skips without torch.

Usage: record_test.py MESHSIM"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_python import require_torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "record")


def _import_torch():
    import torch.distributed  # noqa: F401


failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def record(out, program, world, *args, extra=()):
    """Runs the recorder; the package is the repository's own (pip install ./python gives the
    same one)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "meshsim_record", "--world-size", str(world),
                           "-o", out, *extra, "--", os.path.join(PROGRAMS, program), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def analyze(meshsim, out):
    r = subprocess.run([meshsim, "fr", "analyze", "--json", out], capture_output=True, text=True,
                       timeout=300)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, {"verdict": "unreadable", "stdout": r.stdout, "stderr": r.stderr}


def main():
    meshsim = os.path.abspath(sys.argv[1])
    require_torch("record", _import_torch)
    tmp = tempfile.mkdtemp(prefix="meshsim-record-")
    out = os.path.join(tmp, "dumps")
    cases = 0
    try:
        # A DeviceMesh program: clean, then with each fault.
        r = record(out, "mesh_program.py", 4)
        code, a = analyze(meshsim, out)
        names = sorted(n for n in os.listdir(out) if n.startswith("nccl_trace_rank_"))
        header = json.load(open(os.path.join(out, "meshsim_record.json")))
        check(r.returncode == 0 and len(names) == 4 and code == 0 and a["verdict"] == "no hang" and
              header["world_size"] == 4 and header["torch_version"] and
              all(o["status"] == "ok" for o in header["ranks"]),
              f"mesh program, 4 ranks: one dump per rank, clean: {r.stdout[-300:]!r} "
              f"{a.get('summary')}")
        dump = json.load(open(os.path.join(out, "nccl_trace_rank_1.json")))
        descs = sorted(g["desc"] for g in dump["pg_config"].values())
        check(dump["version"] == "2.10" and "mesh_dp" in descs and "mesh_tp" in descs and
              any(e["profiling_name"] == "nccl:_all_gather_base" for e in dump["entries"]) and
              any(f["filename"].endswith("mesh_program.py") for f in dump["entries"][0]["frames"]),
              f"a dump holds the mesh's groups, NCCL's names and the Python frames: {descs}")
        cases += 1
        r = record(out, "mesh_program.py", 4, "--skip-rank", "3")
        code, a = analyze(meshsim, out)
        check(code == 1 and a["culprits"] == [3] and "mesh_program.py:49" in " ".join(a["summary"]),
              f"a rank that skips a collective is named with the line it went on to: "
              f"{a.get('culprits')} {a.get('summary')}")
        r = record(out, "mesh_program.py", 4, "--raise-rank", "2")
        code, a = analyze(meshsim, out)
        check(r.returncode == 1 and "rank 2: ValueError: a planted failure" in r.stdout and
              code == 1 and a["culprits"] == [2] and
              any("raised ValueError: a planted failure at" in e and "mesh_program.py:39" in e
                  for e in a["evidence"]),
              f"a rank whose program raises is the culprit, its error and line said: "
              f"{r.stdout[-300:]!r} {a.get('culprits')} {a.get('evidence')}")
        r = record(out, "mesh_program.py", 4, "--swap-rank", "1")
        code, a = analyze(meshsim, out)
        check(code == 1 and 1 in a["culprits"] and
              any(e.startswith("rank 1 created process groups in another order") and
                  "its group 5 has ranks [1, 3], where ranks 0, 2 give it [0, 2]" in e
                  for e in a["evidence"]),
              f"groups created in another order on rank 1 are found: {a.get('culprits')} "
              f"{a.get('evidence')}")
        cases += 3
        r = record(out, "mesh_program.py", 4, "--spin-rank", "2", extra=("--rank-timeout", "3"))
        code, a = analyze(meshsim, out)
        check(r.returncode == 1 and "rank 2: RankTimeout: the rank ran past --rank-timeout" in
              r.stdout and "mesh_program.py:41" in r.stdout and code == 1 and a["culprits"] == [2],
              f"a rank that never returns is stopped at --rank-timeout and named with its line: "
              f"{r.stdout[-400:]!r} {a.get('culprits')}")
        r = record(out, "mesh_program.py", 4, "--exit-rank", "1")
        code, a = analyze(meshsim, out)
        check(r.returncode == 0 and code == 1 and a["culprits"] == [1] and
              "mesh_tp" in " ".join(a["summary"]),
              f"a rank leaving through os._exit(0) keeps its calls and is the culprit: "
              f"{r.stdout[-300:]!r} {a.get('culprits')} {a.get('summary')}")
        r = record(out, "mesh_program.py", 4, "--crash-rank", "3")
        code, a = analyze(meshsim, out)
        check(r.returncode == 1 and "rank 3: its process ended with status -11" in r.stdout and
              code == 1 and a["culprits"] == [3] and
              any("the program of rank 3 crashed (its process ended with status -11)" in e
                  for e in a["evidence"]),
              f"a rank that dies of a signal is said and blamed: {r.stdout[-300:]!r} "
              f"{a.get('culprits')} {a.get('evidence')}")
        cases += 3
        # The replay of a recorded hang reproduces it.
        r = record(out, "mesh_program.py", 4, "--skip-rank", "3")
        toml = os.path.join(tmp, "hung.toml")
        w = subprocess.run([meshsim, "fr", "to-scenario", out, "-o", toml], capture_output=True,
                           text=True, timeout=300)
        run = subprocess.run([meshsim, "run", "--no-time", toml], capture_output=True, text=True,
                             timeout=300)
        check(w.returncode == 0 and run.returncode == 0 and "pass" in run.stdout,
              f"fr to-scenario of a recorded hang runs to the same hang: {w.stderr[-300:]!r} "
              f"{run.stdout[-600:]!r}")
        cases += 1
        # torch.distributed.pipelining schedules.
        for schedule in ("gpipe", "1f1b", "interleaved"):
            r = record(out, "pipeline_program.py", 4, "--schedule", schedule)
            code, a = analyze(meshsim, out)
            check(r.returncode == 0 and code == 0 and a["verdict"] == "no hang",
                  f"{schedule}, 4 ranks: clean: {r.stdout[-300:]!r} {a.get('summary')}")
            r = record(out, "pipeline_program.py", 4, "--schedule", schedule, "--skip-rank", "1")
            code, a = analyze(meshsim, out)
            check(code == 1 and a["culprits"] == [1] and
                  "pipeline_program.py:58" in " ".join(a["summary"]),
                  f"{schedule}: rank 1 skipping the loss all_reduce is named with its line: "
                  f"{a.get('culprits')} {a.get('summary')}")
            r = record(out, "pipeline_program.py", 4, "--schedule", schedule, "--skew-rank", "2")
            code, a = analyze(meshsim, out)
            check(code == 1 and a["verdict"] == "deadlock" and a["culprits"] == [2] and
                  "pipeline_program.py:54" in a["summary"][1],
                  f"{schedule}: a stage with another n_microbatches is named with its line: "
                  f"{a.get('verdict')} {a.get('culprits')} {a.get('summary')}")
            cases += 3
        # FSDP2 x TP on a 2-D mesh, meta init, one step, 8 ranks: consistent; a rank that
        # creates the mesh's groups in another order is named.
        r = record(out, "fsdp_tp_program.py", 8)
        code, a = analyze(meshsim, out)
        dump = json.load(open(os.path.join(out, "nccl_trace_rank_0.json")))
        ops = {e["profiling_name"] for e in dump["entries"]}
        # The only finding is PyTorch's own: FSDP over TP shards the weights' dim 0 twice, and
        # DTensor's offsets then run into the next parameter's numbers (docs/rng.md 3.3).
        rng = a.get("rng", {})
        check(r.returncode == 0 and code == 1 and a["verdict"] == "no hang" and
              {"nccl:_all_gather_base", "nccl:_reduce_scatter_base", "nccl:all_reduce"} <= ops and
              rng.get("random_ops") == 32 and rng.get("replicas_differ_count") == 0 and
              rng.get("overlap_count", 0) > 0 and
              all("_StridedShard(0, split_factor=" in o for o in rng["overlaps"]) and
              any("sharded over several mesh dims" in n for n in rng["notes"]),
              f"FSDP2 x TP, 8 ranks: FSDP's gathers and reduce-scatters, TP's all_reduce, no "
              f"hang; the init draws FSDP over TP makes overlap: {r.stdout[-300:]!r} "
              f"{sorted(ops)} {a.get('summary')} {rng}")
        r = record(out, "fsdp_tp_program.py", 8, "--swap-rank", "5")
        code, a = analyze(meshsim, out)
        check(code == 1 and 5 in a["culprits"] and
              any(e.startswith("rank 5 created process groups in another order than the others")
                  for e in a["evidence"]),
              f"FSDP2 x TP: rank 5 creating its groups in another order is named: "
              f"{a.get('culprits')} {a.get('evidence')}")
        cases += 2
        # DTensor seeding: per-stage seeds are recorded; seeding stage 0's submesh from stage 1
        # raises PyTorch's own error on those ranks (on a CPU mesh PyTorch would only warn).
        r = record(out, "seed_program.py", 4)
        code, a = analyze(meshsim, out)
        seeds = [json.load(open(os.path.join(out, f"nccl_trace_rank_{k}.json")))
                 ["meshsim_record"]["rng"] for k in range(4)]
        check(r.returncode == 0 and code == 0 and
              [s[0]["seed"] for s in seeds] == [1234, 1234, 1235, 1235] and
              seeds[3][0]["mesh_ranks"] == [2, 3] and seeds[3][0]["coordinate"] == [1],
              f"per-stage manual_seed on a [pp, tp] mesh is recorded: {seeds}")
        r = record(out, "seed_program.py", 4, "--outside")
        code, a = analyze(meshsim, out)
        says = "RuntimeError: manual_seed requires the current rank to be a part of the device mesh"
        rng3 = json.load(open(os.path.join(out, "nccl_trace_rank_3.json")))["meshsim_record"]["rng"]
        check(r.returncode == 1 and f"rank 2: {says}" in r.stdout and
              "seed_program.py:24" in r.stdout and rng3[0]["coordinate"] is None and
              code == 1 and a["culprits"] == [2, 3] and
              any(says in e and "ranks 2-3 raised" in e for e in a["evidence"]),
              f"a submesh seeded from outside: PyTorch's error on ranks 2-3, who are the culprits: "
              f"{r.stdout[-400:]!r} {a.get('culprits')} {a.get('evidence')}")
        cases += 2
        # DTensor random ops: where each shard draws is placed on a GPU's Philox stream.
        r = record(out, "rng_program.py", 4, "--case", "fsdp-tp")
        code, a = analyze(meshsim, out)
        sim = subprocess.run([meshsim, "run", "--no-time",
                              os.path.join(ROOT, "scenarios", "rng_fsdp_tp_meta_init.toml")],
                             capture_output=True, text=True, timeout=300)
        rng = a.get("rng", {})
        # The scenario of PyTorch's FSDP + TP seed test finds the same overlap, between the same
        # shards and counters, simulating the program instead of reading its recording.
        same = ["seed 7:", "(shard 0, rank 0)", "(shard 2, rank 2)", "blocks [32, 33)"]
        check(code == 1 and a["verdict"] == "no hang" and rng.get("overlap_count") == 1 and
              all(s.replace("(", "rng_program.py:54, ") in rng["overlaps"][0] for s in same[1:3])
              and all(s in rng["overlaps"][0] for s in (same[0], same[3])) and
              "bias as [_StridedShard(0, split_factor=2), Shard(0)]" in rng["overlaps"][0] and
              all(s.replace("(", "rng_fsdp_tp_meta_init.toml:43:1, ") in sim.stdout
                  for s in same[1:3]) and
              all(s in sim.stdout for s in (same[0], same[3])),
              f"FSDP + TP init recorded: the overlap the simulated seed test finds: {rng} "
              f"{sim.stdout[-600:]!r}")
        r = record(out, "rng_program.py", 4, "--case", "stages")
        code, a = analyze(meshsim, out)
        check(code == 0 and a.get("rng", {}).get("clean") is True and
              a["rng"]["random_ops"] == 8,
              f"pipeline stages seeded apart: clean: {a.get('rng')}")
        r = record(out, "rng_program.py", 4, "--case", "stages", "--same-seed")
        code, a = analyze(meshsim, out)
        rng = a.get("rng", {})
        check(code == 1 and a["verdict"] == "no hang" and rng.get("overlap_count") == 4 and
              'into "layers.0.weight as [Shard(0)], random op 0 of its mesh" '
              '(tests/record/rng_program.py:40, shard 0, rank 0) and' in rng["overlaps"][0].replace(
                  os.path.join(ROOT, ""), "") and
              '"layers.1.weight' in rng["overlaps"][0],
              f"pipeline stages seeded alike draw each other's numbers: {rng}")
        r = record(out, "rng_program.py", 4, "--case", "replicas")
        code, a = analyze(meshsim, out)
        check(code == 0 and a.get("rng", {}).get("clean") is True,
              f"a parameter replicated over dp, seeded alike: clean: {a.get('rng')}")
        r = record(out, "rng_program.py", 4, "--case", "replicas", "--seed-by-dp")
        code, a = analyze(meshsim, out)
        rng = a.get("rng", {})
        check(code == 1 and rng.get("replicas_differ_count") == 2 and
              "shard 0: rank 0 draws seed 1234 from offset 0, rank 2 seed 1235 from offset 0" in
              rng["replicas_differ"][0],
              f"dp copies seeded by their dp rank: the replicas differ: {rng}")
        r = record(out, "rng_program.py", 4, "--case", "dropout")
        code, a = analyze(meshsim, out)
        rec = json.load(open(os.path.join(out, "nccl_trace_rank_1.json")))
        ops = [c for c in rec["meshsim_record"]["rng"] if c["call"] == "random_op"]
        check(code == 0 and a.get("rng", {}).get("clean") is True and len(ops) == 1 and
              ops[0]["op"] == "native_dropout" and ops[0]["arguments"]["p"] == 0.25 and
              ops[0]["tracker_created"] and
              sum(e["profiling_name"] == "nccl:broadcast" for e in rec["entries"]) == 2,
              f"F.dropout on a DTensor is recorded as the GPU's native_dropout(p), and the tracker "
              f"it makes broadcasts over WORLD: {ops} {a.get('rng')}")
        r = record(out, "rng_program.py", 4, "--case", "factory")
        code, a = analyze(meshsim, out)
        rec = json.load(open(os.path.join(out, "nccl_trace_rank_2.json")))
        ops = [(c["op"], c["local_numel"], c["factory"]) for c in rec["meshsim_record"]["rng"]
               if c["call"] == "random_op"]
        check(code == 0 and a.get("rng", {}).get("clean") is True and
              a["rng"]["draws"] == 8 and ops == [("rand", 8, True), ("randn", 16, True)],
              f"DTensor's rand and randn factories are recorded with the rank's shard: {ops} "
              f"{a.get('rng')}")
        cases += 7
        # --ranks records a subset; the others are assumed to make every call.
        r = record(out, "pipeline_program.py", 8, "--schedule", "1f1b", "--microbatches", "8",
                   extra=("--ranks", "0-1"))
        code, a = analyze(meshsim, out)
        check(r.returncode == 0 and len([n for n in os.listdir(out) if n.startswith("nccl")]) == 2
              and code == 0 and any("ranks 2-7 were not recorded" in e for e in a["evidence"]),
              f"--ranks 0-1 of 8 records two ranks and says the others are assumed: "
              f"{r.stdout[-300:]!r} {a.get('evidence')}")
        cases += 1
        # Bad flags: exit 2, naming the flag.
        for args, says in ((["--world-size", "0"], "--world-size 0"),
                           (["--world-size", "4", "--ranks", "3-9"], "--ranks 3-9"),
                           (["--world-size", "4", "--ranks", "x"], "'x' is not a rank"),
                           (["--world-size", "4", "-j", "0"], "-j 0")):
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
            r = subprocess.run([sys.executable, "-m", "meshsim_record", *args, "-o", out, "--",
                                os.path.join(PROGRAMS, "mesh_program.py")], capture_output=True,
                               text=True, env=env, timeout=120)
            check(r.returncode == 2 and says in r.stderr, f"{args}: exit 2 naming it: {r.stderr!r}")
        r = subprocess.run([sys.executable, "-m", "meshsim_record", "--world-size", "2", "-o", out,
                            "--", os.path.join(tmp, "missing.py")], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
        check(r.returncode == 2 and "missing.py: no such program" in r.stderr,
              f"a missing program is named: {r.stderr!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"record: {cases} recorded programs; {len(failures)} checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
