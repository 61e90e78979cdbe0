#include "src/comm/rank_map.hpp"

namespace meshsim {

RankMap::RankMap(std::vector<int64_t> ranks, int64_t world_size)
    : reserved_((ranks.size() + static_cast<uint64_t>(world_size)) * sizeof(int64_t),
                "a mesh's rank table"),
      ranks_(std::move(ranks)),
      position_(static_cast<size_t>(world_size), -1) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const int64_t r = ranks_[i];
    if (r < 0 || r >= world_size) continue;
    int64_t& slot = position_[static_cast<size_t>(r)];
    if (slot >= 0) {
      has_repeats_ = true;
    } else {
      slot = static_cast<int64_t>(i);
    }
  }
}

int64_t RankMap::position(int64_t rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= position_.size()) return -1;
  return position_[static_cast<size_t>(rank)];
}

}  // namespace meshsim
