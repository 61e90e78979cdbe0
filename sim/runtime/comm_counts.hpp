// What PyTorch's CommDebugMode counts: the collectives and point-to-point calls a rank issued
// while counting was on, per process group and op.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "src/comm/collective.hpp"

namespace meshsim::sim {

struct CommCounts {
  bool counting = false;
  std::map<std::pair<int64_t, CollectiveOp>, int64_t> by_group_and_op;  // by group id

  // `with CommDebugMode()`: a fresh count from here on.
  void start() {
    by_group_and_op.clear();
    counting = true;
  }
  void stop() { counting = false; }
  void issued(int64_t group_id, CollectiveOp op) {
    if (counting) ++by_group_and_op[{group_id, op}];
  }
};

}  // namespace meshsim::sim
