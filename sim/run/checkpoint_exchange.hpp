// What the ranks of one whole-world save or load hand to its coordinator (rank 0). In PyTorch the
// local plans travel to the coordinator in a gather and the global plan comes back in a scatter;
// ranks here share one process, so they leave them in this table, and the collectives between
// the phases only carry whether every rank got through (the same meetings, so the same hangs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/error.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/dcp_metadata.hpp"
#include "src/io/dcp_write.hpp"

namespace meshsim::sim {

class CheckpointExchange {
 public:
  explicit CheckpointExchange(int64_t world_size) : world_size_(world_size) {}

  // One save or load: the n-th checkpoint collective of every rank.
  struct Slot {
    explicit Slot(int64_t world_size)
        : calls(static_cast<size_t>(world_size)),
          plans(static_cast<size_t>(world_size)),
          dcp_written(static_cast<size_t>(world_size)) {}
    // What each rank called ("save of checkpoint \"step1\""); empty until it arrives.
    std::vector<std::string> calls;
    // A save: every rank's local plan, then the coordinator's merge of them.
    std::vector<LocalSavePlan> plans;
    GlobalSavePlan merged;
    // A save in DCP's layout: where each rank's items went (the coordinator's metadata lists them).
    std::vector<std::vector<DcpWrittenItem>> dcp_written;
    // A load: the metadata, read once by the coordinator (meshsim's own, or DCP's `.metadata`).
    std::shared_ptr<const CheckpointMetadata> metadata;
    std::shared_ptr<const DcpMetadata> dcp_metadata;
    // The failures of the phase under way, lowest rank first.
    std::map<int64_t, Error> failures;
    int64_t finished = 0;
  };

  // The slot of this rank's next checkpoint collective (each rank counts its own calls).
  Slot& next_slot(int64_t rank);
  // This rank is done with the slot it took last; the last rank to finish frees it.
  void finish(int64_t rank);

 private:
  int64_t world_size_;
  std::vector<int64_t> calls_made_;  // per rank
  std::map<int64_t, Slot> slots_;    // by call number
};

}  // namespace meshsim::sim
