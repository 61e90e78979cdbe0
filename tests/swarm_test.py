#!/usr/bin/env python3
"""`meshsim swarm` end to end, on generated training schedules (1F1B pipelines, FSDP and HSDP x
TP loops), some with a planted bug at a random rank and iteration:

- the swarm finds every planted bug in the runs without an injected fault, and the replay
  command of each distinct failure reproduces it, blaming the planted rank (a fresh `meshsim
  run`, read from its JSON report); schedules without a bug pass every run without a fault;
- N shards merged equal the unsharded report byte for byte (JSON and text) for several N, with
  shards named as I/N, by a Slurm job array's variables and by a Kubernetes Indexed Job's;
- the example Slurm and Kubernetes files of docs/swarm/ are run as written (their command lines,
  their array range and completions);
- the number of worker processes changes nothing, and two runs agree;
- bad flags and unusable scenarios exit 2 naming the flag or file, before anything runs.

Usage: swarm_test.py MESHSIM SOURCE_ROOT"""
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile

MESHSIM, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(ROOT, "tests", "hang_blame"))
import schedules  # noqa: E402

failures = []
checks = 0
SEEDS = ["--seeds", "0-3", "--faults-seeds", "none,1-3"]


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, env=None, cwd=None, timeout=600):
    full = dict(os.environ)
    for key in [k for k in full if k.startswith(("SLURM_", "JOB_COMPLETION"))]:
        del full[key]
    full.update(env or {})
    return subprocess.run([MESHSIM, *args], capture_output=True, text=True, env=full, cwd=cwd,
                          timeout=timeout, errors="replace")


def read(path):
    with open(path, "rb") as f:
        return f.read()


work = tempfile.mkdtemp(prefix="meshsim-swarm-test-")
os.makedirs(os.path.join(work, "jobs"))
# Generated schedules of at most 32 ranks: three with a planted bug, three without.
planted = {}
clean = []
rng_seed = 2026
while len(planted) < 3 or len(clean) < 3:
    rng_seed += 1
    schedule = schedules.Schedule(random.Random(rng_seed)).build()
    if schedule.world > 32:
        continue
    with_bug = len(planted) < 3 and (len(clean) >= 3 or rng_seed % 2 == 0)
    if with_bug and not schedule.plant():
        continue
    name = f"jobs/{'bug' if with_bug else 'clean'}_{rng_seed}_{schedule.kind}.toml"
    with open(os.path.join(work, name), "w") as f:
        f.write(schedule.toml())
    if with_bug:
        planted[name] = schedule.planted
    else:
        clean.append(name)
generated = len(planted) + len(clean)

# The whole swarm, twice and with another number of workers: one report.
whole = run(["swarm", *SEEDS, "-j", "2", "--json", "whole.json", "jobs"], cwd=work)
check(whole.returncode == 1, f"a swarm with failures exits 1, got {whole.returncode}: "
      f"{whole.stdout[-600:]}{whole.stderr[-600:]}")
report = json.loads(read(os.path.join(work, "whole.json")))
combinations = generated * 4 * 4
check(report["meshsim_swarm"] == "report" and report["runs"] == combinations,
      f"the report covers {combinations} runs: {report.get('runs')}")
check(report["passed"] + report["failed"] == report["runs"], "passed + failed = runs")
check(report["failed"] == sum(f["runs"] for f in report["failures"]),
      "the distinct failures account for every failed run")
again = run(["swarm", *SEEDS, "-j", "1", "--json", "again.json", "jobs"], cwd=work)
check(read(os.path.join(work, "again.json")) == read(os.path.join(work, "whole.json")),
      "-j 1 and -j 2 write the same report")
check(again.stdout == whole.stdout.replace("in 2 workers", "in 1 worker"),
      "-j 1 and -j 2 print the same text")

# Every planted bug is found without an injected fault; its replay blames the planted rank.
for name, bug in planted.items():
    found = [f for f in report["failures"]
             if f["file"] == name and f["first"]["faults_seed"] is None]
    check(len(found) >= 1, f"{name}: the planted {bug['kind']} at rank {bug['rank']} is found "
          f"without an injected fault")
    for failure in found[:1]:
        replay = shlex.split(failure["replay"])
        check(replay[:2] == ["meshsim", "run"], f"replay is a meshsim run: {failure['replay']}")
        again = run([*replay[1:], "--json", "replay.json"], cwd=work)
        check(again.returncode == 1, f"{name}: its replay fails: {again.stdout[-300:]}")
        result = json.loads(read(os.path.join(work, "replay.json")))["scenarios"][0]
        hang = result.get("hang") or {}
        check(bug["rank"] in hang.get("culprits", []),
              f"{name}: the replay blames rank {bug['rank']}: {hang.get('culprits')}")
        check(failure["signature"].startswith(f"{hang.get('kind')} ({hang.get('cause')})"),
              f"{name}: the replay's hang is the swarm's: {failure['signature']} vs "
              f"{hang.get('kind')} ({hang.get('cause')})")
