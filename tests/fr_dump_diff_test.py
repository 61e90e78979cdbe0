#!/usr/bin/env python3
"""Differential test of `meshsim run --fr-dump`: PyTorch's own Flight Recorder analyzer
(torch.distributed.flight_recorder, what `torchfrtrace` runs) reads the dumps meshsim writes for
a hung job and must draw meshsim's conclusion.

Jobs are the realistic training schedules of the hang-blame test (tests/hang_blame/schedules.py:
1F1B and interleaved pipelines, FSDP and HSDP layer loops over [pp, dp, tp] meshes), of 8 to 32
ranks, each with one planted fault at a random rank, train step and iteration: a skipped
collective, send or recv, an extra collective, a collective on the wrong group (the generator's),
or a collective called with another size or dtype (planted here); some run clean. All run in one
`meshsim run --fr-dump DIR --json` (a small --fr-buffer-size for some, so their buffers wrap).

For every job:
- Python's pickle and json modules read every rank's two dumps, whose top-level and entry keys
  are those torch 2.15 writes (tests/io/data/fr holds dumps torch wrote);
- torch's analyzer reads the pickles. For every collective meshsim's report says ranks wait in,
  torch reports the ranks meshsim says are missing as missing from that group's same sequence
  number (or a mismatch there); for every desync meshsim reports, torch reports a mismatch of the
  same class (size, dtype) at that group and seq. A clean job: torch finds nothing. Point-to-point
  waits are left out: torch's analyzer does not follow sends and recvs (said in the summary);
- `meshsim fr analyze --json` on the pickles and on the JSON dumps sees the same verdict as the
  run, and on the pickles (the JSON has no frames) names the planted rank (a culprit, the odd one
  of the first divergence or mismatch) whenever the run's report does;
- the pickles replay (fr_replay_check.py): `meshsim fr to-scenario` writes the same file twice
  and `meshsim run` on it holds the expectations it states.
Skips (exit 77) without PyTorch.

KNOWN_MISSES (default 0) is how many jobs fr analyze is known not to name the planted rank in,
where the run's report does (an extra call at the end of a loop, whose members' dumps show only
that the others never called it; a skipped send in a pipeline): more fails. Jobs are
deterministic for a seed, so the count only moves with the code.

Usage: fr_dump_diff_test.py MESHSIM [CASES] [SEED] [KNOWN_MISSES]
"""
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "hang_blame"))
import schedules  # noqa: E402
from fr_replay_check import fr_analysis, replay_round_trip  # noqa: E402
from torch_fr_analyzer import torch_findings  # noqa: E402
from torch_python import require_torch  # noqa: E402

MAX_WORLD = 32
MISMATCH_CLASSES = {"sizes": "SIZE_OR_SYNTAX_MISMATCH", "dtypes": "COLLECTIVE_DTYPE_MISMATCH"}
TORCH_DATA = os.path.join(HERE, "io", "data", "fr", "skipped", "rank0.pkl")


def plant_mismatch(schedule, rng, kind):
    """Rank r calls one collective, at one train step and iteration, with another size or dtype:
    the step runs for everyone else, and a copy with the changed tensor for r. False when the
    schedule offers no such call."""
    sizes = {"dp": schedule.dp, "tp": schedule.tp}
    sites = [s for s in schedule.sites if s["op"] not in ("send", "recv") and not s["when"]
             and sizes.get(s["group"], 2) > 1 and 'tensor = "ones(' in s["body"]]
    if not sites:
        return False
    site = rng.choice(sites)
    ranks = [r for r in range(schedule.world) if site.get("runs", lambda _: True)(r)
             and site["count_for"](r) > 0]
    if not ranks:
        return False
    rank = rng.choice(ranks)
    s = rng.randrange(schedule.steps_per_run)
    loop = site["loop"]
    k = rng.randrange(site["count_for"](rank)) if loop else None
    at = f"rank == {rank} and s == {s}" + (f" and {loop} == {k}" if loop else "")
    index = schedule.lines.index("  [[step]]", site["line"] - 1)
    schedule._set_when(index, f"not ({at})")
    body = site["body"]
    start = body.index('tensor = "ones(') + len('tensor = "ones(')
    n = int(body[start:body.index(")", start)])
    changed = (f'tensor = "ones({n + 2})"' if kind == "sizes"
               else f'tensor = "ones({n}, dtype=bfloat16)"')
    body = body.replace(f'tensor = "ones({n})"', changed)
    schedule.lines[index + 3:index + 3] = ["  [[step]]", f"  {body}", f'  when = "{at}"']
    schedule.planted = {"kind": kind, "rank": rank}
    return True


