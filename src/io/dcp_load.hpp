// Loads tensors from a torch.distributed.checkpoint directory as DCP's FileSystemReader does: for
// the shard a rank holds, every saved chunk that overlaps it is read (its torch.save archive, at
// the offset and length the metadata gives, in its `.distcp` file: only that range is read),
// checked against the
// metadata, and its overlap copied in. See docs/checkpoints.md.
#pragma once

#include <string>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/io/dcp_metadata.hpp"

namespace meshsim {

// The metadata of the DCP checkpoint in `dir` (its `.metadata`, bounded and checked).
DcpMetadata load_dcp_metadata(const std::string& dir);

// `entry` laid out over `mesh` as `placements` on the calling rank (the shard computed as DCP
// computes it for a DTensor). Throws meshsim::Error: RuntimeError naming the file and the problem
// when the saved chunks do not cover the shard, a data file is missing or shorter than the
// metadata says, or an item is not the tensor the metadata describes; ValueError from the
// archive reader for a damaged item; what DTensor::zeros throws for placements that do not fit.
DTensor load_dcp_dtensor(const std::string& dir, const DcpEntry& entry, const DeviceMesh& mesh,
                         std::vector<Placement> placements);
// A plain tensor of the checkpoint, whole.
Tensor load_dcp_tensor(const std::string& dir, const DcpEntry& entry);

}  // namespace meshsim
