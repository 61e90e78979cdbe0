// Shared, immutable lists of ranks. A world of N ranks that all know the same groups keeps one
// copy of each group's members, not N: interning is what lets tens of thousands of ranks run.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace meshsim {

using RankList = std::shared_ptr<const std::vector<int64_t>>;

class RankListPool {
 public:
  // The pooled list equal to `ranks` (created on first use).
  RankList intern(std::span<const int64_t> ranks);
  size_t size() const { return count_; }

 private:
  std::unordered_map<uint64_t, std::vector<RankList>> by_hash_;
  size_t count_ = 0;
};

}  // namespace meshsim
