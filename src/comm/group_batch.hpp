// Process groups created together: every replica group of one mesh dim (PyTorch calls new_group
// once per group, in this order), or one explicit group. Built once per world and immutable, so
// every rank of a 65,536-rank world shares one copy.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "src/comm/rank_list.hpp"
#include "src/comm/rank_map.hpp"
#include "src/mesh/axis.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim {

class GroupBatch {
 public:
  // The replica groups of `axis` over `map` (complement offsets ascending; replicas that would
  // run past the table do not exist), each with its members sorted as new_group sorts them. Stops
  // at the first group c10d would refuse and keeps its error (invalid()).
  static std::shared_ptr<const GroupBatch> of_axis(const Axis& axis, SharedRankMap map,
                                                   int64_t world_size);
  // One group; `members` sorted and already checked (check_group_ranks).
  static std::shared_ptr<const GroupBatch> of_members(RankList members);

  size_t count() const { return members_.size(); }
  const RankList& members(size_t index) const { return members_.at(index); }
  // Index of the group holding `rank`, or -1.
  int64_t group_of(int64_t rank) const;
  // c10d's ValueError text for the group after the last one kept, or "" when all were valid.
  const std::string& invalid() const { return invalid_; }
  // Whether both batches hold the same member lists in the same order.
  bool same_groups(const GroupBatch& other) const;
  // Whether it is a DeviceMesh dim's groups (of_axis), not groups new_group made.
  bool of_mesh_dim() const { return of_mesh_dim_; }
  // "[0, 1, 2]" for one group; "8192 groups of 8 ([0, ..., 7], ...)" for several.
  std::string describe() const;

 private:
  GroupBatch() = default;
  MemoryReservation reserved_;
  std::vector<RankList> members_;
  std::vector<int32_t> group_of_rank_;  // by global rank; empty for a single group
  std::string invalid_;
  bool of_mesh_dim_ = false;
};

using SharedGroupBatch = std::shared_ptr<const GroupBatch>;

}  // namespace meshsim
