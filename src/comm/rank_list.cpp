#include "src/comm/rank_list.hpp"

namespace meshsim {

RankList RankListPool::intern(std::span<const int64_t> ranks) {
  return lists_.intern(
      ranks, [](const std::vector<int64_t>& list) -> std::span<const int64_t> { return list; },
      [](std::span<const int64_t> r) {
        return std::make_shared<const std::vector<int64_t>>(r.begin(), r.end());
      });
}

}  // namespace meshsim
