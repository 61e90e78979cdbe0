#include "src/rng/cuda_random_kernel.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/rng/philox.hpp"

namespace meshsim {

namespace detail {
void rand_float32_avx2(uint64_t seed, uint64_t first_block, uint64_t stride, uint64_t numel,
                       float* out);
void rand_float32_avx512(uint64_t seed, uint64_t first_block, uint64_t stride, uint64_t numel,
                         float* out);
}  // namespace detail

namespace {

constexpr int64_t kThreadsPerBlock = 256;
constexpr float kTwoPow32Inv = 2.3283064e-10f;           // exactly 2^-32
constexpr double kTwoPow53Inv = 1.1102230246251565e-16;  // 2^-53

// AT_DISPATCH's error for a dtype a floating-point kernel does not handle.
void require_floating(DType dtype, std::string_view kernel) {
  if (!is_floating(dtype)) {
    throw runtime_error(
        fmt::format("\"{}\" not implemented for '{}'", kernel, scalar_type_name(dtype)));
  }
}

// Calls `use(element, words, component, lane)` for every element the kernel writes, draw by
// draw: each (call, thread) draw is computed once, eight neighbouring threads at a time, and
// gives `launch.unroll` elements (component ii of the draw, in lane j of its group of eight).
template <typename Use>
void for_each_draw(const PhiloxState& state, const KernelLaunch& launch, PhiloxPath path,
                   Use&& use) {
  const auto numel = static_cast<uint64_t>(launch.numel);
  if (numel == 0) return;
  const auto stride = static_cast<uint64_t>(launch.stride);  // a multiple of 256
  const uint64_t per_call = stride * static_cast<uint64_t>(launch.unroll);
  uint32_t words[4][8];
  for (uint64_t call = 0, base = 0; base < numel; ++call, base += per_call) {
    for (uint64_t t = 0; t < stride && base + t < numel; t += 8) {
      curand_threads(state.seed, state.offset / 4 + call, t, words, path);
      for (int64_t ii = 0; ii < launch.unroll; ++ii) {
        const uint64_t first = base + static_cast<uint64_t>(ii) * stride + t;
        if (first >= numel) break;
        const size_t lanes = static_cast<size_t>(std::min<uint64_t>(8, numel - first));
        for (size_t j = 0; j < lanes; ++j) use(first + j, words, ii, j);
      }
    }
  }
}

}  // namespace

int64_t random_kernel_threads(int64_t numel, const GpuProfile& gpu) {
  return kThreadsPerBlock *
         std::min((numel + kThreadsPerBlock - 1) / kThreadsPerBlock, gpu.max_blocks());
}

KernelLaunch KernelLaunch::plan(int64_t numel, DType dtype, const GpuProfile& gpu) {
  KernelLaunch l;
  l.numel = numel;
  // Every dtype but double draws four floats per Philox call (curand_uniform4, curand_normal4).
  l.unroll = dtype == DType::kFloat64 ? 2 : 4;
  if (numel <= 0) return l;
  // Past 32-bit byte offsets, PyTorch splits the tensor into several launches, each with its own
  // grid and offset advance: not modelled (yet), so refused rather than predicted wrongly.
  const auto element = static_cast<int64_t>(dtype_size(dtype));
  if (numel - 1 > (int64_t{INT32_MAX}) / element) {
    throw runtime_error(fmt::format(
        "{} {} elements span more than 2^31 - 1 bytes: PyTorch splits such a tensor into "
        "several kernel launches, which meshsim does not predict",
        numel, dtype_name(dtype)));
  }
  l.stride = random_kernel_threads(numel, gpu);
  l.grid = l.stride / kThreadsPerBlock;
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

void predict_rand_float32(PhiloxState& state, const GpuProfile& gpu, std::span<float> out,
                          PhiloxPath path) {
  const auto numel = static_cast<int64_t>(out.size());
  const KernelLaunch launch = KernelLaunch::plan(numel, DType::kFloat32, gpu);
  const uint64_t first_block = state.offset / 4;
  const auto stride = static_cast<uint64_t>(launch.stride);
  // The vector paths number threads in 32 bits: always true of a real GPU's grid.
  if (path == PhiloxPath::kAvx512 && stride < (uint64_t{1} << 32)) {
    if (!__builtin_cpu_supports("avx512f")) throw value_error("this CPU has no AVX-512");
    detail::rand_float32_avx512(state.seed, first_block, stride, out.size(), out.data());
  } else if (path == PhiloxPath::kAvx2 && stride < (uint64_t{1} << 32)) {
    if (!__builtin_cpu_supports("avx2")) throw value_error("this CPU has no AVX2");
    detail::rand_float32_avx2(state.seed, first_block, stride, out.size(), out.data());
  } else {
    // u * 1 + 0 is u: no fused multiply-add to emulate.
    for_each_draw(state, launch, PhiloxPath::kScalar,
                  [&](uint64_t e, const uint32_t(&w)[4][8], int64_t ii, size_t j) {
                    const float u = uniform_from_word(w[ii][j]);
                    out[e] = u == 1.0f ? 0.0f : u;
                  });
  }
  state.offset += launch.counter_offset;
}

void check_uniform_bounds(DType dtype, double from, double to) {
  const double max = dtype == DType::kFloat64   ? std::numeric_limits<double>::max()
                     : dtype == DType::kFloat32 ? std::numeric_limits<float>::max()
                     : dtype == DType::kFloat16 ? 65504.0
                                                : 3.3895313892515355e38;  // bfloat16
  require_floating(dtype, "check_uniform_bounds");
  for (const auto& [value, name] : {std::pair{from, "from"}, std::pair{to, "to"}}) {
    if (!(value >= -max && value <= max)) {
      throw runtime_error(fmt::format("{} is out of bounds for {}", name, type_meta_name(dtype)));
    }
  }
  // Numbers as PyTorch's TORCH_CHECK streams them (six significant digits).
  if (!(from <= to)) {
    throw runtime_error(fmt::format(
        "uniform_ expects to return a [from, to) range, but found from={:g} > to={:g}", from, to));
  }
  if (!(to - from <= max)) {
    throw runtime_error(fmt::format(
        "uniform_ expects to-from <= std::numeric_limits<{}>::max(), but found to={:g} and "
        "from={:g} which result in to-from to exceed the limit",
        scalar_type_name(dtype), to, from));
  }
}

Tensor predict_uniform(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                       double from, double to, PhiloxPath path) {
  check_uniform_bounds(dtype, from, to);
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  Tensor out({numel}, dtype);
  // Bounds and their difference in the tensor's dtype, then opmath (float, or double).
  const double from_s = stored_as(dtype, from), to_s = stored_as(dtype, to);
  const double range = stored_as(dtype, to_s - from_s);
  if (dtype == DType::kFloat32) {
    // The common case, written straight into the tensor's memory.
    auto* values = reinterpret_cast<float*>(out.mutable_bytes().data());
    const auto from_f = static_cast<float>(from_s), to_f = static_cast<float>(to_s);
    const auto range_f = static_cast<float>(range);
    if (from_f == 0.0f && !std::signbit(from_f) && range_f == 1.0f) {
      predict_rand_float32(state, gpu, {values, static_cast<size_t>(numel)}, path);
      return out;
    }
    for_each_draw(state, launch, path,
                  [&](uint64_t e, const uint32_t(&w)[4][8], int64_t ii, size_t j) {
                    const float v = std::fma(uniform_from_word(w[ii][j]), range_f, from_f);
                    values[e] = v == to_f ? from_f : v;
                  });
  } else {
    const bool is_double = dtype == DType::kFloat64;
    for_each_draw(
        state, launch, path, [&](uint64_t e, const uint32_t(&w)[4][8], int64_t ii, size_t j) {
          double v = is_double ? std::fma(uniform_from_words(w[2 * ii][j], w[2 * ii + 1][j]), range,
                                          from_s)
                               : std::fma(uniform_from_word(w[ii][j]), static_cast<float>(range),
                                          static_cast<float>(from_s));
          v = stored_as(dtype, v);
          out.set(static_cast<int64_t>(e), v == to_s ? from_s : v);
        });
  }
  state.offset += launch.counter_offset;
  return out;
}

void check_normal(DType dtype, double std) {
  if (!(std >= 0.0))
    throw runtime_error(fmt::format("normal expects std >= 0.0, but found std {:g}", std));
  require_floating(dtype, "normal_kernel_cuda");
}

void check_bernoulli(double p) {
  if (!(p >= 0.0 && p <= 1.0))
    throw runtime_error(fmt::format("bernoulli_ expects p to be in [0, 1], but got p={:g}", p));
}

void check_exponential(DType dtype, double lambda) {
  if (!(lambda > 0.0)) {
    throw runtime_error(
        fmt::format("exponential_ expects lambda > 0.0, but found lambda={:g}", lambda));
  }
  if (!is_floating(dtype)) {
    throw runtime_error(fmt::format(
        "Exponential distribution is a continuous probability distribution. dtype must be a "
        "floating point but you specified {}",
        scalar_type_name(dtype)));
  }
}

void check_log_normal(DType dtype, double std) {
  if (!(std > 0.0)) {
    throw runtime_error(fmt::format("log_normal_ expects std > 0.0, but found std={:g}", std));
  }
  if (!is_floating(dtype)) {
    throw runtime_error(
        fmt::format("\"log_normal_cuda\" not implemented for '{}'", scalar_type_name(dtype)));
  }
}

void check_geometric(DType dtype, double p) {
  if (!(p > 0.0 && p < 1.0)) {
    throw runtime_error(fmt::format("geometric_ expects p to be in (0, 1), but got p={:g}", p));
  }
  if (dtype == DType::kBool) {
    throw runtime_error(
        fmt::format("\"geometric_cuda\" not implemented for '{}'", scalar_type_name(dtype)));
  }
}

namespace {

// The shared body of PyTorch's normal_and_transform kernels: each element gets one standard
// normal from curand_normal4 (curand_normal2_double for double tensors), and `transform` turns it
// into the stored value.
template <typename Transform>
Tensor normal_and_transform(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                            Transform&& transform) {
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  Tensor out({numel}, dtype);
  for_each_draw(
      state, launch, best_philox_path(),
      [&](uint64_t e, const uint32_t(&w)[4][8], int64_t ii, size_t j) {
        double n = 0;
        if (dtype == DType::kFloat64) {
          // Both doubles of a draw come from one Box-Muller pair: (x0, x1) the radius, (x2, x3) the
          // angle in units of pi.
          const double u = uniform_from_words(w[0][j], w[1][j]);
          const double v = static_cast<double>(static_cast<uint64_t>(w[2][j]) ^
                                               (static_cast<uint64_t>(w[3][j]) << 21)) *
                               (2.0 * kTwoPow53Inv) +
                           kTwoPow53Inv;
          const double radius = std::sqrt(-2.0 * std::log(u));
          n = radius * (ii == 0 ? std::sin(std::numbers::pi * v) : std::cos(std::numbers::pi * v));
        } else {
          // Pairs (x0, x1) and (x2, x3): outputs (sin, cos) of each.
          const int64_t pair = ii / 2 * 2;
          const float u = uniform_from_word(w[pair][j]);
          constexpr float kAngleUnit = kTwoPow32Inv * 2.0f * std::numbers::pi_v<float>;
          const float v = static_cast<float>(w[pair + 1][j]) * kAngleUnit + kAngleUnit / 2.0f;
          const float radius = std::sqrt(-2.0f * std::log(u));
          n = radius * (ii % 2 == 0 ? std::sin(v) : std::cos(v));
        }
        out.set(static_cast<int64_t>(e), stored_as(dtype, transform(n)));
      });
  state.offset += launch.counter_offset;
  return out;
}

// mean + std * n as one fused multiply-add, in float for every dtype but double.
double scaled_normal(double n, DType dtype, double mean, double std) {
  if (dtype == DType::kFloat64) return std::fma(n, std, mean);
  return std::fma(static_cast<float>(n), static_cast<float>(std), static_cast<float>(mean));
}

}  // namespace

Tensor predict_normal(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                      double mean, double std) {
  check_normal(dtype, std);
  return normal_and_transform(state, numel, dtype, gpu,
                              [&](double n) { return scaled_normal(n, dtype, mean, std); });
}

Tensor predict_log_normal(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                          double mean, double std) {
  check_log_normal(dtype, std);
  return normal_and_transform(state, numel, dtype, gpu, [&](double n) {
    const double x = scaled_normal(n, dtype, mean, std);
    return dtype == DType::kFloat64 ? std::exp(x)
                                    : static_cast<double>(std::exp(static_cast<float>(x)));
  });
}

namespace {

// The shared body of PyTorch's uniform_and_transform kernels: each element gets one (0, 1]
// uniform, float from one word (every dtype but double) or double from two, and `transform`
// turns it into the stored value.
template <typename Transform>
Tensor uniform_and_transform(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                             Transform&& transform) {
  const bool is_double = dtype == DType::kFloat64;
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  Tensor out({numel}, dtype);
  for_each_draw(state, launch, best_philox_path(),
                [&](uint64_t e, const uint32_t(&w)[4][8], int64_t ii, size_t j) {
                  const double u = is_double ? uniform_from_words(w[2 * ii][j], w[2 * ii + 1][j])
                                             : uniform_from_word(w[ii][j]);
                  out.set(static_cast<int64_t>(e), stored_as(dtype, transform(u)));
                });
  state.offset += launch.counter_offset;
  return out;
}

}  // namespace

Tensor predict_bernoulli(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                         double p) {
  check_bernoulli(p);
  // The comparison happens in double for double tensors and in float for every other dtype.
  const bool is_double = dtype == DType::kFloat64;
  const auto p_f = static_cast<float>(p);
  return uniform_and_transform(state, numel, dtype, gpu, [&](double u) {
    return (is_double ? u < p : static_cast<float>(u) < p_f) ? 1.0 : 0.0;
  });
}

Tensor predict_geometric(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                         double p) {
  check_geometric(dtype, p);
  if (dtype == DType::kFloat64) {
    const double log_q = std::log1p(-p);
    return uniform_and_transform(state, numel, dtype, gpu,
                                 [&](double u) { return std::ceil(std::log(u) / log_q); });
  }
  const float log_q = std::log1p(-static_cast<float>(p));
  return uniform_and_transform(state, numel, dtype, gpu, [&](double u) {
    return static_cast<double>(std::ceil(std::log(static_cast<float>(u)) / log_q));
  });
}

Tensor predict_exponential(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                           double lambda) {
  check_exponential(dtype, lambda);
  if (dtype == DType::kFloat64) {
    constexpr double kHalfEps = std::numeric_limits<double>::epsilon() / 2;
    return uniform_and_transform(state, numel, dtype, gpu, [&](double u) {
      // curand's uniform reaches 1, where log is 0: PyTorch substitutes -eps/2.
      const double log = u >= 1.0 - kHalfEps ? -kHalfEps : std::log(u);
      return -1.0 / lambda * log;
    });
  }
  constexpr float kHalfEps = std::numeric_limits<float>::epsilon() / 2;
  const auto lambda_f = static_cast<float>(lambda);
  return uniform_and_transform(state, numel, dtype, gpu, [&](double u) {
    const auto u_f = static_cast<float>(u);
    const float log = u_f >= 1.0f - kHalfEps ? -kHalfEps : std::log(u_f);
    return static_cast<double>(-1.0f / lambda_f * log);
  });
}

}  // namespace meshsim
