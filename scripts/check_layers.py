#!/usr/bin/env python3
"""The layer rules of meshsim's sources, checked: which folders a folder's files may include.

The model (src/) includes nothing of sim/. In sim/, each folder may include itself and the
folders below it, in this order:

    base < runtime < gpu, report < scenario < run < steps, swarm < cli

(gpu and report are side by side: neither includes the other; nor do steps and
swarm). The build runs this before it
compiles anything (an include that runs up a layer fails the build), and the test suite runs it
on a tree with a planted violation to show that it can fail.

Usage: check_layers.py ROOT [STAMP]   (writes STAMP, an empty header, when the rules hold)
"""
import os
import re
import sys

# What each sim/ folder may include besides itself.
ALLOWED = {
    "base": set(),
    "runtime": {"base"},
    "gpu": {"base", "runtime"},
    "report": {"base", "runtime"},
    "scenario": {"base", "runtime", "report"},
    "run": {"base", "runtime", "gpu", "report", "scenario"},
    "steps": {"base", "runtime", "gpu", "report", "scenario", "run"},
    "swarm": {"base", "runtime", "gpu", "report", "scenario", "run"},
    "cli": {"base", "runtime", "gpu", "report", "scenario", "run", "steps", "swarm"},
}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"((?:sim|src)/[^"]+)"', re.M)
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".cuh")


def layer_of(path):
    """'src', a sim/ folder name, or None for files outside both."""
    parts = path.split("/")
    if parts[0] == "src":
        return "src"
    if parts[0] == "sim" and len(parts) > 2:
        return parts[1]
    return None


def violations(root):
    out = []
    for top in ("src", "sim"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                here = layer_of(path)
                if here is None:
                    continue
                text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    target = layer_of(m.group(1))
                    line = text.count("\n", 0, m.start()) + 1
                    if here == "src":
                        if target != "src":
                            out.append(f"{path}:{line}: the model includes {m.group(1)}")
                        continue
                    if here not in ALLOWED:
                        out.append(f"{path}:{line}: sim/{here} is no known layer (add it to "
                                   "scripts/check_layers.py)")
                        break
                    if target in (None, "src", here):
                        continue
                    if target not in ALLOWED[here]:
                        out.append(f"{path}:{line}: sim/{here} may not include {m.group(1)} "
                                   f"(sim/{here} uses {', '.join(sorted(ALLOWED[here])) or 'nothing of sim/'})")
    return out


def main():
    root = sys.argv[1]
    found = violations(root)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print(f"check_layers: {len(found)} include(s) run up a layer", file=sys.stderr)
        return 1
    if len(sys.argv) > 2:
        stamp = "// Written by scripts/check_layers.py when the layer rules hold.\n"
        # Rewritten only when missing: a new time stamp would make every compiled file stale.
        old = None
        if os.path.exists(sys.argv[2]):
            with open(sys.argv[2]) as f:
                old = f.read()
        if old != stamp:
            with open(sys.argv[2], "w") as f:
                f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
