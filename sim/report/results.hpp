// What running a scenario produces: dumps, expectation outcomes and per-rank failures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/source_location.hpp"
#include "sim/report/rank_ranges.hpp"
#include "src/rng/rank_rng.hpp"

namespace meshsim::sim {

using Json = nlohmann::json;

// Dumped and expected values a scenario's report keeps, in all (approximate JSON bytes).
inline constexpr uint64_t kMaxReportValueBytes = uint64_t{256} << 20;

// About how many bytes `value` takes as JSON text; walks it without recursion.
uint64_t json_weight(const Json& value);

// JSON text that is always valid: bytes that are not UTF-8 (a file name, a message quoting user
// text) are replaced, never a reason to throw.
inline std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

struct DumpRecord {
  SourceLocation where;
  int64_t rank;
  std::string what;
  Json value;
};

// One check of an expectation, or, for one that passed, every check that passed it the same way
// (same step, query and values): a world that passes alike costs one record, not one per rank.
struct ExpectationRecord {
  SourceLocation where;
  int64_t rank;      // the lowest of `ranks` (-1: a check of the run as a whole)
  std::string what;  // e.g. coordinate(world)
  bool passed;
  Json observed;
  Json expected;
  RankRanges ranks = {};  // when it stands for more than `rank` (empty: `rank` alone)
  uint64_t checks = 1;    // how many checks it stands for (a loop checks a rank again)
};

// Something legal that is likely not what the user meant: a redistribute PyTorch plans badly,
// random numbers drawn twice, groups created with different members. Never hidden: every run
// prints a summary of them, and --warnings-as-errors fails the run.
struct Warning {
  std::string kind;  // what raised it: a step kind ("redistribute"), "rng", "new_group", "report"
  std::string text;  // with the ranks it happened on, when a rank raised it
  SourceLocation where;  // the step that raised it (line 0: the run as a whole)
  // "f.toml:12:1: ranks 0-3: text", or the text alone.
  std::string shown() const { return where.line > 0 ? where.to_string() + ": " + text : text; }
};

// A rank that stopped early: an unexpected error, or an expected one that did not happen.
struct RankFailure {
  SourceLocation where;
  std::string step;
  std::string error_type;  // Python exception name, or "meshsim" for harness-level failures
  std::string message;
};

// One random kernel's draw on one rank, for the report and the overlap check.
struct DrawRecord {
  SourceLocation where;
  int64_t rank;
  std::string tensor;  // the tensor or parameter drawn into
  Draw draw;
};

// What a rank holds when it reaches a cross-rank expectation (distinct, equal), compared with
// the other ranks' after the run.
struct ShardSample {
  std::string tensor;
  // The rank's coordinate in the mesh compared across, split into the dims named in `across`
  // and the others.
  std::vector<int64_t> across;
  std::vector<int64_t> others;
  int64_t replica = 0;  // of that mesh: only ranks of one copy are compared
  bool meta = false;
  int64_t numel = 0;
  uint64_t digest = 0;  // of dtype, shape and bytes
  Json preview;         // the first few values, for the report
  // The random draw whose output the rank holds unchanged; nullopt when its values came from
  // anywhere else (a collective, a load, arithmetic, a slice of a bigger draw).
  std::optional<Draw> drawn;
};

// Two draws meant to be independent that read the same Philox counters under the same seed.
struct RngOverlap {
  DrawRecord first;
  DrawRecord second;
  std::vector<int64_t> first_ranks;  // every rank that made the same draw as `first`
  std::vector<int64_t> second_ranks;
  uint64_t block_begin = 0;  // the shared counter blocks [begin, end)
  uint64_t block_end = 0;
};

struct ScenarioResult {
  std::string name;
  std::string file;
  std::string description;
  int64_t world_size = 0;
  std::vector<DumpRecord> dumps;
  std::vector<ExpectationRecord> expectations;
  // Indexed by rank; nullopt for a rank that ran every step.
  std::vector<std::optional<RankFailure>> failures;
  // The first stall (deadlock or desync) or watchdog timeout, as text and JSON.
  std::optional<std::string> hang_text;
  std::optional<Json> hang;
  std::string hang_dot;
  // Whether the scenario declares the outcome (deadlock, desync, timeout, rank_failed): then a
  // hang or failed ranks are what it tests, and only its expectations decide.
  bool outcome_expected = false;
  std::vector<Warning> warnings;
  // With RunOptions::payload_hashes: one line per member of every completed collective.
  std::vector<std::string> payload_hashes;
  // With RunOptions::fr_dump_dir: where every rank's Flight Recorder dump was written, or why
  // they could not be.
  std::string fr_dump_dir;
  std::string fr_dump_error;
  // Every fault injected into this run (declared or drawn from --faults-seed).
  std::vector<std::string> faults;
  // Random kernels' draws, rank by rank in program order: every one while the run lasts (up to
  // kMaxCheckedDraws), the first kMaxReportedDraws once the overlap check has read them; and the
  // overlaps found (at most kMaxReportedOverlaps, with the total).
  std::vector<DrawRecord> draws;
  uint64_t draws_total = 0;
  std::vector<RngOverlap> overlaps;
  uint64_t overlap_count = 0;
  // Ranks whose own generator state was replaced by rank 0's when the tracker was created lazily.
  std::vector<int64_t> rng_state_synced;
  // Samples of cross-rank expectations: by expectation id, then rank, then tensor.
  std::map<int64_t, std::vector<std::vector<ShardSample>>> cross_rank_samples;
  // Chrome trace events of the run (empty unless tracing was asked for).
  Json trace = Json::array();
  uint64_t schedule_digest = 0;
  uint64_t schedule_decisions = 0;
  double wall_ms = 0;
  // Values kept in dumps and expectations so far, and how many were left out once they reached
  // kMaxReportValueBytes: a report stays proportional to what a person can use.
  uint64_t value_bytes = 0;
  uint64_t omitted_values = 0;
  // Expectations and dumps beyond kMaxListedRecords (loops make many) are counted, not kept.
  static constexpr size_t kMaxListedRecords = size_t{1} << 20;
  uint64_t unlisted_passed = 0;
  uint64_t unlisted_failed = 0;
  // Set when meshsim itself stopped while running the scenario (a rank overflowed its fiber
  // stack, or a bug): what it said and how it ended. Such a scenario fails.
  std::string crash;

  size_t failed_expectations() const;
  // Every check made, passed records counted by what they stand for (listed ones only).
  uint64_t listed_checks() const;
  // While the run lasts: the passed records by a hash of their step, query and values, so that
  // another check passing the same way joins its record.
  std::unordered_multimap<uint64_t, size_t> passed_index;
  size_t failed_ranks() const;
  // Overlaps beyond this many are counted, not listed.
  static constexpr size_t kMaxReportedOverlaps = 64;
  // Draws the overlap check reads (about 200 bytes each), and draws the report lists.
  static constexpr size_t kMaxCheckedDraws = size_t{1} << 20;
  static constexpr size_t kMaxReportedDraws = size_t{1} << 16;

  bool passed() const {
    return crash.empty() && failed_expectations() == 0 &&
           (outcome_expected || (failed_ranks() == 0 && !hang.has_value()));
  }
};

}  // namespace meshsim::sim
