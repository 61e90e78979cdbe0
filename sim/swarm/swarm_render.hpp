// A swarm's results as text for a person: what it runs, and each distinct failure once.
#pragma once

#include <cstddef>
#include <string>

#include "sim/swarm/swarm_space.hpp"
#include "sim/swarm/swarm_tally.hpp"

namespace meshsim::sim {

// "swarm: 2 scenario files x 4 fault seeds (none,1-3) x 12 schedule seeds (0-11) = 96 runs",
// then the shard's share and the workers.
std::string swarm_header(const SwarmSpace& space, const Shard& shard, unsigned jobs);

// The totals, then the first `listed` distinct failures: signature, how many runs show it, the
// first of them, its headline and the command that replays it.
std::string swarm_report_text(const SwarmSpace& space, const SwarmTally& tally, size_t listed);

}  // namespace meshsim::sim
