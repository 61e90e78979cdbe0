"""python -m meshsim_record --world-size N -o DIR [--ranks SPEC] [-j J] -- train.py ARGS..."""

import argparse
import json
import os
import shlex
import sys

from . import __version__

LIMITS = ("values are not real: every collective completes at once with this rank's own data, "
          "so control flow that depends on tensor values may differ from a real run; programs "
          "run on the CPU or the meta device")


def parse_ranks(spec, world_size):
    """"0-3,7" -> [0, 1, 2, 3, 7]; every rank below the world size, each once."""
    ranks = set()
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise argparse.ArgumentTypeError(f"--ranks {spec}: '{part}' is not a rank or a range")
        if a > b:
            raise argparse.ArgumentTypeError(f"--ranks {spec}: '{part}' runs backwards")
        if not 0 <= a <= b < world_size:
            raise argparse.ArgumentTypeError(
                f"--ranks {spec}: '{part}' is outside ranks 0 to {world_size - 1}")
        ranks.update(range(a, b + 1))
    return sorted(ranks)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m meshsim_record",
        description="Run a torch.distributed program once per rank with a recording backend; "
                    "write one Flight Recorder dump per rank for `meshsim fr analyze DIR`.")
    p.add_argument("--world-size", type=int, required=True, help="ranks in the job")
    p.add_argument("-o", "--output", required=True, help="directory for the dumps")
    p.add_argument("--ranks", help="record only these ranks, as 0-3,7 (default: all)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="ranks run at a time (default: the cores)")
    p.add_argument("--nproc-per-node", type=int, default=8,
                   help="ranks per node, for LOCAL_RANK and GROUP_RANK (default: 8)")
    p.add_argument("--rank-timeout", type=int, default=600,
                   help="seconds a rank may run before it is stopped and said (default: 600)")
    p.add_argument("--show-output", dest="quiet_ranks", action="store_false",
                   help="let the ranks print (default: their output is dropped)")
    p.add_argument("program", help="the Python program, after --")
    p.add_argument("program_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if not 1 <= args.world_size <= 1 << 20:
        p.error(f"--world-size {args.world_size}: give 1 to {1 << 20} ranks")
    if args.jobs < 1:
        p.error(f"-j {args.jobs}: give at least 1")
    if not 1 <= args.rank_timeout <= 86400:
        p.error(f"--rank-timeout {args.rank_timeout}: give 1 to 86400 seconds")
    if args.nproc_per_node < 1:
        p.error(f"--nproc-per-node {args.nproc_per_node}: give at least 1")
    if not os.path.isfile(args.program):
        p.error(f"{args.program}: no such program")
    try:
        args.ranks = parse_ranks(args.ranks, args.world_size) if args.ranks else list(
            range(args.world_size))
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # The recorder's flags end at the first `--`; everything after it is the program's.
    if "--" in argv:
        i = argv.index("--")
        args = parse_args(argv[:i] + ["--"] + argv[i + 1:])
    else:
        args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("meshsim_record: torch is not installed in this Python", file=sys.stderr)
        return 2
    from . import launch

    try:
        os.makedirs(args.output, exist_ok=True)
        for name in os.listdir(args.output):
            if name.startswith("nccl_trace_rank_") or name == "meshsim_record.json":
                os.unlink(os.path.join(args.output, name))
    except OSError as e:
        print(f"meshsim_record: -o {args.output}: {e.strerror}", file=sys.stderr)
        return 2
    header = {
        "world_size": args.world_size,
        "command": shlex.join([args.program] + args.program_args),
        "torch_version": torch.__version__,
        "recorder_version": __version__,
        "limits": LIMITS,
    }
    outcomes = launch.run_all(args.ranks, args, args.output, header)
    with open(os.path.join(args.output, "meshsim_record.json"), "w") as f:
        json.dump(dict(header, ranks=outcomes), f, indent=1)
        f.write("\n")
    failed = [o for o in outcomes if o["status"] != "ok"]
    print(f"meshsim_record: recorded {len(outcomes)} of {args.world_size} ranks of "
          f"{args.program} to {args.output}")
    for o in failed[:10]:
        where = f" at {o['at']}" if o.get("at") else ""
        print(f"  rank {o['rank']}: {o.get('error') or o['status']}{where}")
    if len(failed) > 10:
        print(f"  ... and {len(failed) - 10} more ranks that failed")
    print(f"  limits: {LIMITS}")
    print(f"  next: meshsim fr analyze {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
