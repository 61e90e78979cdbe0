// What running a scenario produces: dumps, expectation outcomes and per-rank failures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/source_location.hpp"

namespace meshsim::sim {

using Json = nlohmann::json;

struct DumpRecord {
  SourceLocation where;
  int64_t rank;
  std::string what;
  Json value;
};

struct ExpectationRecord {
  SourceLocation where;
  int64_t rank;
  std::string what;  // e.g. coordinate(world)
  bool passed;
  Json observed;
  Json expected;
};

// A rank that stopped early: an unexpected error, or an expected one that did not happen.
struct RankFailure {
  SourceLocation where;
  std::string step;
  std::string error_type;  // Python exception name, or "meshsim" for harness-level failures
  std::string message;
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
  // Suspicious but not fatal (process groups created with different members on different ranks).
  std::vector<std::string> warnings;
  // Every fault injected into this run (declared or drawn from --faults-seed).
  std::vector<std::string> faults;
  // Chrome trace events of the run (empty unless tracing was asked for).
  Json trace = Json::array();
  uint64_t schedule_digest = 0;
  uint64_t schedule_decisions = 0;
  double wall_ms = 0;

  size_t failed_expectations() const;
  size_t failed_ranks() const;
  bool passed() const {
    return failed_expectations() == 0 &&
           (outcome_expected || (failed_ranks() == 0 && !hang.has_value()));
  }
};

}  // namespace meshsim::sim