def make_jobs(count, seed):
    jobs, draw = [], seed * 7919
    while len(jobs) < count:
        draw += 1
        rng = random.Random(draw)
        try:
            schedule = schedules.Schedule(random.Random(draw), None).build()
        except Exception:  # noqa: BLE001  (a draw the generator cannot build)
            continue
        if schedule.world > MAX_WORLD:
            continue
        fault = ["generator", "generator", "generator", "sizes", "dtypes", "none"][len(jobs) % 6]
        if fault == "generator" and not schedule.plant():
            continue
        if fault in MISMATCH_CLASSES and not plant_mismatch(schedule, rng, fault):
            continue
        if fault == "none":
            schedule.planted = {"kind": "none", "rank": None}
        name = f"job{len(jobs):03d}"
        lines = list(schedule.lines)
        first = next(i for i, line in enumerate(lines) if line.startswith("name = "))
        lines[first] = f'name = "{name}"'  # the scenario's; the mesh keeps its own
        jobs.append({"name": name, "schedule": schedule, "toml": "\n".join(lines) + "\n",
                     "buffer": rng.choice([2000, 2000, 24])})
    return jobs


def reference_keys():
    """The top-level and entry keys of a dump torch 2.15 wrote."""
    with open(TORCH_DATA, "rb") as f:
        d = pickle.load(f)
    return set(d), set(d["entries"][0])


def format_problems(pickles, jsons, world, keys):
    problems = []
    top, entry = keys
    for r in range(world):
        with open(os.path.join(pickles, f"nccl_trace_rank_{r}"), "rb") as f:
            p = pickle.load(f)
        with open(os.path.join(jsons, f"nccl_trace_rank_{r}.json")) as f:
            j = json.load(f)
        if set(p) != top:
            problems.append(f"rank {r}: pickle keys {sorted(set(p))}, torch writes {sorted(top)}")
        for e in p["entries"][:3]:
            if set(e) != entry:
                problems.append(f"rank {r}: entry keys {sorted(set(e))}, torch writes "
                                f"{sorted(entry)}")
        if len(j["entries"]) != len(p["entries"]):
            problems.append(f"rank {r}: {len(j['entries'])} JSON entries, "
                            f"{len(p['entries'])} in the pickle")
    return problems


def wrapped(pickles, world):
    """Whether some rank's buffer dropped its oldest calls."""
    for r in range(world):
        with open(os.path.join(pickles, f"nccl_trace_rank_{r}"), "rb") as f:
            entries = pickle.load(f)["entries"]
        if entries and entries[0]["record_id"] > 0:
            return True
    return False


def named_ranks(analysis):
    named = set(analysis["culprits"])
    for d in analysis["divergences"][:1]:
        named.update(d["sites"][0]["ranks"])
    for m in analysis["mismatches"][:1]:
        named.update(m["culprits"])
        if len(m["variants"]) == 2 and len(m["variants"][0]["ranks"]) == len(
                m["variants"][1]["ranks"]):
            named.update(m["variants"][0]["ranks"])
    return named


