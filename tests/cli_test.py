#!/usr/bin/env python3
"""End-to-end checks of the meshsim command: exit codes, locations in messages, determinism,
hostile files and flags, and robustness against truncated and random files. Behaviour checks and
fuzz cases are counted apart. Usage: cli_test.py MESHSIM SOURCE_ROOT"""
import json
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile

MESHSIM, ROOT = sys.argv[1], sys.argv[2]
failures = []
checks = 0
fuzz_cases = 0
fuzz_failures = []


def run(*args, timeout=60):
    return subprocess.run([MESHSIM, *args], capture_output=True, text=True, timeout=timeout,
                          errors="replace")


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

# A file named again, directly or through its directory, is checked and run once.
one = in_root("scenarios", "pp_1f1b.toml")
r = run("check", in_root("scenarios"), one, os.path.join(in_root("scenarios"), ".", "pp_1f1b.toml"))
check(r.returncode == 0 and r.stdout.count("pp_1f1b.toml: ok") == 1,
      f"check DIR FILE lists the file once: {r.stdout.count('pp_1f1b.toml: ok')}")

# `meshsim steps`: a header, then one row per step kind with its arguments in aligned columns.
r = run("steps")
rows = r.stdout.splitlines()
check(rows[0].split() == ["step", "arguments", "what", "it", "does"], f"steps header: {rows[0]}")
column = rows[0].index("arguments")
aligned = [row for row in rows[1:] if not row.startswith(" ")]
check(all(row[column - 2:column] == "  " and row[column] != " " for row in aligned),
      "steps: every argument starts in the arguments column")
check(any(row.startswith("all_reduce ") and "{ tensor, op, group, out }" in row for row in rows),
      "steps: all_reduce lists its arguments")

# A hang report leads with its root cause; aborted ranks with the same story share one line; a
# scenario-level expectation names no rank (never "rank -1").
r = run("run", "--no-time", "-v", in_root("scenarios", "hang_pp_1f1b_forgotten_send.toml"))
lines = r.stdout.splitlines()
check(r.returncode == 0 and lines[1].strip() == "deadlock: unmatched send/recv",
      f"1F1B hang: cause on the report's first line: {lines[:3]}")
check("ranks 4, 5 did not post the send at line 46 (j=6) (`when` false); ranks 2, 3 wait for it "
      "in their 8th recv" in lines[2] and "7 sends posted" in lines[2],
      f"1F1B hang: the culprits on the second line, one story for both: {lines[2][:200]}")
check("step failed: aborted" not in r.stdout and "aborted: aborted" not in r.stdout,
      "aborted ranks are not reported as 'step failed: aborted: aborted ...'")
with tempfile.TemporaryDirectory() as tmp:
    wrong = os.path.join(tmp, "wrong_cause.toml")
    text = open(in_root("scenarios", "hang_rank_exits_early.toml")).read()
    open(wrong, "w").write(text.replace('cause = "rank exited early"', 'cause = "rank failed"'))
    r = run("run", "--no-time", wrong)
    check(r.returncode == 1 and "rank -1" not in r.stdout and "expected deadlock ==" in r.stdout,
          f"a failed scenario-level expectation names no rank: {r.stdout[-600:]}")
    r = run("run", "--no-time", "--json", os.path.join(tmp, "r.json"), wrong)
    report = json.load(open(os.path.join(tmp, "r.json")))
    check(report["scenarios"][0]["expectations"][0]["rank"] is None,
          "JSON: a scenario-level expectation's rank is null")

# The deliberately failing scenario: exit 1, the expectation's file:line and the unexpected error.
failing = in_root("tests", "scenarios", "failing_coordinate.toml")
r = run("run", "--no-time", failing)
check(r.returncode == 1, f"failing scenario exits 1, got {r.returncode}")
check("failing_coordinate.toml:11:1: rank 1: expected coordinate(m) == [1,0], got [0,1]" in r.stdout,
      "failed expectation names file:line:col, rank, expected and observed:\n" + r.stdout)
check("failing_coordinate.toml:15:1: ranks 0-3: mesh step failed: KeyError:" in r.stdout,
      "unexpected model error names the step location and the Python error type, once for all "
      "ranks")
check(r.stdout.index("rank 1: expected coordinate") < r.stdout.index("rank 2: expected coordinate"),
      "failed expectations in rank order")
check("rerun: meshsim run " in r.stdout, "a failing run prints the command that reproduces it")
with tempfile.TemporaryDirectory() as tmp:
    # The same expectation failing the same way on many ranks is one line.
    same = os.path.join(tmp, "same.toml")
    with open(same, "w") as f:
        f.write('[scenario]\nname = "same"\nworld_size = 64\n[[expect]]\nvalue = "1"\nequals = 7\n'
                '[[expect]]\nvalue = "rank % 3"\nequals = 0\n')
    r = run("run", "--no-time", same)
    check("same.toml:4:1: ranks 0-63: expected value(1) == 7, got 1\n" in r.stdout
          and r.stdout.count("expected value(1)") == 1,
          f"one line for 64 identical failures: {r.stdout[:600]}")
    check("same.toml:7:1: ranks 1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 34, 37, 40, 43, 46, 49, "
          "52, 55, 58, 61: expected value(rank % 3) == 0, got 1\n" in r.stdout
          and "ranks 2, 5, 8," in r.stdout and r.stdout.count("expected value(rank % 3)") == 2,
          f"failures that differ keep a line each: {r.stdout[:600]}")

# Unusable input: exit 2 with file:line:col and what was expected.
bad = {
    "unknown_step.toml": ':5:1: unknown step "frobnicate"',
    "unknown_key.toml": ':7:1: unknown key "colour" in a mesh definition',
    "wrong_type.toml": ":3:14: world_size must be an integer, not a string",
    "unknown_mesh.toml": ':5:14: unknown mesh "nowhere"',
    "unknown_dim.toml": ":9:19: bad expression in value: mesh 'm' has no dim 'y'",
    "mesh_too_big.toml": ':6:9: mesh "m" has 8 ranks, more than the world size 4',
    "bad_expression.toml": ":5:16: bad expression in value: unexpected '*'",
    "bad_view_index.toml": ":7:54: index \"[:, 1::coord(m, 0)]\": unknown mesh 'm'",
    "toml_syntax.toml": ":6:15: TOML syntax error",
    "collective_two_peers.toml": ":5:13: broadcast needs exactly one of src (a global rank) and "
                                 "group_src (a rank of the group)",
    # Each a load-time error at its place, never a crash or a wrong value.
    "deep_parens.toml": ":5:74: bad expression in value: expression nests deeper than 64 levels",
    "unary_chain.toml": ":5:73: bad expression in value: expression nests deeper than 64 levels",
    "constant_overflow.toml": ":5:27: bad expression in value: integer overflow in '*': the "
                              "result does not fit in int64",
    "nan_sleep.toml": ":5:9: sleep (seconds) must be a finite number, not nan",
    "inf_timeout.toml": ":4:13: timeout_s must be a finite number, not inf",
    "negative_sleep.toml": ":5:9: sleep (seconds) must be zero or positive, got -0.5",
    "mesh_shape_overflow.toml": ":6:9: the mesh shape's product does not fit in int64",
    "meta_overflow.toml": ":5:32: meta(4294967296, 4294967296): Storage size calculation "
                          "overflowed with sizes=[4294967296, 4294967296]",
    "tensor_over_budget.toml": ":5:32: full(1000000000, 1) takes 3.7 GiB per rank, 14.9 GiB on "
                               "the 4 rank(s) that run this step: more than the 8.0 GiB memory "
                               "budget (--max-memory)",
    "toml_bug_190.toml": ":5:1: character U+00A7 is not allowed after a backslash in a "
                         "multi-line string (toml++ 3.3 bug)",
    "non_ascii_outside_string.toml": ":6:11: character U+00A0 is not allowed outside a string "
                                     "or a comment",
    # Checkpoint steps say what is wrong with a path before anything runs.
    "checkpoint_path_escapes.toml": ":5:29: a checkpoint path is a file name of letters, digits",
    "checkpoint_load_unsaved.toml": ':5:29: no save step before this writes "never-{rank}.ckpt"',
    "checkpoint_load_wrong_kind.toml": ':10:29: "m-{rank}.ckpt" holds a mesh, not RNG state',
    "checkpoint_missing_file.toml": ":5:29: cannot use no/such/m-0.ckpt (rank 0's file): cannot "
                                    "read",
    "checkpoint_dir_missing.toml": ":7:27: cannot use the checkpoint in no/such/step1: cannot read",
    "checkpoint_dir_escapes.toml": ":5:27: checkpoint_dir is a directory relative to the "
                                   "scenario's",
    "checkpoint_rng_key_template.toml": ":5:38: rng: in {coord(nomesh, pp)}: unknown mesh 'nomesh'",
    "checkpoint_load_both_sources.toml": ":7:8: a load of a checkpoint takes checkpoint (a save of "
                                         "this run) or checkpoint_dir",
    "checkpoint_unknown_format.toml": ':7:54: unknown checkpoint format "safetensors" (binary, '
                                      "text or xml: meshsim's own records; dcp: PyTorch's",
}
for name, message in bad.items():
    for command in ("run", "check"):
        r = run(command, "--max-memory", "8G", in_root("tests", "bad_inputs", name))
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

