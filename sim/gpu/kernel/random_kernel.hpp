// Launching PyTorch's elementwise CUDA distribution kernel (uniform_, normal_), or its host twin.
// The twin runs the same per-thread code on the CPU. Plain C++ (no CUDA headers), so the NCCL
// backend and the tests include it without nvcc.
#pragma once

#include <cstdint>

namespace meshsim::sim::gpu {

enum class RandomDistribution : int { kUniform, kNormal };
enum class RandomDType : int { kFloat32, kFloat64, kFloat16, kBFloat16 };

// One launch over `numel` contiguous elements, as PyTorch shapes it (docs/rng.md 2.3).
struct RandomFillLaunch {
  RandomDistribution distribution = RandomDistribution::kUniform;
  RandomDType dtype = RandomDType::kFloat32;
  int64_t numel = 0;
  uint64_t seed = 0;
  // The generator's Philox offset before this launch's advance, in 32-bit words. PyTorch keeps it
  // a multiple of 4; other values start inside a Philox block, as curand_init does, which the CPU
  // model (src/rng/cuda_random_kernel.hpp) does not predict.
  uint64_t offset = 0;
  int64_t grid = 0;  // from KernelLaunch::plan; block is always 256
  double a = 0.0;    // uniform: from; normal: mean
  double b = 1.0;    // uniform: to; normal: std
};

// Bytes one element of `dtype` takes (4, 8, 2, 2).
constexpr int64_t random_dtype_size(RandomDType dtype) {
  return dtype == RandomDType::kFloat64 ? 8 : dtype == RandomDType::kFloat32 ? 4 : 2;
}

// Enqueues the kernel on `stream` (a cudaStream_t; nullptr is the default stream) writing
// `numel` elements at `out` (device memory, at least numel * random_dtype_size bytes). Returns
// the cudaError_t of the launch as an int (0 = success) so callers need no CUDA headers;
// cudaErrorInvalidValue when numel > 0 and grid is not in [1, 2^31 - 1]. numel <= 0 launches
// nothing and returns 0, as PyTorch. Bounds are not checked here: callers run
// check_uniform_bounds / check_normal first, as PyTorch does before launching.
int launch_random_fill(void* stream, void* out, const RandomFillLaunch& launch);

// The host version of the same per-thread code (for tests without a GPU): fills `out` (host
// memory, numel * random_dtype_size bytes) by running every thread of the grid in turn. The
// uniform path gives the device's bits exactly; normals use the host's sinf/cosf/logf (and
// sin/cos/log for double) where the device has __sincosf/logf (and sincospi), so they agree
// with the device to about 1e-6 (float) or 1e-15 (double), times std.
void random_fill_on_host(void* out, const RandomFillLaunch& launch);

}  // namespace meshsim::sim::gpu
