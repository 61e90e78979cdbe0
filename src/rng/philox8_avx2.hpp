// Philox4x32-10 on eight counters in AVX2 registers, shared by the AVX2 paths (include only from
// files whose callers check the CPU first). Callers are target("avx2") and `flatten`.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "src/rng/philox_rounds.hpp"

namespace meshsim::detail {

#define MESHSIM_AVX2 __attribute__((target("avx2")))

struct Avx2Lanes {
  MESHSIM_AVX2 static void mul_hi_lo(const __m256i& a, uint32_t m, __m256i& hi, __m256i& lo) {
    const __m256i mm = _mm256_set1_epi32(static_cast<int>(m));
    const __m256i even = _mm256_mul_epu32(a, mm);                        // lanes 0, 2, 4, 6
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mm);  // lanes 1, 3, 5, 7
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  }
  MESHSIM_AVX2 static void xor3(const __m256i& a, const __m256i& b, uint32_t word, __m256i& out) {
    out = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_set1_epi32(static_cast<int>(word)));
  }
};

#undef MESHSIM_AVX2

}  // namespace meshsim::detail
