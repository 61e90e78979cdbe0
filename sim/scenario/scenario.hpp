// A loaded scenario: its header and the ordered program every rank runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/source_location.hpp"
#include "sim/report/results.hpp"
#include "sim/runtime/call_site.hpp"
#include "sim/runtime/faults.hpp"
#include "sim/runtime/skip_log.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "sim/scenario/expression.hpp"
#include "src/error.hpp"
#include "src/rng/gpu_profile.hpp"
#include "src/rng/rank_rng.hpp"

namespace meshsim::sim {

class RankState;

// `raises = { type = "KeyError", contains = "...", on = "rank > 1" }`: the step must fail this way
// on the ranks where `on` holds (all ranks when absent) and succeed on the others.
struct RaisesSpec {
  PyErrorType type;
  std::string contains;
  std::optional<Expression> on;
};

// `repeat = { var = "mb", count = 8 }` opens a loop whose body runs with mb = 0, 1, ..., 7, up to
// the `end_repeat = "mb"` that closes it. Both mark the program and run nothing themselves;
// `partner` is the index (in Scenario::steps) of the other end.
struct LoopMark {
  bool opens = true;
  std::string var;
  std::optional<Expression> count;  // on the repeat
  size_t partner = 0;
  // The most a count may be, and the most passes of loop bodies one rank may make in all.
  static constexpr int64_t kMaxCount = int64_t{1} << 24;
};

// One entry of the program ([[mesh]], [[step]] or [[expect]]), run by every rank in file order.
class Step {
 public:
  virtual ~Step() = default;
  // Runs on one rank. Model errors propagate as meshsim::Error; the runner checks them against
  // `raises` and attaches the location.
  virtual void run(RankState& rank) const = 0;
  // The collective or send/recv the step would issue on this rank, for steps that issue one:
  // what a skipped step (its `when` false) did not call. Never throws; unknowns are -1.
  virtual std::optional<PlannedCall> planned_call(const RankState&) const { return std::nullopt; }
  // Whether planned_call() gives one (runs and skips of such steps are counted per rank).
  virtual bool communicates() const { return false; }

  SourceLocation where;
  const LoopScope* loop_scope = nullptr;  // the innermost repeat around the step
  std::string kind;                       // registry key, for reports
  std::optional<Expression> when;
  std::optional<RaisesSpec> raises;
  std::optional<LoopMark> loop;  // a repeat or end_repeat
};

// An expectation about how the whole run ends (deadlock, desync, timeout, a failed rank), checked
// once after every rank has stopped.
class OutcomeExpectation {
 public:
  virtual ~OutcomeExpectation() = default;
  virtual ExpectationRecord check(const ScenarioResult& result) const = 0;
  // Whether it states how the run ends (a hang, a failed rank): then those are what the scenario
  // tests, not failures. Checks of what ranks computed (distinct, equal, overlaps) do not.
  virtual bool declares_run_outcome() const { return true; }
  SourceLocation where;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;
  int64_t world_size = 0;
  std::string device_type = "cuda";
  // GPUs per host (`gpus_per_node = 8`): ranks r and s share a node when r / n == s / n. Unset,
  // meshsim knows no topology and refuses questions about it.
  std::optional<int64_t> gpus_per_node;
  CostModel cost;
  // Whose DTensor seeding rules apply (`torch = "2.6"`), and the GPU whose kernel launches the
  // random numbers are predicted for (`gpu = "H200"` or { sms, max_threads_per_sm }).
  RngProfile rng_profile = RngProfile::kLatest;
  GpuProfile gpu = *find_gpu("H200");
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<std::unique_ptr<LoopScope>> loop_scopes;  // the repeats' (call sites point here)
  std::vector<std::unique_ptr<OutcomeExpectation>> outcomes;
  std::vector<Fault> faults;  // [[fault]] entries
};

}  // namespace meshsim::sim
