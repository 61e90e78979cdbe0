#include "src/rng/cuda_random_kernel.hpp"

#include <bit>
#include <cmath>

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::DType;
using meshsim::GpuProfile;
using meshsim::KernelLaunch;
using meshsim::PhiloxState;

namespace {

const GpuProfile kH200 = *meshsim::find_gpu("H200");
const GpuProfile kA100 = *meshsim::find_gpu("a100");

uint32_t float_bits(double v) {
  return std::bit_cast<uint32_t>(static_cast<float>(v));
}

// The first values of `numel` float32 draws from (seed, offset), to 6 decimals as docs/rng.md
// prints.
std::vector<double> rand_values(uint64_t seed, uint64_t offset, int64_t numel, size_t first) {
  PhiloxState state{seed, offset};
  const meshsim::Tensor t = meshsim::predict_uniform(state, numel, DType::kFloat32, kH200);
  std::vector<double> out;
  for (size_t i = 0; i < first; ++i) {
    out.push_back(std::round(t.get(static_cast<int64_t>(i)) * 1e6) / 1e6);
  }
  return out;
}

}  // namespace

TEST_CASE("cuda kernel: counter offsets on an H200 (docs/rng.md 2.3)", "[rng][kernel]") {
  CHECK(KernelLaunch::plan(5, DType::kFloat32, kH200).counter_offset == 4);
  CHECK(KernelLaunch::plan(int64_t{1} << 20, DType::kFloat32, kH200).counter_offset == 4);
  CHECK(KernelLaunch::plan(2000000, DType::kFloat32, kH200).counter_offset == 8);
  CHECK(KernelLaunch::plan(100000000, DType::kFloat32, kH200).counter_offset == 372);
  CHECK(KernelLaunch::plan(int64_t{1} << 20, DType::kFloat64, kH200).counter_offset == 8);
  CHECK(KernelLaunch::plan(2000000, DType::kFloat64, kH200).counter_offset == 16);
  CHECK(KernelLaunch::plan(100000000, DType::kFloat64, kH200).counter_offset == 740);
  CHECK(KernelLaunch::plan(0, DType::kFloat32, kH200).counter_offset == 0);
  // One wave: 1056 blocks of 256 threads, 4 floats each.
  CHECK(KernelLaunch::plan(int64_t{1} << 28, DType::kFloat32, kH200).grid == 1056);
  // bernoulli_ on integer and bool tensors draws four floats per call, like float32.
  CHECK(KernelLaunch::plan(2000000, DType::kBool, kH200).counter_offset == 8);
  CHECK(KernelLaunch::plan(2000000, DType::kInt64, kH200).unroll == 4);
}

TEST_CASE("cuda kernel: which thread and component an element comes from depends on the GPU",
          "[rng][kernel]") {
  const auto h200 =
      meshsim::element_source(KernelLaunch::plan(2000000, DType::kFloat32, kH200), 300000);
  CHECK(h200.thread == 29664);
  CHECK(h200.call == 0);
  CHECK(h200.component == 1);  // y
  const KernelLaunch a100 = KernelLaunch::plan(2000000, DType::kFloat32, kA100);
  CHECK(a100.counter_offset == 12);
  const auto s = meshsim::element_source(a100, 300000);
  CHECK(s.thread == 78816);
  CHECK(s.component == 1);
}

TEST_CASE("cuda kernel: torch.manual_seed(0); torch.rand(5, device='cuda') (docs/rng.md 2.4)",
          "[rng][kernel]") {
  PhiloxState state{0, 0};
  const meshsim::Tensor t = meshsim::predict_uniform(state, 5, DType::kFloat32, kH200);
  const uint32_t expected[] = {0x3ecc4fd2, 0x3f044516, 0x3ccc3acf, 0x3f70a90b, 0x3f72237f};
  for (int64_t i = 0; i < 5; ++i) CHECK(float_bits(t.get(i)) == expected[i]);
  CHECK(state.offset == 4);
}

