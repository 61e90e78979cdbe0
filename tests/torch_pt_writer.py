"""Writes scenarios/checkpoints/torch-pt-fsdp-tp-2x4 with torch itself (2.15.0 made the shipped
files): on a (dp 2, tp 4) mesh of 8 ranks, FSDP over TP's layout of a [16, 4] float32 weight
([_StridedShard(0, sf=4), Shard(0)], every value its flat index, requires_grad) and the mesh, each
rank torch.save'ing its own DTensor (w-<rank>.pt) and mesh (mesh-<rank>.pt), process-group names
inside as PyTorch 2.15 pickles them. Runs on the fake process group, one rank at a time.
Usage: torch_pt_writer.py DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_pt_diff_test import write_case  # noqa: E402

CASE = {
    "mesh": [2, 4], "names": ["dp", "tp"], "used": [0, 1], "flatten": False, "shape": [16, 4],
    "dtype": "float32", "placements": [("SS", 0, 4), ("S", 0)], "explicit_order": False,
    "requires_grad": True,
}


def main():
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    write_case(CASE, directory, tensor_file="w-{rank}.pt")


if __name__ == "__main__":
    main()
