#include "src/rng/philox.hpp"

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"
#include "src/rng/philox_rounds.hpp"

namespace meshsim {

namespace detail {
void curand_blocks_avx2(uint64_t seed, uint64_t subsequence, uint64_t first, uint64_t blocks,
                        uint32_t* out);
void curand_threads_avx2(uint64_t seed, uint64_t block, uint64_t first_thread,
                         uint32_t (&out)[4][8]);
}  // namespace detail

namespace {

PhiloxCounter counter_of(uint64_t block, uint64_t subsequence) {
  return {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
          static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)};
}

}  // namespace

PhiloxBlock philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  philox_rounds<ScalarLanes>(counter[0], counter[1], counter[2], counter[3], key);
  return counter;
}

PhiloxBlock curand_block(uint64_t seed, uint64_t subsequence, uint64_t block) {
  return philox4x32_10(counter_of(block, subsequence), philox_key(seed));
}

uint32_t curand_word(uint64_t seed, uint64_t subsequence, uint64_t offset) {
  return curand_block(seed, subsequence, offset / 4)[offset % 4];
}

PhiloxPath best_philox_path() {
  static const PhiloxPath best = __builtin_cpu_supports("avx512f") ? PhiloxPath::kAvx512
                                 : __builtin_cpu_supports("avx2")  ? PhiloxPath::kAvx2
                                                                   : PhiloxPath::kScalar;
  return best;
}

constexpr EnumName<PhiloxPath> kPhiloxPathNames[] = {
    {PhiloxPath::kAvx512, "avx512"},
    {PhiloxPath::kAvx2, "avx2"},
    {PhiloxPath::kScalar, "scalar"},
};

std::string_view philox_path_name(PhiloxPath path) {
  return name_in(kPhiloxPathNames, path);
}

void curand_blocks(uint64_t seed, uint64_t subsequence, uint64_t first_block,
                   std::span<uint32_t> out, PhiloxPath path) {
  MESHSIM_ASSERT(out.size() % 4 == 0, fmt::format("{} words is not whole blocks", out.size()));
  const uint64_t blocks = out.size() / 4;
  uint64_t done = 0;
  if (path != PhiloxPath::kScalar) {
    if (!__builtin_cpu_supports("avx2")) throw value_error("this CPU has no AVX2");
    done = blocks - blocks % 8;
    if (done > 0) detail::curand_blocks_avx2(seed, subsequence, first_block, done, out.data());
  }
  for (; done < blocks; ++done) {
    const PhiloxBlock b = curand_block(seed, subsequence, first_block + done);
    for (size_t w = 0; w < 4; ++w) out[4 * done + w] = b[w];
  }
}

void curand_threads(uint64_t seed, uint64_t block, uint64_t first_thread, uint32_t (&out)[4][8],
                    PhiloxPath path) {
  if (path != PhiloxPath::kScalar) {
    if (!__builtin_cpu_supports("avx2")) throw value_error("this CPU has no AVX2");
    detail::curand_threads_avx2(seed, block, first_thread, out);
    return;
  }
  for (size_t j = 0; j < 8; ++j) {
    const PhiloxBlock b = curand_block(seed, first_thread + j, block);
    for (size_t w = 0; w < 4; ++w) out[w][j] = b[w];
  }
}

uint32_t curand_host_word(uint64_t seed, uint64_t index) {
  // Blocks are dealt across 65,536 subsequences first: block b is subsequence b % 65536, at
  // position b / 65536 of it, with the subsequence in the counter's third word only.
  const uint64_t block = index / 4;
  const PhiloxCounter counter{static_cast<uint32_t>(block / 65536),
                              static_cast<uint32_t>((block / 65536) >> 32),
                              static_cast<uint32_t>(block % 65536), 0};
  return philox4x32_10(counter, philox_key(seed))[index % 4];
}

}  // namespace meshsim
