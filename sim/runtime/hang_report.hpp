// Explains why a world stopped making progress: per rank, where it is and what it waits for;
// the wait-for edges; and one classification of the cause. Text, JSON and Graphviz DOT.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/sim_collectives.hpp"

namespace meshsim::sim {

enum class HangCause {
  kMissingRank,        // a member never reached the collective (it is busy elsewhere)
  kSignatureMismatch,  // members met with different signatures (desync)
  kOrderInversion,     // a cycle of waits across groups
  kRankExitedEarly,    // a member finished its program without the collective
  kRankFailed,         // a member failed (threw) before the collective
  kTimeout,            // the watchdog fired before the last rank arrived
};
std::string_view hang_cause_name(HangCause cause);

struct HangReport {
  // "deadlock", "desync" or "timeout".
  std::string kind;
  HangCause cause = HangCause::kMissingRank;
  struct Rank {
    int64_t rank;
    RankActivity activity;
    std::vector<int64_t> waits_for;
  };
  std::vector<Rank> ranks;
  std::optional<DesyncRecord> desync;
  std::optional<TimeoutRecord> timeout;

  // The ranks blocked in one collective (group, seq) and the members that never came.
  std::vector<int64_t> blocked() const;
  std::vector<int64_t> missing() const;

  std::string text() const;
  nlohmann::json json() const;
  std::string dot() const;
};

// Builds the report from the runtime's state at a stall (or after a timeout).
HangReport analyze_hang(const std::vector<RankActivity>& activity, const SimCollectives& backend);

}  // namespace meshsim::sim
