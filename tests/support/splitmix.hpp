// A documented, portable random generator for property tests (std distributions are
// implementation-defined, so a seed would not give the same cases everywhere).
#pragma once

#include <cstdint>

namespace meshsim::testing {

// splitmix64.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for test cases.
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

}  // namespace meshsim::testing
