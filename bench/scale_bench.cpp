// Whole scenarios at scale, as `meshsim run` runs them: meshes over 16,384 and 65,536 ranks (the
// scale suite in tests/scale checks their peak memory), and a WORLD all_reduce over 65,536 meta
// ranks. The time is the load and the run together. A 16,384-rank pipeline hang runs beside the
// same job without its bug: the difference is what the hang costs (its report, text and JSON,
// and aborting the ranks that wait). One HSDP x TP x PP training step with a whole-world
// checkpoint runs from 1,024 to 131,072 ranks: its CPU time per rank is the curve to keep flat.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "src/tensor/memory_budget.hpp"

namespace {

using namespace meshsim::sim;

std::string scale_file(const std::string& name) {
  return std::string(MESHSIM_SOURCE_ROOT) + "/tests/scale/" + name;
}

void run_text(benchmark::State& state, const std::string& text, const std::string& path,
              int64_t ranks) {
  meshsim::MemoryBudget::set_limit(uint64_t{8} << 30);
  for (auto _ : state) {
    const Scenario scenario = load_scenario_text(text, path);
    const ScenarioResult result = run_scenario(scenario);
    if (!result.passed()) state.SkipWithError(("scenario failed: " + path).c_str());
  }
  state.SetItemsProcessed(state.iterations() * ranks);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces the first `from` in `text` by `to`; false when there is none.
bool replace_once(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) return false;
  text.replace(at, from.size(), to);
  return true;
}

void run_file(benchmark::State& state, const std::string& name, int64_t ranks) {
  const std::string path = scale_file(name);
  run_text(state, read_text(path), path, ranks);
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

// Megatron 1F1B on [8, 256, 8] (16,384 ranks): rank 5003 skips a TP all_reduce in warmup and the
// job hangs at the end of the step; the report must name it (its expectation says so).
void BM_scale_hang_pp_tp_16384(benchmark::State& state) {
  run_file(state, "hang_pp_tp_16384.toml", 16384);
}
BENCHMARK(BM_scale_hang_pp_tp_16384)->Unit(benchmark::kMillisecond)->Iterations(1);

// The floor: the same job without the bug (and without the expectation of a hang) runs to the end.
void BM_scale_hang_pp_tp_16384_floor(benchmark::State& state) {
  const std::string path = scale_file("hang_pp_tp_16384.toml");
  std::string text = read_text(path);
  if (!replace_once(text, "not (rank == 5003 and w == 2)", "true") ||
      !replace_once(text, "[[expect]]", "") ||
      !replace_once(text, "deadlock = {", "# deadlock = {")) {
    state.SkipWithError("hang_pp_tp_16384.toml no longer has its planted bug");
    return;
  }
  run_text(state, text, path, 16384);
}
BENCHMARK(BM_scale_hang_pp_tp_16384_floor)->Unit(benchmark::kMillisecond)->Iterations(1);

// tests/scale/training_step.toml at `ranks` ranks: its world_size line and the dp_shard size of
// its [8, 8, dp_shard, 8] mesh rewritten, as tests/scale/run_scale.py --world does; with
// `checkpoint` false, without the steps from the save to the load (the floor of the save and
// load). Empty when the file no longer has the lines rewritten.
std::string training_step_at(int64_t ranks, bool checkpoint) {
  std::string text = read_text(scale_file("training_step.toml"));
  if (!replace_once(text, "\nworld_size = 1024\n",
                    "\nworld_size = " + std::to_string(ranks) + "\n") ||
      !replace_once(text, "\nshape = [8, 8, 2, 8]\n",
                    "\nshape = [8, 8, " + std::to_string(ranks / 512) + ", 8]\n")) {
    return "";
  }
  if (!checkpoint) {
    const size_t from =
        text.find("[[step]]\nto_local = { tensor = \"fc.weight\", out = \"weight_before\" }");
    const size_t to = text.find("[[step]]\nbarrier = \"WORLD\"");
    if (from == std::string::npos || to == std::string::npos || to < from) return "";
    text.erase(from, to - from);
  }
  return text;
}

void run_training_step(benchmark::State& state, bool checkpoint) {
  const int64_t ranks = state.range(0);
  const std::string text = training_step_at(ranks, checkpoint);
  if (text.empty()) {
    state.SkipWithError("training_step.toml no longer has the lines this benchmark rewrites");
    return;
  }
  run_text(state, text, scale_file("training_step.toml"), ranks);
  state.counters["cpu_us_per_rank"] =
      benchmark::Counter(static_cast<double>(ranks), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

// The curve: CPU time per rank at 131,072 ranks against 1,024.
void BM_scale_training_step(benchmark::State& state) {
  run_training_step(state, true);
}
// The curve's base is a quarter of a second: timed over eight runs per repetition, so that one
// run the shared machine slowed does not move every ratio.
BENCHMARK(BM_scale_training_step)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Iterations(8);
BENCHMARK(BM_scale_training_step)
    ->Arg(8192)
    ->Arg(32768)
    ->Arg(131072)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Iterations(1);

// The same step without its checkpoint: the difference at 16,384 ranks is what a whole-world
// save and load of the weight costs.
void BM_scale_training_step_floor(benchmark::State& state) {
  run_training_step(state, false);
}
BENCHMARK(BM_scale_training_step_floor)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Iterations(1);
BENCHMARK(BM_scale_training_step)
    ->Name("BM_scale_training_step_with_checkpoint")
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
