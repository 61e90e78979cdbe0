// Process-group creation in the fiber runtime: new_group waits in c10d's store-based barrier over
// WORLD, so ranks that skip it or create groups in another order hang or desynchronise exactly as
// they would on a cluster. The groups themselves live in the world's shared table. The same for
// every backend: the store is not the collective backend.
//
// One departure from c10d: a mesh dim's groups meet in one barrier (c10d: one per group), with
// the number of groups in the signature. Ranks that create other numbers of groups at that point
// are a desync here, where c10d would pair their barriers one by one and hang or warn later.
#pragma once

#include <string>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "sim/runtime/trace.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

// Ranks of WORLD that asked a store barrier for the same groups.
struct GroupRequest {
  SharedGroupBatch batch;
  std::vector<int64_t> ranks;  // ascending
  std::string origin;          // what the lowest of them calls the groups ("world.tp")
};

// Told when a store barrier has named a batch of groups (the NCCL backend creates their
// communicators). What it throws fails the barrier on every rank.
class GroupListener {
 public:
  virtual ~GroupListener() = default;
  // The groups of `requests[q].batch` are named first_id, first_id + 1, ... for its ranks.
  virtual void groups_defined(int64_t first_id, const std::vector<GroupRequest>& requests) = 0;
};

// Completes a store barrier: names the groups in the world's table (the lowest rank's request
// for every rank that agrees with it), keeps a warning when ranks asked for other members
// (c10d's barrier is keyed by the group's name, not its members, so such ranks still meet), and
// lets virtual time pass.
class StoreBarrier final : public Executor {
 public:
  // `listener` may be null.
  StoreBarrier(GroupTable& groups, VirtualTime& time, GroupListener* listener = nullptr)
      : groups_(groups), time_(time), listener_(listener) {}

  void execute(Meeting& meeting) override;
  // Groups created with different members on different ranks, in the order they happened.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  GroupTable& groups_;
  VirtualTime& time_;
  GroupListener* listener_;
  std::vector<std::string> warnings_;
};

class StoreGroupCreator final : public GroupCreator {
 public:
  // `trace` may be null (no tracing).
  StoreGroupCreator(int64_t rank, std::shared_ptr<GroupTable> table, Rendezvous& rendezvous,
                    StoreBarrier& barrier, RankActivity& activity, Trace* trace)
      : GroupCreator(rank, std::move(table)),
        rendezvous_(rendezvous),
        barrier_(barrier),
        activity_(activity),
        trace_(trace) {}

 protected:
  void store_barrier(const SharedGroupBatch& batch, int64_t first) override;

 private:
  Rendezvous& rendezvous_;
  StoreBarrier& barrier_;
  RankActivity& activity_;
  Trace* trace_;
};

}  // namespace meshsim::sim
