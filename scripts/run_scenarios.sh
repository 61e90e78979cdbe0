#!/usr/bin/env bash
# Quick start, main job: install what is missing, build, and run every shipped scenario.
# Extra arguments go to `meshsim run` (for example --json report.json).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" --only-run build
ninja -C "$root/build" sim/meshsim  # the command only: the tests build in scripts/test.sh
exec "$root/build/sim/meshsim" run "$@" "$root/scenarios"
