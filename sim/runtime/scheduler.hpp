// A Boost.Fiber scheduling algorithm that makes every scheduling decision reproducible: FIFO, or a
// seeded permutation of the ready queue. Rank fibers always run before the driver (main) fiber,
// so the driver runs exactly when no rank can make progress.
#pragma once

#include <cstdint>

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/context.hpp>
#include <boost/fiber/properties.hpp>
#include "sim/runtime/ready_queue.hpp"
#include "src/enum_names.hpp"
#include "src/fnv1a.hpp"

namespace meshsim::sim {

enum class SchedulePolicy { kFifo, kRandom };
// As `meshsim run --schedule` names them.
inline constexpr EnumName<SchedulePolicy> kSchedulePolicyNames[] = {
    {SchedulePolicy::kFifo, "fifo"},
    {SchedulePolicy::kRandom, "random"},
};

// Set on each rank fiber right after it is created.
class RankProps : public boost::fibers::fiber_properties {
 public:
  using boost::fibers::fiber_properties::fiber_properties;
  int64_t rank = -1;
};

// What the scheduler tells its owner: how many rank fibers are ready, and a digest of every
// decision (the rank picked, in order), so two runs can be compared cheaply.
struct ScheduleLog {
  size_t ready_ranks = 0;
  uint64_t decisions = 0;
  uint64_t digest = kFnv1aOffset;
  void record(int64_t rank);
};

class DeterministicScheduler final
    : public boost::fibers::algo::algorithm_with_properties<RankProps> {
 public:
  DeterministicScheduler(SchedulePolicy policy, uint64_t seed, ScheduleLog* log)
      : policy_(policy), seed_(seed), log_(log) {}

  void awakened(boost::fibers::context* ctx, RankProps& props) noexcept override;
  boost::fibers::context* pick_next() noexcept override;
  bool has_ready_fibers() const noexcept override;
  // Everything runs on one thread and no rank waits on wall-clock time: nothing to wait for.
  void suspend_until(std::chrono::steady_clock::time_point const&) noexcept override {}
  void notify() noexcept override {}

 private:
  SchedulePolicy policy_;
  uint64_t seed_;
  ScheduleLog* log_;
  // Each ready rank with its number as it was awakened: reading it back from the context's
  // properties when picked cost a cache miss or two per switch.
  struct ReadyRank {
    boost::fibers::context* context = nullptr;
    int64_t rank = -1;  // -1: a new fiber, awakened before its number was set
  };
  ReadyQueue<ReadyRank> ranks_;
  ReadyQueue<boost::fibers::context*> others_;  // main and dispatcher contexts
  int64_t running_ = -1;                        // the rank picked last, -1 for the driver
};

// splitmix64 of (seed, n): the documented mix behind random schedules and fault draws.
uint64_t mix64(uint64_t seed, uint64_t n);

}  // namespace meshsim::sim
