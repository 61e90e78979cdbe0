// A recorder's dumps (meshsim_record, python/) hold each rank's whole history: every call
// finished at once, since no rank waited for another. Settling turns them into the dumps the real
// job would leave: the ranks run their calls in order, and the first call a rank cannot finish
// with its peers is where it stops. See docs/recording.md.
#pragma once

#include <string>
#include <vector>

#include "sim/report/fr_analysis.hpp"

namespace meshsim::sim {

// Rewrites `dumps` in place when they are a recorder's: a collective finishes when every member
// reached the same (group, seq) with the same call; a send or recv (or a batch of them) when the
// other half of each is posted by its peer. A rank's first call that cannot finish is left
// `started`, and the calls after it are dropped (it would never have made them). Members without
// a dump are taken to make every call their peers wait for. Returns what a report says about it
// (nothing for dumps a real job wrote, which are left as they are).
std::vector<std::string> settle_recorded_histories(std::vector<FrRankDump>& dumps);

// The recorded ranks whose program raised, exited with a non-zero status or crashed: a real run
// fails there even where no rank waits for another.
std::vector<int64_t> failed_recorded_ranks(const std::vector<FrRankDump>& dumps);

// Over whole histories, each pair of ranks must make as many sends as recvs to each other on a
// group. The pairs whose counts differ, as report lines, and the ranks in most of them (the rank
// whose stage runs more or fewer microbatches than its neighbours is in every such pair).
struct FrPairCounts {
  std::vector<std::string> lines;
  std::vector<int64_t> ranks;
  size_t ranks_in = 0;  // how many of the pairs each of `ranks` is in
};
FrPairCounts unpaired_point_to_point(const std::vector<FrRankDump>& dumps);

// A recorded job that hangs because sends and recvs do not pair up is blamed on those ranks: the
// analysis's culprits and cause are replaced, and the pairs lead its summary.
void blame_unpaired(FrAnalysis& analysis, const FrPairCounts& counts);

}  // namespace meshsim::sim
