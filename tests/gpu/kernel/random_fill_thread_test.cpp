// The CUDA random kernel's per-thread body, compiled for the host (random_fill_on_host), against
// the CPU model: runs without a GPU, so every build with nvcc checks the kernel's own code.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/gpu/kernel/random_fill_thread.hpp"
#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/rng/philox.hpp"
#include "tests/gpu/kernel/random_fill_check.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::DType;
using meshsim::GpuProfile;
using meshsim::sim::gpu::random_fill_on_host;
using meshsim::sim::gpu::RandomDistribution;
using meshsim::testing::FillCase;

namespace {

const GpuProfile kH200 = *meshsim::find_gpu("H200");
// One block of 256 threads: a wave is 1024 floats (512 doubles).
const GpuProfile kOneBlock = GpuProfile::custom(1, 256);
// Three SMs of two blocks: 1536 threads, a wave of 6144 floats (3072 doubles).
const GpuProfile kSixBlocks = GpuProfile::custom(3, 512);

const DType kDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
constexpr uint64_t kSeeds[] = {0, 42, (uint64_t{1} << 63) + 5, ~uint64_t{0}};
// PyTorch only ever hands the kernel offsets that are multiples of 4: counter_offset is one, and
// set_rng_state / set_offset refuse others. The model is written for those (it starts at block
// offset / 4); other offsets have a test of their own below.
constexpr uint64_t kOffsets[] = {0, 4, 4000, uint64_t{1} << 42};

// Elements per grid-stride loop of `dtype` on `gpu` ("one wave").
int64_t wave(DType dtype, const GpuProfile& gpu) {
  // The grid is at its cap (docs/rng.md 2.3): 256 threads per block, 4 floats or 2 doubles each.
  return gpu.max_blocks() * 256 * (dtype == DType::kFloat64 ? 2 : 4);
}

// Sizes around the block, one wave and two waves of `dtype` on `gpu`.
std::vector<int64_t> sizes_around_waves(DType dtype, const GpuProfile& gpu) {
  const int64_t w = wave(dtype, gpu);
  return {0,     1, 5,     255,       256,   257,       1000,
          w - 1, w, w + 1, 2 * w - 1, 2 * w, 2 * w + 1, 5 * w / 2 + 3};
}

std::vector<std::byte> fill_on_host(const FillCase& c, const GpuProfile& gpu) {
  std::vector<std::byte> out(static_cast<size_t>(c.numel) * meshsim::dtype_size(c.dtype));
  random_fill_on_host(out.data(), meshsim::testing::fill_launch(c, gpu));
  return out;
}

// Runs `c` through the host body and the model; returns the verdict.
meshsim::testing::FillVerdict check(const FillCase& c, const GpuProfile& gpu) {
  return meshsim::testing::compare_fill(c, meshsim::testing::predict_fill(c, gpu),
                                        fill_on_host(c, gpu));
}

}  // namespace

TEST_CASE(
    "gpu kernel: torch.rand(5) after manual_seed(0) gives the published bits (docs/rng.md 2.4)",
    "[gpu][kernel][uniform]") {
  const FillCase c{RandomDistribution::kUniform, DType::kFloat32, 5, 0, 0, 0.0, 1.0};
  const std::vector<std::byte> out = fill_on_host(c, kH200);
  uint32_t bits[5];
  std::memcpy(bits, out.data(), sizeof bits);
  CHECK(bits[0] == 0x3ecc4fd2u);
  CHECK(bits[1] == 0x3f044516u);
  CHECK(bits[2] == 0x3ccc3acfu);
  CHECK(bits[3] == 0x3f70a90bu);
  CHECK(bits[4] == 0x3f72237fu);
}

