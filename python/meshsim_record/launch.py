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


class RankTimeout(Exception):
    pass


def _time_is_up(signum, frame):
    raise RankTimeout("the rank ran past --rank-timeout (a loop that waits for something no "
                      "recorded call provides?)")


def run_rank(rank, args, out_dir, header):
    """The child's work: run the program as this rank, write its dump, say how it ended."""
    os.environ.update(rank_environment(rank, args.world_size, args.nproc_per_node))
    signal.signal(signal.SIGALRM, _time_is_up)
    signal.alarm(args.rank_timeout)
    import torch

    torch.set_num_threads(1)
    redirect.install()
    rng.install()
    rank_trace = trace.start(rank, args.world_size)
    outcome = {"rank": rank, "status": "ok"}
    sys.argv = [args.program] + args.program_args
    try:
        runpy.run_path(args.program, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            outcome = {"rank": rank, "status": "exit", "code": str(e.code)}
    except BaseException as e:  # the rank's failure is part of the record, not the recorder's
        outcome = {"rank": rank, "status": "raised", "error": f"{type(e).__name__}: {e}",
                   "at": user_line(e.__traceback__)}
    signal.alarm(0)
    header = dict(header, outcome=outcome)
    rank_trace.write(os.path.join(out_dir, f"nccl_trace_rank_{rank}.json"), header)
    return outcome


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

    preload()

    running = {}
    outcomes = {}

    def reap_one():
        pid, status = os.wait()
        rank, result_path = running.pop(pid)
        try:
            with open(result_path) as f:
                outcomes[rank] = json.load(f)
            os.unlink(result_path)
        except (OSError, ValueError):
            code = os.waitstatus_to_exitcode(status)
            outcomes[rank] = {"rank": rank, "status": "crashed",
                              "error": f"the rank's process ended with status {code}"}

    for rank in ranks:
        while len(running) >= args.jobs:
            reap_one()
        result_path = os.path.join(out_dir, f".outcome_{rank}.json")
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
                outcome = run_rank(rank, args, out_dir, header)
                with open(result_path, "w") as f:
                    json.dump(outcome, f)
            except BaseException:
                traceback.print_exc()
                code = 70
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        running[pid] = (rank, result_path)
    while running:
        reap_one()
    return [outcomes[r] for r in ranks]
