// torch.rand in float32 with AVX-512, sixteen threads of the kernel at once: the same floats as
// the AVX2 and element-by-element paths (cuda_random_kernel.cpp checks the CPU first).
#include <cstdint>

// g++ 12 reports its own AVX-512 intrinsics (their "undefined" pass-through operands) as maybe
// uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "src/rng/philox_rounds.hpp"

namespace meshsim::detail {

namespace {

#define MESHSIM_AVX512 __attribute__((target("avx512f")))

struct Avx512Lanes {
  MESHSIM_AVX512 static void mul_hi_lo(const __m512i& a, uint32_t m, __m512i& hi, __m512i& lo) {
    const __m512i mm = _mm512_set1_epi32(static_cast<int>(m));
    const __m512i even = _mm512_mul_epu32(a, mm);
    const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mm);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  }
  MESHSIM_AVX512 static void xor3(const __m512i& a, const __m512i& b, uint32_t word, __m512i& out) {
    out = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_set1_epi32(static_cast<int>(word)));
  }
};

// curand_uniform with 1.0 mapped to 0.0 (AVX-512 converts unsigned words directly).
MESHSIM_AVX512 inline __m512 rand_of(__m512i x) {
  const __m512 value = _mm512_cvtepu32_ps(x);
  const __m512 u =
      _mm512_add_ps(_mm512_mul_ps(value, _mm512_set1_ps(0x1p-32f)), _mm512_set1_ps(0x1p-33f));
  const __mmask16 one = _mm512_cmp_ps_mask(u, _mm512_set1_ps(1.0f), _CMP_EQ_OQ);
  return _mm512_mask_blend_ps(one, u, _mm512_setzero_ps());
}

}  // namespace

// As rand_float32_avx2; `stride` a multiple of 256.
__attribute__((target("avx512f"), flatten)) void rand_float32_avx512(uint64_t seed,
                                                                     uint64_t first_block,
                                                                     uint64_t stride,
                                                                     uint64_t numel, float* out) {
  const PhiloxKey key = philox_key(seed);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (uint64_t call = 0, base = 0; base < numel; ++call, base += 4 * stride) {
    const uint64_t block = first_block + call;
    for (uint64_t t = 0; t < stride && base + t < numel; t += 16) {
      __m512i c0 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(block)));
      __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(block >> 32)));
      __m512i c2 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(t)), lanes);
      __m512i c3 = _mm512_setzero_si512();
      philox_rounds<Avx512Lanes>(c0, c1, c2, c3, key);
      const __m512i words[4] = {c0, c1, c2, c3};
      for (uint64_t ii = 0; ii < 4; ++ii) {
        const uint64_t first = base + ii * stride + t;
        if (first >= numel) break;
        const __m512 values = rand_of(words[ii]);
        if (first + 16 <= numel) {
          _mm512_storeu_ps(out + first, values);
        } else {
          const auto mask = static_cast<__mmask16>((1u << (numel - first)) - 1);
          _mm512_mask_storeu_ps(out + first, mask, values);
        }
      }
    }
  }
}

#undef MESHSIM_AVX512

}  // namespace meshsim::detail
