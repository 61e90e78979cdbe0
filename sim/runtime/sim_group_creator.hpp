// Process-group creation in the fiber runtime: new_group is a collective over WORLD (as c10d's
// store-based barrier makes it), so ranks that skip it or create groups in another order hang or
// desynchronise exactly as they would on a cluster. The groups themselves live in the world's
// shared table.
#pragma once

#include "sim/runtime/sim_collectives.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

class SimGroupCreator final : public GroupCreator {
 public:
  SimGroupCreator(int64_t rank, std::shared_ptr<GroupTable> table, SimCollectives& collectives)
      : GroupCreator(rank, std::move(table)), collectives_(collectives) {}

 protected:
  // c10d's store barrier is keyed by the group's name, not its ranks: ranks that disagree on the
  // members still meet here (the backend reports the disagreement as a warning). A mesh dim's
  // groups meet once, as a batch: ranks that create another number of groups disagree on the
  // signature.
  void store_barrier(const SharedGroupBatch& batch) override {
    Signature sig{CollectiveOp::kNewGroup,
                  DType::kInt64,
                  {{static_cast<int64_t>(batch->count())}},
                  std::nullopt,
                  std::nullopt,
                  {}};
    collectives_.collective(rank(), Group{"store", world_ranks()}, sig, Payload{{}, {}, batch});
  }

 private:
  SimCollectives& collectives_;
};

}  // namespace meshsim::sim
