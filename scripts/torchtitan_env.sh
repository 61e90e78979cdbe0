#!/usr/bin/env bash
# Optional: torchtitan 0.3.0 and what its trainer imports, for tests/torchtitan_record_test.py
# (meshsim_record on torchtitan's llama3 debug model). About 500 MB, installed with
# `pip install --target` into VENV/torchtitan-site, outside the virtualenv's own packages, so
# that nothing it pulls in changes the torch or numpy the other tests use.
# Usage: scripts/torchtitan_env.sh [VENV_DIR]   (after scripts/torch_env.sh; same default)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv-torch}
site=$venv/torchtitan-site
pip=("$venv/bin/python" -m pip install -q --target "$site" --upgrade)
numpy=$("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')
# torchtitan's own requirements name torch nightlies: these four come without dependencies.
"${pip[@]}" --no-deps torchtitan==0.3.0 torchdata==0.11.0 torch_checkpointing==0.1.1 \
  spmd_types==0.2.3
"${pip[@]}" datasets==4.7.0 tokenizers==0.23.3 safetensors==0.8.0 tyro==1.0.17 \
  tensorboard==2.21.0 einops==0.8.2 "numpy==$numpy"
echo "torchtitan in $site; tests/torchtitan_record_test.py finds it there"
