// How `distinct` and `equal` decide, for one tensor, from what each rank held
// (scenarios/README.md). A value a rank holds exactly as a random op drew it is judged by where in
// the Philox stream it came from: shards are distinct when they drew disjoint counter blocks (or
// under other seeds), replicas equal when they made the same draw. Equal values from disjoint
// counters are a coincidence, reported as one, never a failure. Values with any other history
// (gathered, loaded, computed) are compared by their digest.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/report/results.hpp"

namespace meshsim::sim {

// A rank and the sample it recorded.
using HeldSample = std::pair<int64_t, const ShardSample*>;

struct SampleVerdict {
  Json problems = Json::array();  // empty: the expectation holds
  // Whether every compared sample was judged by its draw (else by value).
  bool by_draws = true;
  // Ranks holding equal values drawn from disjoint counters: "ranks 3 and 9 ([0.25])".
  std::vector<std::string> coincidences;
  uint64_t coincidence_count = 0;
};

// Problems and coincidences listed, each (the rest are counted); a verdict accumulates over the
// tensors of one expectation.
inline constexpr size_t kMaxListedProblems = 8;

// Ranks whose coordinates differ in an across dim hold values from different random numbers.
void compare_distinct(const std::string& tensor, const std::vector<HeldSample>& held,
                      SampleVerdict& verdict);
// Ranks whose coordinates differ only in across dims hold the same values, from the same draw.
void compare_equal(const std::string& tensor, const std::vector<HeldSample>& held,
                   SampleVerdict& verdict);

}  // namespace meshsim::sim
