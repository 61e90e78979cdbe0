// Explains why a world stopped making progress. It opens with the root cause (the kind, the
// culprit rank(s), the scenario line where they went another way, and what everyone else waits
// for), then per rank where it is and what it waits for, and the collectives waited in, with who
// arrived and who is missing. Text (ranks with the same story share a line), JSON and Graphviz
// DOT. Sizes stay linear in the world, so a report on tens of thousands of ranks is cheap.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/runtime/first_divergence.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "sim/runtime/virtual_time.hpp"

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
};
inline constexpr HangCause kAllHangCauses[] = {
    HangCause::kMissingRank,     HangCause::kSignatureMismatch,     HangCause::kOrderInversion,
    HangCause::kRankExitedEarly, HangCause::kExtraCollective,       HangCause::kRankFailed,
    HangCause::kTimeout,         HangCause::kUnmatchedPointToPoint, HangCause::kHeadToHeadSend,
    HangCause::kWrongPeer,       HangCause::kHeadToHeadRecv,        HangCause::kPointToPointCycle,
};
std::string_view hang_cause_name(HangCause cause);

// How a world stopped: no rank can run (deadlock), ranks met with different signatures (desync),
// or a watchdog fired (timeout).
enum class HangKind { kDeadlock, kDesync, kTimeout };
std::string_view hang_kind_name(HangKind kind);

struct HangReport {
  HangKind kind = HangKind::kDeadlock;
  HangCause cause = HangCause::kMissingRank;
  // The cause meshsim gave this hang before issue 11 refined the point-to-point ones: scenario
  // files written then still match it.
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
  // Where members of a group first called different things (from the flight recorders).
  std::optional<Divergence> divergence;
  // What reports call the groups the flight recorders name, by id.
  std::map<int64_t, std::string> group_labels;

  // Ranks parked in some collective, and the members those collectives still wait for.
  std::vector<int64_t> blocked() const;
  std::vector<int64_t> missing() const;
  // The ranks `rank` waits for.
  const std::vector<int64_t>& waits_for(int64_t rank) const;

  // The summary, then "  per rank:" and one line per story (report.cpp cuts that section).
  std::string text() const;
  // One of `rank`'s records: "world.tp#1 seq 3: all_reduce(float32[4], op=sum) at line 12,
  // completed"; send/recv name their direction ("WORLD p2p 4→2 seq 7: ...").
  std::string record_text(int64_t rank, const CollectiveRecord& c) const;
  nlohmann::json json() const;
  // Rank-level for small worlds (<= 64 ranks), collective-level otherwise.
  std::string dot() const;
};

// Builds the report from the runtime's state at a stall (or after a timeout).
HangReport analyze_hang(const std::vector<RankActivity>& activity, const Rendezvous& rendezvous,
                        const std::optional<TimeoutRecord>& timeout);

}  // namespace meshsim::sim
