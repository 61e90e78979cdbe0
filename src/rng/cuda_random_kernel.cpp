#include "src/rng/cuda_random_kernel.hpp"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/rng/philox.hpp"

namespace meshsim {

namespace {

constexpr int64_t kThreadsPerBlock = 256;
constexpr float kTwoPow32Inv = 2.3283064e-10f;           // exactly 2^-32
constexpr double kTwoPow53Inv = 1.1102230246251565e-16;  // 2^-53

int64_t unroll_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 4;
    case DType::kFloat64:
      return 2;
    default:
      throw runtime_error(
          fmt::format("\"check_uniform_bounds\" not implemented for '{}'", dtype_name(dtype)));
  }
}

// The words of the draw an element comes from.
PhiloxBlock draw_of(const PhiloxState& state, const ElementSource& s) {
  return curand_block(state.seed, s.thread, state.offset / 4 + s.call);
}

// The value the kernel stores for `v` computed in opmath: rounded to the tensor's dtype.
double stored(DType dtype, double v) {
  switch (dtype) {
    case DType::kFloat16:
      return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::kBFloat16:
      return bfloat16_bits_to_float(float_to_bfloat16_bits(static_cast<float>(v)));
    case DType::kFloat32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

}  // namespace

KernelLaunch KernelLaunch::plan(int64_t numel, DType dtype, const GpuProfile& gpu) {
  KernelLaunch l;
  l.numel = numel;
  l.unroll = unroll_of(dtype);
  if (numel <= 0) return l;
  l.grid = std::min((numel + kThreadsPerBlock - 1) / kThreadsPerBlock, gpu.max_blocks());
  l.stride = kThreadsPerBlock * l.grid;
  const auto per_call = static_cast<uint64_t>(l.stride * l.unroll);
  l.counter_offset = ((static_cast<uint64_t>(numel) - 1) / per_call + 1) * 4;
  return l;
}

ElementSource element_source(const KernelLaunch& launch, uint64_t index) {
  const auto stride = static_cast<uint64_t>(launch.stride);
  const uint64_t per_call = stride * static_cast<uint64_t>(launch.unroll);
  const uint64_t r = index % per_call;
  return {index / per_call, static_cast<int64_t>(r / stride), r % stride};
}

float uniform_from_word(uint32_t x) {
  // The product is exact (a power of two), so a fused multiply-add gives the same float.
  return static_cast<float>(x) * kTwoPow32Inv + kTwoPow32Inv / 2.0f;
}

double uniform_from_words(uint32_t x, uint32_t y) {
  const uint64_t z = static_cast<uint64_t>(x) ^ (static_cast<uint64_t>(y) << (53 - 32));
  return static_cast<double>(z) * kTwoPow53Inv + kTwoPow53Inv / 2.0;
}

Tensor predict_uniform(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                       double from, double to) {
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  Tensor out({numel}, dtype);
  const bool is_double = dtype == DType::kFloat64;
  // Bounds and their difference in the tensor's dtype, then opmath (float, or double).
  const double from_s = stored(dtype, from), to_s = stored(dtype, to);
  const double range = stored(dtype, to_s - from_s);
  for (int64_t e = 0; e < numel; ++e) {
    const ElementSource s = element_source(launch, static_cast<uint64_t>(e));
    const PhiloxBlock w = draw_of(state, s);
    double v = 0;
    if (is_double) {
      const auto c = static_cast<size_t>(2 * s.component);
      v = std::fma(uniform_from_words(w[c], w[c + 1]), range, from_s);
    } else {
      const float u = uniform_from_word(w[static_cast<size_t>(s.component)]);
      v = std::fma(u, static_cast<float>(range), static_cast<float>(from_s));
    }
    v = stored(dtype, v);
    out.set(e, v == to_s ? from_s : v);
  }
  state.offset += launch.counter_offset;
  return out;
}

Tensor predict_normal(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                      double mean, double std) {
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  Tensor out({numel}, dtype);
  for (int64_t e = 0; e < numel; ++e) {
    const ElementSource s = element_source(launch, static_cast<uint64_t>(e));
    const PhiloxBlock w = draw_of(state, s);
    double n = 0;
    if (dtype == DType::kFloat64) {
      // Both doubles of a draw come from one Box-Muller pair: (x0, x1) the radius, (x2, x3) the
      // angle in units of pi.
      const double u = uniform_from_words(w[0], w[1]);
      const double v =
          static_cast<double>(static_cast<uint64_t>(w[2]) ^ (static_cast<uint64_t>(w[3]) << 21)) *
              (2.0 * kTwoPow53Inv) +
          kTwoPow53Inv;
      const double radius = std::sqrt(-2.0 * std::log(u));
      n = radius *
          (s.component == 0 ? std::sin(std::numbers::pi * v) : std::cos(std::numbers::pi * v));
    } else {
      // Pairs (x0, x1) and (x2, x3): outputs (sin, cos) of each.
      const size_t pair = static_cast<size_t>(s.component / 2) * 2;
      const float u = uniform_from_word(w[pair]);
      constexpr float kAngleUnit = kTwoPow32Inv * 2.0f * std::numbers::pi_v<float>;
      const float v = static_cast<float>(w[pair + 1]) * kAngleUnit + kAngleUnit / 2.0f;
      const float radius = std::sqrt(-2.0f * std::log(u));
      n = radius * (s.component % 2 == 0 ? std::sin(v) : std::cos(v));
    }
    const double value =
        dtype == DType::kFloat64
            ? n * std + mean
            : static_cast<double>(std::fma(static_cast<float>(n), static_cast<float>(std),
                                           static_cast<float>(mean)));
    out.set(e, stored(dtype, value));
  }
  state.offset += launch.counter_offset;
  return out;
}

}  // namespace meshsim
