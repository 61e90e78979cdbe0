"""What the Flight Recorder tests share: `meshsim fr analyze --json` on a job's dumps, and the
round trip: `meshsim fr to-scenario` on the dumps, twice (the file must be the same), then
`meshsim run` on it, twice: the run must hold the expectations the file states (the hang
`fr analyze` saw) and report the same both times, and a hang must not be written as none."""
import json
import subprocess


def fr_analysis(meshsim, dumps):
    """`meshsim fr analyze --json` on `dumps`, parsed; raises when it cannot analyse them."""
    run = subprocess.run([meshsim, "fr", "analyze", "--json", dumps], capture_output=True,
                         text=True, timeout=300)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"meshsim fr analyze {dumps} exited {run.returncode}: {run.stderr}")
    return json.loads(run.stdout)


def replay_round_trip(meshsim, dumps, scenario, report, extra_args=(), label=""):
    """Problems found (each prefixed with `label`), and the scenario's text ("" when none)."""
    prefix = f"{label}: " if label else ""
    texts = []
    for _ in range(2):
        w = subprocess.run([meshsim, "fr", "to-scenario", *extra_args, dumps, "-o", scenario],
                           capture_output=True, text=True, timeout=300)
        if w.returncode != 0:
            return [f"{prefix}fr to-scenario exited {w.returncode}: {w.stderr}"], ""
        with open(scenario) as f:
            texts.append(f.read())
    problems = []
    if texts[0] != texts[1]:
        problems.append(f"{prefix}fr to-scenario wrote two different files from the same dumps")
    runs = [subprocess.run([meshsim, "run", "--no-time", scenario], capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    if runs[0].returncode != 0:
        problems.append(f"{prefix}the replay does not reproduce what fr analyze saw "
                        f"({report['verdict']}: {report['cause']}):\n{runs[0].stdout}\n"
                        f"{texts[0]}")
    elif runs[0].stdout != runs[1].stdout:
        problems.append(f"{prefix}two runs of the replay report differently")
    expect = texts[0][texts[0].rindex("[[expect]]"):]
    if report["verdict"] not in ("no hang", "stall") and "no_hang" in expect:
        problems.append(f"{prefix}the replay of a hang expects none:\n{expect}")
    return problems, texts[0]
