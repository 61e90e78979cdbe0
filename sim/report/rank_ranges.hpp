// A set of ranks as ascending, disjoint, non-touching [first, last] ranges: the ranks a shared
// record stands for, which costs one pair for a whole world that passed alike.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace meshsim::sim {

class RankRanges {
 public:
  RankRanges() = default;
  explicit RankRanges(int64_t rank) : ranges_{{rank, rank}} {}

  // Adds `rank` (one already held changes nothing).
  void add(int64_t rank);
  // Adds [first, last]: at once when it comes after every range held, as ranges read back in
  // order do; otherwise rank by rank.
  void add(int64_t first, int64_t last);
  uint64_t count() const;
  bool empty() const { return ranges_.empty(); }
  int64_t lowest() const { return ranges_.front().first; }
  const std::vector<std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }
  friend bool operator==(const RankRanges&, const RankRanges&) = default;

 private:
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace meshsim::sim
