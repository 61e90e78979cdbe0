"""meshsim_record on torchtitan: its llama3 debug model trained for two steps on 8 ranks, pp 2 x
dp_shard 2 x tp 2 (Interleaved1F1B, FSDP2, sequence-parallel TP), on the CPU. `fr analyze` must
find no hang; its RNG check may only report the init draws that overlap because FSDP and TP both
shard a weight's dim 0 (docs/rng.md 3.3), which PyTorch does. Skips without torch, without
torchtitan (from $MESHSIM_TORCHTITAN_SITE, a `pip install --target` folder, if set, else
VENV/torchtitan-site as scripts/torchtitan_env.sh makes it), or when this torchtitan lacks what
the CPU run patches. Nothing is downloaded: the tokenizer and the dataset are made here.

Each rank runs this file again (`--rank`), which patches torchtitan for the CPU and the recorder:
- torchtitan picks its device at import as `_get_available_device_type() or "cuda"`, and its
  memory monitor calls torch.cuda-only functions: the device is "cpu", with those functions added;
- FlexAttention has no backward on the CPU: the same masked attention runs through SDPA;
- pipelining infers stage shapes by sending pickled metadata, which the recorder does not carry:
  the stages get static shapes instead.

Usage: torchtitan_record_test.py MESHSIM"""
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where scripts/torchtitan_env.sh installs it: next to the torch virtualenv's own packages.
SITE = os.environ.get("MESHSIM_TORCHTITAN_SITE") or os.path.join(sys.prefix, "torchtitan-site")
if os.path.isdir(SITE):
    sys.path.insert(0, SITE)
else:
    SITE = None

WORLD = 8
TRAIN = ["--module", "llama3", "--config", "llama3_debugmodel",
         "--training.steps", "2", "--training.seq-len", "32", "--training.local-batch-size", "4",
         "--training.disable-cuda-graphs",  # torchtitan refuses PP with CUDA graphs on
         "--validator.no-enable", "--checkpoint.no-enable",
         "--parallelism.pipeline-parallel-degree", "2",
         "--parallelism.data-parallel-shard-degree", "2",
         "--parallelism.tensor-parallel-degree", "2"]

# What the rank side replaces; a torchtitan or torch without one of them cannot run here.
HOOKS = [("torch._utils", "_get_available_device_type"), ("torch._utils", "_get_device_module"),
         ("torch.distributed.pipelining._utils", "_StageMeta"),
         ("torch.distributed.pipelining._utils", "extract_tensor_metas"),
         ("torchtitan.models.common.attention", "FlexAttention._compiled_flex_attn"),
         ("torchtitan.models.llama3", "pipeline_llm"),
         ("torchtitan.models.llama3.config_registry", "llama3_debugmodel"),
         ("torchtitan.train", "main")]


def missing_hooks():
    missing = []
    for module, attr in HOOKS:
        try:
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as exc:  # ImportError, AttributeError, or a broken installation
            missing.append(f"{module}.{attr} ({type(exc).__name__}: {exc})")
    return missing


def run_rank(args):
    import runpy
    import types

    import torch
    import torch._utils
    from torch.distributed.pipelining._utils import _StageMeta, extract_tensor_metas
    from torch.nn.attention.flex_attention import AuxOutput, create_mask

    cpu = types.ModuleType("cpu_device")
    cpu.__dict__.update({k: getattr(torch.cpu, k) for k in dir(torch.cpu) if k[0] != "_"})
    cpu.current_device = lambda: 0
    cpu.get_device_name = lambda device=None: "cpu"
    cpu.get_device_properties = lambda device=None: types.SimpleNamespace(total_memory=1 << 30)
    cpu.memory_stats = lambda device=None: {}
    cpu.reset_peak_memory_stats = cpu.empty_cache = lambda device=None: None
    device_module = torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda t=None: cpu if t == "cpu" else device_module(t)

    from torchtitan.config import TORCH_DTYPE_MAP
    from torchtitan.models.common.attention import FlexAttention
    import torchtitan.models.llama3 as llama3

    def dense_attention(q, k, v, *, score_mod=None, block_mask=None, scale=None,
                        enable_gqa=False, return_aux=None, kernel_options=None):
        assert score_mod is None and not (return_aux and return_aux.lse)
        mask = create_mask(block_mask.mask_mod, block_mask.shape[0], None, q.shape[2],
                           k.shape[2], device=q.device)
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa), AuxOutput()

    FlexAttention._compiled_flex_attn = staticmethod(dense_attention)

    pipeline_llm = llama3.pipeline_llm

    def static_pipeline_llm(model, **kw):
        # Between stages flow the hidden states: (microbatch, local sequence, dim), in the
        # parameters' mixed precision; the first stage takes the token ids.
        schedule, parts, has_first, has_last = pipeline_llm(model, **kw)
        training, parallelism, dims = kw["training"], kw["parallelism"], kw["parallel_dims"]
        mb = parallelism.pipeline_parallel_microbatch_size
        seq = training.seq_len // (dims.tp if parallelism.enable_sequence_parallel else 1)
        hidden = torch.empty(mb, seq, kw["model_config"].dim, device="meta", requires_grad=True,
                             dtype=TORCH_DTYPE_MAP[training.mixed_precision_param])
        tokens = torch.empty(mb, training.seq_len, dtype=torch.long, device="meta")
        for stage in getattr(schedule, "_stages", None) or [schedule._stage]:
            stage._user_meta = _StageMeta(
                inputs=extract_tensor_metas((tokens,) if stage.is_first else (hidden,)),
                outputs=extract_tensor_metas((hidden,)))
        return schedule, parts, has_first, has_last

    llama3.pipeline_llm = static_pipeline_llm
    sys.argv = ["torchtitan.train", *args]
    runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)


