#!/usr/bin/env python3
"""Fails when a scenario file in a directory (scenarios/, tests/regressions/) is not registered as a
meson test.
Usage: scenarios_registered.py SCENARIO_DIR REGISTERED_FILE..."""
import os
import sys

directory, registered = sys.argv[1], {os.path.basename(p) for p in sys.argv[2:]}
present = {f for f in os.listdir(directory) if f.endswith(".toml")}
missing = sorted(present - registered)
stale = sorted(registered - present)
name = os.path.basename(os.path.normpath(directory))
for f in missing:
    print(f"{name}/{f} is not registered in tests/meson.build")
for f in stale:
    print(f"tests/meson.build registers {name}/{f}, which does not exist")
print(f"registered: {len(present) - len(missing)} passed, {len(missing) + len(stale)} failed")
sys.exit(1 if missing or stale else 0)
