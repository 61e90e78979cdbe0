#include "sim/swarm/swarm_tally.hpp"

#include <algorithm>

namespace meshsim::sim {

void SwarmTally::add_failure(DistinctFailure failure) {
  runs_ += failure.runs;
  auto key = std::pair(failure.file, failure.signature);
  const auto [it, fresh] = failures_.try_emplace(std::move(key), failure);
  if (fresh) return;
  DistinctFailure& known = it->second;
  known.runs += failure.runs;
  if (failure.first < known.first) {
    known.first = failure.first;
    known.scenario = std::move(failure.scenario);
    known.headline = std::move(failure.headline);
  }
}

void SwarmTally::merge(const SwarmTally& other) {
  add_passes(other.passed_);
  for (const auto& [key, failure] : other.failures_) add_failure(failure);
}

std::vector<const DistinctFailure*> SwarmTally::failures() const {
  std::vector<const DistinctFailure*> out;
  out.reserve(failures_.size());
  for (const auto& [key, failure] : failures_) out.push_back(&failure);
  std::sort(out.begin(), out.end(), [](const DistinctFailure* a, const DistinctFailure* b) {
    return std::pair(a->file, a->first) < std::pair(b->file, b->first);
  });
  return out;
}

}  // namespace meshsim::sim
