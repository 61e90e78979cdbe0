// libFuzzer target: load a scenario and, when it is small enough, run it and render its reports.
// Every outcome (pass, failed expectations, failed ranks, hangs) is fine; a crash, a hang of the
// simulator itself or an exception escaping the runner is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/report/report.hpp"
#include "sim/run/runner.hpp"
#include "sim/scenario/scenario_loader.hpp"
#include "src/tensor/memory_budget.hpp"

namespace {
constexpr int64_t kMaxRanks = 32;
constexpr size_t kMaxSteps = 256;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsim::sim;
  Scenario scenario;
  try {
    scenario =
        load_scenario_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const InputError&) {
    return 0;
  }
  if (scenario.world_size > kMaxRanks || scenario.steps.size() > kMaxSteps) return 0;
  RunOptions options;
  options.trace = size % 2 == 1;  // exercise tracing on half of the inputs
  RunReport report;
  report.results.push_back(run_scenario(scenario, options));
  (void)format_failures(report.results.back(), SIZE_MAX);
  (void)format_table(report, false);
  (void)json_text(report_json(report, "fuzz"));
  return 0;
}
