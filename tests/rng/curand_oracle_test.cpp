// meshsim's Philox against cuRAND itself: the device API from curand_kernel.h compiled for this
// CPU, and libcurand's host generator. Built only where the CUDA toolkit is found.
#include <catch2/catch.hpp>

#include <vector>

// curand_kernel.h compiles for the host once its functions are plain inline functions.
#define QUALIFIERS static inline
#include <curand.h>
#include <curand_kernel.h>

#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/dropout_kernel.hpp"
#include "src/rng/philox.hpp"
#include "tests/support/splitmix.hpp"

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

TEST_CASE(
    "curand oracle: one kernel thread's draw is curand_uniform4, curand_uniform2_double, "
    "curand_normal4 and curand_normal2_double",
    "[rng][curand]") {
  // One SM of one 256-thread block: thread 0's components are elements 0, 256, 512, 768.
  const meshsim::GpuProfile one_block = meshsim::GpuProfile::custom(1, 256);
  meshsim::testing::SplitMix rng{3};
  for (int i = 0; i < 200; ++i) {
    const uint64_t seed = rng.next(), offset = 4 * (rng.next() % 100000);
    INFO("seed " << seed << " offset " << offset);
    curandStatePhilox4_32_10_t s;
    meshsim::PhiloxState state{seed, offset};
    const meshsim::Tensor uf =
        meshsim::predict_uniform(state, 1024, meshsim::DType::kFloat32, one_block);
    curand_init(seed, 0, offset, &s);
    const float4 u4 = curand_uniform4(&s);
    const float expected_f[] = {u4.x, u4.y, u4.z, u4.w};
    for (int c = 0; c < 4; ++c) {
      REQUIRE(uf.get(256 * c) == (expected_f[c] == 1.0f ? 0.0f : expected_f[c]));
    }
    state = {seed, offset};
    const meshsim::Tensor ud =
        meshsim::predict_uniform(state, 512, meshsim::DType::kFloat64, one_block);
    curand_init(seed, 0, offset, &s);
    const double2 u2 = curand_uniform2_double(&s);
    REQUIRE(ud.get(0) == u2.x);
    REQUIRE(ud.get(256) == u2.y);
    state = {seed, offset};
    const meshsim::Tensor nf =
        meshsim::predict_normal(state, 1024, meshsim::DType::kFloat32, one_block);
    curand_init(seed, 0, offset, &s);
    const float4 n4 = curand_normal4(&s);
    const float expected_n[] = {n4.x, n4.y, n4.z, n4.w};
    for (int c = 0; c < 4; ++c) {
      REQUIRE(nf.get(256 * c) == Approx(expected_n[c]).margin(1e-5).epsilon(1e-5));
    }
    state = {seed, offset};
    const meshsim::Tensor nd =
        meshsim::predict_normal(state, 512, meshsim::DType::kFloat64, one_block);
    curand_init(seed, 0, offset, &s);
    const double2 n2 = curand_normal2_double(&s);
    REQUIRE(nd.get(0) == Approx(n2.x).margin(1e-12));
    REQUIRE(nd.get(256) == Approx(n2.y).margin(1e-12));
  }
}

TEST_CASE("curand oracle: bernoulli_ and exponential_ transform curand_uniform4's draw",
          "[rng][curand]") {
  const meshsim::GpuProfile one_block = meshsim::GpuProfile::custom(1, 256);
  meshsim::testing::SplitMix rng{17};
  for (int i = 0; i < 200; ++i) {
    const uint64_t seed = rng.next(), offset = 4 * (rng.next() % 100000);
    const double p = static_cast<double>(rng.below(1001)) / 1000.0;
    INFO("seed " << seed << " offset " << offset << " p " << p);
    curandStatePhilox4_32_10_t s;
    curand_init(seed, 0, offset, &s);
    const float4 u4 = curand_uniform4(&s);
    const float u[] = {u4.x, u4.y, u4.z, u4.w};
    meshsim::PhiloxState state{seed, offset};
    const meshsim::Tensor b =
        meshsim::predict_bernoulli(state, 1024, meshsim::DType::kBool, one_block, p);
    REQUIRE(state.offset == offset + 4);
    state = {seed, offset};
    const meshsim::Tensor e =
        meshsim::predict_exponential(state, 1024, meshsim::DType::kFloat32, one_block, 2.5);
    for (int c = 0; c < 4; ++c) {
      REQUIRE(b.get(256 * c) == (u[c] < static_cast<float>(p) ? 1.0 : 0.0));
      // -log(u) / lambda, to the last bit of logf.
      const double expected = u[c] == 1.0f ? 0x1p-24 / 2.5 : -std::log(double{u[c]}) / 2.5;
      REQUIRE(e.get(256 * c) == Approx(expected).epsilon(4e-7).margin(1e-30));
    }
  }
}

