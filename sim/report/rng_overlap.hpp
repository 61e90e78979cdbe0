// The automatic overlap check: draws that were meant to be independent (different ops, or
// different shards of one DTensor op) but read the same Philox counters under the same seed, so
// they hold the same random numbers. It flags both quirks of docs/rng.md 3.3 (a dim sharded twice,
// and shards smaller than 4 elements) and ops DTensor runs without offsets (exponential_, a
// disabled distribute region).
#pragma once

#include <string>

#include "sim/report/results.hpp"

namespace meshsim::sim {

// The overlaps among `draws` (the first `max_reported`, in seed and counter order), how many there
// are, and whether the sweep stopped early (the count is then a lower bound).
struct RngOverlaps {
  std::vector<RngOverlap> reported;
  uint64_t count = 0;
  bool stopped = false;
};
RngOverlaps find_overlaps(const std::vector<DrawRecord>& draws, size_t max_reported);

// Fills result.overlaps (the first kMaxReportedOverlaps, in seed and counter order) and
// result.overlap_count from result.draws. Only draws of the same seed epoch count: the n-th
// manual_seed of every rank starts epoch n, and restarting a stream means to repeat it. Replicas
// (the same op and shard on several ranks) and draws of one plain-tensor op on every rank are not
// independent and never count.
void find_rng_overlaps(ScenarioResult& result);

// "seed 1234: uniform_(0, 1) into \"w\" (file:12:1, shard 2, rank 2) and ... both read Philox
// counter blocks [8, 10)".
std::string describe_overlap(const RngOverlap& overlap);

}  // namespace meshsim::sim