def check_job(meshsim, job, result, base, keys, tally):
    schedule, planted = job["schedule"], job["schedule"].planted
    where = (f"{job['name']} ({schedule.kind} {schedule.pp}x{schedule.dp}x{schedule.tp}, "
             f"{planted['kind']} at rank {planted['rank']}, buffer {job['buffer']})")
    dumps = os.path.join(base, job["name"])
    pickles, jsons = os.path.join(dumps, "pickle"), os.path.join(dumps, "json")
    problems = format_problems(pickles, jsons, schedule.world, keys)
    hang = result.get("hang")
    if (planted["kind"] == "none") != (hang is None):
        problems.append(f"the run's report: {'a hang' if hang else 'no hang'}")
    missing, mismatches, log = torch_findings(pickles, collectives_only=True)
    # torch's analyzer matches calls from each rank's oldest entry: buffers that wrapped at
    # different calls, and its cap on mismatches per group (sends and recvs it takes for
    # collectives reach it), leave it without a finding. Those jobs are counted, not failed.
    partial = wrapped(pickles, schedule.world) or "aborting" in log
    if hang is None:
        if missing or mismatches:
            problems.append(f"a job without a hang: torch reports {sorted(missing)[:4]} missing, "
                            f"{sorted(mismatches)[:4]} mismatched")
    else:
        problems_before = len(problems)
        counts = {"collective_waits": 0, "desyncs": 0}
        mismatched_at = {(g, s) for g, s, _, _ in mismatches}
        for w in hang["waits"]:
            if w["op"] in ("send", "recv") or w["op"] == "new_group":
                tally["p2p_waits"] += 1
                continue
            counts["collective_waits"] += 1
            key = (w["group_id"], w["seq"])
            for r in w["missing"]:
                if (*key, r) not in missing and key not in mismatched_at:
                    problems.append(f"meshsim: rank {r} missing from group {key[0]} seq {key[1]} "
                                    f"({w['group']}); torch does not say so")
        for d in hang.get("desyncs", []):
            counts["desyncs"] += 1
            want = MISMATCH_CLASSES.get(planted["kind"])
            found = {c for g, s, _, c in mismatches if (g, s) == (d["group_id"], d["seq"])}
            if want and want not in found:
                problems.append(f"meshsim: a desync on group {d['group_id']} seq {d['seq']}; "
                                f"torch reports {sorted(found) or 'no mismatch'} there")
        if partial:
            tally["partial"] += 1
            tally["partial_agreed"] += len(problems) == problems_before
            del problems[problems_before:]
        else:
            for k, v in counts.items():
                tally[k] += v
    for form, directory in (("pickle", pickles), ("JSON", jsons)):
        analysis = fr_analysis(meshsim, directory)
        if form == "pickle":
            # The run's dumps replay as a scenario that reproduces what they show.
            problems += replay_round_trip(meshsim, pickles, os.path.join(dumps, "replay.toml"),
                                          analysis)[0]
        if (analysis["verdict"] == "no hang") != (hang is None):
            problems.append(f"fr analyze on the {form} dumps says {analysis['verdict']}")
        elif form == "pickle" and hang is not None and planted["rank"] in hang["culprits"]:
            if planted["rank"] not in named_ranks(analysis):
                tally["misses"].append(f"{where}: fr analyze names "
                                       f"{sorted(named_ranks(analysis))}, not rank "
                                       f"{planted['rank']}")
    if problems:
        problems.append("torch's log:\n" + log[-3000:])
    return [f"{where}: {p}" for p in problems]


def main():
    require_torch("fr_dump_diff", lambda: __import__("torch.distributed.flight_recorder"))
    meshsim = os.path.abspath(sys.argv[1])
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    known_misses = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    jobs = make_jobs(cases, seed)
    keys = reference_keys()
    failures, tally = [], {"collective_waits": 0, "p2p_waits": 0, "desyncs": 0, "partial": 0,
                           "partial_agreed": 0, "misses": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "dumps")
        results = {}
        # One run per buffer size: the flag is the run's.
        for buffer in sorted({j["buffer"] for j in jobs}):
            paths = []
            for job in jobs:
                if job["buffer"] != buffer:
                    continue
                path = os.path.join(tmp, f"{job['name']}.toml")
                with open(path, "w") as f:
                    f.write(job["toml"])
                paths.append(path)
            report = os.path.join(tmp, f"report{buffer}.json")
            run = subprocess.run([meshsim, "run", "--no-time", "--json", report, "--fr-dump", base,
                                  "--fr-buffer-size", str(buffer), *paths],
                                 capture_output=True, text=True, timeout=1200)
            if run.returncode not in (0, 1):
                sys.exit(f"fr_dump_diff: meshsim run exited {run.returncode}: {run.stderr[-2000:]}")
            with open(report) as f:
                for s in json.load(f)["scenarios"]:
                    results[s["name"]] = s
        for job in jobs:
            failures += check_job(meshsim, job, results[job["name"]], base, keys, tally)
    kinds = {}
    for job in jobs:
        k = job["schedule"].planted["kind"]
        kinds[k] = kinds.get(k, 0) + 1
    for f in failures[:10]:
        print("FAIL:", f)
    for m in tally["misses"]:
        print("miss:", m)
    print(f"fr_dump_diff: {len(jobs)} jobs ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}"
          f"); torch's analyzer agreed on {tally['collective_waits']} collective waits and "
          f"{tally['desyncs']} desyncs of complete dumps; {tally['p2p_waits']} point-to-point "
          f"waits it does not follow were left out; of {tally['partial']} hung jobs whose "
          f"buffers wrapped or whose sends and recvs stopped it, it agreed on "
          f"{tally['partial_agreed']}")
    misses = len(tally["misses"])
    print(f"fr_dump_diff: fr analyze missed the planted rank the run names in {misses} jobs, "
          f"{known_misses} known")
    failed = len({f.split(':')[0] for f in failures}) + max(0, misses - known_misses)
    print(f"{len(jobs) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