for name in clean:
    check(not any(f["file"] == name and f["first"]["faults_seed"] is None
                  for f in report["failures"]),
          f"{name}: a schedule without a bug passes every run without a fault")
# Injected faults fail runs of every schedule.
check(all(any(f["file"] == name and f["first"]["faults_seed"] is not None
              for f in report["failures"]) for name in [*planted, *clean]),
      "every schedule fails with some injected fault")


def merged_equals_whole(label, shard_files, reference=("whole.json", whole)):
    merged = run(["swarm", "merge", *shard_files, "--json", "merged.json"], cwd=work)
    check(merged.returncode == 1, f"{label}: merge exits 1 (failures): {merged.stdout[-300:]}")
    check(read(os.path.join(work, "merged.json")) == read(os.path.join(work, reference[0])),
          f"{label}: the merged JSON is the unsharded report, byte for byte")
    check(merged.stdout == reference[1].stdout.split("\n", 1)[1],
          f"{label}: merge prints the unsharded text")


def unsharded_like(args, name):
    """The unsharded swarm with a documented command's run flags (they are the swarm's)."""
    flags = []
    for flag in ("--max-memory", "--stack-kib", "--timeout"):
        if flag in args:
            flags += [flag, args[args.index(flag) + 1]]
    return name, run(["swarm", *SEEDS, "-j", "2", *flags, "--json", name, "jobs"], cwd=work)


# N shards as I/N.
for n in (1, 2, 3, 5):
    files = []
    for i in range(n):
        r = run(["swarm", *SEEDS, "-j", "2", "--shard", f"{i}/{n}", "--json", f"s{n}-{i}.json",
                 "jobs"], cwd=work)
        check(r.returncode in (0, 1), f"shard {i}/{n} runs: {r.stdout[-300:]}{r.stderr[-300:]}")
        files.append(f"s{n}-{i}.json")
    random.Random(n).shuffle(files)
    merged_equals_whole(f"{n} shards", files)

# The documented examples, run as written: their flags, with the test's seeds and schedules.
docs = os.path.join(ROOT, "docs", "swarm")
VALUED = {"--shard", "-j", "--jobs", "--seeds", "--faults-seeds", "--json", "--timeout",
          "--max-memory", "--stack-kib"}


def documented_command(text, variables):
    """The example's `meshsim swarm --shard` command as arguments, its variables set."""
    joined = text.replace("\\\n", " ")
    found = re.search(r"meshsim swarm --shard[^;\n]*", joined)
    if not found:
        return None
    line = re.sub(r"\$\{(\w+)\}|\$(\w+)",
                  lambda m: variables[m.group(1) or m.group(2)], found.group(0))
    words = shlex.split(line)[2:]
    args, i = [], 0
    while i < len(words):
        if words[i] in VALUED:
            value = words[i + 1]
            if words[i] == "--seeds":
                value = SEEDS[1]
            elif words[i] == "--faults-seeds":
                value = SEEDS[3]
            elif words[i] == "--json" and value.startswith("/"):
                value = os.path.join(work, value.lstrip("/"))
            args += [words[i], value]
            i += 2
        else:
            args.append("jobs" if not words[i].startswith("-") else words[i])
            i += 1
    return args


