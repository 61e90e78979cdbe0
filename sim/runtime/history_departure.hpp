// Blame by symmetry: the members of a group in an SPMD job (a pipeline stage's dp peers, the
// ranks of a data-parallel group) run the same program, so their call histories agree call for
// call. The first checkpoint where most members still agree and a few do not says who departed, and
// between which calls; the hang report then names the step from what those ranks skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "sim/runtime/call_history.hpp"

namespace meshsim::sim {

struct HistoryDeparture {
  int64_t group_id = 0;
  // The members whose histories depart; none in an open tail (`agreed` is the last checkpoint
  // every member holds, and the odd ones are to be told by their skips after it).
  std::vector<int64_t> odd;
  std::vector<int64_t> peers;  // the majority, whose histories agree (every member in a tail)
  uint64_t agreed = 0;         // calls every member made alike
  uint64_t differ = 0;         // by this many calls, the odd ones differ (a tail: unknown, 0)
  bool open_tail() const { return odd.empty(); }
};

// Every group's departure, earliest first (fewest calls agreed, then the order of `groups`), among
// `groups` (id -> members, sorted). Groups of fewer than three members cannot have a majority;
// where the members outside the majority do not agree among themselves either, the group runs
// several programs (one rank per pipeline stage): both are passed over.
std::vector<HistoryDeparture> history_departures(
    const std::map<int64_t, std::vector<int64_t>>& groups,
    const std::function<const CallHistory&(int64_t)>& history_of);

}  // namespace meshsim::sim
