// What PyTorch's CommDebugMode counts: the collectives a rank issued while counting was on, per
// process group and op. Like CommDebugMode, it leaves out send, recv and barrier.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "src/comm/collective.hpp"

namespace meshsim::sim {

struct CommCounts {
  static bool counts(CollectiveOp op) {
    return op != CollectiveOp::kSend && op != CollectiveOp::kRecv && op != CollectiveOp::kBarrier &&
           op != CollectiveOp::kNewGroup;
  }

  std::map<std::pair<int64_t, CollectiveOp>, int64_t> by_group_and_op;  // by group id

  // `with CommDebugMode()`: a fresh count from here on (whether it is on is its owner's flag).
  void start() { by_group_and_op.clear(); }
  void issued(int64_t group_id, CollectiveOp op) {
    if (counts(op)) ++by_group_and_op[{group_id, op}];
  }
};

}  // namespace meshsim::sim
