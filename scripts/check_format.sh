#!/usr/bin/env bash
# Fails when a C++ file differs from what .clang-format produces; prints the files to fix.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done < <(git ls-files '*.cpp' '*.hpp')
[ "$bad" -eq 0 ] && echo "format: 1 passed, 0 failed" || { echo "format: 0 passed, 1 failed"; exit 1; }
