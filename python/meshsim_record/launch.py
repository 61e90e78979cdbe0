"""Runs the program once per rank: torch is imported once, then each rank is a forked child with
the environment torchrun would give it, at most `jobs` at a time."""

import os
import runpy
import signal
import sys
import traceback

from . import redirect, rng, trace

RENDEZVOUS = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
              "TORCHELASTIC_RUN_ID": "meshsim_record", "TORCHELASTIC_RESTART_COUNT": "0",
              "TORCHELASTIC_MAX_RESTARTS": "0"}


def rank_environment(rank, world_size, nproc_per_node):
    nodes = (world_size + nproc_per_node - 1) // nproc_per_node
    env = dict(RENDEZVOUS)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank % nproc_per_node), "LOCAL_WORLD_SIZE": str(nproc_per_node),
        "GROUP_RANK": str(rank // nproc_per_node), "GROUP_WORLD_SIZE": str(nodes),
        "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world_size), "ROLE_NAME": "default",
    })
    return env


def user_line(tb):
    """The innermost frame of the traceback outside torch and the recorder: "train.py:12"."""
    where = None
    for frame in traceback.extract_tb(tb):
        if "/torch/" not in frame.filename and os.path.dirname(os.path.abspath(
                frame.filename)) != os.path.dirname(os.path.abspath(__file__)):
            where = f"{frame.filename}:{frame.lineno}"
    return where


class RankTimeout(BaseException):
    """Not an Exception, so that a program's `except Exception` does not swallow it."""


def _time_is_up(signum, frame):
    raise RankTimeout("the rank ran past --rank-timeout (a loop that waits for something no "
                      "recorded call provides?)")


def run_rank(rank, args, out_dir, header, result_path):
    """The child's work: run the program as this rank, write its dump and how it ended."""
    import json

    os.environ.update(rank_environment(rank, args.world_size, args.nproc_per_node))
    signal.signal(signal.SIGALRM, _time_is_up)
    signal.alarm(args.rank_timeout)
    import torch

    torch.set_num_threads(1)
    redirect.install()
    rng.install()
    rank_trace = trace.start(rank, args.world_size)
    dump_path = os.path.join(out_dir, f"nccl_trace_rank_{rank}.json")
    outcome = {"rank": rank, "status": "ok"}
    hard_exit = os._exit

    def write(ended):
        rank_trace.write(dump_path, dict(header, outcome=ended))
        with open(result_path, "w") as f:
            json.dump(ended, f)

    def exit_after_dump(code):  # a program's os._exit still leaves the rank's dump
        signal.alarm(0)
        write({"rank": rank, "status": "ok"} if code == 0 else
              {"rank": rank, "status": "exit", "error": f"os._exit({code})"})
        hard_exit(code)

    os._exit = exit_after_dump
    sys.argv = [args.program] + args.program_args
    # As `python prog.py` does: the program's folder first on the path, for its own modules.
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.program)))
    try:
        runpy.run_path(args.program, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            outcome = {"rank": rank, "status": "exit", "error": f"sys.exit({e.code!r})"}
    except BaseException as e:  # the rank's failure is part of the record, not the recorder's
        outcome = {"rank": rank, "status": "raised", "error": f"{type(e).__name__}: {e}",
                   "at": user_line(e.__traceback__)}
    signal.alarm(0)
    os._exit = hard_exit
    write(outcome)


# What training programs import, imported once before the ranks fork, so that no rank pays for
# it again; a module missing from this torch is skipped.
PRELOADED = ("torch.distributed.device_mesh", "torch.distributed.tensor",
             "torch.distributed.tensor.parallel", "torch.distributed.fsdp",
             "torch.distributed.pipelining", "torch.distributed.checkpoint", "torch.nn",
             "torch.optim")


def preload():
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # an older torch without it: the program imports what it has
            pass


def run_all(ranks, args, out_dir, header):
    """Forks one child per rank, `args.jobs` at a time; returns each rank's outcome, by rank."""
    import json
    import tempfile
    import time

    preload()
    out_dir = os.path.abspath(out_dir)  # the program may change directory
    # How each child ended travels through a folder of the recorder's own, not the dumps'.
    outcomes_dir = tempfile.mkdtemp(prefix="meshsim_record-")
    grace_s = 30
    running = {}
    outcomes = {}

    def finished(pid, status):
        rank, result_path, _ = running.pop(pid)
        try:
            with open(result_path) as f:
                outcomes[rank] = json.load(f)
            os.unlink(result_path)
        except (OSError, ValueError):
            code = os.waitstatus_to_exitcode(status)
            outcomes[rank] = {"rank": rank, "status": "crashed",
                              "error": f"its process ended with status {code}"}
            # Its dump says so, so that the analysis does not take it for a rank never recorded.
            stub = trace.RankTrace(rank, args.world_size)
            stub.write(os.path.join(out_dir, f"nccl_trace_rank_{rank}.json"),
                       dict(header, outcome=outcomes[rank]))

    def reap_one():
        """Waits for a child to end; one past its timeout and a grace period is killed."""
        while True:
            for pid in list(running):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    finished(pid, status)
                    return
                if time.monotonic() > running[pid][2]:
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    try:
        for rank in ranks:
            while len(running) >= args.jobs:
                reap_one()
            result_path = os.path.join(outcomes_dir, f"{rank}.json")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    if args.quiet_ranks:
                        devnull = os.open(os.devnull, os.O_WRONLY)
                        os.dup2(devnull, 1)
                        os.dup2(devnull, 2)
                    run_rank(rank, args, out_dir, header, result_path)
                except BaseException:
                    traceback.print_exc()
                    code = 70
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = (rank, result_path, time.monotonic() + args.rank_timeout + grace_s)
        while running:
            reap_one()
    finally:
        import shutil

        shutil.rmtree(outcomes_dir, ignore_errors=True)
    return [outcomes[r] for r in ranks]
