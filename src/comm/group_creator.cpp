#include "src/comm/group_creator.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

namespace meshsim {

LocalGroupCreator::LocalGroupCreator(int64_t rank, int64_t world_size,
                                     std::shared_ptr<RankListPool> pool)
    : rank_(rank), world_size_(world_size), pool_(std::move(pool)) {
  std::vector<int64_t> world(static_cast<size_t>(world_size));
  std::iota(world.begin(), world.end(), 0);
  groups_.push_back(pool_->intern(world));
}

std::optional<std::string> LocalGroupCreator::new_group(std::span<const int64_t> ranks) {
  groups_.push_back(pool_->intern(ranks));
  if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return std::nullopt;
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
  for (size_t i = groups_.size(); i-- > 0;) {
    if (std::equal(groups_[i]->begin(), groups_[i]->end(), ranks.begin(), ranks.end())) {
      return std::to_string(i);
    }
  }
  return std::nullopt;
}

}  // namespace meshsim
