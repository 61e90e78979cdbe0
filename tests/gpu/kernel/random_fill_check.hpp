// Checking the random kernel's output (GPU or host twin) against the CPU model's prediction.
// One case, the model's tensor, and the verdict; shared by the kernel tests and kernel_parity.
// Plain C++, no CUDA headers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include <fmt/format.h>

#include "sim/gpu/device_types.hpp"
#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/gpu_profile.hpp"
#include "src/rng/philox_state.hpp"
#include "src/tensor/dtype.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim::testing {

using sim::gpu::random_dtype;
using sim::gpu::RandomDistribution;
using sim::gpu::RandomDType;
using sim::gpu::RandomFillLaunch;

// One kernel launch to check: a, b are (from, to) for uniform_ and (mean, std) for normal_.
struct FillCase {
  RandomDistribution distribution = RandomDistribution::kUniform;
  DType dtype = DType::kFloat32;
  int64_t numel = 0;
  uint64_t seed = 0;
  uint64_t offset = 0;
  double a = 0.0;
  double b = 1.0;
};

inline const char* distribution_name(RandomDistribution d) {
  return d == RandomDistribution::kUniform ? "uniform" : "normal";
}

// The launch PyTorch makes for `c` on `gpu` (the grid is the model's KernelLaunch::plan).
inline RandomFillLaunch fill_launch(const FillCase& c, const GpuProfile& gpu) {
  RandomFillLaunch l;
  l.distribution = c.distribution;
  l.dtype = random_dtype(c.dtype).value();  // the cases are floating
  l.numel = c.numel;
  l.seed = c.seed;
  l.offset = c.offset;
  l.grid = KernelLaunch::plan(c.numel, c.dtype, gpu).grid;
  l.a = c.a;
  l.b = c.b;
  return l;
}

// The model's tensor for `c` on `gpu`, from a generator at (seed, offset).
inline Tensor predict_fill(const FillCase& c, const GpuProfile& gpu) {
  PhiloxState state{c.seed, c.offset};
  return c.distribution == RandomDistribution::kUniform
             ? predict_uniform(state, c.numel, c.dtype, gpu, c.a, c.b)
             : predict_normal(state, c.numel, c.dtype, gpu, c.a, c.b);
}

// One unit in the last place of `dtype` at |x| (the spacing of the dtype's values there).
inline double dtype_ulp(DType dtype, double x) {
  const int mantissa_bits = dtype == DType::kFloat64   ? 52
                            : dtype == DType::kFloat32 ? 23
                            : dtype == DType::kFloat16 ? 10
                                                       : 7;
  const int min_exponent = dtype == DType::kFloat64   ? -1022
                           : dtype == DType::kFloat32 ? -126
                           : dtype == DType::kFloat16 ? -14
                                                      : -126;
  int exponent = 0;
  std::frexp(std::fabs(x), &exponent);  // |x| = m * 2^exponent, m in [0.5, 1)
  return std::ldexp(1.0, std::max(exponent - 1, min_exponent) - mantissa_bits);
}

// How far a normal_ element may be from the model. The uniform path is exact, but normals pass
// through sin, cos and log, which the GPU computes with __sincosf and its own logf (float
// dtypes) or sincospi (double) where the model has the host's libm (docs/rng.md 2.6):
// - float32/16/bf16: 2e-5 * std. __sincosf is within 2^-21.4 (3.6e-7) of sin/cos on [-pi, pi]
//   and a few times that up to 2 pi, the radius sqrt(-2 ln u) is at most 6.7, logf is within one
//   ulp: about 1e-5 in the worst case, 2e-5 leaves a margin. (tests/rng/curand_oracle_test.cpp
//   holds the model to 1e-5 against curand_normal4 on the host.)
// - float64: 1e-12 * std (the model computes sin(pi * v) for sinpi(v): about 1e-15).
// - plus one ulp of the dtype at the expected value: a value near a rounding tie may round
//   either way (one half or bfloat16 ulp is far more than the error above).
inline double normal_tolerance(DType dtype, double std, double expected) {
  const double scale = dtype == DType::kFloat64 ? 1e-12 : 2e-5;
  return scale * std + dtype_ulp(dtype, expected);
}

struct FillVerdict {
  int64_t mismatches = 0;       // uniform: elements whose bits differ; normal: out of tolerance
  double max_error = 0.0;       // normal: the largest |got - expected| (uniform: 0)
  int64_t first_bad = -1;       // the first element counted in `mismatches`
  double first_got = 0.0;       // its value as written
  double first_expected = 0.0;  // and as predicted
  bool pass() const { return mismatches == 0; }
};

// Element `i` of raw tensor bytes `bytes` of `dtype`, as a double.
inline double element_value(DType dtype, std::span<const std::byte> bytes, int64_t i) {
  const auto at = static_cast<size_t>(i) * dtype_size(dtype);
  if (dtype == DType::kFloat64) {
    double v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
  }
  if (dtype == DType::kFloat32) {
    float v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + at, sizeof h);
  return dtype == DType::kFloat16 ? half_bits_to_float(h) : bfloat16_bits_to_float(h);
}

// Uniform: bit for bit. Normal: each element within normal_tolerance (NaN never is).
inline FillVerdict compare_fill(const FillCase& c, const Tensor& predicted,
                                std::span<const std::byte> got) {
  FillVerdict v;
  const std::span<const std::byte> want = predicted.bytes();
  if (got.size() != want.size()) {
    v.mismatches = c.numel;
    return v;
  }
  const size_t size = dtype_size(c.dtype);
  for (int64_t i = 0; i < c.numel; ++i) {
    const auto at = static_cast<size_t>(i) * size;
    bool bad = false;
    if (c.distribution == RandomDistribution::kUniform) {
      bad = std::memcmp(got.data() + at, want.data() + at, size) != 0;
    } else {
      const double g = element_value(c.dtype, got, i), w = element_value(c.dtype, want, i);
      const double error = std::fabs(g - w);
      if (error > v.max_error || std::isnan(error)) v.max_error = error;
      bad = !(error <= normal_tolerance(c.dtype, c.b, w));
    }
    if (bad) {
      if (v.mismatches++ == 0) {
        v.first_bad = i;
        v.first_got = element_value(c.dtype, got, i);
        v.first_expected = element_value(c.dtype, want, i);
      }
    }
  }
  return v;
}

// "uniform(-2, 3) float16 numel 5 seed 42 offset 4" for messages.
inline std::string describe(const FillCase& c) {
  return fmt::format("{}({:g}, {:g}) {} numel {} seed {} offset {}",
                     distribution_name(c.distribution), c.a, c.b, dtype_name(c.dtype), c.numel,
                     c.seed, c.offset);
}

inline std::string describe(const FillVerdict& v) {
  if (v.pass()) return "ok";
  return fmt::format("{} mismatches, first at element {}: got {:.9g}, model {:.9g}", v.mismatches,
                     v.first_bad, v.first_got, v.first_expected);
}

}  // namespace meshsim::testing
