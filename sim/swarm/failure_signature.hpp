// What a failed run is, in words that do not depend on the seeds that found it: runs of one
// scenario whose failures have the same signature are one distinct failure of a swarm.
#pragma once

#include <string>
#include <string_view>

#include "sim/report/results.hpp"

namespace meshsim::sim {

struct FailureSummary {
  // The root cause's kind and place: "deadlock (unmatched send/recv) at f.toml:60:3 (send),
  // with an injected backend error". No ranks, seeds, values or times.
  std::string signature;
  // The run's own first line about it, ranks and all (at most about 300 characters).
  std::string headline;
};

// `result` must have failed (!result.passed()).
FailureSummary summarize_failure(const ScenarioResult& result);

// The kind of an injected fault as Fault::describe() words it: "crash rank 1 at ..." gives
// "crash", "backend error on rank 7 at ..." gives "backend error".
std::string_view injected_fault_kind(std::string_view described);

}  // namespace meshsim::sim
