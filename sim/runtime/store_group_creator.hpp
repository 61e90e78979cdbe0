// Process-group creation in the fiber runtime: new_group waits in c10d's store-based barrier over
// WORLD, so ranks that skip it or create groups in another order hang or desynchronise exactly as
// they would on a cluster. The groups themselves live in the world's shared table. The same for
// every backend: the store is not the collective backend.
#pragma once

#include <string>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

// Completes a store barrier: checks that every rank asked for the same groups, and keeps a
// warning when they did not (c10d's barrier is keyed by the group's name, not its members, so
// such ranks still meet).
class StoreBarrier final : public Executor {
 public:
  void execute(Meeting& meeting) override;
  // Groups created with different members on different ranks, in the order they happened.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> warnings_;
};

class StoreGroupCreator final : public GroupCreator {
 public:
  StoreGroupCreator(int64_t rank, std::shared_ptr<GroupTable> table, Rendezvous& rendezvous,
                    StoreBarrier& barrier)
      : GroupCreator(rank, std::move(table)), rendezvous_(rendezvous), barrier_(barrier) {}

 protected:
  // A mesh dim's groups meet once, as a batch: ranks that create another number of groups
  // disagree on the signature.
  void store_barrier(const SharedGroupBatch& batch) override;

 private:
  Rendezvous& rendezvous_;
  StoreBarrier& barrier_;
};

}  // namespace meshsim::sim