TEST_CASE("cuda kernel: the values of docs/rng.md 3.3's worked examples", "[rng][kernel]") {
  using V = std::vector<double>;
  // A single-device torch.rand(8, 4) under seed 1234.
  CHECK(rand_values(1234, 0, 32, 5) == V{0.127208, 0.816736, 0.543999, 0.660079, 0.272056});
  // Shards of 8 elements at pre-op offsets 0, 8, 16, 24.
  CHECK(rand_values(1234, 0, 8, 4) == V{0.127208, 0.816736, 0.543999, 0.660079});
  CHECK(rand_values(1234, 8, 8, 4) == V{0.249173, 0.171930, 0.447136, 0.368808});
  CHECK(rand_values(1234, 16, 8, 4) == V{0.080679, 0.030580, 0.939573, 0.859657});
  CHECK(rand_values(1234, 24, 8, 4) == V{0.988474, 0.813494, 0.730532, 0.846902});
  // 5x3 over 4 ranks: rank 2 draws its 3 elements from offset 12.
  CHECK(rand_values(1234, 12, 3, 3) == V{0.711527, 0.161500, 0.974214});
}

TEST_CASE("cuda kernel: uniform_ maps a value that rounds to `to` back to `from`",
          "[rng][kernel]") {
  CHECK(meshsim::uniform_from_word(0xffffffffu) == 1.0f);  // curand_uniform's range is (0, 1]
  CHECK(meshsim::uniform_from_word(0) == 0x1p-33f);
  CHECK(meshsim::uniform_from_words(0, 0) == 0x1p-54);
  // x ^ (y << 21): 53 bits, the high word shifted under the low one.
  CHECK(meshsim::uniform_from_words(1, 1) ==
        static_cast<double>(1 ^ (1 << 21)) * 0x1p-53 + 0x1p-54);
  // Overlapping bits of the two words cancel (XOR, not OR): 0x1ffffffe0000 ^ ... has 53 bits.
  CHECK(meshsim::uniform_from_words(0xffffffffu, 0xffffffffu) ==
        static_cast<double>(0x1fffffffe00000ULL ^ 0xffffffffULL) * 0x1p-53 + 0x1p-54);
  CHECK(meshsim::uniform_from_words(0, 0xffffffffu) ==
        static_cast<double>(0x1fffffffe00000ULL) * 0x1p-53 + 0x1p-54);
  // float16: every float draw that rounds to 1.0 in half precision becomes 0.0.
  const int64_t n = 1 << 18;
  PhiloxState a{77, 0}, b{77, 0};
  const meshsim::Tensor half = meshsim::predict_uniform(a, n, DType::kFloat16, kH200);
  const meshsim::Tensor single = meshsim::predict_uniform(b, n, DType::kFloat32, kH200);
  int64_t reversed = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool rounds_to_one = meshsim::half_bits_to_float(meshsim::float_to_half_bits(
                                   static_cast<float>(single.get(i)))) == 1.0f;
    CHECK(half.get(i) != 1.0);
    if (rounds_to_one) {
      ++reversed;
      CHECK(half.get(i) == 0.0);
    }
  }
  CHECK(reversed > 0);
  CHECK(a.offset == b.offset);
}

TEST_CASE("cuda kernel: normals have the moments of a standard normal", "[rng][kernel]") {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    PhiloxState state{3, 0};
    const int64_t n = 1 << 18;
    const meshsim::Tensor t = meshsim::predict_normal(state, n, dtype, kH200, 2.0, 3.0);
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += t.get(i);
      squares += t.get(i) * t.get(i);
    }
    const double mean = sum / n, variance = squares / n - mean * mean;
    INFO(meshsim::dtype_name(dtype));
    CHECK(std::abs(mean - 2.0) < 0.03);
    CHECK(std::abs(variance - 9.0) < 0.15);
  }
}

