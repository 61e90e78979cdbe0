// The fiber runtime at scale: creating and joining worlds, memory per idle rank, collectives per
// rank, and deadlock detection with its full report.
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <fstream>

#include <boost/fiber/barrier.hpp>

#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/runtime/sim_collectives.hpp"
#include "sim/runtime/world.hpp"

namespace {

using namespace meshsim;
using namespace meshsim::sim;

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

Group world_group(int64_t n) {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < n; ++r) ranks.push_back(r);
  return Group{"0", ranks};
}

const Signature kBarrier{CollectiveOp::kBarrier, DType::kFloat32, {}, {}, {}, {}};

// A world of n ranks over the simulated collectives, with WORLD as a group.
struct SimWorld {
  SimWorld(int64_t n, WorldOptions options = {})
      : world(n, options),
        activity(static_cast<size_t>(n)),
        collectives(world, activity, CostModel{}),
        group(world_group(n)) {}
  World world;
  std::vector<RankActivity> activity;
  SimCollectives collectives;
  Group group;
};

std::vector<std::optional<std::string>> abort_blocked(const std::vector<RankActivity>& activity) {
  std::vector<std::optional<std::string>> out(activity.size());
  for (size_t r = 0; r < activity.size(); ++r) {
    if (activity[r].state == RankActivity::State::kBlocked) out[r] = "benchmark abort";
  }
  return out;
}

// Benchmarks of the collective path use canary stacks: the same creation cost as the floor.
const WorldOptions kCanaryStacks{SchedulePolicy::kFifo, 0, 64 * 1024, StackGuard::kCanary};

StackGuard guard_of(int64_t arg) {
  return arg == 0 ? StackGuard::kCanary : StackGuard::kGuardPages;
}

// Create N ranks, let each run to completion, join them all; stacks with canaries (0) or guard
// pages (1).
void BM_runtime_world_create_join(benchmark::State& state) {
  const int64_t n = state.range(0);
  WorldOptions options;
  options.stack_guard = guard_of(state.range(1));
  for (auto _ : state) {
    World world(n, options);
    world.run([](int64_t) {}, [] { return std::vector<std::optional<std::string>>(); });
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_world_create_join)
    ->Args({1024, 0})
    ->Args({16384, 0})
    ->Args({16384, 1})
    ->Unit(benchmark::kMillisecond);

// The floor for a collective: K rounds of a plain Boost.Fiber barrier across N rank fibers.
void BM_runtime_fiber_barrier_floor(benchmark::State& state) {
  const int64_t n = state.range(0);
  constexpr int kRounds = 200;
  for (auto _ : state) {
    World world(n, kCanaryStacks);
    boost::fibers::barrier barrier(static_cast<size_t>(n));
    world.run(
        [&](int64_t) {
          for (int k = 0; k < kRounds; ++k) barrier.wait();
        },
        [] { return std::vector<std::optional<std::string>>(); });
  }
  state.SetItemsProcessed(state.iterations() * n * kRounds);
}
BENCHMARK(BM_runtime_fiber_barrier_floor)->Arg(1024)->Unit(benchmark::kMillisecond);

// Resident memory per rank while every rank but the last is parked in a WORLD barrier.
void BM_runtime_idle_rank_memory(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t stack = static_cast<size_t>(state.range(1)) * 1024;
  double per_rank = 0;
  for (auto _ : state) {
    SimWorld w(n, WorldOptions{SchedulePolicy::kFifo, 0, stack, guard_of(state.range(2))});
    auto& [world, activity, collectives, g] = w;
    const size_t before = resident_bytes();
    world.run(
        [&](int64_t r) {
          if (r == n - 1)
            per_rank = static_cast<double>(resident_bytes() - before) / static_cast<double>(n);
          collectives.collective(r, g, kBarrier, {});
        },
        [&] { return abort_blocked(activity); });
  }
  state.counters["bytes_per_idle_rank"] = per_rank;
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_idle_rank_memory)
    ->Args({16384, 64, 0})
    ->Args({16384, 64, 1})
    ->Args({16384, 16, 0})
    ->Unit(benchmark::kMillisecond);

// K all_reduces of one float across N ranks; items = rank-collectives, so the time per item is
// the amortised cost per rank per collective.
void BM_runtime_all_reduce_1_float(benchmark::State& state) {
  const int64_t n = state.range(0);
  constexpr int kRounds = 200;
  for (auto _ : state) {
    SimWorld w(n, kCanaryStacks);
    auto& [world, activity, collectives, g] = w;
    world.run(
        [&](int64_t r) {
          Tensor t = Tensor::full({1}, 1, DType::kFloat32);
          const Signature sig{
              CollectiveOp::kAllReduce, DType::kFloat32, {{1}}, {}, ReduceOp::kSum, {}};
          for (int k = 0; k < kRounds; ++k) {
            t = collectives.collective(r, g, sig, Payload{{t}, {}}).tensors.at(0);
          }
        },
        [&] { return abort_blocked(activity); });
  }
  state.SetItemsProcessed(state.iterations() * n * kRounds);
}
BENCHMARK(BM_runtime_all_reduce_1_float)->Arg(1024)->Unit(benchmark::kMillisecond);

// N-1 ranks wait in a barrier for a rank that exited: run, detect, analyse, render text/JSON/DOT.
void BM_runtime_deadlock_report(benchmark::State& state) {
  const int64_t n = state.range(0);
  size_t report_bytes = 0;
  for (auto _ : state) {
    SimWorld w(n);
    auto& [world, activity, collectives, g] = w;
    world.run(
        [&](int64_t r) {
          try {
            if (r != n / 2) collectives.collective(r, g, kBarrier, {});
            activity[static_cast<size_t>(r)].state = RankActivity::State::kFinished;
          } catch (const RankAborted&) {
            forget_unwound_frames();
            activity[static_cast<size_t>(r)].state = RankActivity::State::kAborted;
          }
        },
        [&] {
          const HangReport report = analyze_hang(activity, collectives);
          report_bytes = report.text().size() + report.json().dump().size() + report.dot().size();
          return abort_blocked(activity);
        });
  }
  state.counters["report_bytes"] = static_cast<double>(report_bytes);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_deadlock_report)->Arg(16384)->Unit(benchmark::kMillisecond);

// 65,536 ranks all-reduce a 1 GiB meta tensor: signatures only, no data.
void BM_runtime_meta_world(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    SimWorld w(n, WorldOptions{SchedulePolicy::kFifo, 0, 16 * 1024});
    auto& [world, activity, collectives, g] = w;
    world.run(
        [&](int64_t r) {
          const Tensor t({1 << 14, 1 << 14}, DType::kFloat32, Tensor::Storage::kMeta);
          const Signature sig{
              CollectiveOp::kAllReduce, DType::kFloat32, {t.shape()}, {}, ReduceOp::kSum, {}};
          benchmark::DoNotOptimize(collectives.collective(r, g, sig, Payload{{t}, {}}));
        },
        [&] { return abort_blocked(activity); });
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_meta_world)->Arg(65536)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
