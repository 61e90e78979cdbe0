#include "src/comm/group_batch.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "src/comm/group_creator.hpp"
#include "src/error.hpp"

namespace meshsim {

std::shared_ptr<const GroupBatch> GroupBatch::of_axis(const Axis& axis, SharedRankMap map,
                                                      int64_t world_size) {
  MESHSIM_ASSERT(world_size <= std::numeric_limits<int32_t>::max(),
                 fmt::format("world of {} ranks", world_size));
  std::shared_ptr<GroupBatch> batch(new GroupBatch());
  batch->of_mesh_dim_ = true;
  const std::span<const int64_t> table = map->ranks();
  const auto table_size = static_cast<int64_t>(table.size());
  // Once per world, but as large as the world: counted like tensor data (MemoryError).
  constexpr uint64_t kBytesPerGroup = 96;  // member list, its control block, the pointer
  batch->reserved_ = MemoryReservation(
      static_cast<uint64_t>(world_size) * sizeof(int32_t) + table.size() * sizeof(int64_t) +
          static_cast<uint64_t>(table_size / std::max<int64_t>(axis.numel(), 1)) * kBytesPerGroup,
      "a mesh dim's process groups");
  const std::vector<int64_t> offsets = axis.codomain();
  batch->group_of_rank_.assign(static_cast<size_t>(world_size), -1);
  std::vector<int64_t> group;
  for (int64_t start : axis.complement(table_size).codomain()) {
    group.clear();
    for (int64_t o : offsets) {
      if (start + o >= table_size) break;
      group.push_back(table[static_cast<size_t>(start + o)]);
    }
    if (group.size() != offsets.size()) continue;
    try {
      group = check_group_ranks(group, world_size);
    } catch (const Error& e) {
      batch->invalid_ = e.what();
      break;
    }
    const auto index = static_cast<int32_t>(batch->members_.size());
    for (int64_t r : group) {
      int32_t& slot = batch->group_of_rank_[static_cast<size_t>(r)];
      if (slot < 0) slot = index;
    }
    batch->members_.push_back(std::make_shared<const std::vector<int64_t>>(group));
  }
  return batch;
}

std::shared_ptr<const GroupBatch> GroupBatch::of_members(RankList members) {
  std::shared_ptr<GroupBatch> batch(new GroupBatch());
  batch->members_.push_back(std::move(members));
  return batch;
}

int64_t GroupBatch::group_of(int64_t rank) const {
  if (group_of_rank_.empty()) {
    if (members_.empty()) return -1;
    const std::vector<int64_t>& m = *members_.front();
    return std::binary_search(m.begin(), m.end(), rank) ? 0 : -1;
  }
  if (rank < 0 || static_cast<size_t>(rank) >= group_of_rank_.size()) return -1;
  return group_of_rank_[static_cast<size_t>(rank)];
}

bool GroupBatch::same_groups(const GroupBatch& other) const {
  if (this == &other) return true;
  return std::equal(members_.begin(), members_.end(), other.members_.begin(), other.members_.end(),
                    [](const RankList& a, const RankList& b) { return a == b || *a == *b; });
}

std::string GroupBatch::describe() const {
  const auto list = [](const std::vector<int64_t>& m) {
    if (m.size() <= 8) return fmt::format("[{}]", fmt::join(m, ", "));
    return fmt::format("[{}, ..., {}]", fmt::join(m.begin(), m.begin() + 4, ", "), m.back());
  };
  if (members_.size() == 1) return list(*members_.front());
  if (members_.empty()) return "no groups";
  return fmt::format("{} groups of {} ({}, ...)", members_.size(), members_.front()->size(),
                     list(*members_.front()));
}

}  // namespace meshsim
