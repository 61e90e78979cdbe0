#include "src/rng/philox.hpp"

#include <catch2/catch.hpp>

#include <vector>

#include "tests/support/splitmix.hpp"

using meshsim::PhiloxBlock;

TEST_CASE("philox: Random123's known answers (docs/rng.md 2.1)", "[rng][philox]") {
  CHECK(meshsim::philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
        PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(meshsim::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                               {0xffffffff, 0xffffffff}) ==
        PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(meshsim::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                               {0xa4093822, 0x299f31d0}) ==
        PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("philox: cuRAND's device layout puts the block in the counter's low words",
          "[rng][philox]") {
  // Seed 0, subsequence 0, block 0 is the all-zero counter and key.
  CHECK(meshsim::curand_block(0, 0, 0) == meshsim::philox4x32_10({0, 0, 0, 0}, {0, 0}));
  meshsim::testing::SplitMix rng{8};
  for (int i = 0; i < 1000; ++i) {
    const uint64_t seed = rng.next(), sub = rng.next(), block = rng.next() >> 2;  // 4 * block fits
    const PhiloxBlock b = meshsim::curand_block(seed, sub, block);
    CHECK(b ==
          meshsim::philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                  static_cast<uint32_t>(sub), static_cast<uint32_t>(sub >> 32)},
                                 meshsim::philox_key(seed)));
    // Word by word, an offset walks through the blocks in order.
    for (uint64_t w = 0; w < 4; ++w) CHECK(meshsim::curand_word(seed, sub, 4 * block + w) == b[w]);
  }
}

TEST_CASE("philox: the host generator deals blocks over 65,536 subsequences", "[rng][philox]") {
  // Its first block is the device's; its second is the device's subsequence 1, block 0; block
  // 65,536 is subsequence 0, block 1.
  for (uint64_t w = 0; w < 4; ++w) {
    CHECK(meshsim::curand_host_word(7, w) == meshsim::curand_word(7, 0, w));
    CHECK(meshsim::curand_host_word(7, 4 + w) == meshsim::curand_word(7, 1, w));
    CHECK(meshsim::curand_host_word(7, 4 * 65536 + w) == meshsim::curand_word(7, 0, 4 + w));
  }
}

TEST_CASE("philox: the AVX2 path gives the scalar path's bits", "[rng][philox][simd]") {
  if (meshsim::best_philox_path() == meshsim::PhiloxPath::kScalar) {
    WARN("skipped: this CPU has no AVX2");
    return;
  }
  meshsim::testing::SplitMix rng{99};
  for (int i = 0; i < 300; ++i) {
    const uint64_t seed = rng.next(), sub = rng.next();
    // Blocks that cross a 2^32 boundary of the counter's low word, and any others.
    const uint64_t first = i % 3 == 0 ? (uint64_t{1} << 32) - 5 : rng.next() >> 3;
    std::vector<uint32_t> scalar(4 * static_cast<size_t>(1 + rng.below(100))), simd(scalar.size());
    meshsim::curand_blocks(seed, sub, first, scalar, meshsim::PhiloxPath::kScalar);
    meshsim::curand_blocks(seed, sub, first, simd, meshsim::PhiloxPath::kAvx2);
    INFO("seed " << seed << " subsequence " << sub << " first block " << first);
    REQUIRE(simd == scalar);
    CHECK(scalar[0] == meshsim::curand_word(seed, sub, 4 * first));
  }
}

TEST_CASE("philox: eight neighbouring threads at once, both paths", "[rng][philox][simd]") {
  meshsim::testing::SplitMix rng{5};
  for (int i = 0; i < 300; ++i) {
    const uint64_t seed = rng.next(), block = rng.next();
    // Threads that cross a 2^32 boundary of the counter's third word, and any others.
    const uint64_t first = i % 3 == 0 ? (uint64_t{1} << 32) - 3 : rng.next() >> 1;
    uint32_t scalar[4][8], simd[4][8];
    meshsim::curand_threads(seed, block, first, scalar, meshsim::PhiloxPath::kScalar);
    for (size_t j = 0; j < 8; ++j) {
      const PhiloxBlock b = meshsim::curand_block(seed, first + j, block);
      for (size_t w = 0; w < 4; ++w) REQUIRE(scalar[w][j] == b[w]);
    }
    if (meshsim::best_philox_path() == meshsim::PhiloxPath::kScalar) continue;
    meshsim::curand_threads(seed, block, first, simd, meshsim::PhiloxPath::kAvx2);
    for (size_t w = 0; w < 4; ++w) {
      for (size_t j = 0; j < 8; ++j) REQUIRE(simd[w][j] == scalar[w][j]);
    }
  }
}
