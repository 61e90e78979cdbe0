#!/usr/bin/env bash
# The fuzz suite's smoke run: a short, seeded session of one fuzz target over the committed corpus
# plus the shipped scenarios. libFuzzer writes what it finds into a temporary directory, never into
# the source tree. Usage: run_fuzz.sh libfuzzer|replay BINARY RUNS CORPUS_DIR...
set -euo pipefail
mode=$1 binary=$2 runs=$3
shift 3
if [ "$mode" = libfuzzer ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # libFuzzer's default error exit code is 77, which meson reads as "skipped": a finding must fail.
  exec "$binary" -error_exitcode=1 -seed=20261130 -runs="$runs" -max_len=8192 -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 "$scratch" "$@"
fi
exec "$binary" --mutations "$runs" "$@"
