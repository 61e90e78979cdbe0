// A scenario that replays a real job from its ranks' Flight Recorder dumps: every rank makes the
// calls its dump recorded, in order, on the recorded process groups, with meta tensors of the
// recorded sizes and dtypes, and the file expects what the analysis of those dumps saw. Ranks with
// the same history share steps (`when` over rank ranges), so a large job gives a file a person
// can read. See docs/flight-recorder.md.
#pragma once

#include <string>
#include <vector>

#include "sim/report/fr_analysis.hpp"

namespace meshsim::sim {

struct FrReplayOptions {
  std::string name = "fr-replay";  // the scenario's name
  std::string source;              // what the dumps were, for the header comment
};

// The scenario, as TOML text. `analysis` is analyze_fr_dumps of the same dumps.
std::string fr_replay_scenario(const std::vector<FrRankDump>& dumps, const FrAnalysis& analysis,
                               const FrReplayOptions& options);

}  // namespace meshsim::sim
