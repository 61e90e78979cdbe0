// What the ranks of one collective save or load hand to its coordinator (group rank 0 of the group
// it runs over, WORLD by default). In PyTorch the local plans travel to the coordinator in a
// gather and the global plan comes back in a scatter; ranks here share one process, so they leave
// them in this table, and the collectives between the phases only carry whether every rank got
// through (the same meetings, so the same hangs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/comm/collective.hpp"
#include "src/error.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/dcp_metadata.hpp"
#include "src/io/dcp_write.hpp"

namespace meshsim::sim {

class CheckpointExchange {
 public:
  // One save or load: the n-th checkpoint collective of every member of one group. Vectors are
  // indexed by group rank.
  struct Slot {
    explicit Slot(int64_t group_size)
        : calls(static_cast<size_t>(group_size)),
          plans(static_cast<size_t>(group_size)),
          dcp_written(static_cast<size_t>(group_size)),
          files(static_cast<size_t>(group_size)) {}
    // What each rank called ("save of checkpoint \"step1\""); empty until it arrives.
    std::vector<std::string> calls;
    // A save: every rank's local plan, then the coordinator's merge of them.
    std::vector<LocalSavePlan> plans;
    GlobalSavePlan merged;
    // A save in DCP's layout: where each rank's items went (the coordinator's metadata lists them).
    std::vector<std::vector<DcpWrittenItem>> dcp_written;
    // A save: the file each rank wrote, made durable together when the checkpoint is kept.
    std::vector<std::string> files;
    // A load: the metadata, read once by the coordinator (meshsim's own, or DCP's `.metadata`).
    std::shared_ptr<const CheckpointMetadata> metadata;
    std::shared_ptr<const DcpMetadata> dcp_metadata;
    // A load of meshsim's own format: each tensor's chunk lookup, made by the first rank that
    // reads the tensor and shared by the others.
    std::map<std::string, std::shared_ptr<const ChunkLookup>> chunk_lookups;
    // Whether every rank is in the same call, worked out by the first rank past the first meeting
    // (empty when they are; else why not) and read by the others.
    std::optional<std::string> calls_differ;
    // The failures of the phase under way by group rank, lowest first.
    std::map<int64_t, Error> failures;
    int64_t finished = 0;
  };

  // The slot of this rank's next checkpoint collective over `group`, which holds the rank (each
  // member counts its own calls on each group).
  Slot& next_slot(const Group& group);
  // This rank is done with the slot it took last on `group`; the last member to finish frees it.
  void finish(const Group& group);

  // A save over `group` (described as `label`) writes into `dir`. When another group's save of
  // this run wrote there too, returns the two labels, the lower group id's first (which of the
  // two came first depends on the schedule): both write the same file names, each numbering its
  // files by group rank.
  std::optional<std::pair<std::string, std::string>> claim_directory(const std::string& dir,
                                                                     const Group& group,
                                                                     const std::string& label);
  // What reports call `group`: made by `make` the first time it is asked for, then shared.
  template <typename Make>
  const std::string& group_label(const Group& group, Make&& make) {
    std::string& label = groups_[group.id].label;
    if (label.empty()) label = make();
    return label;
  }

 private:
  struct GroupCalls {
    std::vector<int64_t> calls_made;  // per group rank
    std::map<int64_t, Slot> slots;    // by call number
    std::string label;
  };
  struct Claim {
    int64_t group_id;
    std::string label;
  };
  std::map<int64_t, GroupCalls> groups_;  // by group id
  std::map<std::string, Claim> directories_;
};

}  // namespace meshsim::sim
