"""Writes dcp_variants/: DCP .metadata files that torch 2.15's pickler wrote from the metadata of
dcp_2x2 after one change each, for the tests of meshsim's reader (each must be refused, or read,
as dcp_metadata_test.cpp says). Needs torch. Usage: make_dcp_variants.py (from this folder)."""
import copy
import os
import pickle

import torch
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "dcp_2x2", ".metadata"), "rb") as f:
    ORIGINAL = pickle.load(f)


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


def variant(name, change):
    md = copy.deepcopy(ORIGINAL)
    change(md)
    with open(os.path.join(HERE, "dcp_variants", name + ".metadata"), "wb") as f:
        pickle.dump(md, f)


def chunks(md, fqn):
    return md.state_dict_metadata[fqn].chunks


def overlap(md):
    chunks(md, "model.w")[1] = ChunkStorageMetadata(torch.Size([0, 1]), torch.Size([4, 2]))


def past_shape(md):
    chunks(md, "model.w")[2] = ChunkStorageMetadata(torch.Size([4, 0]), torch.Size([5, 2]))


def missing_storage(md):
    del md.storage_data[MetadataIndex("model.emb", torch.Size([0, 3]))]


def storage_for_unknown_name(md):
    md.storage_data[MetadataIndex("ghost", torch.Size([0]))] = \
        md.storage_data[MetadataIndex("mask", torch.Size([0]))]


def huge_tensor(md):  # a 40000 x 40000 tensor whose chunks hold 32 elements
    md.state_dict_metadata["model.w"].size = torch.Size([40000, 40000])


def calls_system(md):
    md.planner_data["model.w"] = Evil()


def compressed(md):
    md.storage_data[MetadataIndex("mask", torch.Size([0]))].transform_descriptors = ["zstd"]


def escaping_path(md):
    md.storage_data[MetadataIndex("mask", torch.Size([0]))].relative_path = "../../etc/passwd"


def negative_length(md):
    md.storage_data[MetadataIndex("mask", torch.Size([0]))].length = -5


for fn in (overlap, past_shape, missing_storage, storage_for_unknown_name, huge_tensor,
           calls_system, compressed, negative_length, escaping_path):
    variant(fn.__name__, fn)
