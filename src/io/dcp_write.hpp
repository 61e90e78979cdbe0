// Whole-world checkpoints written in the layout of torch.distributed.checkpoint's
// FileSystemWriter in PyTorch 2.15, so that `dcp.load` reads what meshsim saved: each rank writes
// `__<rank>_0.distcp` (its items, each a torch.save archive of one chunk, one after another), then
// the coordinator writes `.metadata` (a pickle of DCP's Metadata: every name's shape, dtype and
// chunks, and where each chunk's archive lies). The plan is the same as for meshsim's own format
// (src/io/checkpoint_plan): one writer per chunk, as DCP picks it. See docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/io/atomic_file.hpp"
#include "src/io/checkpoint_plan.hpp"

namespace meshsim {

// Where one chunk's archive went: what DCP's WriteResult tells the coordinator.
struct DcpWrittenItem {
  std::string name;
  size_t chunk = 0;  // its position in the tensor's chunk list of the merged plan
  std::string file;  // "__3_0.distcp"
  uint64_t offset = 0;
  uint64_t length = 0;
};

// "__<rank>_0.distcp": the one data file a rank writes (DCP's default of one writer thread).
std::string dcp_data_file_name(int64_t rank);

// What rank `mine.rank` writes: its data file (always, 0 bytes when it was given no chunk), with
// `writes` (the chunks of its local plan that the merged plan assigns to it: GlobalSavePlan's
// writes), in its state dict's order. Throws RuntimeError for a chunk DCP's format cannot hold (a
// strided shard, whose elements are not one box of the tensor) and for a file that cannot be
// written (naming it). `durability` as for write_file_atomically.
std::vector<DcpWrittenItem> save_dcp_shard(const std::string& dir, const LocalSavePlan& mine,
                                           std::span<const PlannedWrite> writes,
                                           Durability durability = Durability::kNow);

// What the coordinator writes once every rank has written: `.metadata`, from the merged plan,
// every rank's local plan (for each tensor's properties, taken from its first chunk's writer, as
// DCP takes them) and every rank's written items (`written[r]` from rank r). `checkpoint_id` is
// recorded as the save's location; the save id is derived from the plan, so that one scenario
// writes one file.
void save_dcp_metadata(const std::string& dir, const CheckpointMetadata& plan,
                       std::span<const LocalSavePlan> plans,
                       std::span<const std::vector<DcpWrittenItem>> written,
                       std::string_view checkpoint_id, Durability durability = Durability::kNow);

}  // namespace meshsim
