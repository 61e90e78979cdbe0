#!/usr/bin/env bash
# Quick start, test suite: install what is missing, build, and run every test (unit, CLI, scenarios,
# format). Extra arguments go to `meson test`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" build
ninja -C "$root/build"
exec meson test -C "$root/build" --print-errorlogs "$@"
