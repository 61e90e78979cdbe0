// Philox4x32-10 on eight counters at once with AVX2: the same bits as the scalar rounds in
// philox.cpp, for CPUs that have AVX2 (philox.cpp asks the CPU before calling this).
#include "src/rng/philox8_avx2.hpp"

namespace meshsim::detail {

// Blocks first .. first + blocks - 1 of one subsequence; `blocks` a multiple of 8.
__attribute__((target("avx2"), flatten)) void curand_blocks_avx2(uint64_t seed,
                                                                 uint64_t subsequence,
                                                                 uint64_t first, uint64_t blocks,
                                                                 uint32_t* out) {
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
    philox_rounds<Avx2Lanes>(c0, c1, c2, c3, key);
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

// Block `block` of the eight subsequences first_thread .. first_thread + 7, planar: out[w][j] is
// word w of thread first_thread + j (how a kernel's neighbouring threads draw).
__attribute__((target("avx2"), flatten)) void curand_threads_avx2(uint64_t seed, uint64_t block,
                                                                  uint64_t first_thread,
                                                                  uint32_t (&out)[4][8]) {
  alignas(32) uint32_t lo_words[8], hi_words[8];
  for (int j = 0; j < 8; ++j) {
    const uint64_t thread = first_thread + static_cast<uint64_t>(j);
    lo_words[j] = static_cast<uint32_t>(thread);
    hi_words[j] = static_cast<uint32_t>(thread >> 32);
  }
  __m256i c0 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block)));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block >> 32)));
  __m256i c2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_words));
  __m256i c3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_words));
  philox_rounds<Avx2Lanes>(c0, c1, c2, c3, philox_key(seed));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[0]), c0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[1]), c1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[2]), c2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[3]), c3);
}

}  // namespace meshsim::detail
