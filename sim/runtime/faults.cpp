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
  }
  return "?";
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
