// The random kernel runner of the NCCL backend: uniform_ and normal_ run as the CUDA kernel
// (sim/gpu/kernel/) on the rank's own GPU and stream, and the values come back to the host.
#pragma once

#include <chrono>
#include <cstdint>

#include "sim/gpu/nccl_communicators.hpp"
#include "src/rng/random_kernel_runner.hpp"

namespace meshsim::sim::gpu {

class DeviceRandomKernel final : public RandomKernelRunner {
 public:
  DeviceRandomKernel(NcclCommunicators& comms, int64_t rank, std::chrono::milliseconds timeout)
      : comms_(comms), rank_(rank), timeout_(timeout) {}

  // RuntimeError naming the rank and the CUDA call when the launch, the copy or the wait fails.
  Tensor run(const PhiloxState& state, const KernelLaunch& launch, const RandomOp& op,
             DType dtype) override;

 private:
  NcclCommunicators& comms_;
  int64_t rank_;
  std::chrono::milliseconds timeout_;
};

}  // namespace meshsim::sim::gpu
