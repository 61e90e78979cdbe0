#!/usr/bin/env bash
# Installs meshsim's build dependencies (Debian 12 packages) and configures the build directory.
# Idempotent: installs only what is missing, and reconfigures an existing build directory in place.
# Usage: scripts/setup.sh [BUILD_DIR] [extra meson options...]
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ clang clang-format libclang-rt-14-dev
  libboost-fiber-dev libboost-context-dev libboost-serialization-dev
  catch2 libbenchmark-dev libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libxxhash-dev
)

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
  meson setup "$build" --buildtype=debugoptimized "$@"
fi