TEST_CASE(
    "gpu kernel: uniform_ writes the model's bits for every dtype, size, seed, offset and bounds",
    "[gpu][kernel][uniform]") {
  // (0, 1) is torch.rand; (-2, 3) puts a fused multiply-add and a non-zero `from` in play;
  // (1, 1.0625) is a narrow range where half and bfloat16 round many values onto `to` (and so
  // onto `from`).
  const std::pair<double, double> bounds[] = {{0.0, 1.0}, {-2.0, 3.0}, {1.0, 1.0625}};
  int64_t cases = 0;
  for (const GpuProfile& gpu : {kOneBlock, kSixBlocks}) {
    for (const DType dtype : kDtypes) {
      for (const int64_t numel : sizes_around_waves(dtype, gpu)) {
        for (size_t s = 0; s < std::size(kSeeds); ++s) {
          for (const auto& [from, to] : bounds) {
            // Every seed with every offset would repeat the same mapping: pair them up instead.
            const FillCase c{
                RandomDistribution::kUniform, dtype, numel, kSeeds[s], kOffsets[s], from, to};
            const auto verdict = check(c, gpu);
            INFO(gpu.name << ": " << describe(c) << ": " << describe(verdict));
            REQUIRE(verdict.pass());
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases == 2 * 4 * 14 * 4 * 3);
}

TEST_CASE("gpu kernel: uniform_ over one and two H200 waves (1,081,344 floats) is the model's",
          "[gpu][kernel][uniform]") {
  for (const DType dtype : kDtypes) {
    const int64_t w = wave(dtype, kH200);
    CHECK(w == (dtype == DType::kFloat64 ? 540672 : 1081344));
    const int64_t sizes[] = {w - 1, w + 1, 2 * w + 1, 5 * w / 2};
    for (size_t i = 0; i < std::size(sizes); ++i) {
      const bool plain = i % 2 == 0;
      const FillCase c{RandomDistribution::kUniform,
                       dtype,
                       sizes[i],
                       kSeeds[(i + 1) % 4],
                       kOffsets[i],
                       plain ? 0.0 : -2.0,
                       plain ? 1.0 : 3.0};
      const auto verdict = check(c, kH200);
      INFO(describe(c) << ": " << describe(verdict));
      REQUIRE(verdict.pass());
    }
  }
}

TEST_CASE("gpu kernel: normal_ is within the documented tolerance of the model",
          "[gpu][kernel][normal]") {
  // The host body takes sinf/cosf/logf (sin/cos/log for double) from the same libm as the
  // model, so here the two agree far inside the tolerance a GPU gets (random_fill_check.hpp).
  const std::pair<double, double> mean_std[] = {{0.0, 1.0}, {0.5, 2.0}, {-3.0, 0.01}};
  for (const GpuProfile& gpu : {kOneBlock, kSixBlocks}) {
    for (const DType dtype : kDtypes) {
      for (const int64_t numel : sizes_around_waves(dtype, gpu)) {
        for (size_t s = 0; s < std::size(kSeeds); ++s) {
          const auto& [mean, std] = mean_std[s % 3];
          const FillCase c{
              RandomDistribution::kNormal, dtype, numel, kSeeds[s], kOffsets[s], mean, std};
          const auto verdict = check(c, gpu);
          INFO(gpu.name << ": " << describe(c) << ": " << describe(verdict) << ", max error "
                        << verdict.max_error);
          REQUIRE(verdict.pass());
          // On the host both sides run the same libm calls in the same order: exact.
          CHECK(verdict.max_error == 0.0);
        }
      }
    }
  }
  for (const DType dtype : kDtypes) {
    const FillCase c{
        RandomDistribution::kNormal, dtype, 2 * wave(dtype, kH200) + 3, 7, 8, 0.0, 1.0};
    const auto verdict = check(c, kH200);
    INFO(describe(c) << ": " << describe(verdict));
    REQUIRE(verdict.pass());
  }
}

TEST_CASE(
    "gpu kernel: an offset inside a Philox block starts where curand_init puts it (not the "
    "model)",
    "[gpu][kernel][uniform]") {
  // PyTorch never produces such offsets; the kernel still does what curand_init does with
  // them: thread t's k-th draw takes words offset + 4k ... offset + 4k + 3 of subsequence t.
  for (const uint64_t offset : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{4001}}) {
    const FillCase c{RandomDistribution::kUniform, DType::kFloat32, 3000, 42, offset, 0.0, 1.0};
    const std::vector<std::byte> out = fill_on_host(c, kOneBlock);
    for (int64_t e = 0; e < c.numel; ++e) {
      const uint64_t call = static_cast<uint64_t>(e) / 1024, component = (e % 1024) / 256;
      const uint64_t thread = static_cast<uint64_t>(e) % 256;
      const float u = meshsim::uniform_from_word(
          meshsim::curand_word(c.seed, thread, offset + 4 * call + component));
      float got;
      std::memcpy(&got, out.data() + 4 * e, sizeof got);
      INFO("offset " << offset << " element " << e);
      REQUIRE(got == (u == 1.0f ? 0.0f : u));
    }
  }
}

TEST_CASE("gpu kernel: half and bfloat16 rounding by hand is the model's rounding",
          "[gpu][kernel][dtype]") {
  meshsim::testing::SplitMix rng{90};
  // Every exponent and sign, with the mantissas that sit on and around rounding ties, plus
  // random ones.
  const uint32_t edges[] = {0,      1,      0xfff,  0x1000,  0x1001,   0x2000,   0x3000,
                            0x7fff, 0x8000, 0x8001, 0x18000, 0x7fffff, 0x400000, 0x7ff000};
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exponent = 0; exponent < 256; ++exponent) {
      std::vector<uint32_t> mantissas(std::begin(edges), std::end(edges));
      for (int i = 0; i < 2000; ++i) mantissas.push_back(static_cast<uint32_t>(rng.next()) >> 9);
      for (const uint32_t mantissa : mantissas) {
        const uint32_t bits = sign << 31 | exponent << 23 | mantissa;
        const float f = std::bit_cast<float>(bits);
        INFO("float bits " << bits);
        REQUIRE(meshsim::sim::gpu::random_half_bits(f) == meshsim::float_to_half_bits(f));
        REQUIRE(meshsim::sim::gpu::random_bfloat16_bits(f) == meshsim::float_to_bfloat16_bits(f));
      }
    }
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float model = meshsim::half_bits_to_float(half);
    const float mine = meshsim::sim::gpu::random_half_value(half);
    INFO("half bits " << h);
    REQUIRE(std::bit_cast<uint32_t>(mine) == std::bit_cast<uint32_t>(model));
  }
}
