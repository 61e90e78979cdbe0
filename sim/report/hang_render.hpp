// A hang report as people and tools read it: text (the root cause, then one line per story of
// ranks and their flight recorders), JSON (every rank, wait, desync and divergence) and Graphviz
// DOT (the wait-for graph, a few boxes at any world size).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/runtime/hang_report.hpp"

namespace meshsim::sim {

// The summary, then "  per rank:" and one line per story (report.cpp cuts that section).
std::string hang_text(const HangReport& report);
// One of `rank`'s records: "world.tp#1 seq 3: all_reduce(float32[4], op=sum) at line 12 (w=2),
// completed"; send/recv name their direction ("WORLD p2p 4→2 seq 7: ...").
std::string hang_record_text(const HangReport& report, int64_t rank, const CollectiveRecord& c);
// Without the DOT graph, which results keep apart (ScenarioResult::hang_dot) and the JSON report
// puts back under "dot".
nlohmann::json hang_json(const HangReport& report);
// Rank-level for small worlds (<= 64 ranks), collective-level otherwise.
std::string hang_dot(const HangReport& report);

}  // namespace meshsim::sim
