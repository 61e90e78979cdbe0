// Process-group creation in the fiber runtime: new_group is a collective over WORLD (as c10d's
// store-based barrier makes it), so ranks that skip it or create groups in another order hang or
// desynchronise exactly as they would on a cluster.
#pragma once

#include "sim/runtime/sim_collectives.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

class SimGroupCreator final : public GroupCreator {
 public:
  SimGroupCreator(int64_t rank, int64_t world_size, SimCollectives& collectives)
      : local_(rank, world_size, collectives.rank_lists()), collectives_(collectives) {}

  int64_t rank() const override { return local_.rank(); }
  int64_t world_size() const override { return local_.world_size(); }
  std::string world_group_name() const override { return local_.world_group_name(); }
  std::optional<std::string> new_group(std::span<const int64_t> ranks) override {
    // c10d's store barrier is keyed by the group's name, not its ranks: ranks that disagree on the
    // members still meet here (the backend reports the disagreement as a warning).
    // c10d validates the ranks before it reaches the store.
    const std::vector<int64_t> members = check_group_ranks(ranks, world_size());
    Signature sig{CollectiveOp::kNewGroup, DType::kInt64, {}, std::nullopt, std::nullopt, {}};
    collectives_.collective(rank(), store(), sig,
                            Payload{{}, {}, collectives_.rank_lists()->intern(members)});
    return local_.new_group(members);
  }
  RankList group_ranks(const std::string& name) const override { return local_.group_ranks(name); }
  std::optional<std::string> find_group(std::span<const int64_t> ranks) const override {
    return local_.find_group(ranks);
  }
  // WORLD as a Group.
  Group world() const { return Group{world_group_name(), local_.groups().front()}; }
  // The TCP store's barrier that new_group waits in: all of WORLD, but its own sequence, apart
  // from the collectives on WORLD.
  Group store() const { return Group{"store", local_.groups().front()}; }

 private:
  LocalGroupCreator local_;
  SimCollectives& collectives_;
};

}  // namespace meshsim::sim
