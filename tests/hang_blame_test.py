#!/usr/bin/env python3
"""Property test: the hang report blames the planted fault.

Generates random training schedules (1F1B pipelines and FSDP layer loops over [pp, dp, tp] meshes
of 8 to 256 ranks; tests/hang_blame/schedules.py), plants one fault at a random rank, train step
and loop iteration (a skipped collective, send or recv, an extra collective, a collective on the
wrong group), runs them all through `meshsim run --json`, and checks that the report's first three
summary lines name the planted call site with its iterations and that the planted rank is a
culprit. The schedules without the fault must run to the end: the generator is checked too.

Usage: hang_blame_test.py MESHSIM [CASES] [SEED] [KNOWN_MISSES] [KIND]

KIND draws every schedule of one kind (1f1b, interleaved, fsdp, hsdp); by default 1F1B, FSDP and
HSDP schedules are mixed.

KNOWN_MISSES (default 0) is how many of these cases the analysis is known to miss: the test fails
when it misses more. Cases are deterministic for a seed, so the count only moves with the code.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hang_blame"))
import schedules  # noqa: E402

MESHSIM = sys.argv[1]
CASES = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1
KNOWN_MISSES = int(sys.argv[4]) if len(sys.argv) > 4 else 0
KIND = sys.argv[5] if len(sys.argv) > 5 else None
BATCH = 200  # scenarios per meshsim run
BASELINES = 40  # fault-free schedules run first


def named(text, site):
    """Whether `text` names `site` ((line, iterations)) as "line 19 (s=0, w=2)" or as a location
    "f.toml:19:3 (all_reduce, s=0, w=2)"."""
    line, iterations = site
    return (f"line {line} ({iterations})" in text
            or any(f":{line}:" in part and f", {iterations})" in part
                   for part in text.split("\n")))


def run_batch(paths, tmp):
    report = os.path.join(tmp, "report.json")
    r = subprocess.run([MESHSIM, "run", "--no-time", "--json", report, *paths],
                       capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 1):
        sys.exit(f"hang_blame: meshsim exited {r.returncode}: {r.stderr[-2000:]}")
    with open(report) as f:
        return {s["file"]: s for s in json.load(f)["scenarios"]}


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # 1. The generator's schedules are valid training programs: no fault, no hang.
        paths = []
        for i in range(BASELINES):
            schedule = schedules.Schedule(schedules.random.Random(SEED * 100003 + i), KIND).build()
            path = os.path.join(tmp, f"baseline_{i}.toml")
            with open(path, "w") as f:
                f.write(schedule.toml())
            paths.append(path)
        for path, result in run_batch(paths, tmp).items():
            if result.get("hang") or result["result"] != "pass":
                failures.append(f"{path}: the fault-free schedule did not pass: "
                                f"{(result.get('hang') or {}).get('summary')}")
        # 2. Planted faults.
        cases, seed, kinds = [], SEED * 1000003, {}
        while len(cases) < CASES:
            seed += 1
            schedule = schedules.generate(seed, KIND)
            if schedule is None:
                continue
            path = os.path.join(tmp, f"case_{len(cases)}.toml")
            with open(path, "w") as f:
                f.write(schedule.toml())
            cases.append((path, seed, schedule))
            kinds[schedule.planted["kind"]] = kinds.get(schedule.planted["kind"], 0) + 1
        for start in range(0, len(cases), BATCH):
            batch = cases[start:start + BATCH]
            results = run_batch([p for p, _, _ in batch], tmp)
            for path, seed, schedule in batch:
                planted = schedule.planted
                result = results.get(path)
                hang = (result or {}).get("hang")
                where = (f"seed {seed} ({schedule.kind} {schedule.pp}x{schedule.dp}x"
                         f"{schedule.tp}, {planted['kind']} at rank {planted['rank']} "
                         f"{planted['site']})")
                if not hang:
                    failures.append(f"{where}: no hang reported")
                    continue
                first = "\n".join(hang["summary"][:3])
                if not any(named(first, site) for site in planted["sites"]):
                    failures.append(f"{where}: the first lines do not name the call site:\n"
                                    f"{first}")
                elif planted["rank"] not in hang["culprits"]:
                    failures.append(f"{where}: rank {planted['rank']} is not a culprit "
                                    f"({hang['culprits'][:8]}):\n{first}")
    for f in failures[:int(os.environ.get("HANG_BLAME_SHOW", "10"))]:
        print("FAIL:", f)
    print(f"hang_blame: {CASES} planted faults ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}) "
          f"and {BASELINES} fault-free schedules; {len(failures)} missed")
    baseline_failures = [f for f in failures if "fault-free" in f]
    misses = len(failures) - len(baseline_failures)
    print(f"hang_blame: {misses} misses, {KNOWN_MISSES} known")
    failed = len(baseline_failures) + max(0, misses - KNOWN_MISSES)
    print(f"{CASES + BASELINES - len(failures)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
