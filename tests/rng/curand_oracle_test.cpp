// meshsim's Philox against cuRAND itself: the device API from curand_kernel.h compiled for this
// CPU, and libcurand's host generator. Built only where the CUDA toolkit is found.
#include <catch2/catch.hpp>

#include <vector>

// curand_kernel.h compiles for the host once its functions are plain inline functions.
#define QUALIFIERS static inline
#include <curand.h>
#include <curand_kernel.h>

#include "src/rng/philox.hpp"
#include "tests/splitmix.hpp"

TEST_CASE(
    "curand oracle: the device API gives meshsim's words for random seeds, threads and "
    "offsets",
    "[rng][curand]") {
  meshsim::testing::SplitMix rng{2026};
  for (int i = 0; i < 2000; ++i) {
    const uint64_t seed = rng.next();
    // Subsequences and offsets as large as cuRAND takes them, and small ones as kernels use.
    const uint64_t sub = i % 2 ? rng.next() : rng.next() % 300000;
    const uint64_t offset = i % 3 ? rng.next() >> 2 : rng.next() % 4096;
    curandStatePhilox4_32_10_t state;
    curand_init(seed, sub, offset, &state);
    for (uint64_t w = 0; w < 9; ++w) {
      INFO("seed " << seed << " subsequence " << sub << " offset " << offset << " word " << w);
      REQUIRE(curand(&state) == meshsim::curand_word(seed, sub, offset + w));
    }
    // curand4 after an offset that is a multiple of 4: one whole block.
    curand_init(seed, sub, offset & ~uint64_t{3}, &state);
    const uint4 v = curand4(&state);
    const meshsim::PhiloxBlock b = meshsim::curand_block(seed, sub, offset / 4);
    REQUIRE(meshsim::PhiloxBlock{v.x, v.y, v.z, v.w} == b);
  }
}

TEST_CASE("curand oracle: the host generator's stream, offsets and successive calls",
          "[rng][curand]") {
  meshsim::testing::SplitMix rng{11};
  for (int i = 0; i < 40; ++i) {
    const uint64_t seed = rng.next();
    const uint64_t offset = i % 2 ? rng.next() % (uint64_t{1} << 40) : rng.next() % 1000;
    curandGenerator_t gen;
    REQUIRE(curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) ==
            CURAND_STATUS_SUCCESS);
    REQUIRE(curandSetPseudoRandomGeneratorSeed(gen, seed) == CURAND_STATUS_SUCCESS);
    REQUIRE(curandSetGeneratorOffset(gen, offset) == CURAND_STATUS_SUCCESS);
    // Two calls: the second continues exactly where the first stopped.
    std::vector<unsigned int> first(1000 + static_cast<size_t>(rng.below(400000))), second(517);
    REQUIRE(curandGenerate(gen, first.data(), first.size()) == CURAND_STATUS_SUCCESS);
    REQUIRE(curandGenerate(gen, second.data(), second.size()) == CURAND_STATUS_SUCCESS);
    curandDestroyGenerator(gen);
    for (size_t e = 0; e < first.size(); e += 1 + e / 64) {
      INFO("seed " << seed << " offset " << offset << " element " << e);
      REQUIRE(first[e] == meshsim::curand_host_word(seed, offset + e));
    }
    for (size_t e = 0; e < second.size(); ++e) {
      REQUIRE(second[e] == meshsim::curand_host_word(seed, offset + first.size() + e));
    }
  }
}
