// The fiber runtime at scale: creating and joining worlds, memory per idle rank, collectives per
// rank against a plain fiber barrier measured in the same run, and deadlock detection with its
// full report.
#include <benchmark/benchmark.h>

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <new>

#include <boost/fiber/barrier.hpp>

#include "sim/report/hang_render.hpp"
#include "sim/run/backend_factory.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/runtime/world.hpp"

// Every allocation of this program is counted, so the collective benchmark can show how many a
// rank makes per collective.
std::atomic<uint64_t> g_allocations{0};

void* operator new(size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// g++ takes these replacements for a mismatch of new and free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using namespace meshsim;
using namespace meshsim::sim;

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

RankList world_ranks(int64_t n) {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < n; ++r) ranks.push_back(r);
  return std::make_shared<const std::vector<int64_t>>(std::move(ranks));
}

// A world of n ranks over the simulated backend; every rank's Backend is made before it runs.
struct SimWorld {
  SimWorld(int64_t n, WorldOptions options = {})
      : world(n, options), activity(static_cast<size_t>(n)), factory(world, activity, {}) {
    for (int64_t r = 0; r < n; ++r) backends.push_back(factory.backend(r));
  }
  World world;
  std::vector<RankActivity> activity;
  BackendFactory factory;
  std::vector<std::unique_ptr<Backend>> backends;
};

// User-space instructions retired by this thread, where the machine exposes a PMU (many VMs do
// not: then every read is nullopt and no instruction counters are reported).
class InstructionCounter {
 public:
  InstructionCounter() {
    perf_event_attr attr{};
    attr.type = PERF_TYPE_HARDWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd_ = static_cast<int>(syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0));
  }
  ~InstructionCounter() {
    if (fd_ >= 0) close(fd_);
  }
  std::optional<double> read() const {
    uint64_t count = 0;
    if (fd_ < 0 || ::read(fd_, &count, sizeof count) != sizeof count) return std::nullopt;
    return static_cast<double>(count);
  }

 private:
  int fd_ = -1;
};

std::vector<std::optional<std::string>> abort_blocked(const std::vector<RankActivity>& activity) {
  std::vector<std::optional<std::string>> out(activity.size());
  for (size_t r = 0; r < activity.size(); ++r) {
    if (activity[r].state == RankActivity::State::kBlocked) out[r] = "benchmark abort";
  }
  return out;
}

// Benchmarks of the collective path use canary stacks: the same creation cost as the floor.
const WorldOptions kCanaryStacks{SchedulePolicy::kFifo, 0, kDefaultStackBytes, StackGuard::kCanary};

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

// Resident memory per rank while every rank but the last is parked in a WORLD barrier.
void BM_runtime_idle_rank_memory(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t stack = static_cast<size_t>(state.range(1)) * 1024;
  double per_rank = 0;
  for (auto _ : state) {
    SimWorld w(n, WorldOptions{SchedulePolicy::kFifo, 0, stack, guard_of(state.range(2))});
    const RankList all = world_ranks(n);
    const size_t before = resident_bytes();
    w.world.run(
        [&](int64_t r) {
          if (r == n - 1)
            per_rank = static_cast<double>(resident_bytes() - before) / static_cast<double>(n);
          w.backends[static_cast<size_t>(r)]->barrier(Group{"0", all, r});
        },
        [&] { return abort_blocked(w.activity); });
  }
  state.counters["bytes_per_idle_rank"] = per_rank;
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_idle_rank_memory)
    ->Args({16384, 64, 0})
    ->Args({16384, 64, 1})
    ->Args({16384, 16, 0})
    ->Unit(benchmark::kMillisecond);

