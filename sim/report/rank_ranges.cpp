#include "sim/report/rank_ranges.hpp"

#include <algorithm>

namespace meshsim::sim {

void RankRanges::add(int64_t rank) {
  // Ranks mostly arrive in order: the last range first.
  if (!ranges_.empty() && ranges_.back().second + 1 == rank) {
    ranges_.back().second = rank;
    return;
  }
  // The first range that starts after `rank`, and the one before it.
  auto next = std::upper_bound(ranges_.begin(), ranges_.end(), rank,
                               [](int64_t r, const auto& range) { return r < range.first; });
  if (next != ranges_.begin()) {
    auto before = std::prev(next);
    if (rank <= before->second) return;
    if (before->second + 1 == rank) {
      before->second = rank;
      if (next != ranges_.end() && next->first == rank + 1) {
        before->second = next->second;
        ranges_.erase(next);
      }
      return;
    }
  }
  if (next != ranges_.end() && next->first == rank + 1) {
    next->first = rank;
    return;
  }
  ranges_.insert(next, {rank, rank});
}

void RankRanges::add(int64_t first, int64_t last) {
  if (first > last) return;
  if (ranges_.empty() || first > ranges_.back().second + 1) {
    ranges_.emplace_back(first, last);
    return;
  }
  for (int64_t rank = first; rank <= last; ++rank) add(rank);
}

uint64_t RankRanges::count() const {
  uint64_t n = 0;
  for (const auto& [first, last] : ranges_) n += static_cast<uint64_t>(last - first) + 1;
  return n;
}

}  // namespace meshsim::sim
