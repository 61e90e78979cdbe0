// Running a shard of a swarm on this machine: worker processes share its combinations, and
// every combination runs in a child process of its worker, as `meshsim run` runs a scenario.
#pragma once

#include <cstdint>
#include <functional>

#include "sim/run/runner.hpp"
#include "sim/scenario/step_registry.hpp"
#include "sim/swarm/swarm_space.hpp"
#include "sim/swarm/swarm_tally.hpp"

namespace meshsim::sim {

struct SwarmProgress {
  uint64_t done = 0;
  uint64_t total = 0;
  uint64_t failed = 0;
  uint64_t distinct = 0;
};

// Runs `shard`'s combinations of `space` in `jobs` worker processes (fewer when there are fewer
// combinations). `options` holds what every run shares; each combination sets the random
// schedule's seed and the fault seed. `progress` hears of every finished run. The tally does
// not depend on `jobs`. Throws std::runtime_error when a worker process fails (not a scenario:
// a scenario that crashes is a failed run).
SwarmTally run_swarm(const SwarmSpace& space, const Shard& shard, unsigned jobs,
                     const StepRegistry& steps, const RunOptions& options,
                     const std::function<void(const SwarmProgress&)>& progress = {});

}  // namespace meshsim::sim
