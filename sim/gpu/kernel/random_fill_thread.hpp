// What one thread of PyTorch's distribution kernel writes (uniform_, normal_), for nvcc and g++.
// The CUDA kernel and its host twin share this body, so both run the same code.
#pragma once

#include <cstdint>
#include <cstring>

#include <curand_kernel.h>

#include "sim/gpu/kernel/random_kernel.hpp"

// Under nvcc the cuRAND draws are __device__ only, so the thread body is device code; the pure
// arithmetic helpers are also needed on the host (to prepare a launch) and are __host__ __device__.
// g++ compiles curand_kernel.h's functions as plain host functions, so everything is inline there.
#if defined(__CUDACC__)
#define MESHSIM_RANDOM_DEVICE __device__ __forceinline__
#define MESHSIM_RANDOM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MESHSIM_RANDOM_DEVICE inline
#define MESHSIM_RANDOM_HOST_DEVICE inline
#endif

namespace meshsim::sim::gpu {

// Threads per block: PyTorch's distribution kernels always launch 256.
constexpr int64_t kRandomFillBlock = 256;

// A launch reduced to what every thread needs, computed once on the host. Bounds, mean and std
// are already in the tensor's dtype and held in opmath (float, or double for float64 tensors),
// exactly as PyTorch converts them before it launches.
struct RandomFillThreadArgs {
  RandomDistribution distribution = RandomDistribution::kUniform;
  RandomDType dtype = RandomDType::kFloat32;
  uint64_t numel = 0;
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint64_t stride = 0;  // threads in the grid: 256 * grid
  // Uniform: from, to and (opmath)(to - from), the difference taken in the dtype. Normal: mean,
  // std (range unused).
  float a_f = 0.0f, b_f = 0.0f, range_f = 0.0f;
  double a_d = 0.0, b_d = 0.0, range_d = 0.0;
};

MESHSIM_RANDOM_HOST_DEVICE uint32_t random_float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

MESHSIM_RANDOM_HOST_DEVICE float random_bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// IEEE binary16 from float, rounding to nearest even, in integer operations only: the device's
// __float2half_rn and the host's conversion give these bits, and doing it by hand keeps the two
// compilations identical.
MESHSIM_RANDOM_HOST_DEVICE uint16_t random_half_bits(float value) {
  const uint32_t f = random_float_bits(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN stays NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs >= 0x38800000u) {
    // A normal half: rebase the exponent, then drop 13 mantissa bits to nearest even (a carry
    // into the exponent is the correct result).
    const uint32_t rebased = abs - (112u << 23);
    return static_cast<uint16_t>(sign | ((rebased + 0x0fffu + ((rebased >> 13) & 1u)) >> 13));
  }
  // A subnormal half counts units of 2^-24. Below 2^-25 everything rounds to zero (2^-25 itself
  // is a tie that goes to the even zero, which the general case below also gives).
  const uint32_t exponent = abs >> 23;
  if (exponent < 102u) return static_cast<uint16_t>(sign);
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;  // value = mantissa * 2^(exponent-150)
  const uint32_t shift = 126u - exponent;                   // 14 ... 24
  uint32_t units = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t tie = 1u << (shift - 1u);
  if (rest > tie || (rest == tie && (units & 1u) != 0u)) ++units;
  return static_cast<uint16_t>(sign | units);
}

MESHSIM_RANDOM_HOST_DEVICE float random_half_value(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0u) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // exact
    return sign != 0u ? -magnitude : magnitude;
  }
  if (exponent == 31u) return random_bits_float(sign | 0x7f800000u | (mantissa << 13));
  return random_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// bfloat16 from float, rounding to nearest even (c10::BFloat16's rounding).
MESHSIM_RANDOM_HOST_DEVICE uint16_t random_bfloat16_bits(float value) {
  const uint32_t f = random_float_bits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);
  return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

MESHSIM_RANDOM_HOST_DEVICE float random_bfloat16_value(uint16_t bits) {
  return random_bits_float(static_cast<uint32_t>(bits) << 16);
}

// `value` rounded to a 32-, 16- or bfloat16-bit dtype and read back as float.
MESHSIM_RANDOM_HOST_DEVICE float random_round_to(RandomDType dtype, float value) {
  switch (dtype) {
    case RandomDType::kFloat16:
      return random_half_value(random_half_bits(value));
    case RandomDType::kBFloat16:
      return random_bfloat16_value(random_bfloat16_bits(value));
    default:
      return value;
  }
}

// The kernel's arguments for `launch` (host code: PyTorch does these conversions before it
// launches). The double-to-float step before rounding to half or bfloat16 is c10's too.
inline RandomFillThreadArgs random_fill_thread_args(const RandomFillLaunch& launch) {
  RandomFillThreadArgs args;
  args.distribution = launch.distribution;
  args.dtype = launch.dtype;
  args.numel = launch.numel > 0 ? static_cast<uint64_t>(launch.numel) : 0u;
  args.seed = launch.seed;
  args.offset = launch.offset;
  args.stride = launch.grid > 0 ? static_cast<uint64_t>(launch.grid * kRandomFillBlock) : 0u;
  if (launch.dtype == RandomDType::kFloat64) {
    args.a_d = launch.a;
    args.b_d = launch.b;
    args.range_d = launch.b - launch.a;
  } else if (launch.distribution == RandomDistribution::kUniform) {
    args.a_f = random_round_to(launch.dtype, static_cast<float>(launch.a));
    args.b_f = random_round_to(launch.dtype, static_cast<float>(launch.b));
    // c10::Half and c10::BFloat16 subtract in float and round the difference to their dtype.
    args.range_f = random_round_to(launch.dtype, args.b_f - args.a_f);
  } else {
    // normal_ takes mean and std in opmath (float) without rounding them to the dtype.
    args.a_f = static_cast<float>(launch.a);
    args.b_f = static_cast<float>(launch.b);
  }
  return args;
}

