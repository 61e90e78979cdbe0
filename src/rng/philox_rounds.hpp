// The ten rounds of Philox4x32-10, written once over the lanes they run in: one counter in plain
// 32-bit words, or eight (AVX2) or sixteen (AVX-512) counters in vector registers. A lane type's
// operations carry its CPU target; a caller built for that target is marked `flatten`, so that the
// rounds and the operations inline into it (a function without the target could not inline the
// target's intrinsics).
#pragma once

#include <cstdint>

#include "src/rng/philox.hpp"

namespace meshsim {

inline constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxKeyIncrement0 = 0x9E3779B9u;  // the golden ratio
inline constexpr uint32_t kPhiloxKeyIncrement1 = 0xBB67AE85u;  // sqrt(3) - 1

// `Lanes` provides, for its word type V: splat(word, out), every lane set to `word`;
// mul_hi_lo(a, word, hi, lo), the high and low halves of each lane's 32 x 32-bit product with
// `word`; xor3(a, b, word, out), a ^ b ^ word lane by lane.
template <typename Lanes, typename V>
inline void philox_round(V& c0, V& c1, V& c2, V& c3, uint32_t k0, uint32_t k1) {
  V hi0, lo0, hi1, lo1, n0, n2;
  Lanes::mul_hi_lo(c0, kPhiloxMultiplier0, hi0, lo0);
  Lanes::mul_hi_lo(c2, kPhiloxMultiplier1, hi1, lo1);
  Lanes::xor3(hi1, c1, k0, n0);
  Lanes::xor3(hi0, c3, k1, n2);
  c0 = n0;
  c1 = lo1;
  c2 = n2;
  c3 = lo0;
}

template <typename Lanes, typename V>
inline void philox_rounds(V& c0, V& c1, V& c2, V& c3, PhiloxKey key) {
  uint32_t k0 = key[0], k1 = key[1];
  philox_round<Lanes>(c0, c1, c2, c3, k0, k1);
  for (int round = 1; round < 10; ++round) {
    k0 += kPhiloxKeyIncrement0;
    k1 += kPhiloxKeyIncrement1;
    philox_round<Lanes>(c0, c1, c2, c3, k0, k1);
  }
}

// One counter.
struct ScalarLanes {
  static void mul_hi_lo(uint32_t a, uint32_t m, uint32_t& hi, uint32_t& lo) {
    const uint64_t p = static_cast<uint64_t>(a) * m;
    hi = static_cast<uint32_t>(p >> 32);
    lo = static_cast<uint32_t>(p);
  }
  static void xor3(uint32_t a, uint32_t b, uint32_t word, uint32_t& out) { out = a ^ b ^ word; }
};

}  // namespace meshsim
