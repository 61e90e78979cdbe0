// Philox4x32-10 on eight counters at once with AVX2: the same bits as the scalar rounds in
// philox.cpp, for CPUs that have AVX2 (philox.cpp asks the CPU before calling this).
#include <immintrin.h>

#include "src/rng/philox.hpp"

namespace meshsim::detail {

namespace {

// The high and low 32 bits of the eight 32 x 32-bit products a * m, lane by lane.
__attribute__((target("avx2"))) inline void multiply(__m256i a, __m256i m, __m256i& hi,
                                                     __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

}  // namespace

// Blocks first .. first + blocks - 1 of one subsequence; `blocks` a multiple of 8.
__attribute__((target("avx2"))) void curand_blocks_avx2(uint64_t seed, uint64_t subsequence,
                                                        uint64_t first, uint64_t blocks,
                                                        uint32_t* out) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const PhiloxKey key = philox_key(seed);
  const __m256i sub_lo = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence)));
  const __m256i sub_hi =
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence >> 32)));
  for (uint64_t done = 0; done < blocks; done += 8) {
    alignas(32) uint32_t lo_words[8], hi_words[8];
    for (int j = 0; j < 8; ++j) {
      const uint64_t block = first + done + static_cast<uint64_t>(j);
      lo_words[j] = static_cast<uint32_t>(block);
      hi_words[j] = static_cast<uint32_t>(block >> 32);
    }
    __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_words));
    __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_words));
    __m256i c2 = sub_lo, c3 = sub_hi;
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      __m256i hi0, lo0, hi1, lo1;
      multiply(c0, m0, hi0, lo0);
      multiply(c2, m1, hi1, lo1);
      const __m256i n0 =
          _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      const __m256i n2 =
          _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
    }
    // Eight blocks of four words, lane by lane, into block order.
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i* dst = reinterpret_cast<__m256i*>(out + 4 * done);
    _mm256_storeu_si256(dst + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(dst + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(dst + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
}

}  // namespace meshsim::detail
