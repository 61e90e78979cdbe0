// What each rank is doing, kept by the runtime for reports: where it is in the scenario, its state
// and virtual clock, the meetings it entered, and how it ended.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/source_location.hpp"
#include "sim/runtime/call_history.hpp"
#include "sim/runtime/call_site.hpp"
#include "sim/runtime/comm_counts.hpp"
#include "sim/runtime/flight_recorder.hpp"
#include "sim/runtime/skip_log.hpp"
#include "src/comm/collective.hpp"
#include "src/enum_names.hpp"

namespace meshsim::sim {

// A rank parked in a collective or point-to-point operation.
struct WaitInfo {
  std::string group;
  RankList members;  // global ranks that must arrive
  int64_t seq = 0;   // per (rank, group) for collectives, per (pair) for send/recv
  Signature signature;
  std::optional<int64_t> peer;  // send/recv: the other side (global rank)
};

// Fields in the order a call touches them: what every collective reads and writes comes first,
// so that a call brings in a few cache lines of its rank's activity, not a dozen (a rank's
// activity is cold by then: a thousand other ranks ran since its last call).
struct alignas(64) RankActivity {
  enum class State { kRunning, kBlocked, kFinished, kFailed, kAborted };
  State state = State::kRunning;
  bool in_loop = false;   // the step runs inside a repeat loop (its line does not order it)
  bool counting = false;  // a count_collectives step counts what it issues (in `issued`)
  double clock = 0.0;     // virtual seconds
  // Meetings (collectives, send/recv, store barriers) this rank has entered, and the sequence
  // number of the last: what tells a collective that happened from a call refused before it met
  // anyone.
  int64_t meetings_entered = 0;
  int64_t last_seq = 0;
  FlightRecorder history;  // its last collectives and point-to-point calls (not new_group)
  CallSite site;           // the step being run, with its loop iterations
  CallHistory calls;       // every call it entered, hashed
  // What it issued while a count_collectives step counts: far down, since only `counting`, on
  // the first line, is read on every call.
  CommCounts issued;
  SourceLocation where;  // the same step
  std::string step;
  std::string error;  // why it failed or was aborted
  SkipLog skipped;    // the calls its `when`s skipped
};

inline constexpr EnumName<RankActivity::State> kRankStateNames[] = {
    {RankActivity::State::kRunning, "running"},   {RankActivity::State::kBlocked, "blocked"},
    {RankActivity::State::kFinished, "finished"}, {RankActivity::State::kFailed, "failed"},
    {RankActivity::State::kAborted, "aborted"},
};

inline std::string_view state_name(RankActivity::State state) {
  return name_in(kRankStateNames, state);
}

// c10d names the default group "0"; reports and scenarios call it WORLD.
inline std::string display_group(const std::string& name) {
  return name == "0" ? "WORLD" : name;
}

}  // namespace meshsim::sim
