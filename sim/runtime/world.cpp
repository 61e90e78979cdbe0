#include "sim/runtime/world.hpp"

#include <boost/fiber/all.hpp>

#include "sim/runtime/crash_handler.hpp"

#include "src/error.hpp"

namespace meshsim::sim {

// A parked rank is a suspended fiber context; waking it hands that context straight to the
// scheduler. All ranks run on one thread, so no lock is needed, and none is taken.
struct World::Parker {
  boost::fibers::context* context = nullptr;
  bool parked = false;
  bool scheduled = false;  // handed to the scheduler, not yet resumed
  bool woken = false;
  std::optional<std::string> abort_reason;
};

void World::resume_later(Parker& p) {
  if (!p.parked || p.scheduled) return;
  p.scheduled = true;
  boost::fibers::context::active()->schedule(p.context);
}

World::World(int64_t size, WorldOptions options)
    : size_(size), options_(options), stacks_(size, options.stack_size, options.stack_guard) {
  parkers_.reserve(static_cast<size_t>(size));
  for (int64_t r = 0; r < size; ++r) parkers_.push_back(std::make_unique<Parker>());
}

World::~World() = default;

void World::park(int64_t rank) {
  Parker& p = *parkers_[static_cast<size_t>(rank)];
  p.context = boost::fibers::context::active();
  p.parked = true;
  while (!p.woken && !p.abort_reason) {
    p.context->suspend();
    p.scheduled = false;
  }
  p.parked = false;
  p.woken = false;
  if (p.abort_reason) throw RankAborted{*p.abort_reason};
}

void World::wake(int64_t rank) {
  Parker& p = *parkers_[static_cast<size_t>(rank)];
  p.woken = true;
  resume_later(p);
}

bool World::is_parked(int64_t rank) const {
  return parkers_[static_cast<size_t>(rank)]->parked;
}

void World::run(const std::function<void(int64_t)>& body,
                const std::function<std::vector<std::optional<std::string>>()>& on_stall) {
  log_ = ScheduleLog{};
  stacks_.prepare();  // may throw; no fiber exists yet
  crash::install_handlers();
  boost::fibers::use_scheduling_algorithm<DeterministicScheduler>(options_.policy, options_.seed,
                                                                  &log_);
  int64_t live = size_;
  std::vector<boost::fibers::fiber> fibers;
  fibers.reserve(static_cast<size_t>(size_));
  for (int64_t r = 0; r < size_; ++r) {
    fibers.emplace_back(std::allocator_arg, stacks_.allocator(r), [&, r] {
      body(r);
      --live;
    });
    fibers.back().properties<RankProps>().rank = r;
  }
  while (live > 0) {
    boost::this_fiber::yield();
    if (live == 0 || log_.ready_ranks > 0) continue;
    const std::vector<std::optional<std::string>> aborts = on_stall();
    bool changed = false;
    for (int64_t r = 0; r < size_; ++r) {
      const auto& reason = aborts.at(static_cast<size_t>(r));
      if (!reason || !is_parked(r)) continue;
      Parker& p = *parkers_[static_cast<size_t>(r)];
      p.abort_reason = *reason;
      resume_later(p);
      changed = true;
    }
    MESHSIM_ASSERT(changed || log_.ready_ranks > 0,
                   "the world is stuck and on_stall neither aborted nor woke a rank");
  }
  for (auto& f : fibers) f.join();
  for (auto& p : parkers_) *p = Parker{};
}

}  // namespace meshsim::sim