// The cost per rank per collective of K all_reduces of one float, against the floor: K rounds of
// a plain Boost.Fiber barrier over the same number of rank fibers, timed in the same iteration.
// Arguments: world size, and the group (0: WORLD, 8: tp groups of 8 consecutive ranks). The
// benchmark's time is the all_reduce's; the counters give the floor and the ratio (and the same
// for instructions where the machine can count them).
void BM_runtime_all_reduce_vs_floor(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t group_size = state.range(1) == 0 ? n : state.range(1);
  constexpr int kRounds = 100;
  const InstructionCounter instructions;
  double floor_s = 0, op_s = 0, floor_instr = 0, op_instr = 0, allocations = 0;
  double steady_allocations = 0;
  uint64_t steady_from = 0;
  bool counted = true;
  for (auto _ : state) {
    {
      World world(n, kCanaryStacks);
      boost::fibers::barrier barrier(static_cast<size_t>(n));
      const auto i0 = instructions.read();
      const auto t0 = std::chrono::steady_clock::now();
      world.run(
          [&](int64_t) {
            for (int k = 0; k < kRounds; ++k) barrier.wait();
          },
          [] { return std::vector<std::optional<std::string>>(); });
      floor_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto i1 = instructions.read();
      counted = counted && i0 && i1;
      if (counted) floor_instr += *i1 - *i0;
    }
    SimWorld w(n, kCanaryStacks);
    // Groups as every rank holds them, built before the clock starts.
    std::vector<Group> groups;
    std::vector<RankList> lists;
    for (int64_t first = 0; first < n; first += group_size) {
      std::vector<int64_t> members;
      for (int64_t r = first; r < first + group_size; ++r) members.push_back(r);
      lists.push_back(std::make_shared<const std::vector<int64_t>>(std::move(members)));
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t index = r / group_size;
      groups.emplace_back(group_size == n ? "0" : std::to_string(1 + index),
                          lists[static_cast<size_t>(index)], r);
    }
    const uint64_t a0 = g_allocations.load();
    const auto i0 = instructions.read();
    const auto t0 = std::chrono::steady_clock::now();
    w.world.run(
        [&](int64_t r) {
          Tensor t = Tensor::full({1}, 1, DType::kFloat32);
          Backend& b = *w.backends[static_cast<size_t>(r)];
          const Group& g = groups[static_cast<size_t>(r)];
          for (int k = 0; k < kRounds; ++k) {
            b.all_reduce(t, ReduceOp::kSum, g);
            // Ranks start in order (FIFO): when the last one leaves its first round, every rank
            // has started, and what follows until the world ends is the steady state.
            if (r == n - 1 && k == 0) steady_from = g_allocations.load();
          }
          benchmark::DoNotOptimize(t);
        },
        [&] { return abort_blocked(w.activity); });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    op_s += seconds;
    allocations += static_cast<double>(g_allocations.load() - a0);
    steady_allocations += static_cast<double>(g_allocations.load() - steady_from);
    const auto i1 = instructions.read();
    counted = counted && i0 && i1;
    if (counted) op_instr += *i1 - *i0;
    state.SetIterationTime(seconds);
  }
  const double per = static_cast<double>(state.iterations() * n * kRounds);
  state.counters["floor_ns_per_rank_op"] = floor_s / per * 1e9;
  state.counters["ns_per_rank_op"] = op_s / per * 1e9;
  state.counters["ratio_to_floor"] = op_s / floor_s;
  // All of them (each rank's tensor, the first meetings), and those after every rank's first
  // round (about rounds 2..K).
  state.counters["allocations_per_rank_op"] = allocations / per;
  state.counters["steady_allocations_per_rank_op"] =
      steady_allocations / static_cast<double>(state.iterations() * n * (kRounds - 1));
  if (counted) {
    state.counters["floor_instructions_per_rank_op"] = floor_instr / per;
    state.counters["instructions_per_rank_op"] = op_instr / per;
    state.counters["instruction_ratio"] = op_instr / floor_instr;
  }
  state.SetItemsProcessed(state.iterations() * n * kRounds);
}
BENCHMARK(BM_runtime_all_reduce_vs_floor)
    ->Args({1024, 0})
    ->Args({1024, 8})
    ->Args({65536, 0})
    ->Args({65536, 8})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// N-1 ranks wait in a barrier for a rank that exited: run, detect, analyse, render text/JSON/DOT.
void BM_runtime_deadlock_report(benchmark::State& state) {
  const int64_t n = state.range(0);
  size_t report_bytes = 0;
  for (auto _ : state) {
    SimWorld w(n);
    const RankList all = world_ranks(n);
    auto& activity = w.activity;
    w.world.run(
        [&](int64_t r) {
          try {
            if (r != n / 2) w.backends[static_cast<size_t>(r)]->barrier(Group{"0", all, r});
            activity[static_cast<size_t>(r)].state = RankActivity::State::kFinished;
          } catch (const RankAborted&) {
            forget_unwound_frames();
            activity[static_cast<size_t>(r)].state = RankActivity::State::kAborted;
          }
        },
        [&] {
          const HangReport report =
              analyze_hang(activity, w.factory.rendezvous(), w.factory.timeout());
          report_bytes =
              hang_text(report).size() + hang_json(report).dump().size() + hang_dot(report).size();
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
    const RankList all = world_ranks(n);
    w.world.run(
        [&](int64_t r) {
          Tensor t({1 << 14, 1 << 14}, DType::kFloat32, Tensor::Storage::kMeta);
          w.backends[static_cast<size_t>(r)]->all_reduce(t, ReduceOp::kSum, Group{"0", all, r});
        },
        [&] { return abort_blocked(w.activity); });
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_runtime_meta_world)->Arg(65536)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
