// Explains why a world stopped making progress: the root cause (the kind, the culprit rank(s),
// the call site where they went another way, and what everyone else waits for), then per rank
// where it is and what it waits for, and the collectives waited in, with who arrived and who is
// missing. The analysis only; sim/report/hang_render.hpp writes it as text, JSON and DOT. Sizes
// stay linear in the world, so a report on tens of thousands of ranks is cheap.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/group_label.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "sim/runtime/site_divergence.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "src/enum_names.hpp"

namespace meshsim::sim {

enum class HangCause {
  kMissingRank,        // a member never reached the collective (it is busy elsewhere)
  kSignatureMismatch,  // members met with different signatures (desync)
  kOrderInversion,     // a cycle of waits across groups
  kRankExitedEarly,    // a member finished its program without the collective
  // Fewer members entered a collective than finished without it: the ones that entered are odd.
  kExtraCollective,
  kRankFailed,  // a member failed (threw) before the collective
  kTimeout,     // the watchdog fired before the last rank arrived
  // Point to point: a recv (send) whose peer posted fewer sends (recvs) and went on elsewhere;
  // two ranks that each send to (receive from) the other first; a recv from one peer while
  // another sends; a longer ring of ranks each blocked in a send or recv to the next.
  kUnmatchedPointToPoint,
  kHeadToHeadSend,
  kWrongPeer,
  kHeadToHeadRecv,
  kPointToPointCycle,
  kWallClockLimit,  // the run went past its wall-clock limit (--timeout) while still going
};
std::string_view hang_cause_name(HangCause cause);
// Every value with its name, in the order lists of them are printed.
inline constexpr EnumName<HangCause> kHangCauseNames[] = {
    {HangCause::kMissingRank, "missing rank"},
    {HangCause::kSignatureMismatch, "signature mismatch"},
    {HangCause::kOrderInversion, "cross-group order inversion"},
    {HangCause::kRankExitedEarly, "rank exited early"},
    {HangCause::kExtraCollective, "collective only some ranks called"},
    {HangCause::kRankFailed, "rank failed"},
    {HangCause::kTimeout, "watchdog timeout"},
    {HangCause::kUnmatchedPointToPoint, "unmatched send/recv"},
    {HangCause::kHeadToHeadSend, "head-to-head send"},
    {HangCause::kWrongPeer, "recv from the wrong peer"},
    {HangCause::kHeadToHeadRecv, "head-to-head recv"},
    {HangCause::kPointToPointCycle, "point-to-point cycle"},
    {HangCause::kWallClockLimit, "wall-clock limit"},
};

// How a world stopped: no rank can run (deadlock), ranks met with different signatures (desync),
// a watchdog fired (timeout), or the run was stopped at its wall-clock limit (--timeout), which
// says nothing about the program: only where every rank was.
enum class HangKind { kDeadlock, kDesync, kTimeout, kWallClock };
std::string_view hang_kind_name(HangKind kind);

// Ranks whose call histories depart from their peers' after a checkpoint, without a skip the
// report could name for sure: a second run of the same scenario (deterministic) records their
// skips from there on (SkipLog::probe).
struct ProbeRequest {
  std::vector<int64_t> ranks;
  uint64_t from_calls = 0;
};

struct HangReport {
  HangKind kind = HangKind::kDeadlock;
  HangCause cause = HangCause::kMissingRank;
  // The cause the first scenario format named for this hang, before point-to-point causes were
  // told apart: scenario files of that format (tests/compat/v1) still match it.
  HangCause legacy_cause = HangCause::kMissingRank;
  // The rank(s) the hang starts from, and the root cause in a few sentences (one per line).
  std::vector<int64_t> culprits;
  std::vector<std::string> summary;
  struct Rank {
    int64_t rank;
    RankActivity activity;
    std::optional<WaitInfo> waiting;  // what it is parked in
    int64_t wait = -1;                // index into waits, or -1
  };
  std::vector<Rank> ranks;
  std::vector<OpenWait> waits;
  std::vector<DesyncRecord> desyncs;  // every disagreement, in the order seen
  std::optional<TimeoutRecord> timeout;
  // Every group's first meeting whose members came from different call sites, in schedule
  // order; the first that is not a desync of its own is the report's "first divergence".
  std::vector<SiteDivergence> divergences;
  std::optional<size_t> first_divergence;  // index into divergences
  // Whether the root cause was found before the hang (a departure from the other members' call
  // sites, or a call a `when` skipped): then `culprits` are the ranks that went wrong there.
  bool blamed_earlier = false;
  // Set when a second run of the same schedule with these probes would name the departure.
  std::optional<ProbeRequest> probe;
  // The groups collectives were called on, with all their members.
  std::vector<std::pair<int64_t, RankList>> groups;
  // What reports call the groups the flight recorders name, by id.
  std::map<int64_t, std::string> group_labels;

  // Ranks parked in some collective, and the members those collectives still wait for.
  std::vector<int64_t> blocked() const;
  std::vector<int64_t> missing() const;
  // The ranks `rank` waits for.
  const std::vector<int64_t>& waits_for(int64_t rank) const;
};

// Builds the report from the runtime's state at a stall (or after a timeout).
HangReport analyze_hang(const std::vector<RankActivity>& activity, const Rendezvous& rendezvous,
                        const std::optional<TimeoutRecord>& timeout);

// Where every rank was when the run reached its wall-clock limit of `limit_s` seconds: the
// ranks, the collectives they wait in and their flight recorders, with no cause or culprit (a
// slow run and a livelock look alike from outside).
HangReport wall_clock_report(const std::vector<RankActivity>& activity,
                             const Rendezvous& rendezvous, double limit_s);

}  // namespace meshsim::sim
