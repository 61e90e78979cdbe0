// The RNG checks on a recorder's dumps: each rank's seeding and DTensor random ops (recorded on
// the CPU) are replayed on the model of a GPU's generator, without drawing values, to find where
// on the Philox stream every shard would draw. Draws meant to be independent that read the same
// counters under the same seed (shards of one op, ops of different pipeline stages seeded alike)
// are overlaps; ranks holding the same shard of one op that draw from different places are
// replicas that differ. See docs/recording.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/report/fr_analysis.hpp"
#include "sim/report/results.hpp"
#include "src/rng/gpu_profile.hpp"

namespace meshsim::sim {

struct FrRngFindings {
  std::string gpu;                    // the GPU whose kernel grid the counters follow
  int64_t ranks = 0;                  // ranks that recorded a seed or a random op
  uint64_t random_ops = 0;            // on all ranks together
  uint64_t draws = 0;                 // of them, those placed on the stream (not meta, not empty)
  uint64_t unplaced = 0;              // draws whose place is unknown (see the notes)
  int64_t stopped_ranks = 0;          // ranks whose later draws could not be followed
  std::vector<std::string> overlaps;  // the first kMaxListed, described
  uint64_t overlap_count = 0;
  std::vector<std::string> replicas_differ;  // likewise
  uint64_t replicas_differ_count = 0;
  std::vector<std::string> notes;  // what was assumed or could not be checked
  bool recorded = false;           // whether any dump carried RNG records

  static constexpr size_t kMaxListed = 16;
  bool clean() const { return overlap_count == 0 && replicas_differ_count == 0; }
};

// The findings over the recorded dumps' whole histories (a real job's dumps have no RNG records:
// the findings are then empty and `recorded` false). A draw whose place is unknown (an op meshsim
// does not model, a generator of the program's own) is left out when the ranks' streams go on
// past it; anything that loses a rank's stream (placements that do not fit the mesh, such an op
// outside the distribute region) stops the checks of that rank's later draws. Both are said in
// `notes`.
FrRngFindings check_recorded_rng(const std::vector<FrRankDump>& dumps, const GpuProfile& gpu);

// A few lines for `fr analyze`'s report, after the hang analysis; nothing when nothing was
// recorded.
std::string fr_rng_text(const FrRngFindings& findings);
Json fr_rng_json(const FrRngFindings& findings);

}  // namespace meshsim::sim
