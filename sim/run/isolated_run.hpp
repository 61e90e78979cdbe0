// Loading and running one scenario file, by default in a child process of its own: whatever the
// scenario does to the simulator (a rank that overflows its fiber stack, a crash), the other
// scenarios of the run keep their results and the reports are still written.
#pragma once

#include <optional>
#include <string>

#include "sim/base/source_location.hpp"
#include "sim/report/results.hpp"
#include "sim/run/runner.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

// What became of one scenario file: a result, or why it could not be used.
struct FileOutcome {
  std::optional<ScenarioResult> result;
  std::optional<SourceLocation> unusable_at;
  std::string unusable_message;
};

enum class Isolation { kChildProcess, kInProcess };

// kChildProcess forks: the child loads and runs, and hands the result back through a pipe; if it
// dies instead, the result is a failed scenario whose `crash` says how, with what the child
// wrote to stderr. kInProcess runs here (for a debugger).
// `steps`: the step kinds the file may use.
FileOutcome run_scenario_file(const std::string& file, const StepRegistry& steps,
                              const RunOptions& options, Isolation isolation);

}  // namespace meshsim::sim
