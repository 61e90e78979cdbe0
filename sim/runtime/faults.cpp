#include "sim/runtime/faults.hpp"

#include <fmt/format.h>

#include "sim/runtime/scheduler.hpp"

namespace meshsim::sim {

std::string Fault::describe() const {
  const std::string at = trigger == Trigger::kStep ? fmt::format("step {}", index)
                                                   : fmt::format("its collective {}", index);
  switch (kind) {
    case Kind::kCrash:
      return fmt::format("crash rank {} at {}", rank, at);
    case Kind::kStall:
      return fmt::format("stall rank {} for {} s at {}", rank, seconds, at);
    case Kind::kBackendError:
      return fmt::format("backend error on rank {} at {}", rank, at);
    case Kind::kStackOverflow:
      return fmt::format("stack overflow on rank {} at {}", rank, at);
  }
  return "?";
}

namespace {

// Each call keeps a written frame of 1 KiB alive; the volatile limit (never reached) keeps the
// recursion from being a provable infinite loop, and the sum from being a tail call.
volatile int64_t g_depth_limit = INT64_MAX;

__attribute__((noinline)) int64_t descend(int64_t depth) {
  volatile char frame[1024];
  for (size_t i = 0; i < sizeof(frame); i += 64) frame[i] = static_cast<char>(depth);
  if (depth >= g_depth_limit) return frame[0];
  return descend(depth + 1) + frame[depth % 1024];
}

}  // namespace

void overflow_fiber_stack() {
  if (descend(0) != 0) __builtin_trap();  // unreachable: only the crash handler ends it
  __builtin_trap();
}

std::vector<Fault> draw_faults(uint64_t seed, int64_t world_size, int count) {
  std::vector<Fault> out;
  for (int i = 0; i < count; ++i) {
    const auto n = static_cast<uint64_t>(i) * 4;
    Fault f;
    f.kind = static_cast<Fault::Kind>(mix64(seed, n) % 3);
    f.rank = static_cast<int64_t>(mix64(seed, n + 1) % static_cast<uint64_t>(world_size));
    f.trigger = Fault::Trigger::kCollective;
    f.index = 1 + static_cast<int64_t>(mix64(seed, n + 2) % 4);
    f.seconds = f.kind == Fault::Kind::kStall ? 700.0 : 0.0;
    f.where = SourceLocation{fmt::format("--faults-seed {}", seed), 0, 0};
    out.push_back(f);
  }
  return out;
}

std::vector<const Fault*> faults_at(const std::vector<Fault>& faults, int64_t rank,
                                    Fault::Trigger trigger, int64_t index) {
  std::vector<const Fault*> out;
  for (const Fault& f : faults) {
    if (f.rank == rank && f.trigger == trigger && f.index == index) out.push_back(&f);
  }
  return out;
}

}  // namespace meshsim::sim
