// The CUDA kernel behind launch_random_fill: one thread per Philox subsequence, 256 per block,
// each running random_fill_thread (the body the host twin runs too).
#include <cuda_runtime.h>

#include "sim/gpu/kernel/random_fill_thread.hpp"
#include "sim/gpu/kernel/random_kernel.hpp"

namespace meshsim::sim::gpu {

namespace {

__global__ void __launch_bounds__(kRandomFillBlock)
    random_fill_kernel(RandomFillThreadArgs args, void* out) {
  const uint64_t thread =
      static_cast<uint64_t>(blockIdx.x) * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  random_fill_thread(args, thread, out);
}

}  // namespace

int launch_random_fill(void* stream, void* out, const RandomFillLaunch& launch) {
  // PyTorch launches nothing for an empty tensor (and does not advance the generator).
  if (launch.numel <= 0) return static_cast<int>(cudaSuccess);
  // A grid of more than 2^31 - 1 blocks does not exist; KernelLaunch::plan never asks for one.
  if (launch.grid < 1 || launch.grid > 0x7fffffff || out == nullptr) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const RandomFillThreadArgs args = random_fill_thread_args(launch);
  random_fill_kernel<<<static_cast<unsigned int>(launch.grid),
                       static_cast<unsigned int>(kRandomFillBlock), 0,
                       static_cast<cudaStream_t>(stream)>>>(args, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace meshsim::sim::gpu