# Warnings are never hidden: a passing run prints their summary by kind, with file:line, before
# the totals; --warnings-as-errors fails a run that warns and passes one that does not.
r = run("run", "--no-time", in_root("scenarios", "rng_overlap_quirks.toml"))
out = r.stdout.splitlines()
check(r.returncode == 0 and any(l.startswith("warnings: ") and "(rng overlap " in l for l in out),
      f"warnings: a passing run prints a summary by kind: {out[-8:]}")
check(any(l.startswith("  scenarios/rng_overlap_quirks.toml:") or
          "rng_overlap_quirks.toml:24:1: RNG overlap" in l for l in out),
      f"warnings: the first ones are listed with file:line: {out[-8:]}")
check(out[-1] == "1 passed, 0 failed", f"warnings: the totals stay the last line: {out[-1:]}")
r = run("run", "--no-time", "--warnings-as-errors", in_root("scenarios", "rng_overlap_quirks.toml"))
check(r.returncode == 1 and "with --warnings-as-errors: the run fails" in r.stdout,
      f"--warnings-as-errors fails a run that warns: {r.returncode}")
r = run("run", "--no-time", "--warnings-as-errors", in_root("scenarios", "pp_1f1b.toml"))
check(r.returncode == 0 and "warnings:" not in r.stdout,
      f"--warnings-as-errors passes a run without warnings: {r.returncode}")

# Checkpoints: a run's directory is removed afterwards; --keep-checkpoints keeps it under
# DIR/<scenario name>, and two runs write byte-identical files.
with tempfile.TemporaryDirectory() as tmp:
    scratch = os.path.join(tmp, "scratch")
    os.mkdir(scratch)
    env = dict(os.environ, TMPDIR=scratch)
    seed_test = in_root("scenarios", "checkpoint_seed_test.toml")
    r = subprocess.run([MESHSIM, "run", "--no-time", seed_test], capture_output=True, text=True,
                       env=env, timeout=60)
    check(r.returncode == 0, f"checkpoint_seed_test passes: {r.stdout}")
    check(os.listdir(scratch) == [], f"the run's checkpoint directory is removed: {os.listdir(scratch)}")
    kept = []
    for i in range(2):
        keep = os.path.join(tmp, f"keep{i}")
        r = run("run", "--no-time", "--keep-checkpoints", keep, seed_test)
        files = sorted(os.listdir(os.path.join(keep, "checkpoint-seed-test")))
        check(files == [f"x-{k}.ckpt" for k in range(4)], f"--keep-checkpoints keeps the files: {files}")
        kept.append([open(os.path.join(keep, "checkpoint-seed-test", f), "rb").read() for f in files])
    check(kept[0] == kept[1], "two runs write byte-identical checkpoint files")
    r = run("run", "--no-time", "--keep-checkpoints", os.path.join(in_root("README.md"), "x"), seed_test)
    check(r.returncode != 0 and "cannot prepare checkpoint directory" in r.stdout + r.stderr,
          f"an unusable --keep-checkpoints directory is named: {r.stdout} {r.stderr}")