TEST_CASE("philox state: seeds, saved states and their errors (docs/rng.md 1)", "[rng][state]") {
  CHECK(PhiloxState::from_seed_text("-1").seed == 0xffffffffffffffffULL);
  CHECK(PhiloxState::from_seed_text("-9223372036854775808").seed == 0x8000000000000000ULL);
  CHECK(PhiloxState::from_seed_text("18446744073709551615").seed == 0xffffffffffffffffULL);
  CHECK_THROWS_AS(PhiloxState::from_seed_text("18446744073709551616"), meshsim::Error);
  CHECK_THROWS_AS(PhiloxState::from_seed_text("-9223372036854775809"), meshsim::Error);
  CHECK_THROWS_AS(PhiloxState::from_seed_text("1e3"), meshsim::Error);
  const PhiloxState s{0x0102030405060708ULL, 40};
  CHECK(PhiloxState::from_bytes(s.to_bytes()) == s);
  CHECK(s.to_bytes()[0] == 0x08);  // little endian
  const std::vector<uint8_t> seed_only(8, 1);
  CHECK(PhiloxState::from_bytes(seed_only).offset == 0);
  CHECK_THROWS_WITH(PhiloxState::from_bytes(std::vector<uint8_t>(12)), "RNG state is wrong size");
  std::vector<uint8_t> odd = s.to_bytes();
  odd[8] = 6;
  CHECK_THROWS_WITH(PhiloxState::from_bytes(odd), "offset must be a multiple of 4");
}

TEST_CASE("gpu profiles: the table, names and custom profiles", "[rng][gpu]") {
  CHECK(kH200.max_blocks() == 1056);
  CHECK(meshsim::find_gpu("H100 PCIe")->max_blocks() == 912);
  CHECK(meshsim::find_gpu("l40s")->max_blocks() == 852);
  CHECK(meshsim::find_gpu("T4")->max_blocks() == 160);
  CHECK(meshsim::find_gpu("rtx4090")->max_blocks() == 768);
  CHECK_FALSE(meshsim::find_gpu("B200"));
  CHECK(GpuProfile::custom(100, 2048).max_blocks() == 800);
  CHECK_THROWS_AS(GpuProfile::custom(0, 2048), meshsim::Error);
  CHECK_THROWS_AS(GpuProfile::custom(10, 1000), meshsim::Error);
}

TEST_CASE("cuda kernel: torch.rand's vector paths give the element-by-element floats",
          "[rng][kernel][simd]") {
  const meshsim::PhiloxPath best = meshsim::best_philox_path();
  std::vector<meshsim::PhiloxPath> paths{meshsim::PhiloxPath::kScalar};
  if (best != meshsim::PhiloxPath::kScalar) paths.push_back(meshsim::PhiloxPath::kAvx2);
  if (best == meshsim::PhiloxPath::kAvx512) paths.push_back(meshsim::PhiloxPath::kAvx512);
  uint64_t s = 12345;
  const auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 11;
  };
  for (int round = 0; round < 40; ++round) {
    // Small GPUs make several calls per thread; sizes end mid-group and mid-wave.
    const GpuProfile gpu =
        round % 2 ? kH200 : GpuProfile::custom(1 + static_cast<int64_t>(next() % 4), 256);
    const auto n = static_cast<size_t>(1 + next() % (round % 2 ? 2500000 : 5000));
    const PhiloxState start{next(), 4 * (next() % 1000)};
    std::vector<std::vector<float>> results;
    std::vector<uint64_t> offsets;
    for (meshsim::PhiloxPath path : paths) {
      PhiloxState state = start;
      results.emplace_back(n);
      meshsim::predict_rand_float32(state, gpu, results.back(), path);
      offsets.push_back(state.offset);
    }
    INFO("round " << round << " numel " << n << " gpu " << gpu.name);
    for (size_t p = 1; p < paths.size(); ++p) {
      INFO("path " << meshsim::philox_path_name(paths[p]));
      REQUIRE(results[p] == results[0]);
      REQUIRE(offsets[p] == offsets[0]);
    }
    // And the model element by element (the uniform_ path with from = 0, to = 1 in float64,
    // rounded the same way for float32).
    PhiloxState generic = start;
    const meshsim::Tensor t =
        meshsim::predict_uniform(generic, static_cast<int64_t>(n), DType::kFloat32, gpu, 0.0, 1.0,
                                 meshsim::PhiloxPath::kScalar);
    for (size_t i = 0; i < n; i += 1 + i / 16)
      REQUIRE(t.get(static_cast<int64_t>(i)) == results[0][i]);
  }
}

