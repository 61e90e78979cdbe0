// The simulated executor: exact results from real or meta tensors, and virtual time (every member
// leaves once the last has arrived and the data has moved, by a latency + bytes/bandwidth model),
// with NCCL's watchdog in virtual time.
#pragma once

#include <optional>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rank_activity.hpp"

namespace meshsim::sim {

struct CostModel {
  double latency_s = 5e-6;
  double bandwidth_bytes_per_s = 100e9;
  // NCCL's watchdog: a rank that waits longer than this (virtual) fails.
  double timeout_s = 600.0;
};

// A collective where some rank waited longer than the timeout.
struct TimeoutRecord {
  std::string group;
  int64_t seq = 0;
  Signature signature;
  std::vector<int64_t> timed_out;  // ranks whose watchdog fired
  std::vector<int64_t> late;       // ranks that arrived last
  double waited_s = 0.0;
};

class SimExecutor final : public Executor {
 public:
  SimExecutor(std::vector<RankActivity>& activity, CostModel cost)
      : activity_(activity), cost_(cost) {}

  void execute(Meeting& meeting) override;

  // The first collective whose watchdog fired.
  const std::optional<TimeoutRecord>& timeout() const { return timeout_; }

 private:
  void compute_results(Meeting& m);
  // Throws MemoryError when n results for each of n members would not fit the budget.
  static void check_fan_out(const Signature& sig, size_t n);
  // Virtual time and the watchdog; runs whether or not the results could be computed.
  void advance_clocks(Meeting& m);

  std::vector<RankActivity>& activity_;
  CostModel cost_;
  std::optional<TimeoutRecord> timeout_;
  std::vector<const Tensor*> inputs_;  // scratch, reused by every collective
};

}  // namespace meshsim::sim
