// Whole scenarios at scale, as `meshsim run` runs them: meshes over 16,384 and 65,536 ranks (the
// scale suite in tests/scale checks their peak memory), and a WORLD all_reduce over 65,536 meta
// ranks. The time is the load and the run together.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/run/runner.hpp"
#include "sim/scenario/scenario_loader.hpp"
#include "src/tensor/memory_budget.hpp"

namespace {

using namespace meshsim::sim;

void run_file(benchmark::State& state, const std::string& name, int64_t ranks) {
  const std::string path = std::string(MESHSIM_SOURCE_ROOT) + "/tests/scale/" + name;
  meshsim::MemoryBudget::set_limit(uint64_t{8} << 30);
  for (auto _ : state) {
    const Scenario scenario = load_scenario_file(path);
    const ScenarioResult result = run_scenario(scenario);
    if (!result.passed()) state.SkipWithError(("scenario failed: " + path).c_str());
  }
  state.SetItemsProcessed(state.iterations() * ranks);
}

// init_device_mesh([2048, 8]) on 16,384 ranks, an all_reduce on every tp group. Target: <= 2 s.
void BM_scale_mesh_2048x8_16384(benchmark::State& state) {
  run_file(state, "mesh_16384.toml", 16384);
}
BENCHMARK(BM_scale_mesh_2048x8_16384)->Unit(benchmark::kMillisecond);

// [8, 1024, 8] on 65,536 ranks, a slice and a _flatten, collectives. Target: <= 20 s.
void BM_scale_mesh_8x1024x8_65536(benchmark::State& state) {
  run_file(state, "mesh_65536.toml", 65536);
}
BENCHMARK(BM_scale_mesh_8x1024x8_65536)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
