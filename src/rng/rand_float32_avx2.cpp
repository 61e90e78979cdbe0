// torch.rand in float32 with AVX2, eight threads of the kernel at once: the same floats as the
// element-by-element model in cuda_random_kernel.cpp (which checks the CPU before calling this).
#include "src/rng/philox8_avx2.hpp"

namespace meshsim::detail {

namespace {

// curand_uniform of eight words: RN(x) * 2^-32 + 2^-33, and 1.0 mapped to 0.0 (torch.rand's
// [0, 1)). AVX2 converts signed words only: words of 2^31 and above are halved with the lost bit
// kept as a sticky bit (it lies below the rounding point there, so they round the same way), and
// doubled back exactly.
__attribute__((target("avx2"))) inline __m256 rand_of(__m256i x) {
  const __m256i half =
      _mm256_or_si256(_mm256_srli_epi32(x, 1), _mm256_and_si256(x, _mm256_set1_epi32(1)));
  const __m256 large = _mm256_mul_ps(_mm256_cvtepi32_ps(half), _mm256_set1_ps(2.0f));
  const __m256 small = _mm256_cvtepi32_ps(x);
  const __m256 value = _mm256_blendv_ps(small, large, _mm256_castsi256_ps(x));  // by the top bit
  const __m256 u =
      _mm256_add_ps(_mm256_mul_ps(value, _mm256_set1_ps(0x1p-32f)), _mm256_set1_ps(0x1p-33f));
  return _mm256_andnot_ps(_mm256_cmp_ps(u, _mm256_set1_ps(1.0f), _CMP_EQ_OQ), u);
}

}  // namespace

// The `numel` floats of one launch (threads `stride`, a multiple of 256; four floats per thread
// and call), drawing call k from Philox block first_block + k.
__attribute__((target("avx2"), flatten)) void rand_float32_avx2(uint64_t seed, uint64_t first_block,
                                                                uint64_t stride, uint64_t numel,
                                                                float* out) {
  const PhiloxKey key = philox_key(seed);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (uint64_t call = 0, base = 0; base < numel; ++call, base += 4 * stride) {
    const uint64_t block = first_block + call;
    for (uint64_t t = 0; t < stride && base + t < numel; t += 8) {
      // Threads t .. t + 7: stride < 2^32, so their counters differ in the low word only.
      __m256i c0 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block)));
      __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block >> 32)));
      __m256i c2 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(t)), lanes);
      __m256i c3 = _mm256_setzero_si256();
      philox_rounds<Avx2Lanes>(c0, c1, c2, c3, key);
      const __m256i words[4] = {c0, c1, c2, c3};
      for (uint64_t ii = 0; ii < 4; ++ii) {
        const uint64_t first = base + ii * stride + t;
        if (first >= numel) break;
        const __m256 values = rand_of(words[ii]);
        if (first + 8 <= numel) {
          _mm256_storeu_ps(out + first, values);
        } else {
          alignas(32) float tail[8];
          _mm256_store_ps(tail, values);
          for (uint64_t j = 0; first + j < numel; ++j) out[first + j] = tail[j];
        }
      }
    }
  }
}

}  // namespace meshsim::detail
