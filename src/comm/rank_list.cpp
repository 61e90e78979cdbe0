#include "src/comm/rank_list.hpp"

#include <algorithm>

namespace meshsim {

RankList RankListPool::intern(std::span<const int64_t> ranks) {
  uint64_t h = 0xcbf29ce484222325ULL ^ ranks.size();
  for (int64_t r : ranks) h = (h ^ static_cast<uint64_t>(r)) * 0x100000001b3ULL;
  std::vector<RankList>& bucket = by_hash_[h];
  for (const RankList& list : bucket) {
    if (std::equal(list->begin(), list->end(), ranks.begin(), ranks.end())) return list;
  }
  bucket.push_back(std::make_shared<const std::vector<int64_t>>(ranks.begin(), ranks.end()));
  ++count_;
  return bucket.back();
}

}  // namespace meshsim
