#!/usr/bin/env bash
# Runs in a folder made by scripts/gpu-bundle, on a GPU machine; logs go to $OUT (a new temporary
# folder when unset).
cd "$(dirname "$0")"
OUT=${OUT:-$(mktemp -d)}
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -e "$nccl_lib/libnccl.so.2" ] || nccl_lib=$(dirname "$(find / -name 'libnccl.so.2*' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/lib:$nccl_lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "nccl from $nccl_lib"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
ldd ./meshsim | grep -E 'not found|nccl|cudart'
echo "== gpu_kernel_device_tests"; timeout 120 ./gpu_kernel_device_tests 2>&1 | tail -15; echo "rc=${PIPESTATUS[0]}"
echo "== kernel_parity"; timeout 200 ./kernel_parity > "$OUT/kernel_parity.log" 2>&1; echo "rc=$?"; tail -5 "$OUT/kernel_parity.log"; grep -c PASS "$OUT/kernel_parity.log"; grep FAIL "$OUT/kernel_parity.log" | head
echo "== torch"; PYTHONUNBUFFERED=1 timeout 240 python3 gpu_check_torch.py ./meshsim > "$OUT/torch.log" 2>&1; echo "rc=$?"; head -2 "$OUT/torch.log"; tail -6 "$OUT/torch.log"; grep FAIL "$OUT/torch.log" | head
echo "== one-rank scenario sim vs nccl"
./meshsim run --no-time --backend sim --payload-hashes "$OUT/one.sim" one_rank.toml > "$OUT/one.sim.out" 2>&1; echo "sim rc=$?"
timeout 60 ./meshsim run --no-time --backend nccl --payload-hashes "$OUT/one.nccl" one_rank.toml > "$OUT/one.nccl.out" 2>&1; echo "nccl rc=$?"
tail -4 "$OUT/one.nccl.out"; diff "$OUT/one.sim" "$OUT/one.nccl" && echo "payload hashes IDENTICAL ($(grep -c seq "$OUT/one.sim") collectives)"
echo "== 4 ranks on 1 GPU refused"; timeout 60 ./meshsim run --no-time --backend nccl collectives_results.toml 2>&1 | tail -4; echo "rc=${PIPESTATUS[0]}"