sbatch = open(os.path.join(docs, "slurm-array.sbatch")).read()
array = re.search(r"^#SBATCH --array=0-(\d+)\s*$", sbatch, re.M)
check(array is not None, "the Slurm example sets an --array=0-N range")
check("meshsim swarm merge swarm-$jobid/shard-*.json" in sbatch, "the Slurm example merges")
if array:
    count = int(array.group(1)) + 1
    for i in range(count):
        env = {"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_MIN": "0",
               "SLURM_ARRAY_TASK_MAX": str(count - 1), "SLURM_ARRAY_TASK_COUNT": str(count),
               "SLURM_ARRAY_JOB_ID": "4242", "SLURM_CPUS_PER_TASK": "2"}
        args = documented_command(sbatch, env)
        check(args is not None and "slurm" in args, f"the Slurm example runs --shard slurm: {args}")
        if args is None:
            break
        os.makedirs(os.path.join(work, "swarm-4242"), exist_ok=True)
        r = run(["swarm", *args], env=env, cwd=work)
        check(r.returncode in (0, 1) and f"shard {i} of {count}" in r.stdout,
              f"Slurm task {i}: {args}: {r.stdout[:300]}{r.stderr[-300:]}")
    slurm_files = sorted(os.path.join("swarm-4242", f) for f in
                         os.listdir(os.path.join(work, "swarm-4242")))
    check(len(slurm_files) == count, f"one file per array task: {slurm_files}")
    merged_equals_whole("Slurm job array", slurm_files, unsharded_like(args, "slurm_whole.json"))

job = open(os.path.join(docs, "k8s-indexed-job.yaml")).read()
completions = re.search(r"^\s*completions:\s*(\d+)\s*$", job, re.M)
indexed = re.search(r"^\s*completionMode:\s*Indexed\s*$", job, re.M)
check(completions and indexed, "the Kubernetes example is an Indexed Job with completions")
check("meshsim swarm merge /results/shard-*.json" in job, "the Kubernetes example merges")
if completions and indexed:
    count = int(completions.group(1))
    os.makedirs(os.path.join(work, "results"), exist_ok=True)
    for i in range(count):
        env = {"JOB_COMPLETION_INDEX": str(i)}
        args = documented_command(job, env)
        check(args is not None and f"k8s/{count}" in args,
              f"the Kubernetes example runs --shard k8s/{count}: {args}")
        if args is None:
            break
        r = run(["swarm", *args], env=env, cwd=work)
        check(r.returncode in (0, 1) and f"shard {i} of {count}" in r.stdout,
              f"Kubernetes index {i}: {args}: {r.stdout[:300]}{r.stderr[-300:]}")
    merged_equals_whole("Kubernetes Indexed Job",
                        sorted(os.path.join("results", f) for f in
                               os.listdir(os.path.join(work, "results"))),
                        unsharded_like(args, "k8s_whole.json"))

# Bad flags exit 2, naming the flag; nothing runs.
for args, words in [
        (["--shard", "3/3"], "--shard: shard 3 of 3"),
        (["--shard", "2"], "--shard: expected I/N"),
        (["--shard", "slurm"], "$SLURM_ARRAY_TASK_ID is not set"),
        (["--shard", "k8s/4"], "$JOB_COMPLETION_INDEX is not set"),
        (["--seeds", "5-1"], "--seeds: the range 5-1 runs backwards"),
        (["--seeds", "none"], "--seeds: expected seeds"),
        (["--faults-seeds", "1,1"], "--faults-seeds: seed 1 is listed twice"),
        (["--jobs", "0"], "--jobs: expected an integer from 1"),
        (["--timeout", "soon"], "--timeout: expected a duration"),
        (["--json", "/nonexistent-meshsim-dir/x.json"], "--json: cannot write there")]:
    r = run(["swarm", *args, "jobs"], cwd=work)
    check(r.returncode == 2 and words in r.stderr, f"{args}: exit 2 naming it, got "
          f"{r.returncode}: {r.stderr[-300:]}")
r = run(["swarm", "--shard", "slurm", "jobs"], cwd=work,
        env={"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "7",
             "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_STEP": "2"})
check(r.returncode == 2 and "not one contiguous range" in r.stderr,
      f"a Slurm array with a step is refused: {r.stderr[-300:]}")
with open(os.path.join(work, "broken.toml"), "w") as f:
    f.write("[scenario]\nname = 'x'\nworld_size = 2\n[[step]]\nall_reduce = { tensor = 1 }\n")
r = run(["swarm", "broken.toml", "jobs"], cwd=work)
check(r.returncode == 2 and "broken.toml:" in r.stdout and "nothing ran" in r.stdout,
      f"an unusable scenario stops the swarm before it runs: {r.stdout[-300:]}")
r = run(["swarm", "merge", "whole.json"], cwd=work)
check(r.returncode == 2 and "whole.json: not a meshsim swarm shard" in r.stderr,
      f"merge refuses a report, on stderr: {r.stderr[-300:]}")

print(f"swarm: {generated} generated schedules ({len(planted)} with a planted bug), "
      f"{combinations} runs per swarm, {checks} checks, {len(failures)} failed")
sys.exit(1 if failures else 0)
