#!/usr/bin/env python3
"""The layer rules hold on this tree, and the checker catches a planted violation: a copy of the
tree where sim/runtime includes a sim/scenario header, and one where the model includes sim/.

Usage: layers_test.py ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

root = sys.argv[1]
checker = os.path.join(root, "scripts", "check_layers.py")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}")


def run(tree):
    return subprocess.run([sys.executable, checker, tree], capture_output=True, text=True)


r = run(root)
check(r.returncode == 0, f"the tree keeps its layers: {r.stderr}")
with tempfile.TemporaryDirectory() as tmp:
    for top in ("src", "sim"):
        shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
    planted = os.path.join(tmp, "sim", "runtime", "planted.hpp")
    with open(planted, "w") as f:
        f.write('#pragma once\n\n#include "sim/scenario/scenario.hpp"\n')
    r = run(tmp)
    check(r.returncode == 1 and "sim/runtime/planted.hpp:3: sim/runtime may not include "
          "sim/scenario/scenario.hpp" in r.stderr, f"an upward include is caught: {r.stderr}")
    os.remove(planted)
    with open(os.path.join(tmp, "src", "planted.hpp"), "w") as f:
        f.write('#include "sim/base/source_location.hpp"\n')
    r = run(tmp)
    check(r.returncode == 1 and "src/planted.hpp:1: the model includes sim/base/source_location.hpp"
          in r.stderr, f"the model including sim/ is caught: {r.stderr}")
print(f"layers: {3 - failures}/3 checks pass")
sys.exit(1 if failures else 0)
