// Philox4x32-10 rounds on eight counters in AVX2 registers, shared by the AVX2 paths (include
// only from files whose callers check the CPU first).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "src/rng/philox.hpp"

namespace meshsim::detail {

// The high and low 32 bits of the eight 32 x 32-bit products a * m, lane by lane.
__attribute__((target("avx2"))) inline void multiply8(__m256i a, __m256i m, __m256i& hi,
                                                      __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Ten rounds on the counters (c0, c1, c2, c3), lane by lane, under `key`.
__attribute__((target("avx2"))) inline void philox8(__m256i& c0, __m256i& c1, __m256i& c2,
                                                    __m256i& c3, PhiloxKey key) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    __m256i hi0, lo0, hi1, lo1;
    multiply8(c0, m0, hi0, lo0);
    multiply8(c2, m1, hi1, lo1);
    const __m256i n0 =
        _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i n2 =
        _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
}

}  // namespace meshsim::detail
