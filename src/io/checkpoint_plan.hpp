// How a whole-world save is planned, as Distributed Checkpoint plans it (docs/mesh.md 4.3): each
// rank lists the chunks of its own state dict (its local plan; names are free per rank, plain
// tensors count as a whole replicated chunk), and the coordinator merges the lists into the
// metadata, keeping one writer for a chunk several ranks hold.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/io/world_checkpoint.hpp"

namespace meshsim {

// One entry of a rank's state dict: a plain tensor or a DTensor (exactly one is set).
struct StateDictEntry {
  std::string name;
  const Tensor* tensor = nullptr;
  const DTensor* dtensor = nullptr;
};

// One chunk a rank offers to write: where it lies in the global tensor and what it holds.
struct SaveItem {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // the global shape
  std::vector<IndexRuns> indices;
  std::vector<Placement> placements;  // empty for a plain tensor
  std::vector<int64_t> mesh_shape;
  uint64_t digest = 0;           // of the chunk's elements
  int64_t tensor_bytes = 0;      // of the whole tensor: what DCP's load balancing counts
  bool requires_grad = false;    // a DTensor's (DCP records it with the tensor's properties)
  const Tensor* data = nullptr;  // the chunk's elements: the state dict's, borrowed
};

struct LocalSavePlan {
  int64_t rank = 0;         // in the group that saves: its files are numbered by it
  int64_t global_rank = 0;  // what messages name
  std::vector<SaveItem> items;
};

// The chunks of `entries` on `rank`: a DTensor's shard (nothing for a rank outside its mesh; an
// empty shard is an empty chunk), a plain tensor whole. Throws RuntimeError for a name listed
// twice, a Partial placement (reduce it before saving) and a meta tensor (nothing to save).
LocalSavePlan plan_local_save(int64_t rank, std::span<const StateDictEntry> entries);

struct GlobalSavePlan {
  // Every name's global shape, dtype and chunks, each chunk with the rank that writes it.
  CheckpointMetadata metadata;
  // What DCP would do silently that a user would not want (two ranks saving different values at
  // one place: one of them is written, and every load gets it).
  std::vector<std::string> warnings;
  // Of the elements of every chunk written, in the order the chunks first appear.
  uint64_t values_digest = 0;
  // What each plan's rank writes (writes[p] for plans[p]), in its local plan's order.
  std::vector<std::vector<PlannedWrite>> writes;
};

// The coordinator's merge of every rank's local plan (`plans` in group-rank order). A chunk several
// ranks hold is written by the one DCP's default planner picks: chunks are taken in the order
// they first appear (rank order, then each rank's order), and each goes to the holder that has
// been given the fewest bytes so far (each chunk counting as its whole tensor's bytes), ties
// broken in the order CPython iterates the set of holders. Throws RuntimeError when ranks
// disagree on a name's shape or dtype, and ValueError (DCP's "Failed to validate global plan")
// when a name's chunks overlap or do not cover it.
GlobalSavePlan plan_global_save(std::span<const LocalSavePlan> plans);

}  // namespace meshsim
