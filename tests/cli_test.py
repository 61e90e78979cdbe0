#!/usr/bin/env python3
"""End-to-end checks of the meshsim command: exit codes, locations in messages, determinism,
and robustness against truncated and random files. Usage: cli_test.py MESHSIM SOURCE_ROOT"""
import json
import os
import random
import subprocess
import sys
import tempfile

MESHSIM, ROOT = sys.argv[1], sys.argv[2]
failures = []
checks = 0


def run(*args):
    return subprocess.run([MESHSIM, *args], capture_output=True, text=True, timeout=60)


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def in_root(*parts):
    return os.path.join(ROOT, *parts)


# A passing directory run exits 0, lists every scenario and closes with the totals line.
r = run("run", "--no-time", in_root("scenarios"))
check(r.returncode == 0, f"scenarios/ exits 0, got {r.returncode}: {r.stdout[-400:]}")
check(" passed, 0 failed" in r.stdout, "totals line present")

# The deliberately failing scenario: exit 1, the expectation's file:line and the unexpected error.
failing = in_root("tests", "scenarios", "failing_coordinate.toml")
r = run("run", "--no-time", failing)
check(r.returncode == 1, f"failing scenario exits 1, got {r.returncode}")
check("failing_coordinate.toml:11:1: rank 1: expected coordinate(m) == [1,0], got [0,1]" in r.stdout,
      "failed expectation names file:line:col, rank, expected and observed:\n" + r.stdout)
check("failing_coordinate.toml:15:1: rank 0: mesh step failed: KeyError:" in r.stdout,
      "unexpected model error names the step location and the Python error type")
check("rerun: meshsim run " in r.stdout, "a failing run prints the command that reproduces it")

# Unusable input: exit 2 with file:line:col and what was expected.
bad = {
    "unknown_step.toml": ':5:1: unknown step "frobnicate"',
    "unknown_key.toml": ':7:1: unknown key "colour" in a mesh definition',
    "wrong_type.toml": ":3:14: world_size must be an integer, not a string",
    "unknown_mesh.toml": ':5:14: unknown mesh "nowhere"',
    "unknown_dim.toml": ":9:19: bad expression in value: mesh 'm' has no dim 'y'",
    "mesh_too_big.toml": ':6:9: mesh "m" has 8 ranks, more than the world size 4',
    "bad_expression.toml": ":5:16: bad expression in value: unexpected '*'",
    "toml_syntax.toml": ":6:15: TOML syntax error",
}
for name, message in bad.items():
    for command in ("run", "check"):
        r = run(command, in_root("tests", "bad_inputs", name))
        check(r.returncode == 2, f"{command} {name} exits 2, got {r.returncode}")
        check(name + message in r.stdout, f"{command} {name} says '{message}', got: {r.stdout}")

check(run("run", in_root("no", "such.toml")).returncode == 2, "missing file exits 2")
check(run("run", "--bogus-flag", failing).returncode == 2, "unknown flag exits 2")
check(run().returncode == 2, "no subcommand exits 2")
r = run("--version")
check(r.returncode == 0 and r.stdout.startswith("meshsim "), "--version")
r = run("--help")
check(r.returncode == 0 and "run" in r.stdout and "check" in r.stdout, "--help lists commands")
r = run("check", in_root("scenarios"))
check(r.returncode == 0 and r.stdout.count(": ok (") >= 8, "check accepts every shipped scenario")

