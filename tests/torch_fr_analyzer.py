"""PyTorch's own Flight Recorder analyzer (torch.distributed.flight_recorder, what `torchfrtrace`
runs) as the differential tests call it: build_db on a folder of pickled dumps, its findings
collected as sets. Import only where torch is installed."""
import io
import logging


def torch_findings(directory, allow_incomplete=False, collectives_only=False):
    """(missing, mismatches, log): missing holds (group, seq, rank) for every rank torch reports
    missing from a collective; mismatches (group, seq, rank, class) for every rank it reports
    mismatched; log is what the analyzer printed. With collectives_only, what it reports of sends
    and recvs (which it matches as if they were collectives of the whole group) is left out."""
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir
    log = io.StringIO()
    logger = logging.getLogger("Flight Recorder")  # torch's analyzer reports through it
    saved = logger.handlers[:]
    logger.handlers = [logging.StreamHandler(log)]
    try:
        args = JobConfig().parse_args(
            [directory] + (["--allow-incomplete-ranks"] if allow_incomplete else []))
        details, version = read_dir(args)
        db = build_db(details, args, version)
    finally:
        logger.handlers = saved
    missing, mismatches = set(), set()
    for c in db.collectives:
        if collectives_only and c.collective_name.split(" ")[0].endswith(("send", "recv")):
            continue
        for r in c.missing_ranks or ():
            missing.add((str(c.group_id), c.collective_seq_id, r))
        for r, other in (c.mismatch_collectives or {}).items():
            kind = other.type_of_mismatch.state.name if other.type_of_mismatch else "?"
            mismatches.add((str(c.group_id), c.collective_seq_id, r, kind))
    return missing, mismatches, log.getvalue()
