// A mesh's rank table shared by every rank of a world, with each rank's position in it: what lets
// a rank find its coordinate without scanning the table.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "src/tensor/memory_budget.hpp"

namespace meshsim {

class RankMap {
 public:
  // `ranks` in mesh order; entries outside [0, world_size) are kept (new_group rejects them) but
  // have no position. Counts both tables against the memory budget (MemoryError).
  RankMap(std::vector<int64_t> ranks, int64_t world_size);

  std::span<const int64_t> ranks() const { return ranks_; }
  size_t size() const { return ranks_.size(); }
  // First position of `rank` in the table, or -1.
  int64_t position(int64_t rank) const;
  // Whether some rank appears more than once (PyTorch then fails when it locates that rank).
  bool has_repeats() const { return has_repeats_; }

 private:
  MemoryReservation reserved_;
  std::vector<int64_t> ranks_;
  std::vector<int64_t> position_;  // by rank
  bool has_repeats_ = false;
};

using SharedRankMap = std::shared_ptr<const RankMap>;

}  // namespace meshsim
