// The global indices a rank holds along one tensor dim, in local order, kept as runs of
// consecutive indices. Sharding only ever cuts such a list by position, so a dim of 10^11 rows
// costs a few runs, not 10^11 integers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace meshsim {

class IndexRuns {
 public:
  // One run of indices [start, stop).
  struct Run {
    int64_t start;
    int64_t stop;
    friend bool operator==(const Run&, const Run&) = default;
  };

  IndexRuns() = default;
  // 0, 1, ..., n-1.
  static IndexRuns range(int64_t n);

  // How many indices (positions) the list holds.
  int64_t size() const { return ends_.empty() ? 0 : ends_.back(); }
  bool empty() const { return size() == 0; }
  // The index at local position 0. Requires !empty().
  int64_t first() const { return runs_.front().start; }
  const std::vector<Run>& runs() const { return runs_; }

  // The indices at positions [pos, pos + len) (clamped to the list). O(log runs + runs taken).
  IndexRuns slice(int64_t pos, int64_t len) const;
  // Appends `run`, merging it into the last run when they touch.
  void append(Run run);
  void append(const IndexRuns& other);

  // Every index in local order; only for small lists (tests, reference checks).
  std::vector<int64_t> expand() const;
  // The list of `indices` (any order), as runs; nullopt for an index no tensor can have (< 0 or
  // INT64_MAX).
  static std::optional<IndexRuns> from_indices(const std::vector<int64_t>& indices);

  friend bool operator==(const IndexRuns& a, const IndexRuns& b) { return a.runs_ == b.runs_; }

 private:
  std::vector<Run> runs_;
  std::vector<int64_t> ends_;  // ends_[i]: positions covered by runs_[0..i]
};

}  // namespace meshsim
