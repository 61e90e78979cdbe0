#!/usr/bin/env bash
# Optional: a virtualenv with PyTorch from PyPI (about 3 GB with its CUDA wheels), for the
# differential tests against PyTorch (tests/torch_diff_test.py) and for meshsim_record (python/),
# which it installs. Nothing else needs it.
# Usage: scripts/torch_env.sh [VENV_DIR]   (default: .venv-torch in the repository)
# Then:  MESHSIM_TORCH_PYTHON=VENV_DIR/bin/python meson test -C build --suite diff
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv-torch}
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-venv
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q torch numpy
# The recorder (python/): `python -m meshsim_record` runs a program's ranks next to this torch.
"$venv/bin/pip" install -q "$root/python"
"$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "in", "'"$venv"'")'
echo "run: MESHSIM_TORCH_PYTHON=$venv/bin/python meson test -C build --suite diff"