TEST_CASE(
    "curand oracle: log_normal_ is exp of curand_normal4's draw, geometric_ counts "
    "curand_uniform4's",
    "[rng][curand]") {
  const meshsim::GpuProfile one_block = meshsim::GpuProfile::custom(1, 256);
  meshsim::testing::SplitMix rng{29};
  for (int i = 0; i < 200; ++i) {
    const uint64_t seed = rng.next(), offset = 4 * (rng.next() % 100000);
    const double p = static_cast<double>(1 + rng.below(999)) / 1000.0;
    INFO("seed " << seed << " offset " << offset << " p " << p);
    curandStatePhilox4_32_10_t s;
    curand_init(seed, 0, offset, &s);
    const float4 n4 = curand_normal4(&s);
    const float n[] = {n4.x, n4.y, n4.z, n4.w};
    meshsim::PhiloxState state{seed, offset};
    const meshsim::Tensor ln =
        meshsim::predict_log_normal(state, 1024, meshsim::DType::kFloat32, one_block, 1.0, 0.5);
    REQUIRE(state.offset == offset + 4);  // the offsets of normal_
    curand_init(seed, 0, offset, &s);
    const float4 u4 = curand_uniform4(&s);
    const float u[] = {u4.x, u4.y, u4.z, u4.w};
    state = {seed, offset};
    const meshsim::Tensor g =
        meshsim::predict_geometric(state, 1024, meshsim::DType::kInt64, one_block, p);
    for (int c = 0; c < 4; ++c) {
      REQUIRE(ln.get(256 * c) == Approx(std::exp(1.0 + 0.5 * n[c])).epsilon(2e-5));
      // The count each uniform gives; where logf's last bit could move it, either neighbour.
      const double q = std::log(double{u[c]}) / std::log1p(-p);
      const double count = g.get(256 * c);
      if (std::abs(q - std::round(q)) > 1e-4) {
        REQUIRE(count == std::ceil(q));
      } else {
        REQUIRE(std::abs(count - std::ceil(q)) <= 1.0);
      }
    }
  }
  meshsim::PhiloxState state{1, 0};
  CHECK_THROWS_WITH(meshsim::predict_geometric(state, 4, meshsim::DType::kFloat32, one_block, 1.0),
                    "geometric_ expects p to be in (0, 1), but got p=1");
  CHECK_THROWS_WITH(
      meshsim::predict_log_normal(state, 4, meshsim::DType::kInt64, one_block, 1.0, 2.0),
      "\"log_normal_cuda\" not implemented for 'Long'");
  CHECK_THROWS_WITH(
      meshsim::predict_log_normal(state, 4, meshsim::DType::kFloat32, one_block, 1.0, 0.0),
      "log_normal_ expects std > 0.0, but found std=0");
}

