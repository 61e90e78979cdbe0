// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11): the counter-based generator behind
// cuRAND's default device generator and so behind PyTorch's CUDA random ops, and the two ways
// cuRAND lays its output out (docs/rng.md section 2).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace meshsim {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;
using PhiloxBlock = std::array<uint32_t, 4>;

// Ten rounds of Philox4x32 on `counter` under `key`.
PhiloxBlock philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The key cuRAND derives from a 64-bit seed: (low word, high word).
constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// The device API: after curand_init(seed, subsequence, offset) with offset a multiple of 4, the
// k-th curand4() returns curand_block(seed, subsequence, offset / 4 + k).
PhiloxBlock curand_block(uint64_t seed, uint64_t subsequence, uint64_t block);

// The device API one word at a time: the value of the first curand() after
// curand_init(seed, subsequence, offset), for any offset.
uint32_t curand_word(uint64_t seed, uint64_t subsequence, uint64_t offset);

// How Philox is computed: one counter at a time, eight with AVX2, or sixteen with AVX-512 (only
// torch.rand prediction has an AVX-512 path; the word functions use AVX2 there). All give the
// same bits.
enum class PhiloxPath { kScalar, kAvx2, kAvx512 };
// The fastest path this CPU runs.
PhiloxPath best_philox_path();
std::string_view philox_path_name(PhiloxPath path);

// Blocks first_block, first_block + 1, ... of one subsequence, four words each, in order: the
// words successive curand4() calls return after curand_init(seed, subsequence, 4 * first_block).
// `out.size()` must be a multiple of 4. Throws meshsim::Error (ValueError) for kAvx2 on a CPU
// without AVX2.
void curand_blocks(uint64_t seed, uint64_t subsequence, uint64_t first_block,
                   std::span<uint32_t> out, PhiloxPath path = best_philox_path());

// Block `block` of the eight subsequences first_thread, first_thread + 1, ..., planar: out[w][j]
// is word w of subsequence first_thread + j. What eight neighbouring threads of a CUDA kernel
// draw in one curand4 call; AVX2 where the CPU has it.
void curand_threads(uint64_t seed, uint64_t block, uint64_t first_thread, uint32_t (&out)[4][8],
                    PhiloxPath path = best_philox_path());

// The host generator (curandCreateGeneratorHost with CURAND_RNG_PSEUDO_PHILOX4_32_10): element
// `index` of the stream it produces for `seed` (generator offset included in `index`).
uint32_t curand_host_word(uint64_t seed, uint64_t index);

}  // namespace meshsim
