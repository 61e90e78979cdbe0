// A world of N ranks, each a Boost.Fiber fiber on the calling thread. Ranks block only through
// the world (park/wake), so when no rank is ready the world knows the program is stuck.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/rank_stacks.hpp"
#include "sim/runtime/scheduler.hpp"

namespace meshsim::sim {

// The fiber stack each rank gets unless told otherwise (`--stack-kib`).
inline constexpr size_t kDefaultStackBytes = 64 * 1024;

struct WorldOptions {
  SchedulePolicy policy = SchedulePolicy::kFifo;
  uint64_t seed = 0;
  // Bytes per fiber stack, and how an overflow is caught (rank_stacks.hpp).
  size_t stack_size = kDefaultStackBytes;
  StackGuard stack_guard = StackGuard::kAuto;
};

// Thrown inside a parked rank when the world aborts it; the rank's body lets it propagate.
struct RankAborted {
  std::string reason;
};

class World {
 public:
  explicit World(int64_t size, WorldOptions options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int64_t size() const { return size_; }

  // Runs `body(rank)` on every rank. Whenever no rank can run but some have not returned,
  // `on_stall()` is called on the driver; it returns, per parked rank, why it is aborted (empty
  // to leave it parked, which is only sound if on_stall woke someone). Returns when every body
  // has returned. Bodies must not let exceptions other than RankAborted escape.
  void run(const std::function<void(int64_t)>& body,
           const std::function<std::vector<std::optional<std::string>>()>& on_stall);

  // Parks the calling rank until wake(rank); throws RankAborted if the world aborts it.
  void park(int64_t rank);
  void wake(int64_t rank);
  bool is_parked(int64_t rank) const;

  const ScheduleLog& schedule() const { return log_; }
  const RankStacks& stacks() const { return stacks_; }

 private:
  struct Parker;
  // Hands a parked rank's fiber to the scheduler, once, however often it is woken or aborted.
  static void resume_later(Parker& p);

  int64_t size_;
  WorldOptions options_;
  ScheduleLog log_;
  RankStacks stacks_;
  std::vector<std::unique_ptr<Parker>> parkers_;
};

}  // namespace meshsim::sim