TEST_CASE("cuda kernel: PyTorch's bounds checks for uniform_ and the one-launch limit",
          "[rng][kernel]") {
  PhiloxState state{0, 0};
  CHECK_THROWS_WITH(meshsim::predict_uniform(state, 4, DType::kFloat16, kH200, -60000, 60000),
                    "uniform_ expects to-from <= std::numeric_limits<Half>::max(), but found "
                    "to=60000 and from=-60000 which result in to-from to exceed the limit");
  CHECK_THROWS_WITH(meshsim::predict_uniform(state, 4, DType::kFloat16, kH200, 0, 70000),
                    "to is out of bounds for c10::Half");
  CHECK_THROWS_WITH(meshsim::predict_uniform(state, 4, DType::kFloat32, kH200, -3.5e38, 0),
                    "from is out of bounds for float");
  CHECK_THROWS_WITH(meshsim::predict_uniform(state, 4, DType::kInt64, kH200),
                    "\"check_uniform_bounds\" not implemented for 'Long'");
  CHECK_THROWS_WITH(meshsim::predict_normal(state, 4, DType::kInt32, kH200),
                    "\"normal_kernel_cuda\" not implemented for 'Int'");
  CHECK_THROWS_WITH(meshsim::predict_normal(state, 4, DType::kFloat32, kH200, 0.0, -0.5),
                    "normal expects std >= 0.0, but found std -0.5");
  CHECK_THROWS_WITH(meshsim::predict_uniform(state, 4, DType::kFloat32, kH200, 2, 1),
                    "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
  CHECK_THROWS_WITH(KernelLaunch::plan(int64_t{1} << 29 | 1, DType::kFloat32, kH200),
                    Catch::Contains("several kernel launches"));
  CHECK(KernelLaunch::plan(int64_t{1} << 29, DType::kFloat32, kH200).counter_offset > 0);
  CHECK(state.offset == 0);  // nothing was drawn
}

TEST_CASE("cuda kernel: bernoulli_ follows uniform_'s draws, with its frequency and errors",
          "[rng][kernel]") {
  const int64_t n = 1 << 18;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kBool}) {
    INFO(meshsim::dtype_name(dtype));
    PhiloxState a{77, 8}, b{77, 8};
    const meshsim::Tensor draws = meshsim::predict_bernoulli(a, n, dtype, kH200, 0.3);
    // The same elements from uniform_: 1 exactly where the uniform is below p (the double path
    // compares in double, the others in float).
    const DType uniform_dtype = dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    const meshsim::Tensor u = meshsim::predict_uniform(b, n, uniform_dtype, kH200);
    REQUIRE(a == b);
    int64_t ones = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double expected = u.get(i) < (dtype == DType::kFloat64 ? 0.3 : double{0.3f}) ? 1 : 0;
      REQUIRE(draws.get(i) == expected);
      ones += draws.get(i) == 1.0 ? 1 : 0;
    }
    // Binomial(n, 0.3): the standard deviation is about 230; allow 6 of them.
    REQUIRE(std::abs(static_cast<double>(ones) - 0.3 * n) < 6 * std::sqrt(n * 0.21));
  }
  PhiloxState s{1, 0};
  REQUIRE_THROWS_WITH(meshsim::predict_bernoulli(s, 4, DType::kFloat32, kH200, 1.5),
                      "bernoulli_ expects p to be in [0, 1], but got p=1.5");
  REQUIRE(s.offset == 0);
}

TEST_CASE("cuda kernel: exponential_ has the exponential's mean and PyTorch's errors",
          "[rng][kernel]") {
  const int64_t n = 1 << 18;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    INFO(meshsim::dtype_name(dtype));
    PhiloxState s{5, 0};
    const meshsim::Tensor t = meshsim::predict_exponential(s, n, dtype, kH200, 4.0);
    REQUIRE(s.offset == KernelLaunch::plan(n, dtype, kH200).counter_offset);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(t.get(i) > 0.0);  // never 0: u = 1 maps to eps/2 / lambda
      sum += t.get(i);
    }
    // Mean 1/4 with standard error 1/(4 sqrt(n)) ~ 0.0005.
    REQUIRE(std::abs(sum / n - 0.25) < 0.003);
  }
  PhiloxState s{1, 0};
  REQUIRE_THROWS_WITH(meshsim::predict_exponential(s, 4, DType::kFloat32, kH200, 0.0),
                      "exponential_ expects lambda > 0.0, but found lambda=0");
  REQUIRE_THROWS_WITH(meshsim::predict_exponential(s, 4, DType::kInt64, kH200, 1.0),
                      Catch::Contains("dtype must be a floating point but you specified Long"));
}
