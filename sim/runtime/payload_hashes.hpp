// Per-collective payload hashes: what every member of every completed collective received, as one
// XXH3 per member. Two runs of a scenario on different backends (simulated, NCCL) must give the
// same lines; scripts/gpu-check diffs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/runtime/meeting.hpp"

namespace meshsim::sim {

// Wraps a backend's executor: runs it, then hashes each member's results. A collective that
// failed is recorded as failed, with no hash.
class PayloadHashingExecutor final : public Executor {
 public:
  explicit PayloadHashingExecutor(Executor& inner) : inner_(inner) {}

  void execute(Meeting& meeting) override;
  // "group 3 seq 2 rank 1 all_reduce(float32[4], op=sum) 9f0c...", sorted by group, seq and
  // rank, so the order does not depend on the schedule.
  std::vector<std::string> lines() const;

 private:
  struct Entry {
    int64_t group_id;
    int64_t seq;
    int64_t rank;
    std::string text;
  };
  Executor& inner_;
  std::vector<Entry> entries_;
};

}  // namespace meshsim::sim
