// libFuzzer target: load a scenario and, when it is small enough, run it and render its reports.
// Every outcome (pass, failed expectations, failed ranks, hangs) is fine; a crash, a hang of the
// simulator itself or an exception escaping the runner is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/report.hpp"
#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "src/tensor/memory_budget.hpp"

namespace {
constexpr int64_t kMaxRanks = 32;
constexpr size_t kMaxSteps = 256;
constexpr int64_t kMaxIterations = 256;  // of the innermost loop body, all loops multiplied

// Whether the program's repeat loops stay small: constant counts whose product, nested, is at
// most kMaxIterations (a mutated count would otherwise run for minutes).
bool loops_are_small(const meshsim::sim::Scenario& scenario) {
  std::vector<int64_t> product{1};
  for (const auto& step : scenario.steps) {
    if (!step->loop) continue;
    if (!step->loop->opens) {
      product.pop_back();
      continue;
    }
    const std::optional<int64_t> count = step->loop->count->constant_value();
    if (!count || *count > kMaxIterations ||
        product.back() * std::max<int64_t>(*count, 1) > kMaxIterations)
      return false;
    product.push_back(product.back() * std::max<int64_t>(*count, 1));
  }
  return true;
}
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
  if (scenario.world_size > kMaxRanks || scenario.steps.size() > kMaxSteps ||
      !loops_are_small(scenario)) {
    return 0;
  }
  RunOptions options;
  options.trace = size % 2 == 1;  // exercise tracing on half of the inputs
  RunReport report;
  report.results.push_back(run_scenario(scenario, options));
  (void)format_failures(report.results.back(), SIZE_MAX);
  (void)format_table(report, false);
  (void)json_text(report_json(report, "fuzz"));
  return 0;
}