def write_assets(folder):
    """A byte-level tokenizer (256 bytes, BOS, EOS) and a small C4-like JSON dataset."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    tokenizer, data = os.path.join(folder, "tokenizer"), os.path.join(folder, "c4_test")
    os.makedirs(tokenizer)
    os.makedirs(data)
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for special in ("<|begin_of_text|>", "<|end_of_text|>"):
        vocab[special] = len(vocab)
    tok = Tokenizer(BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(os.path.join(tokenizer, "tokenizer.json"))
    with open(os.path.join(tokenizer, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
    with open(os.path.join(data, "data.json"), "w") as f:
        for i in range(64):
            f.write(json.dumps({"text": f"Document {i}: the quick brown fox. " * 8}) + "\n")
    return tokenizer, data


failures = []


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_python import require_torch, skip
    require_torch("torchtitan_record", lambda: importlib.import_module("torch.distributed"))
    where = f"MESHSIM_TORCHTITAN_SITE={SITE}" if SITE else "this Python"
    try:
        import torchtitan
    except Exception as exc:
        skip("torchtitan_record", f"torchtitan is not importable from {where} "
                                  f"({type(exc).__name__}: {exc}); scripts/torchtitan_env.sh "
                                  "installs it")
    missing = missing_hooks()
    if missing:
        skip("torchtitan_record", f"torchtitan {getattr(torchtitan, '__version__', '?')} from "
                                  f"{where} cannot run on the CPU here: it lacks "
                                  + "; ".join(missing))
    meshsim = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="meshsim-torchtitan-")
    try:
        tokenizer, data = write_assets(os.path.join(tmp, "assets"))
        out = os.path.join(tmp, "dumps")
        path = [os.path.join(ROOT, "python"), SITE, os.environ.get("PYTHONPATH")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p),
                   HF_HOME=os.path.join(tmp, "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        r = subprocess.run(
            [sys.executable, "-m", "meshsim_record", "--world-size", str(WORLD), "-o", out,
             "-j", "2", "--rank-timeout", "300", "--", os.path.abspath(__file__), "--rank",
             *TRAIN, "--hf-assets-path", tokenizer, "--dataloader.dataset-path", data,
             "--dump-folder", os.path.join(tmp, "titan")],
            capture_output=True, text=True, env=env, timeout=1800)
        ranks = load(os.path.join(out, "meshsim_record.json")).get("ranks", [])
        check(r.returncode == 0 and len(ranks) == WORLD and all(o["status"] == "ok" for o in ranks),
              f"torchtitan {torchtitan.__version__} llama3 debugmodel, pp 2 x dp_shard 2 x tp 2, "
              f"2 steps: every rank recorded and finished: {r.stdout[-1500:]!r}")
        dump = load(os.path.join(out, "nccl_trace_rank_5.json"))
        descs = {k: g["desc"] for k, g in dump.get("pg_config", {}).items()}
        calls = {(descs.get(str(e["process_group"][0]), "?"), e["profiling_name"].split(" ")[0])
                 for e in dump.get("entries", [])}
        check({("mesh_pp", "nccl:send"), ("mesh_pp", "nccl:recv"),
               ("mesh_dp_shard", "nccl:_reduce_scatter_base"),
               ("mesh_tp", "nccl:_all_gather_base")} <= calls,
              f"rank 5 holds the stages' sends and recvs, FSDP's and TP's collectives: "
              f"{sorted(calls)}")
        a = subprocess.run([meshsim, "fr", "analyze", "--json", out], capture_output=True,
                           text=True, timeout=300)
        try:
            report = json.loads(a.stdout)
        except ValueError:
            report = {"verdict": "unreadable", "stderr": a.stderr[-500:]}
        rng = report.get("rng") or {}
        check(report.get("verdict") == "no hang" and not report.get("culprits"),
              f"fr analyze: no hang: {report.get('verdict')} {report.get('summary') or ''}")
        # FSDP over TP shards dim 0 of the column-parallel weights twice ([_StridedShard(0),
        # Shard(0)]); DTensor then starts shards past the offset it reserves, so their init
        # draws overlap the next op's (docs/rng.md 3.3): predicted, not a recording fault.
        # Every overlap listed has such a weight on one side, and the note names the cause.
        overlaps = rng.get("overlaps") or []
        twice = all("[_StridedShard(0, split_factor=2), Shard(0)]" in o for o in overlaps) and \
            any("sharded over several mesh dims" in n for n in rng.get("notes", []))
        check(rng.get("random_ops", 0) > 0 and
              (a.returncode == 0 if rng.get("clean") else
               a.returncode == 1 and twice and not rng.get("replicas_differ_count")),
              f"fr analyze: exit {a.returncode}; RNG: {rng.get('random_ops')} random ops, "
              f"{rng.get('overlap_count') or 0} overlapping draws, each from a weight sharded "
              f"twice on dim 0: {[o for o in overlaps if '_StridedShard(0' not in o][:2]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"torchtitan_record: {len(failures)} checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rank"]:
        run_rank(sys.argv[2:])
    else:
        main()