# The checkpoint the resume scenarios read (scenarios/checkpoints/) is what the 16-rank training
# job writes today, byte for byte, and the resume jobs also pass on a freshly written copy.
with tempfile.TemporaryDirectory() as tmp:
    train = "checkpoint-train-pp2-dp4-tp2"
    r = run("run", "--no-time", "--keep-checkpoints", tmp,
            in_root("scenarios", "checkpoint_train_pp2_dp4_tp2.toml"))
    check(r.returncode == 0, f"the training job passes: {r.stdout}")
    fresh = os.path.join(tmp, train, "step1")
    shipped = in_root("scenarios", "checkpoints", train, "step1")
    names = sorted(os.listdir(fresh))
    check(names == sorted(os.listdir(shipped)) and len(names) == 17,
          f"the training job writes metadata and 16 shard files: {names}")
    for name in names:
        with open(os.path.join(fresh, name), "rb") as a, open(os.path.join(shipped, name), "rb") as b:
            check(a.read() == b.read(), f"{name} is the shipped file, byte for byte")
    for scenario in ("checkpoint_resume_pp2_dp2_tp2.toml", "checkpoint_resume_pp2_dp8_tp2.toml"):
        with open(in_root("scenarios", scenario)) as f:
            text = f.read().replace("checkpoints/" + train + "/step1", train + "/step1")
        copy = os.path.join(tmp, scenario)
        with open(copy, "w") as f:
            f.write(text)
        r = run("run", "--no-time", copy)
        check(r.returncode == 0 and "1 passed" in r.stdout, f"{scenario} resumes a fresh copy: {r.stdout}")

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

    # Several desyncs are listed by where they are, not in the order a schedule found them.
    stories = set()
    for seed in ("1", "5"):
        r = run("run", "--no-time", "-v", "--schedule", "random", "--seed", seed,
                in_root("scenarios", "hang_two_desyncs.toml"))
        stories.add(r.stdout[r.stdout.index("desync:"):r.stdout.index("per rank:")])
    check(len(stories) == 1, f"two desyncs read the same under any schedule: {stories}")

    # The wait-for graph of a hang as Graphviz DOT.
    graph = os.path.join(tmp, "g.dot")
    r = run("run", "--no-time", "--graph", graph, in_root("scenarios", "hang_order_inversion.toml"))
    dot = open(graph).read()
    check("digraph wait_for" in dot and "r0 -> r1 [color=red" in dot and "r1 -> r0 [color=red" in dot,
          "DOT graph has the cycle, in red")
    # Several hangs: a directory gets one file each; a file gets the first, and says so.
    graphs = os.path.join(tmp, "graphs") + "/"
    hangs = [in_root("scenarios", f) for f in ("hang_order_inversion.toml", "hang_two_desyncs.toml")]
    r = run("run", "--no-time", "--graph", graphs, *hangs)
    check(sorted(os.listdir(graphs)) == ["hang-order-inversion.dot", "hang-two-desyncs.dot"],
          "--graph DIR/ writes one file per hung scenario: " + str(os.listdir(graphs)))
    check("called barrier()" in open(os.path.join(graphs, "hang-two-desyncs.dot")).read(),
          "a desync's graph says what each side called")
    r = run("run", "--no-time", "--graph", graph, *hangs)
    check("2 scenarios hung; " + graph + " holds the first (hang-order-inversion)" in r.stdout
          and open(graph).read().count("digraph") == 1, "--graph FILE holds one graph and says which")

    # A Chrome trace: a track per rank, slices in virtual time, flows joining collectives.
    trace = os.path.join(tmp, "t.json")
    r = run("run", "--no-time", "--trace", trace, in_root("scenarios", "collectives_mesh_groups.toml"))
    events = json.load(open(trace))["traceEvents"]
    check(any(e["ph"] == "M" and e["args"].get("name") == "rank 7" for e in events), "trace names rank tracks")
    check(any(e["ph"] == "X" and e["name"].startswith("all_reduce") and e["dur"] > 0 for e in events),
          "trace has collective slices with virtual durations")
    check(sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) > 0, "trace flows pair up")

    # Slices name groups as the scenario does; new_group's store barriers only with --trace-setup.
    check(any(e["ph"] == "X" and e["name"].startswith("all_reduce world.tp#") for e in events),
          "trace slices name groups by mesh and dim: "
          + str(sorted({e["name"] for e in events if e["ph"] == "X"})[:6]))
    check(not any(e["ph"] == "X" and e["name"].startswith("new_group") for e in events),
          "no new_group slices without --trace-setup")
    r = run("run", "--no-time", "--trace", trace, "--trace-setup",
            in_root("scenarios", "collectives_mesh_groups.toml"))
    events = json.load(open(trace))["traceEvents"]
    check(any(e["ph"] == "X" and e["name"].startswith("new_group store (WORLD)") for e in events),
          "--trace-setup adds new_group slices")
    # A hang: the collective each blocked rank waits in is a slice that never ends.
    r = run("run", "--no-time", "--trace", trace, in_root("scenarios", "hang_rank_exits_early.toml"))
    events = json.load(open(trace))["traceEvents"]
    hung = [e for e in events if e["ph"] == "B"]
    check(sorted(e["tid"] for e in hung) == [0, 1, 2] and
          all(e["name"] == "all_reduce WORLD #2 (hung)" and e["args"]["waiting_for"] == "3"
              for e in hung), f"hung collective as open slices: {hung[:2]}")
    # A hung new_group is an open slice too, without --trace-setup, naming what it creates and the
    # PyTorch call that creates it.
    r = run("run", "--no-time", "--trace", trace, in_root("scenarios", "hang_submesh_some_ranks.toml"))
    hung = {e["tid"]: e for e in json.load(open(trace))["traceEvents"] if e["ph"] == "B"}
    check(sorted(hung) == [0, 1, 2, 3] and
          hung[0]["name"] == "new_group store (WORLD) #1 (hung)" and
          hung[0]["args"]["creating"] == 'pair [0, 1] for init_device_mesh("cuda", (2,))' and hung[0]["args"]["waiting_for"] == "2-3" and
          hung[3]["name"] == "barrier WORLD #1 (hung)", f"a hung new_group is an open slice: {hung}")

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

    # Files that are not scenario files: refused at once with the path, never read forever.
    fifo = os.path.join(tmp, "pipe.toml")
    os.mkfifo(fifo)
    big = os.path.join(tmp, "big.toml")
    with open(big, "wb") as f:
        f.truncate(17 << 20)
    for path, message in ((fifo, "cannot read a scenario from a FIFO"),
                          ("/dev/zero", "cannot read a scenario from a character device"),
                          ("/dev/urandom", "cannot read a scenario from a character device"),
                          (big, "the file is 17825792 bytes; scenario files are limited to 16777216"),
                          ("/proc/self/mem", "cannot read the file: Input/output error")):
        r = run("run", "--no-time", path, timeout=20)
        check(r.returncode == 2 and f"{path}: {message}" in r.stdout,
              f"{path} is refused with '{message}': exit {r.returncode}, {r.stdout[-300:]}")

    # A directory with a symlink loop, a dangling link and (when not root) an unreadable
    # subdirectory: each is an error for its path; the good scenario still runs and is reported.
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "locked"))
    os.symlink("loop_b.toml", os.path.join(tree, "loop_a.toml"))
    os.symlink("loop_a.toml", os.path.join(tree, "loop_b.toml"))
    os.symlink(".", os.path.join(tree, "again"))  # a cycle back to the top: walked once
    with open(os.path.join(tree, "good.toml"), "w") as f:
        f.write(open(in_root("scenarios", "mesh_slicing.toml")).read())
    os.chmod(os.path.join(tree, "locked"), 0)
    report = os.path.join(tmp, "tree.json")
    r = run("run", "--no-time", "--json", report, tree)
    os.chmod(os.path.join(tree, "locked"), stat.S_IRWXU)
    check(r.returncode == 2, f"a tree with bad entries exits 2, got {r.returncode}")
    check("loop_a.toml: error: cannot tell what this is: Too many levels of symbolic links"
          in r.stdout,
          "a symlink loop is an error for that path: " + r.stdout[-500:])
    check(r.stdout.count("mesh-slicing  pass") == 1, "the good scenario runs once, despite the cycle")
    tree_report = json.load(open(report))
    check([s["name"] for s in tree_report["scenarios"]] == ["mesh-slicing"],
          "the JSON report keeps the good scenario")
    if os.geteuid() != 0:  # root reads any directory
        check("locked: error: cannot read the directory: Permission denied" in r.stdout,
              "an unreadable directory is an error for that path: " + r.stdout[-500:])

    # Outputs that cannot be written are errors (found after flushing), not exit 0.
    one = in_root("scenarios", "mesh_slicing.toml")
    for flag in ("--json", "--trace", "--graph"):
        r = run("run", "--no-time", flag, "/dev/full", one)
        check(r.returncode == 2 and "cannot write /dev/full: No space left on device" in r.stderr,
              f"{flag} /dev/full exits 2 with the error: {r.returncode} {r.stderr}")
    r = run("run", "--no-time", "--json", tmp, one)
    check(r.returncode == 2 and f"cannot write {tmp}: Is a directory" in r.stderr,
          "--json into a directory exits 2")
    # An output over a scenario of the run, or an empty output path, is refused before running.
    victim = os.path.join(tmp, "victim.toml")
    with open(victim, "w") as f:
        f.write(open(one).read())
    for flag in ("--json", "--trace", "--graph", "--payload-hashes"):
        r = run("run", "--no-time", flag, victim, victim)
        check(r.returncode == 2 and "is a scenario file of this run" in r.stderr
              and open(victim).read() == open(one).read(),
              f"{flag} onto the scenario exits 2 and leaves it: {r.returncode} {r.stderr}")
        r = run("run", "--no-time", flag, "", one)
        check(r.returncode == 2 and f"{flag}: needs a path" in r.stderr,
              f"{flag} '' exits 2: {r.returncode} {r.stderr}")

    # A link to the root of the file system is not walked, a dangling link that is not a
    # scenario is not an error, and a FIFO with no reader is refused as an output.
    tree2 = os.path.join(tmp, "tree2")
    os.makedirs(tree2)
    os.symlink("/", os.path.join(tree2, "everything"))
    os.symlink("/nonexistent", os.path.join(tree2, "notes.txt"))
    with open(os.path.join(tree2, "good.toml"), "w") as f:
        f.write(open(in_root("scenarios", "mesh_slicing.toml")).read())
    r = run("check", tree2, timeout=20)
    check(r.returncode == 0 and r.stdout.count(": ok (") == 1,
          f"links out of the tree are not followed: {r.returncode} {r.stdout[-300:]}")
    fifo_out = os.path.join(tmp, "report.fifo")
    os.mkfifo(fifo_out)
    r = run("run", "--no-time", "--json", fifo_out, one, timeout=20)
    check(r.returncode == 2 and "a FIFO with no reader" in r.stderr,
          f"--json into a FIFO without reader exits 2: {r.returncode} {r.stderr}")

    # A scenario that crashes the simulator (here a rank made to overflow its fiber stack) fails
    # on its own; the others still run and every report is written.
    overflow = os.path.join(tmp, "overflow.toml")
    with open(overflow, "w") as f:
        f.write('[scenario]\nname = "overflow"\nworld_size = 4\n'
                '[[fault]]\nstack_overflow = { rank = 2, step = 2 }\n'
                '[[step]]\nbarrier = "WORLD"\n'
                '[[step]]\nall_reduce = { tensor = "ones(2)", out = "x" }\n')
    # Under AddressSanitizer its own report replaces meshsim's crash handler.
    asan = "AddressSanitizer" in run("--version").stdout
    for guard in () if asan else ("pages", "canary"):
        report = os.path.join(tmp, f"overflow_{guard}.json")
        r = run("run", "--no-time", "--stack-guard", guard, "--json", report, overflow, one)
        data = json.load(open(report))
        results = {s["name"]: s for s in data["scenarios"]}
        check(r.returncode == 1 and results["overflow"]["result"] == "crash" and
              results["mesh-slicing"]["result"] == "pass",
              f"{guard}: the crash fails its scenario only: {r.returncode} {r.stdout[-500:]}")
        check("rank 2 overflowed its 64 KiB fiber stack" in results["overflow"]["crash"] and
              "overflow.toml:8:1 (all_reduce step)" in results["overflow"]["crash"] and
              "--stack-kib 256" in results["overflow"]["crash"],
              f"{guard}: the crash names the rank, its step and the flag: "
              f"{results['overflow']['crash']}")
    if asan:
        report = os.path.join(tmp, "overflow_asan.json")
        r = run("run", "--no-time", "--json", report, overflow, one)
        results = {s["name"]: s["result"] for s in json.load(open(report))["scenarios"]}
        check(results == {"overflow": "crash", "mesh-slicing": "pass"},
              f"ASan: the crash fails its scenario only: {results}")
    else:
        r = run("run", "--no-time", "--in-process", overflow)
        check(r.returncode == 3 and "rank 2 overflowed its 64 KiB fiber stack" in r.stderr,
              f"--in-process: the overflow stops the process with status 3: {r.returncode}")

    # Guard pages asked for past the memory-map limit: a clear error, not a crash.
    huge_world = os.path.join(tmp, "huge_world.toml")
    with open(huge_world, "w") as f:
        f.write('[scenario]\nname = "huge"\nworld_size = 40000\n[[step]]\nbarrier = "WORLD"\n')
    r = run("run", "--no-time", "--stack-guard", "pages", huge_world, timeout=120)
    check(r.returncode == 2 and "40000 ranks with guard pages need 80000 memory maps" in r.stdout,
          f"--stack-guard pages past vm.max_map_count is refused: {r.returncode} {r.stdout[-400:]}")

    # An error while computing a collective's result reaches every member (no false deadlock).
    gather = os.path.join(tmp, "gather.toml")
    with open(gather, "w") as f:
        f.write('[scenario]\nname = "gather"\nworld_size = 2\n[[step]]\n'
                'all_gather_into_tensor = { tensor = "zeros(20000000)", out = "y" }\n')
    r = run("run", "--no-time", "--max-memory", "256M", "--json", report, gather)
    ranks = json.load(open(report))["scenarios"][0]["ranks"]
    check(all(x["failure"]["type"] == "MemoryError" for x in ranks) and
          json.load(open(report))["scenarios"][0]["hang"] is None,
          f"every member gets the collective's MemoryError: {r.stdout[-600:]}")

    # A 3 KB file cannot make the loader do work per rank of a huge world.
    fan = os.path.join(tmp, "fan.toml")
    with open(fan, "w") as f:
        f.write('[scenario]\nname = "fan"\nworld_size = 1048576\n' +
                "".join(f'[[step]]\nall_gather = {{ tensor = "ones(1)", out = "g{i}" }}\n'
                        for i in range(60)) +
                '[[expect]]\ntensor = "g59.1048575"\nequals = [1]\n')
    r = run("check", fan, timeout=10)
    check(r.returncode == 0, f"a huge world's all_gather outputs are declared in O(1): {r.stdout}")

    # Virtual time past what int64 microseconds hold (a huge meta tensor over the slowest
    # bandwidth) still gives a valid trace.
    slow = os.path.join(tmp, "slow.toml")
    with open(slow, "w") as f:
        f.write('[scenario]\nname = "slow"\nworld_size = 2\nbandwidth_gbps = 1e-9\n'
                '[[step]]\nall_reduce = { tensor = "meta(1152921504606846975, dtype=int64)", '
                'out = "x" }\n')
    trace = os.path.join(tmp, "slow_trace.json")
    r = run("run", "--no-time", "--trace", trace, slow)
    events = json.load(open(trace))["traceEvents"]
    check(r.returncode == 0 and all(0 <= e.get("ts", 0) <= 2**63 - 1 and
                                    0 <= e.get("dur", 0) <= 2**63 - 1 for e in events),
          f"trace times stay within int64 and ordered: {r.returncode}")

    # Numbers on the command line are read strictly.
    for flags, message in ((["--seed", "-1"], "--seed: expected an integer from 0 to "
                                              "18446744073709551615, got \"-1\""),
                           (["--seed", "18446744073709551616"], "--seed: expected an integer"),
                           (["--seed", "1e23"], "--seed: expected an integer"),
                           (["--faults-seed", "2^64"], "--faults-seed: expected an integer"),
                           (["--stack-kib", "8"], "--stack-kib: expected an integer from 16 to "
                                                  "65536, got 8"),
                           (["--max-memory", "lots"], "--max-memory: expected a size such as 8G"),
                           (["--max-memory", "0"], "--max-memory: expected a size"),
                           (["--max-memory", "9" * 400], "the number is out of range"),
                           (["--max-memory", "0." + "0" * 400 + "1"], "out of range"),
                           (["--timeout", "0"], "--timeout: expected a duration such as 90"),
                           (["--timeout", "5x"], "--timeout: expected a duration"),
                           (["--timeout", "-3s"], "--timeout: expected a duration"),
                           (["--timeout", "8d"], "--timeout: expected a duration"),
                           (["--timeout", "169h"], "it must be in (0 s, 1 week]"),
                           (["--timeout", "9" * 400], "the number is out of range")):
        r = run("run", *flags, one)
        check(r.returncode == 2 and message in r.stderr,
              f"{' '.join(flags)} exits 2 saying '{message}': {r.returncode} {r.stderr}")
    r = run("run", "--no-time", "--seed", "18446744073709551615", "--schedule", "random", one)
    check(r.returncode == 0, "the largest seed is accepted")
    # --timeout stops a scenario still going: it fails (exit 1) with a wall_clock report, and
    # its rerun line carries the flag.
    endless = os.path.join(tmp, "endless.toml")
    with open(endless, "w") as f:
        f.write('[scenario]\nname = "endless"\nworld_size = 4\n'
                '[[step]]\nrepeat = { var = "i", count = 4000 }\n'
                '[[step]]\nrepeat = { var = "j", count = 4000 }\n'
                '[[step]]\nall_reduce = { tensor = "ones(2)", out = "x" }\n'
                '[[step]]\nend_repeat = "j"\n[[step]]\nend_repeat = "i"\n')
    report = os.path.join(tmp, "endless.json")
    r = run("run", "--no-time", "--timeout", "500ms", "--json", report, endless)
    hang = json.load(open(report))["scenarios"][0]["hang"] if r.returncode == 1 else {}
    check(r.returncode == 1 and hang.get("kind") == "wall_clock" and
          "wall_clock: wall-clock limit" in r.stdout and
          "rerun: meshsim run " + endless + " --timeout 500ms" in r.stdout and
          len(hang.get("ranks", [])) == 4,
          f"--timeout 500ms stops an endless scenario with a wall_clock report: {r.returncode} "
          f"{r.stdout[-800:]}")
    # No progress line reaches output that is not a terminal.
    check("collective calls/s" not in r.stdout + r.stderr, "no progress line off a terminal")

    # The memory budget at run time: ranks that ask for more fail with MemoryError, and the run
    # goes on.
    budget = os.path.join(tmp, "budget.toml")
    with open(budget, "w") as f:
        f.write('[scenario]\nname = "budget"\nworld_size = 4\n'
                '[[step]]\ntensor = { name = "x", value = "full(100000 + rank, 1)" }\n'
                '[[expect]]\nrank_failed = { rank = 0, type = "MemoryError", '
                'contains = "a tensor needs 390.6 KiB, but 0 B of the '
                '256.0 KiB memory budget is in use" }\n')
    r = run("run", "--no-time", "--max-memory", "256K", budget)
    check(r.returncode == 0 and "1 passed, 0 failed" in r.stdout,
          "a tensor over --max-memory fails its rank with MemoryError: " + r.stdout[-600:])
    # Process groups count too: a loop that builds a mesh on every pass fails on every rank at
    # the same new_group, not after eating the machine.
    with open(budget, "w") as f:
        f.write('[scenario]\nname = "groups"\nworld_size = 4\n'
                '[[step]]\nrepeat = { var = "i", count = 1000000 }\n'
                '[[step]]\nmesh = { name = "m", shape = [2, 2] }\n'
                '[[step]]\nend_repeat = "i"\n'
                '[[expect]]\nrank_failed = { rank = 0, type = "MemoryError", '
                'contains = "process groups needs" }\n'
                '[[expect]]\nrank_failed = { rank = 3, type = "MemoryError", line = 6 }\n'
                '[[expect]]\nno_hang = true\n')
    r = run("run", "--no-time", "--max-memory", "1M", budget)
    check(r.returncode == 0 and "1 passed, 0 failed" in r.stdout,
          "process groups over --max-memory fail every rank with MemoryError: " + r.stdout[-600:])

    # Reports stay proportional: a dump of 10^7 rows holds runs, not indices.
    shards = os.path.join(tmp, "shards.json")
    r = run("run", "--no-time", "--json", shards,
            in_root("tests", "regressions", "shards_large_and_strided.toml"))
    check(r.returncode == 0 and os.path.getsize(shards) < 64 * 1024,
          f"the report of huge shards is small: {os.path.getsize(shards)} bytes")

    # Regression scenarios run the same way twice, under FIFO and a random schedule.
    for schedule in (["--schedule", "fifo"], ["--schedule", "random", "--seed", "5"]):
        outs = [run("run", "--no-time", *schedule, in_root("tests", "regressions")).stdout
                for _ in range(2)]
        check(outs[0] == outs[1] and " 0 failed" in outs[0],
              f"regressions pass and repeat under {' '.join(schedule)}: {outs[0][-400:]}")

    # `ckpt inspect` on the DCP checkpoint torch 2.15 wrote (tests/io/data/dcp_2x2): the table
    # from the metadata alone; a directory without its data files has problems (exit 1); a
    # hostile metadata file is refused naming its byte (exit 2).
    dcp = in_root("tests", "io", "data", "dcp_2x2")
    r = run("ckpt", "inspect", dcp)
    check(r.returncode == 0 and "10 entries (9 tensors, 1 object), 17 stored items in 4 files, "
          "26621 bytes" in r.stdout and "  model.w        float32    [8, 4]" in r.stdout,
          f"ckpt inspect lists torch's checkpoint: {r.returncode} {r.stdout[:600]!r} {r.stderr!r}")
    r = run("ckpt", "inspect", "--chunks", dcp)
    check("      [4:8, 0:2]  __2_0.distcp @1261 +1577" in r.stdout,
          f"ckpt inspect --chunks lists each chunk's region and place: {r.stdout[:900]!r}")
    copied = os.path.join(tmp, "dcp_partial")
    shutil.copytree(dcp, copied)
    os.remove(os.path.join(copied, "__1_0.distcp"))
    with open(os.path.join(copied, "__3_0.distcp"), "r+b") as f:
        f.truncate(100)
    r = run("ckpt", "inspect", copied)
    check(r.returncode == 1 and "__1_0.distcp: missing (3 items are in it)" in r.stdout and
          "__3_0.distcp: 100 bytes, but its items end at byte 11103" in r.stdout,
          f"ckpt inspect names missing and short data files: {r.returncode} {r.stdout[-400:]!r}")
    r = run("ckpt", "inspect", in_root("tests", "io", "data", "dcp_variants", "calls_system.metadata"))
    check(r.returncode == 2 and "byte 1621: STACK_GLOBAL (0x93): posix.system is not one of the "
          "classes this file may name" in r.stderr,
          f"ckpt inspect refuses a pickle that calls os.system: {r.returncode} {r.stderr!r}")
    r = run("ckpt", "inspect", in_root("scenarios"))
    check(r.returncode == 2 and "not a torch.distributed.checkpoint directory (it has no "
          ".metadata file)" in r.stderr, f"ckpt inspect on another directory: {r.stderr!r}")
    r = run("ckpt", "inspect", "--json", dcp)
    check(r.returncode == 0 and json.loads(r.stdout)["entries"][7] == {
        "name": "epoch", "kind": "object", "file": "__2_0.distcp", "offset": 0, "length": 1261},
        f"ckpt inspect --json: {r.stdout[:300]!r}")

    # `ckpt inspect x.pt`: a torch.save file of a DTensor (torch 2.15 wrote it; the diff test
    # torch_pt_diff compares many such files with torch), and one that is not a zip archive.
    pt = in_root("scenarios", "checkpoints", "torch-pt-fsdp-tp-2x4", "w-5.pt")
    r = run("ckpt", "inspect", "--values", pt)
    check(r.returncode == 0 and "a torch.save file holding a DTensor" in r.stdout and
          "placements   (_StridedShard(dim=0, sf=4), Shard(dim=0))" in r.stdout and
          "values       [24, 25, 26, 27, 28, 29, 30, 31]" in r.stdout and
          "saved by     rank 5, coordinate [1, 1]" in r.stdout and
          "group names  dp '2', tp '6'" in r.stdout,
          f"ckpt inspect x.pt: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = run("ckpt", "inspect", "--json", pt)
    check(r.returncode == 0 and json.loads(r.stdout)["mesh"]["group_names"] == ["2", "6"],
          f"ckpt inspect --json x.pt gives the saved group names: {r.stdout[:300]!r}")
    not_zip = os.path.join(tmp, "cut.pt")
    with open(pt, "rb") as src, open(not_zip, "wb") as dst:
        dst.write(src.read()[:-30])
    r = run("ckpt", "inspect", not_zip)
    check(r.returncode == 2 and "cut.pt: byte " in r.stderr,
          f"ckpt inspect on a cut torch.save file: {r.returncode} {r.stderr!r}")

    # `fr analyze` on Flight Recorder dumps torch 2.15 wrote on 4 Gloo ranks (tests/fr_writer.py;
    # fr_analyze_diff compares many jobs' dumps with torch's own analyzer).
    fr = in_root("tests", "io", "data", "fr")
    r = run("fr", "analyze", os.path.join(fr, "skipped"))
    check(r.returncode == 1 and r.stdout.startswith("deadlock: missing rank\n") and
          "rank 3 never called all_reduce(Float[4]) on WORLD seq 2 that ranks 0-2 wait in" in
          r.stdout and "ranks 0-2: blocked in all_reduce(Float[4]) on WORLD seq 2 at " in r.stdout
          and "the JSON dumps of ranks 0-3 are not read" in r.stdout,
          f"fr analyze names the rank that skipped a collective: {r.returncode} {r.stdout!r}")
    graph = os.path.join(tmp, "waits.dot")
    r = run("fr", "analyze", "--json", "--graph", graph,
            *[os.path.join(fr, "mismatch", f"rank{i}.json") for i in range(4)])
    report = json.loads(r.stdout) if r.returncode == 1 else {}
    check(report.get("verdict") == "desync" and report["culprits"] == [2] and
          report["mismatches"][0]["kind"] == "sizes" and "digraph waits" in open(graph).read(),
          f"fr analyze --json --graph on JSON dumps: {r.returncode} {r.stdout[:400]!r}")
    r = run("fr", "analyze", os.path.join(fr, "ok"))
    check(r.returncode == 0 and r.stdout.startswith("no hang"), f"fr analyze, clean: {r.stdout!r}")
    r = run("fr", "analyze", "--world-size", "6", os.path.join(fr, "ok", "rank0.pkl"))
    check(r.returncode == 0 and "no dump from ranks 1-5 (5 of 6 ranks)" in r.stdout,
          f"fr analyze says which ranks left no dump: {r.stdout!r}")
    hostile = os.path.join(tmp, "dumps")
    os.makedirs(hostile)
    shutil.copy(os.path.join(fr, "skipped", "rank0.pkl"), hostile)
    with open(os.path.join(hostile, "rank1.pkl"), "wb") as f:
        f.write(b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.")
    r = run("fr", "analyze", hostile)
    check(r.returncode == 2 and "rank1.pkl: byte 2:" in r.stderr and
          "rank 1's dump cannot be read" in r.stdout,
          f"fr analyze refuses a pickle that calls os.system and goes on: {r.returncode} "
          f"{r.stdout!r} {r.stderr!r}")
    r = run("fr", "analyze", os.path.join(ROOT, "README.md"))
    check(r.returncode == 2 and "does not end with a rank" in r.stderr,
          f"fr analyze on a file without a rank in its name: {r.stderr!r}")
    r = run("fr", "analyze", "--world-size", "0", fr)
    check(r.returncode == 2 and "--world-size" in r.stderr, f"fr analyze --world-size 0: {r.stderr!r}")
    r = run("fr", "analyze", in_root("scenarios"))
    check(r.returncode == 2 and "no readable dump" in r.stderr,
          f"fr analyze on a directory without dumps: {r.stderr!r}")

    # `fr to-scenario`: the same dumps as a scenario every rank of which makes its recorded calls;
    # `meshsim run` on it holds the hang the dumps show.
    for case in ("ok", "skipped", "mismatch", "wrapped", "mesh_skipped"):
        written = os.path.join(tmp, f"replay_{case}.toml")
        r = run("fr", "to-scenario", os.path.join(fr, case), "-o", written)
        ran = run("run", "--no-time", written) if r.returncode == 0 else r
        check(r.returncode == 0 and "run it with: meshsim run" in r.stderr and
              ran.returncode == 0 and "1 passed, 0 failed" in ran.stdout,
              f"fr to-scenario {case}, then run: {r.returncode} {r.stderr!r} {ran.stdout!r}")
    text = open(os.path.join(tmp, "replay_mesh_skipped.toml")).read()
    check('dims = ["g1", "g3"]' in text and 'repeat = { var = "loop1", count = 2 }' in text and
          'when = "rank <= 2"' in text and "fr_writer.py:57 in _calls" in text,
          f"fr to-scenario makes a 2x2 mesh of the row and column groups, folds the loop and "
          f"writes the skipped call's line: {text!r}")
    text = open(os.path.join(tmp, "replay_skipped.toml")).read()
    check('deadlock = { cause = "rank exited early", culprits = [3], waiting = [0, 1, 2]' in text,
          f"fr to-scenario expects the hang the dumps show: {text!r}")
    r = run("fr", "to-scenario", os.path.join(fr, "mismatch"))
    again = run("fr", "to-scenario", os.path.join(fr, "mismatch"))
    check(r.returncode == 0 and r.stdout == again.stdout and
          'desync = { cause = "signature mismatch", group = "WORLD", seq = 2, culprits = [2] }'
          in r.stdout, f"fr to-scenario to standard output, twice the same: {r.stdout!r}")
    r = run("fr", "to-scenario", os.path.join(fr, "ok"), "-o",
            os.path.join(tmp, "no_such_dir", "x.toml"))
    check(r.returncode == 2 and "no_such_dir" in r.stderr,
          f"fr to-scenario into a directory that does not exist: {r.returncode} {r.stderr!r}")
    r = run("fr", "to-scenario", in_root("scenarios"))
    check(r.returncode == 2 and "no readable dump" in r.stderr,
          f"fr to-scenario on a directory without dumps: {r.stderr!r}")

    # `run --fr-dump`: every rank's recorder as PyTorch writes it, pickle and JSON; fr analyze
    # reads them back to the run's conclusion; the same run writes the same bytes; what an earlier
    # run left there (a rank of a bigger world) is gone.
    dumps = os.path.join(tmp, "fr_dumps")
    hung = in_root("scenarios", "hang_fsdp_skipped_allgather.toml")
    pickles = os.path.join(dumps, "hang-fsdp-skipped-allgather", "pickle")
    os.makedirs(pickles)
    open(os.path.join(pickles, "nccl_trace_rank_99"), "w").close()
    r = run("run", "--no-time", "--fr-dump", dumps, hung)
    names = sorted(os.listdir(pickles))
    jsons = os.path.join(dumps, "hang-fsdp-skipped-allgather", "json")
    check(r.returncode == 0 and f"flight recorder dumps: {os.path.dirname(pickles)}/pickle"
          in r.stdout and names == sorted(f"nccl_trace_rank_{i}" for i in range(16)) and
          len(os.listdir(jsons)) == 16,
          f"run --fr-dump writes one pickle and one JSON per rank: {r.stdout!r} {names}")
    first = open(os.path.join(pickles, "nccl_trace_rank_5"), "rb").read()
    a = run("fr", "analyze", pickles)
    b = run("fr", "analyze", jsons)
    check(a.returncode == 1 and "rank 5 _reduce_scatter_base" in a.stdout and
          "toml:19 in all_gather_into_tensor (s=0, l=15)" in a.stdout and
          b.stdout.splitlines()[0] == a.stdout.splitlines()[0],
          f"fr analyze reads meshsim's dumps to the run's culprit, rank 5: {a.stdout[:600]!r}")
    r = run("run", "--no-time", "--fr-dump", dumps, "--fr-buffer-size", "4", hung)
    a = run("fr", "analyze", pickles)
    check(r.returncode == 0 and "wrapped (their dumps start at record" in a.stdout and
          open(os.path.join(pickles, "nccl_trace_rank_5"), "rb").read() != first,
          f"--fr-buffer-size 4 keeps each rank's newest 4 calls: {a.stdout[-800:]!r}")
    run("run", "--no-time", "--fr-dump", dumps, hung)
    check(open(os.path.join(pickles, "nccl_trace_rank_5"), "rb").read() == first,
          "the same run writes the same dump")
    for args, says in ((["--fr-buffer-size", "0", "--fr-dump", dumps], "--fr-buffer-size"),
                       (["--fr-buffer-size", "100001", "--fr-dump", dumps], "--fr-buffer-size"),
                       (["--fr-buffer-size", "8"], "--fr-dump"),
                       (["--fr-dump", ""], "--fr-dump"),
                       (["--fr-dump", os.path.join(pickles, "nccl_trace_rank_0")],
                        "cannot prepare")):
        r = run("run", "--no-time", *args, hung)
        check(r.returncode == 2 and says in r.stdout + r.stderr,
              f"run {args}: exit 2 naming {says}: {r.returncode} {r.stdout[-300:]!r} "
              f"{r.stderr!r}")
    # Two scenarios of one run whose folders would be one: the run says so and fails.
    twins = os.path.join(tmp, "fr_twins")
    os.makedirs(twins)
    for twin in ("a.toml", "b.toml"):
        shutil.copy(hung, os.path.join(twins, twin))
    r = run("run", "--no-time", "--fr-dump", dumps, twins)
    check(r.returncode == 2 and "a.toml and " in r.stderr and "b.toml share the folder name "
          "hang-fsdp-skipped-allgather" in r.stderr,
          f"scenarios sharing a dump folder are named: {r.returncode} {r.stderr!r}")
    r = run("run", "--no-time", "--fr-dump", dumps, hung, seed_test)
    check(r.returncode == 0, f"scenarios with distinct names share a --fr-dump: {r.stderr!r}")

    # A DCP checkpoint torch wrote, damaged on disk: the load fails on every rank naming the file,
    # the chunk and the CRC-32, never loading the flipped value.
    damaged = os.path.join(tmp, "dcp_damaged")
    os.makedirs(os.path.join(damaged, "checkpoints"))
    shutil.copytree(in_root("scenarios", "checkpoints", "torch-dcp-train-2x2"),
                    os.path.join(damaged, "checkpoints", "torch-dcp-train-2x2"))
    shutil.copy(in_root("scenarios", "checkpoint_resume_from_torch_dcp.toml"), damaged)
    with open(os.path.join(damaged, "checkpoints", "torch-dcp-train-2x2", "__0_0.distcp"),
              "r+b") as f:
        data = bytearray(f.read())
        data[64 * 11 + 3] ^= 0x10  # in the first item's storage (archive/data/0, from byte 704)
        f.seek(0)
        f.write(data)
    r = run("run", "--no-time", "-v", os.path.join(damaged, "checkpoint_resume_from_torch_dcp.toml"))
    check(r.returncode == 1 and "CheckpointException" in r.stdout and "__0_0.distcp" in r.stdout
          and "does not match its CRC-32" in r.stdout,
          f"a damaged DCP data file fails the load naming it: {r.returncode} {r.stdout[-1500:]!r}")

    # `rng predict`: torch.manual_seed(0); torch.rand(5, device="cuda") as published (docs/rng.md 2.4),
    # the generator offset after it, and clear errors with exit 2 for bad arguments.
    r = run("rng", "predict", "--seed", "0", "--numel", "5", "--format", "hex")
    check(r.returncode == 0 and r.stdout.split() == [
        "0x3ecc4fd2", "0x3f044516", "0x3ccc3acf", "0x3f70a90b", "0x3f72237f", "offset", "4"],
          f"rng predict gives torch.rand's published bits: {r.stdout!r} {r.stderr!r}")
    r = run("rng", "predict", "--seed", "1234", "--offset", "12", "--numel", "3")
    check(r.stdout.split()[:3] == ["0.711526513", "0.161499515", "0.974213839"] and
          r.stdout.split()[-1] == "16", f"rng predict from an offset (docs/rng.md 3.3): {r.stdout!r}")
    r = run("rng", "predict", "--numel", "2000000", "--gpu", "A100")
    check(r.returncode == 0 and r.stdout.splitlines()[-1] == "offset 12",
          f"rng predict's offset depends on the GPU: {r.stdout[-40:]!r}")
    # bernoulli_ and exponential_ transform the very uniforms rand draws: 1 where u < p, and
    # -log(u) / lambda (to float precision).
    u = [float(v) for v in run("rng", "predict", "--seed", "9", "--numel", "64").stdout.split()[:-2]]
    r = run("rng", "predict", "--seed", "9", "--numel", "64", "--op", "bernoulli", "--p", "0.4")
    b = [float(v) for v in r.stdout.split()[:-2]]
    check(r.returncode == 0 and b == [1.0 if x < 0.4 else 0.0 for x in u] and 0 < sum(b) < 64,
          f"rng predict --op bernoulli is uniform < p: {b!r}")
    r = run("rng", "predict", "--seed", "9", "--numel", "64", "--op", "exponential", "--lambda", "2")
    e = [float(v) for v in r.stdout.split()[:-2]]
    check(r.returncode == 0 and len(e) == 64 and
          all(abs(x + math.log(y) / 2) <= 1e-6 * max(1.0, x) for x, y in zip(e, u)),
          f"rng predict --op exponential is -log(u) / lambda: {e[:4]!r}")
    # --shape is torch.rand(3, 4): row-major, the values of its numel; GPUs by their other names.
    r = run("rng", "predict", "--seed", "3", "--shape", "3,4")
    check(r.returncode == 0 and r.stdout == run("rng", "predict", "--seed", "3", "--numel",
                                                "12").stdout,
          f"rng predict --shape 3,4 is --numel 12: {r.stdout[:60]!r} {r.stderr!r}")
    r = run("rng", "predict", "--numel", "2000000", "--gpu", "h100")
    check(r.returncode == 0 and r.stdout == run("rng", "predict", "--numel", "2000000", "--gpu",
                                                "H100 SXM").stdout,
          f"rng predict --gpu H100 is the H100 SXM: {r.stderr!r}")
    r = run("rng", "predict", "--gpu", "list")
    check(r.returncode == 0 and "H100 SXM    132 SMs x 2048 threads  (also H100" in r.stdout
          and len(r.stdout.splitlines()) == 11, f"rng predict --gpu list: {r.stdout!r}")
    # Dropout of ones: 0 or 1 / (1 - p), and the offset of one curand_uniform4 per thread. The
    # pytorch_dropout regression pins the same draw (seed 7, offset 1056) on its tensor.
    # 8 elements run the vectorized kernel, 7 the unrolled one, which lays the draws out otherwise.
    r = run("rng", "predict", "--op", "dropout", "--p", "0.5", "--numel", "8", "--seed", "7",
            "--offset", "1056")
    check(r.returncode == 0 and r.stdout.split()[:7] == ["2", "0", "2", "2", "2", "0", "0"]
          and r.stdout.split()[-2:] == ["offset", "1060"], f"rng predict --op dropout: {r.stdout!r}")
    r = run("rng", "predict", "--op", "dropout", "--p", "0.5", "--numel", "7", "--seed", "7",
            "--offset", "1056")
    check(r.returncode == 0 and r.stdout.split() == ["2", "2", "2", "0", "2", "0", "0", "offset",
                                                     "1060"],
          f"rng predict --op dropout, unrolled: {r.stdout!r}")
    for bad_args, message in [
            (["--shape", "3,0"], "--shape: shape [3, 0]: 1 to 2^30 elements"),
            (["--shape", "65536,65536"], "--shape: shape [65536, 65536]: 1 to 2^30 elements"),
            (["--shape", "3,x"], "--shape"),
            (["--numel", "3", "--shape", "3"], "--numel: give --numel or --shape"),
            ([], "--numel: give --numel or --shape"),
            (["--numel", "5", "--op", "bernoulli", "--p", "1.5"],
             "--p: bernoulli_ expects p to be in [0, 1], but got p=1.5"),
            (["--numel", "5", "--op", "exponential", "--lambda", "0"],
             "--lambda: exponential_ expects lambda > 0.0, but found lambda=0"),
            (["--numel", "5", "--p", "0.5"], "--p: --p goes with bernoulli, geometric and dropout"),
            (["--numel", "5", "--op", "geometric"], "--p: --op geometric needs --p"),
            (["--numel", "5", "--op", "geometric", "--p", "1"],
             "--p: geometric_ expects p to be in (0, 1), but got p=1"),
            (["--numel", "5", "--op", "dropout", "--p", "2"],
             "--p: dropout probability has to be between 0 and 1, but got 2"),
            (["--numel", "5", "--op", "dropout", "--p", "0"], "--p: dropout draws only for 0 < p < 1"),
            (["--numel", "5", "--op", "log_normal", "--to", "0"],
             "--to: log_normal_ expects std > 0.0, but found std=0"),
            (["--numel", "5", "--op", "bernoulli", "--from", "1"], "--from: --from and --to go"),
            (["--numel", "5", "--offset", "3"], "--offset: offset must be a multiple of 4"),
            (["--numel", "0"], "--numel"),
            (["--numel", "5", "--dtype", "int64"], "--dtype: int64 is not a floating dtype"),
            (["--numel", "5", "--gpu", "B9000"], 'unknown GPU "B9000"'),
            (["--numel", "5", "--seed", "18446744073709551616"], "--seed"),
            (["--numel", "5", "--sms", "100"], "--sms and --max-threads-per-sm go together"),
            (["--numel", "5", "--sms", "100", "--max-threads-per-sm", "1000"],
             "multiple of 256"),
            (["--numel", "5", "--from", "2", "--to", "1"], "from=2 > to=1"),
            (["--numel", "5", "--from", "nan"], "--from: not a finite number"),
            (["--numel", "5", "--dtype", "float16", "--from", "-60000", "--to", "60000"],
             "--to: uniform_ expects to-from <= std::numeric_limits<Half>::max()"),
            (["--numel", "5", "--dtype", "float16", "--from", "-70000"],
             "--from: from is out of bounds for c10::Half"),
            (["--numel", "1073741824", "--dtype", "float64"], "several kernel launches"),
            (["--numel", "5", "--max-threads-per-sm", "1024"],
             "--max-threads-per-sm: --sms and --max-threads-per-sm go together")]:
        r = run("rng", "predict", *bad_args)
        check(r.returncode == 2 and message in r.stderr,
              f"rng predict {' '.join(bad_args)} exits 2 naming the problem: {r.stderr!r}")

    # `rng offsets`: docs/rng.md 3.3's (2,2,2) [S1, R, S0] example on 8x16, and its errors.
    r = run("rng", "offsets", "--shape", "8,16", "--mesh", "2,2,2", "--placement", "Shard(1)",
            "--placement", "R", "--placement", "S(0)")
    check(r.returncode == 0 and len(r.stdout.splitlines()) == 8 and
          "rank 5: coordinate [1, 0, 1], shard 3, first_shard_numel 32, pre +96, post +128" in r.stdout,
          f"rng offsets gives docs/rng.md's rank 5: {r.stdout!r}")
    for bad_args, message in [
            (["--shape", "8", "--mesh", "2", "--placement", "Shard(1)"], "IndexError"),
            (["--shape", "8", "--mesh", "2,2", "--placement", "R"], "1 placements for a 2-d mesh"),
            (["--shape", "8", "--mesh", "0", "--placement", "R"], "mesh sizes must be positive"),
            (["--shape", "8", "--mesh", "300,300", "--placement", "R", "--placement", "R"],
             "at most 65,536 ranks"),
            (["--shape", "-8", "--mesh", "2", "--placement", "R"], "--shape"),
            (["--shape", "8", "--mesh", "2", "--placement", "Shard(x)"], '"Shard(x)"'),
            (["--shape", "4611686018427387904,4", "--mesh", "2", "--placement", "R"],
             "--shape: OverflowError")]:
        r = run("rng", "offsets", *bad_args)
        check(r.returncode == 2 and message in r.stderr,
              f"rng offsets {' '.join(bad_args)} exits 2 naming the problem: {r.stderr!r}")

    # Truncations and random mutations of every shipped scenario: exit 0, 1 or 2, never a crash;
    # unusable input names the file. Counted apart from the behaviour checks above.
    rng = random.Random(20261130)
    sources = [in_root("scenarios", n) for n in sorted(os.listdir(in_root("scenarios")))]
    sources += [in_root("tests", "regressions", n)
                for n in sorted(os.listdir(in_root("tests", "regressions")))]
    for source in sources:
        if not source.endswith(".toml"):
            continue
        text = open(source, "rb").read()
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
            fuzz_cases += 1
            ok = r.returncode in (0, 1) or (r.returncode == 2 and b"fuzz.toml:" in r.stdout)
            if not ok:
                fuzz_failures.append((os.path.basename(source), r.returncode, r.stdout[-300:]))
                print(f"FUZZ FAIL: {os.path.basename(source)} variant exits {r.returncode}")

print(f"cli: {checks - len(failures)} behaviour checks passed, {len(failures)} failed; "
      f"{fuzz_cases} fuzz cases, {len(fuzz_failures)} crashed or unnamed")
sys.exit(1 if failures or fuzz_failures else 0)
