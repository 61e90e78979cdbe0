#include "src/comm/group_creator.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

LocalGroupCreator::LocalGroupCreator(int64_t rank, int64_t world_size,
                                     std::shared_ptr<RankListPool> pool)
    : rank_(rank), world_size_(world_size), pool_(std::move(pool)) {
  std::vector<int64_t> world(static_cast<size_t>(world_size));
  std::iota(world.begin(), world.end(), 0);
  groups_.push_back(pool_->intern(world));
}

std::vector<int64_t> check_group_ranks(std::span<const int64_t> ranks, int64_t world_size) {
  std::vector<int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw value_error(fmt::format("ranks list must not contain duplicate entries, got [{}]",
                                  fmt::join(sorted, ", ")));
  }
  if (static_cast<int64_t>(sorted.size()) > world_size) {
    throw value_error(
        "the new group's world size should be less or equal to the world size set by "
        "init_process_group");
  }
  for (int64_t r : sorted) {
    if (r < 0 || r >= world_size) {
      throw value_error(
          fmt::format("Rank {} is out of range. Valid ranks are 0 to {} (world_size={})", r,
                      world_size - 1, world_size));
    }
  }
  return sorted;
}

std::optional<std::string> LocalGroupCreator::new_group(std::span<const int64_t> ranks) {
  const std::vector<int64_t> members = check_group_ranks(ranks, world_size_);
  groups_.push_back(pool_->intern(members));
  if (!std::binary_search(members.begin(), members.end(), rank_)) return std::nullopt;
  return std::to_string(groups_.size() - 1);
}

RankList LocalGroupCreator::group_ranks(const std::string& name) const {
  size_t index = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec != std::errc() || end != name.data() + name.size() || index >= groups_.size()) {
    return nullptr;
  }
  return groups_[index];
}

std::optional<std::string> LocalGroupCreator::find_group(std::span<const int64_t> ranks) const {
  std::vector<int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = groups_.size(); i-- > 0;) {
    if (*groups_[i] == sorted) {
      return std::to_string(i);
    }
  }
  return std::nullopt;
}

}  // namespace meshsim
