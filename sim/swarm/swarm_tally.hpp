// What some combinations of a swarm came to: how many ran and passed, and each distinct failure
// once, with the lowest combination that shows it. Tallies of disjoint shares merge into the
// tally of their union, whatever the order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace meshsim::sim {

struct DistinctFailure {
  size_t file = 0;        // into SwarmSpace::files
  std::string signature;  // FailureSummary::signature
  std::string scenario;   // the scenario's name
  uint64_t first = 0;     // the lowest combination that shows it
  std::string headline;   // of that run
  uint64_t runs = 0;      // combinations that show it
};

class SwarmTally {
 public:
  void add_passes(uint64_t count = 1) {
    runs_ += count;
    passed_ += count;
  }
  // One more failed run (its `runs` counts how many it stands for).
  void add_failure(DistinctFailure failure);
  void merge(const SwarmTally& other);

  uint64_t runs() const { return runs_; }
  uint64_t passed() const { return passed_; }
  uint64_t failed() const { return runs_ - passed_; }
  size_t distinct() const { return failures_.size(); }
  // By file, then by the first combination that shows each.
  std::vector<const DistinctFailure*> failures() const;

 private:
  uint64_t runs_ = 0;
  uint64_t passed_ = 0;
  std::map<std::pair<size_t, std::string>, DistinctFailure> failures_;
};

}  // namespace meshsim::sim
