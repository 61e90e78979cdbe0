#!/usr/bin/env bash
# Installs meshsim's build dependencies (Debian 12 packages) and configures the build directory.
# Idempotent: installs only what is missing, and reconfigures an existing build directory in place.
# Usage: scripts/setup.sh [--only-run] [BUILD_DIR] [extra meson options...]
#   --only-run: only what building and running `meshsim` needs (the quick start's first command);
#   the clang toolchain (sanitizers, fuzzing, the format check) is left for the test suite.
set -euo pipefail

only_run=false
if [ "${1:-}" = "--only-run" ]; then
  only_run=true
  shift
fi

packages=(
  meson ninja-build pkg-config g++
  libboost-fiber-dev libboost-context-dev libboost-serialization-dev
  catch2 libbenchmark-dev libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libxxhash-dev libjemalloc-dev
)
$only_run || packages+=(clang clang-format libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build}
shift || true
cd "$root"
if [ -f "$build/build.ninja" ]; then
  meson configure "$build" "$@" >/dev/null
else
  # -O2 without debug information, which costs a third of the compile time (-Ddebug=true for a
  # debugger); assertions stay on.
  meson setup "$build" -Doptimization=2 -Ddebug=false "$@"
fi
