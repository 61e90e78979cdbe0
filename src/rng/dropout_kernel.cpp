#include "src/rng/dropout_kernel.hpp"

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/philox.hpp"

namespace meshsim {

namespace {

// The kernel's random values per thread and curand_uniform4 call.
constexpr int64_t kUnroll = 4;
// The caching allocator hands out blocks aligned far beyond the 16 bytes a vector load needs.
constexpr uint64_t kAllocationAlignment = 512;

// Where element `index` takes its uniform from. The unrolled kernel strides like the distribution
// kernels (four values per call). A vectorized one gives each thread `vec` neighbours per
// iteration, from ceil(vec / 4) calls (vec 2 takes a fresh call each time and uses half of it).
ElementSource dropout_source(uint64_t index, int64_t threads, int vec) {
  if (vec == 1) {
    KernelLaunch unrolled;
    unrolled.stride = threads;
    unrolled.unroll = kUnroll;
    return element_source(unrolled, index);
  }
  const auto v = static_cast<uint64_t>(vec);
  const uint64_t per_iteration = static_cast<uint64_t>(threads) * v;
  const uint64_t r = index % per_iteration;
  const uint64_t lane = r % v;
  const uint64_t calls_per_iteration = (v + kUnroll - 1) / kUnroll;
  return {index / per_iteration * calls_per_iteration + lane / kUnroll,
          static_cast<int64_t>(lane % kUnroll), r / v};
}

}  // namespace

void check_dropout_probability(double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw value_error(fmt::format("dropout probability has to be between 0 and 1, but got {}", p));
  }
}

void check_dropout(DType dtype, double p) {
  check_dropout_probability(p);
  if (!is_floating(dtype)) {
    throw runtime_error(
        fmt::format("\"fused_dropout\" not implemented for '{}'", scalar_type_name(dtype)));
  }
}

bool dropout_draws(double p, bool training, int64_t numel) {
  return training && p > 0.0 && p < 1.0 && numel > 0;
}

int dropout_vector_size(int64_t numel, DType dtype, uint64_t input_byte_offset) {
  const auto element = static_cast<uint64_t>(dtype_size(dtype));
  const uint64_t address = input_byte_offset % kAllocationAlignment;
  int vec = 1;
  for (int v = static_cast<int>(16 / element); v > 1; v /= 2) {
    if (address % (static_cast<uint64_t>(v) * element) == 0) {
      vec = v;
      break;
    }
  }
  // A smaller vector without a remainder is preferred to a larger one with one.
  while (vec > 1 && numel % vec != 0) vec /= 2;
  return vec;
}

Tensor predict_dropout(PhiloxState& state, const Tensor& input, double p, const GpuProfile& gpu,
                       uint64_t input_byte_offset) {
  const DType dtype = input.dtype();
  check_dropout(dtype, p);
  const int64_t numel = input.numel();
  if (numel == 0 || input.is_meta()) return input;
  const int64_t threads = random_kernel_threads(numel, gpu);
  const int vec = dropout_vector_size(numel, dtype, input_byte_offset);
  const bool is_double = dtype == DType::kFloat64;
  // The kept fraction and the scale in the kernel's accumulate type.
  const double keep = 1.0 - p;
  const auto keep_f = static_cast<float>(keep);
  const double scale = is_double ? 1.0 / keep : static_cast<float>(1.0 / keep_f);
  Tensor out(input.shape(), dtype);
  // Neighbours of a vectorized thread share a draw: it is computed once for them.
  ElementSource drawn{UINT64_MAX, 0, UINT64_MAX};
  PhiloxBlock words{};
  for (int64_t i = 0; i < numel; ++i) {
    const ElementSource s = dropout_source(static_cast<uint64_t>(i), threads, vec);
    if (s.thread != drawn.thread || s.call != drawn.call) {
      words = curand_block(state.seed, s.thread, state.offset / 4 + s.call);
      drawn = s;
    }
    const float u = uniform_from_word(words[static_cast<size_t>(s.component)]);
    const double kept = (is_double ? u < keep : u < keep_f) ? 1.0 : 0.0;
    const double x = input.get(i);
    // (x * mask) * scale, each product rounded to the accumulate type.
    const double value =
        is_double ? x * kept * scale
                  : static_cast<float>(static_cast<float>(x * kept) * static_cast<float>(scale));
    out.set(i, stored_as(dtype, value));
  }
  state.offset += dropout_counter_offset(numel, gpu);
  return out;
}

uint64_t dropout_counter_offset(int64_t numel, const GpuProfile& gpu) {
  const auto per_run = static_cast<uint64_t>(random_kernel_threads(numel, gpu) * kUnroll);
  return ((static_cast<uint64_t>(numel) - 1) / per_run + 1) * kUnroll;
}

}  // namespace meshsim
