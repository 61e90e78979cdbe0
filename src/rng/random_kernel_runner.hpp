// Where a random op's elementwise kernel runs: by default meshsim predicts it on the CPU
// (cuda_random_kernel.hpp); the NCCL backend plugs in a runner that launches the CUDA kernel on the
// rank's GPU, so scenario values there come from a real device.
#pragma once

#include <optional>

#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/philox_state.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

struct RandomOp;  // rank_rng.hpp

class RandomKernelRunner {
 public:
  virtual ~RandomKernelRunner() = default;
  // The values `launch` writes from `state` (not advanced here) for `op`, a uniform_ or normal_
  // whose arguments were checked, into a floating `dtype`; shape [launch.numel]. Throws
  // meshsim::Error when the device fails.
  virtual Tensor run(const PhiloxState& state, const KernelLaunch& launch, const RandomOp& op,
                     DType dtype) = 0;
};

}  // namespace meshsim
