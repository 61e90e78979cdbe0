// Injected faults: a rank that crashes, stalls (in virtual time), sees a backend error or overflows
// its fiber stack (to see how meshsim reports that), at a given step of its program or at its k-th
// collective. Declared in a scenario or drawn from a
// seed; either way the same run happens every time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/source_location.hpp"

namespace meshsim::sim {

struct Fault {
  enum class Kind { kCrash, kStall, kBackendError, kStackOverflow };
  enum class Trigger { kStep, kCollective };
  Kind kind = Kind::kCrash;
  int64_t rank = 0;
  Trigger trigger = Trigger::kCollective;
  int64_t index = 1;     // 1-based: the k-th step of the program, or the rank's k-th collective
  double seconds = 0.0;  // stall length
  SourceLocation where;  // the [[fault]] entry, or the seed that drew it

  // "crash rank 2 at its collective 3", for reports.
  std::string describe() const;
};

// A crash kills the rank on the spot: no exception handling in the program sees it.
struct InjectedCrash {
  std::string what;
};

// Recurses on the calling fiber until its stack overflows; the crash handler then stops the
// process (in a child process per scenario, the run goes on).
[[noreturn]] void overflow_fiber_stack();

// Draws `count` faults from `seed` (splitmix64): kind, rank in [0, world), collective 1..4,
// stalls of 700 s (past the default watchdog).
std::vector<Fault> draw_faults(uint64_t seed, int64_t world_size, int count = 1);

// The faults of `rank` that fire at trigger (kind, index).
std::vector<const Fault*> faults_at(const std::vector<Fault>& faults, int64_t rank,
                                    Fault::Trigger trigger, int64_t index);

}  // namespace meshsim::sim