namespace random_fill_detail {

// Stores float-opmath `value` as element `index` of a 32-, 16- or bfloat16-bit tensor. For
// uniform_, a value that equals `to` once rounded becomes `from` (curand's (0, 1] turned into
// torch's [from, to)); normal_ stores the rounded value as it is.
template <RandomDType D, RandomDistribution Dist>
MESHSIM_RANDOM_HOST_DEVICE void store_float(const RandomFillThreadArgs& a, void* out,
                                            uint64_t index, float value) {
  if constexpr (D == RandomDType::kFloat32) {
    if (Dist == RandomDistribution::kUniform && value == a.b_f) value = a.a_f;
    static_cast<float*>(out)[index] = value;
  } else {
    constexpr bool kHalf = D == RandomDType::kFloat16;
    uint16_t bits = kHalf ? random_half_bits(value) : random_bfloat16_bits(value);
    if (Dist == RandomDistribution::kUniform) {
      const float rounded = kHalf ? random_half_value(bits) : random_bfloat16_value(bits);
      // a_f already holds a value of the dtype, so converting it back is exact.
      if (rounded == a.b_f) bits = kHalf ? random_half_bits(a.a_f) : random_bfloat16_bits(a.a_f);
    }
    static_cast<uint16_t*>(out)[index] = bits;
  }
}

// float32, float16 and bfloat16: one curand_uniform4 / curand_normal4 per loop gives the
// thread's elements t, t + stride, t + 2 stride, t + 3 stride of that loop.
template <RandomDType D, RandomDistribution Dist>
MESHSIM_RANDOM_DEVICE void fill_thread_float(const RandomFillThreadArgs& a, uint64_t thread,
                                             void* out) {
  curandStatePhilox4_32_10_t state;
  curand_init(a.seed, thread, a.offset, &state);
  for (uint64_t first = thread; first < a.numel; first += 4 * a.stride) {
    const float4 draw =
        Dist == RandomDistribution::kUniform ? curand_uniform4(&state) : curand_normal4(&state);
    const float values[4] = {draw.x, draw.y, draw.z, draw.w};
    for (int ii = 0; ii < 4; ++ii) {
      const uint64_t index = first + static_cast<uint64_t>(ii) * a.stride;
      if (index >= a.numel) break;
      // u * range + from and n * std + mean, fused as nvcc compiles them by default.
      const float value = Dist == RandomDistribution::kUniform ? fmaf(values[ii], a.range_f, a.a_f)
                                                               : fmaf(values[ii], a.b_f, a.a_f);
      store_float<D, Dist>(a, out, index, value);
    }
  }
}

// float64: one curand_uniform2_double / curand_normal2_double per loop (four words) gives the
// thread's elements t and t + stride of that loop.
template <RandomDistribution Dist>
MESHSIM_RANDOM_DEVICE void fill_thread_double(const RandomFillThreadArgs& a, uint64_t thread,
                                              void* out) {
  curandStatePhilox4_32_10_t state;
  curand_init(a.seed, thread, a.offset, &state);
  double* values_out = static_cast<double*>(out);
  for (uint64_t first = thread; first < a.numel; first += 2 * a.stride) {
    const double2 draw = Dist == RandomDistribution::kUniform ? curand_uniform2_double(&state)
                                                              : curand_normal2_double(&state);
    const double values[2] = {draw.x, draw.y};
    for (int ii = 0; ii < 2; ++ii) {
      const uint64_t index = first + static_cast<uint64_t>(ii) * a.stride;
      if (index >= a.numel) break;
      if (Dist == RandomDistribution::kUniform) {
        const double value = fma(values[ii], a.range_d, a.a_d);
        values_out[index] = value == a.b_d ? a.a_d : value;
      } else {
        values_out[index] = fma(values[ii], a.b_d, a.a_d);
      }
    }
  }
}

template <RandomDistribution Dist>
MESHSIM_RANDOM_DEVICE void fill_thread(const RandomFillThreadArgs& a, uint64_t thread, void* out) {
  switch (a.dtype) {
    case RandomDType::kFloat32:
      fill_thread_float<RandomDType::kFloat32, Dist>(a, thread, out);
      break;
    case RandomDType::kFloat16:
      fill_thread_float<RandomDType::kFloat16, Dist>(a, thread, out);
      break;
    case RandomDType::kBFloat16:
      fill_thread_float<RandomDType::kBFloat16, Dist>(a, thread, out);
      break;
    case RandomDType::kFloat64:
      fill_thread_double<Dist>(a, thread, out);
      break;
  }
}

}  // namespace random_fill_detail

// Writes every element thread `thread` (0 <= thread < a.stride) of the launch writes into `out`
// (the whole tensor's bytes): a grid-stride loop of Philox draws from subsequence `thread`,
// starting at the generator's offset. Threads past the tensor's end write nothing; on the GPU
// they would also draw, which changes nothing since every thread has its own subsequence.
MESHSIM_RANDOM_DEVICE void random_fill_thread(const RandomFillThreadArgs& a, uint64_t thread,
                                              void* out) {
  if (a.distribution == RandomDistribution::kUniform) {
    random_fill_detail::fill_thread<RandomDistribution::kUniform>(a, thread, out);
  } else {
    random_fill_detail::fill_thread<RandomDistribution::kNormal>(a, thread, out);
  }
}

}  // namespace meshsim::sim::gpu