namespace {

// ATen's fused dropout kernel written as its threads run it, on curand's device API: the unrolled
// variant strides by the grid four times per draw; a vectorized one takes `vec` neighbours per
// iteration from ceil(vec / 4) draws. Returns F.dropout(x) for x[i] = i + 1 in float.
std::vector<float> dropout_on_threads(uint64_t seed, uint64_t offset, int64_t numel,
                                      int64_t threads, int vec, float keep) {
  std::vector<float> out(static_cast<size_t>(numel), -1.0f);
  const auto scale = static_cast<float>(1.0 / keep);
  auto write = [&](int64_t i, float u) {
    out[static_cast<size_t>(i)] = static_cast<float>(i + 1) * (u < keep ? 1.0f : 0.0f) * scale;
  };
  for (int64_t idx = 0; idx < threads; ++idx) {
    curandStatePhilox4_32_10_t s;
    curand_init(seed, static_cast<unsigned long long>(idx), offset, &s);
    if (vec == 1) {
      const int64_t rounded = ((numel - 1) / (threads * 4) + 1) * threads * 4;
      for (int64_t base = idx; base < rounded; base += threads * 4) {
        const float4 r = curand_uniform4(&s);
        const float u[] = {r.x, r.y, r.z, r.w};
        for (int64_t ii = 0; ii < 4; ++ii) {
          if (base + threads * ii < numel) write(base + threads * ii, u[ii]);
        }
      }
      continue;
    }
    for (int64_t base = idx * vec; base < numel; base += threads * vec) {
      float u[8];
      for (int j = 0; j < (vec + 3) / 4; ++j) {
        const float4 r = curand_uniform4(&s);
        u[4 * j] = r.x, u[4 * j + 1] = r.y, u[4 * j + 2] = r.z, u[4 * j + 3] = r.w;
      }
      for (int k = 0; k < vec; ++k) write(base + k, u[k]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("curand oracle: dropout lays elements out as ATen's fused kernel does",
          "[rng][curand][dropout]") {
  // One block of 256 threads, so that a few thousand elements run the grid several times.
  const meshsim::GpuProfile one_block = meshsim::GpuProfile::custom(1, 256);
  meshsim::testing::SplitMix rng{31};
  // numel decides the variant for float32: odd (unrolled), 2 mod 4 (vec 2), 0 mod 4 (vec 4); a
  // storage offset of one float from an aligned block forbids vectorizing.
  const struct {
    int64_t numel;
    uint64_t byte_offset;
    int vec;
  } cases[] = {{1, 0, 1},    {5, 0, 1},     {2049, 0, 1},  {4099, 0, 1}, {6, 0, 2},
               {2050, 0, 2}, {4, 0, 4},     {1024, 0, 4},  {5000, 0, 4}, {1024, 4, 1},
               {1024, 8, 2}, {1024, 16, 4}, {2048, 512, 4}};
  for (const auto& c : cases) {
    REQUIRE(meshsim::dropout_vector_size(c.numel, meshsim::DType::kFloat32, c.byte_offset) ==
            c.vec);
    for (int i = 0; i < 3; ++i) {
      const uint64_t seed = rng.next(), offset = 4 * (rng.next() % 100000);
      const double p = 0.05 + static_cast<double>(rng.below(900)) / 1000.0;
      INFO("numel " << c.numel << " vec " << c.vec << " seed " << seed << " p " << p);
      const std::vector<float> want =
          dropout_on_threads(seed, offset, c.numel, 256, c.vec, static_cast<float>(1.0 - p));
      meshsim::Tensor x({c.numel}, meshsim::DType::kFloat32);
      for (int64_t e = 0; e < c.numel; ++e) x.set(e, static_cast<double>(e + 1));
      meshsim::PhiloxState state{seed, offset};
      const meshsim::Tensor got = meshsim::predict_dropout(state, x, p, one_block, c.byte_offset);
      for (int64_t e = 0; e < c.numel; ++e) REQUIRE(got.get(e) == want[static_cast<size_t>(e)]);
      // The generator moves by four per run of the grid, whatever the variant.
      REQUIRE(state.offset == offset + 4 * static_cast<uint64_t>((c.numel - 1) / 1024 + 1));
    }
  }
  // Two-byte dtypes load 16 bytes: eight elements per thread, from two draws.
  CHECK(meshsim::dropout_vector_size(4096, meshsim::DType::kBFloat16, 0) == 8);
  CHECK(meshsim::dropout_vector_size(4100, meshsim::DType::kFloat16, 0) == 4);
  CHECK(meshsim::dropout_vector_size(4096, meshsim::DType::kFloat64, 0) == 2);
  const uint64_t seed = 99, offset = 40;
  const std::vector<float> want = dropout_on_threads(seed, offset, 4096, 256, 8, 0.75f);
  meshsim::Tensor x({4096}, meshsim::DType::kBFloat16);
  for (int64_t e = 0; e < 4096; ++e) x.set(e, static_cast<double>(e + 1));
  meshsim::PhiloxState state{seed, offset};
  const meshsim::Tensor got = meshsim::predict_dropout(state, x, 0.25, one_block);
  for (int64_t e = 0; e < 4096; ++e) {
    // The float product rounded to bfloat16 (x itself is exact in bfloat16 only up to 256).
    const float x_bf16 = static_cast<float>(x.get(e));
    const float kept = want[static_cast<size_t>(e)] == 0.0f ? 0.0f : 1.0f;
    const float product = x_bf16 * kept * static_cast<float>(1.0 / 0.75f);
    REQUIRE(got.get(e) ==
            meshsim::bfloat16_bits_to_float(meshsim::float_to_bfloat16_bits(product)));
  }
}
