// What a DCP load onto a given mesh would read, from the checkpoint's metadata alone: for every
// rank, the saved items whose chunks overlap the shard it will hold (each item is one torch.save
// archive that DCP's FileSystemReader reads whole and then narrows), the bytes it holds and its
// peak; and the names that are missing, that the placements do not fit, or whose chunks leave
// part of the tensor unsaved. No tensor data is read, so a 70B model's checkpoint plans in
// seconds. See docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "src/dtensor/local_shard.hpp"
#include "src/dtensor/placement.hpp"
#include "src/io/dcp_metadata.hpp"

namespace meshsim {

// One saved item a rank reads: entry and chunk index into the metadata, and the part of the
// chunk it keeps (global offsets and sizes).
struct DcpRead {
  size_t entry = 0;
  size_t chunk = 0;  // of a tensor; objects are read whole
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

// The chunks of one tensor that overlap a region, found without testing them all: chunks sorted
// by their start in dim 0, with the largest end so far, so a search stops at the first chunk
// whose predecessors all end before the region starts.
class DcpChunkIndex {
 public:
  explicit DcpChunkIndex(const DcpEntry& entry);
  // The non-empty overlaps of `region` (global offsets and shape) with the chunks, in chunk
  // order; `entry_index` is copied into each. A 0-d tensor's one chunk always overlaps.
  std::vector<DcpRead> overlapping(size_t entry_index, const LocalShard& region) const;

 private:
  const DcpEntry& entry_;
  std::vector<size_t> order_;
  std::vector<int64_t> max_end_;
};

struct DcpRankRead {
  uint64_t items = 0;        // archives read
  uint64_t file_bytes = 0;   // their lengths together
  uint64_t holds_bytes = 0;  // the shards it loads into
  // The holds plus the largest item in flight: its archive bytes and the chunk torch.load makes
  // of them before the narrow-and-copy.
  uint64_t peak_bytes = 0;
  std::vector<DcpRead> reads;  // only for the ranks asked for in detail, in metadata order
};

struct DcpReadPlan {
  std::vector<DcpRankRead> ranks;    // by rank, row-major over the mesh
  std::vector<std::string> missing;  // asked for, not in the checkpoint (DCP's "Missing key")
  // Not loadable as asked: "model.b: Shard(1) does not apply to a 1-d tensor", an object asked
  // for as a tensor.
  std::vector<std::string> mismatched;
  // Parts of a tensor no chunk holds: a load would leave them as they were.
  std::vector<std::string> uncovered;
  size_t tensors = 0;  // loaded
  size_t objects = 0;  // loaded
};

struct DcpReadRequest {
  std::vector<int64_t> mesh_shape;
  std::vector<Placement> placements;  // one per mesh dim, the same for every tensor
  // Names to load (empty: everything the checkpoint holds).
  std::vector<std::string> names;
  std::optional<int64_t> detail_rank;  // whose reads to list
  bool detail_all_ranks = false;       // or everyone's (small worlds)
  // Whether a rank's reads are listed.
  bool detailed(size_t rank) const {
    return detail_all_ranks || detail_rank == static_cast<int64_t>(rank);
  }
};

// A 0-d tensor is loaded whole by every rank (as the plain tensor it is in a training job's state
// dict); other tensors by the placements. Throws meshsim::Error (ValueError) for a request that
// fits no tensor: placements that are not one per mesh dim, a Partial (DCP cannot load into
// one), an empty mesh or a rank outside it.
DcpReadPlan plan_dcp_read(const DcpMetadata& metadata, const DcpReadRequest& request);

}  // namespace meshsim
