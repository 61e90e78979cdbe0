// Shared, immutable lists of ranks. A world of N ranks that all know the same groups keeps one
// copy of each group's members, not N: interning is what lets tens of thousands of ranks run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "src/fnv1a.hpp"

namespace meshsim {

using RankList = std::shared_ptr<const std::vector<int64_t>>;

// One shared copy of each value made from a list of ranks (a member list, a rank table), found by
// the list's hash.
template <typename Value>
class RankInterner {
 public:
  // The value whose ranks_of(value) equals `ranks`, made by make(ranks) the first time.
  template <typename RanksOf, typename Make>
  std::shared_ptr<const Value> intern(std::span<const int64_t> ranks, RanksOf ranks_of, Make make) {
    std::vector<std::shared_ptr<const Value>>& bucket = by_hash_[fnv1a_words(ranks)];
    for (const std::shared_ptr<const Value>& v : bucket) {
      if (std::ranges::equal(ranks_of(*v), ranks)) return v;
    }
    bucket.push_back(make(ranks));
    ++count_;
    return bucket.back();
  }
  size_t size() const { return count_; }

 private:
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<const Value>>> by_hash_;
  size_t count_ = 0;
};

class RankListPool {
 public:
  // The pooled list equal to `ranks` (created on first use).
  RankList intern(std::span<const int64_t> ranks);
  size_t size() const { return lists_.size(); }

 private:
  RankInterner<std::vector<int64_t>> lists_;
};

}  // namespace meshsim
