// Finding the saved chunks of a tensor that meet one rank's shard without looking at every chunk.
// A load at a large world asks this once per rank, so a scan of every chunk each time is
// quadratic in the world size (65,536 ranks: 4 * 10^9 looks); the lookup is built once per load
// and shared by the ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "src/dtensor/index_runs.hpp"

namespace meshsim {

class ChunkLookup {
 public:
  // Each chunk as its index runs per dim.
  explicit ChunkLookup(const std::vector<const std::vector<IndexRuns>*>& chunks);

  // The chunks whose bounding box meets the bounding box of `shard` (one IndexRuns per dim), in
  // ascending order: every chunk that holds an element of the shard is among them.
  std::vector<size_t> candidates(const std::vector<IndexRuns>& shard) const;

 private:
  using Box = std::vector<std::pair<int64_t, int64_t>>;  // [lo, hi) per dim
  std::vector<Box> boxes_;
  // The dim the chunks are sorted by: the one where they start at the most places (a tensor
  // split along dim 1 only has every chunk start at row 0). None for a scalar's chunks, or chunks
  // of differing dims (which the caller refuses): then every chunk is a candidate to look at.
  std::optional<size_t> dim_;
  std::vector<size_t> by_start_;  // chunk numbers by their lo in dim_
  std::vector<int64_t> max_end_;  // the largest hi in dim_ among by_start_[0..i]
};

// The smallest [lo, hi) holding every index of `indices` ([0, 0) when it has none).
std::pair<int64_t, int64_t> index_bounds(const IndexRuns& indices);

}  // namespace meshsim
