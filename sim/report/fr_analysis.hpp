// Why a real job hung, from its ranks' Flight Recorder dumps (src/io/fr_dump.hpp): each rank's
// calls are put in order per process group and matched across the members by (group, sequence
// number), point-to-point calls by peer. The analysis finds the collectives some members never
// reached, the ones members called with another op, sizes or dtypes, the sends and recvs whose
// peer went elsewhere, cycles of waits, and the first call whose members came from different
// Python lines; then, as meshsim's own hang reports do, it names the cause first, the culprits,
// and one line per group of ranks with the same story. Partial evidence (a rank without a dump, a
// ring buffer that wrapped) is said, and what is there is analysed. See docs/flight-recorder.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/runtime/hang_report.hpp"
#include "src/io/fr_dump.hpp"

namespace meshsim::sim {

// One rank's dump, and the file it came from (for messages).
struct FrRankDump {
  int64_t rank = 0;
  std::string file;
  FrDump dump;
};

struct FrGroup {
  std::string name;              // c10d's name ("0", "3")
  std::string desc;              // "default_pg", "undefined", a mesh dim's description
  std::string label;             // what reports call it: "WORLD", "pg 3", "mesh_tp (pg 3)"
  std::vector<int64_t> members;  // global ranks, sorted
  // Where the members come from: "pg_config" (it lists them), "world" (the default group: every
  // rank), or "dumps": the ranks whose dumps name the group (Gloo keeps no usable pg_config), so
  // a member that never called on it is not known, and group ranks cannot be mapped to them.
  std::string members_from;
  // Members the group has that no dump names: a gather's or reduce-scatter's sizes say how many
  // members a group has, when pg_config does not list them.
  int64_t unnamed_members = 0;
};

// Ranks that called one (group, seq) the same way, and how: "all_reduce(Float[4])" and the
// user's line that called it ("train.py:30 in step").
struct FrVariant {
  std::string text;
  std::vector<int64_t> ranks;
};

// Members that called one collective with another op, sizes or dtypes (the classes of PyTorch's
// analyzer: COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, COLLECTIVE_DTYPE_MISMATCH).
struct FrMismatch {
  size_t group = 0;  // index into FrAnalysis::groups
  int64_t seq = 0;
  std::string kind;                 // "op", "sizes" or "dtypes"
  std::vector<FrVariant> variants;  // most ranks first (ties: lowest rank first)
  std::vector<int64_t> culprits;    // the ranks outside the first variant
  int64_t created_ns = 0;           // the earliest member's time_created_ns
};

// A call ranks are blocked in, and what keeps it from finishing.
struct FrOpenCall {
  size_t group = 0;
  int64_t seq = 0;   // collective seq; for a send or recv, the caller's p2p seq
  std::string call;  // "all_reduce(Float[4])", "send(Float[4]) to rank 1"
  std::string site;  // the lowest waiting rank's line, or "record 7" without frames
  bool p2p = false;
  std::vector<int64_t> waiting;    // ranks blocked in it
  std::vector<int64_t> missing;    // members whose dumps show they never called it
  std::vector<int64_t> elsewhere;  // members that called it but are blocked in an earlier call
  std::vector<int64_t> no_dump;    // members without a dump, or whose buffer lost the group
  int64_t unnamed = 0;             // members no dump names (FrGroup::unnamed_members)
};

// One group's first collective whose members called it from different lines.
struct FrDivergence {
  size_t group = 0;
  int64_t seq = 0;
  std::vector<FrVariant> sites;  // fewest ranks first
  int64_t created_ns = 0;
};

struct FrRank {
  enum class State { kNoDump, kIdle, kBlocked };
  int64_t rank = 0;
  State state = State::kNoDump;
  std::string file;
  size_t entries = 0;
  int64_t first_record = 0;         // above 0: the ring buffer wrapped
  std::optional<size_t> open_call;  // index into FrAnalysis::open_calls when blocked
  std::vector<int64_t> waits_for;
  std::string story;  // the per-rank line, without the rank
  // Its newest records, oldest first, as report lines ("WORLD seq 2: all_reduce(Float[4]) at
  // train.py:30 in step, scheduled").
  std::vector<std::string> last_calls;
};

struct FrAnalysis {
  // No hang (every recorded call finished, every member agreed), a deadlock (members wait for
  // ranks that went elsewhere, or in a cycle), a desync (members disagreed), or a stall that the
  // dumps do not explain (every member entered the call the same way).
  enum class Verdict { kClean, kDeadlock, kDesync, kStall };
  Verdict verdict = Verdict::kClean;
  HangCause cause = HangCause::kMissingRank;  // meaningful unless kClean
  std::vector<int64_t> culprits;
  std::vector<std::string> summary;  // the cause in a few sentences
  int64_t world_size = 0;
  std::vector<FrGroup> groups;
  std::vector<FrRank> ranks;  // every rank of the world, by rank
  std::vector<FrOpenCall> open_calls;
  std::vector<FrMismatch> mismatches;  // every one, earliest first
  std::vector<FrDivergence> divergences;
  std::vector<std::vector<int64_t>> cycles;  // of waits, when no rank outside one is to blame
  std::vector<std::string> evidence;         // what the dumps lack, said once each
};

std::string_view fr_verdict_name(FrAnalysis::Verdict verdict);

// Ranks above this are refused when named by a file or a dump: the analysis keeps one record per
// rank of the world.
inline constexpr int64_t kMaxFrWorld = int64_t{1} << 22;

// Analyses the dumps (any order, one per rank). The world has `world_size_hint` ranks or as many
// as the dumps' ranks and groups show, whichever is more. Throws meshsim::Error only for a world
// past kMaxFrWorld; anything odd in the dumps is reported in `evidence`.
FrAnalysis analyze_fr_dumps(std::vector<FrRankDump> dumps, int64_t world_size_hint = 0);

}  // namespace meshsim::sim