# Determinism: two runs give byte-identical text (without times) and JSON.
with tempfile.TemporaryDirectory() as tmp:
    outs = []
    for i in range(2):
        path = os.path.join(tmp, f"r{i}.json")
        r = run("run", "--no-time", "--json", path, in_root("scenarios"), failing)
        outs.append((r.stdout, open(path).read()))
    check(outs[0] == outs[1], "run twice gives identical text and JSON")
    report = json.loads(outs[0][1])
    check(report["schema_version"] == 1, "JSON schema version")
    check(report["summary"]["failed"] == 1, "JSON summary counts the failing scenario")
    failed = [s for s in report["scenarios"] if s["result"] == "fail"][0]
    check(failed["ranks"][0]["failure"]["type"] == "KeyError", "JSON names the rank failure type")
    check(any(not e["passed"] and e["location"]["line"] == 11 for e in failed["expectations"]),
          "JSON carries expectation locations")
    dumps = [d for s in report["scenarios"] for d in s["dumps"]]
    check(any(d["value"].get("groups") for d in dumps), "JSON carries dumps")

    # Run-twice determinism for every shipped scenario under FIFO and three random seeds: the same
    # schedule digest, values and report, byte for byte; and every schedule passes.
    digests = {}
    for schedule in (["--schedule", "fifo"], ["--schedule", "random", "--seed", "1"],
                     ["--schedule", "random", "--seed", "2"], ["--schedule", "random", "--seed", "3"]):
        texts = []
        for i in range(2):
            path = os.path.join(tmp, f"d{i}.json")
            r = run("run", "--no-time", "--json", path, *schedule, in_root("scenarios"))
            check(r.returncode == 0, f"scenarios pass under {' '.join(schedule)}: {r.stdout[-600:]}")
            texts.append((r.stdout, open(path).read()))
        check(texts[0] == texts[1], f"two runs under {' '.join(schedule)} are byte-identical")
        report = json.loads(texts[0][1])
        digests[" ".join(schedule)] = [s["schedule"]["digest"] for s in report["scenarios"]]
    check(len({tuple(d) for d in digests.values()}) > 1, "random seeds change the schedule")

    # The wait-for graph of a hang as Graphviz DOT.
    graph = os.path.join(tmp, "g.dot")
    r = run("run", "--no-time", "--graph", graph, in_root("scenarios", "hang_order_inversion.toml"))
    dot = open(graph).read()
    check("digraph wait_for" in dot and "r0 -> r1;" in dot and "r1 -> r0;" in dot, "DOT graph has the cycle")

    # A Chrome trace: a track per rank, slices in virtual time, flows joining collectives.
    trace = os.path.join(tmp, "t.json")
    r = run("run", "--no-time", "--trace", trace, in_root("scenarios", "collectives_mesh_groups.toml"))
    events = json.load(open(trace))["traceEvents"]
    check(any(e["ph"] == "M" and e["args"].get("name") == "rank 7" for e in events), "trace names rank tracks")
    check(any(e["ph"] == "X" and e["name"].startswith("all_reduce") and e["dur"] > 0 for e in events),
          "trace has collective slices with virtual durations")
    check(sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) > 0, "trace flows pair up")

    # Seeded faults are reproducible and named in the report and the rerun line.
    outs = [run("run", "--no-time", "--faults-seed", "5", in_root("scenarios", "collectives_results.toml")).stdout
            for _ in range(2)]
    check(outs[0] == outs[1], "the same fault seed gives the same run")
    check("injected: backend error on rank 0 at its collective 4 (--faults-seed 5)" in outs[0],
          "the drawn fault is reported")
    check("--faults-seed 5" in outs[0].split("rerun:")[1], "the rerun line carries the fault seed")

    # A failing run under a random schedule prints the command that reproduces it.
    r = run("run", "--no-time", "--schedule", "random", "--seed", "9", failing)
    check("rerun: meshsim run " + failing + " --schedule random --seed 9" in r.stdout,
          "rerun line carries the schedule and seed")

    # Truncations and random mutations of every shipped scenario: exit 0, 1 or 2, never a crash.
    rng = random.Random(20261130)
    sources = sorted(os.listdir(in_root("scenarios")))
    cases = 0
    for name in sources:
        if not name.endswith(".toml"):
            continue
        text = open(in_root("scenarios", name), "rb").read()
        variants = [text[: rng.randrange(len(text))] for _ in range(12)]
        for _ in range(12):
            b = bytearray(text)
            for _ in range(rng.randrange(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            variants.append(bytes(b))
        variants.append(bytes(rng.randrange(256) for _ in range(300)))
        for v in variants:
            path = os.path.join(tmp, "fuzz.toml")
            open(path, "wb").write(v)
            r = subprocess.run([MESHSIM, "run", "--no-time", path], capture_output=True, timeout=60)
            cases += 1
            check(r.returncode in (0, 1, 2), f"{name} variant exits {r.returncode}, not a crash")
            if r.returncode == 2:
                check(b"fuzz.toml:" in r.stdout, f"{name} variant: unusable input names the file")
    print(f"fuzzed {cases} variants")

print(f"cli: {checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
