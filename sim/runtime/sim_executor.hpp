// The simulated executor: exact results from real or meta tensors, then virtual time.
#pragma once

#include <optional>
#include <vector>

#include "sim/runtime/backend_registry.hpp"
#include "sim/runtime/meeting.hpp"
#include "sim/runtime/virtual_time.hpp"

namespace meshsim::sim {

class SimExecutor final : public Executor {
 public:
  explicit SimExecutor(VirtualTime& time) : time_(time) {}

  void execute(Meeting& meeting) override;

 private:
  void compute_results(Meeting& m);
  // Throws MemoryError when n results for each of n members would not fit the budget.
  static void check_fan_out(const Signature& sig, size_t n);

  VirtualTime& time_;
  std::vector<const Tensor*> inputs_;  // scratch, reused by every collective
};

// Registers the simulated backend as "sim".
void register_sim_backend(BackendRegistry& registry);

}  // namespace meshsim::sim
