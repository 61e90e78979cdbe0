// make_cuda_device_api for a build without nvcc, the CUDA runtime or NCCL: says how to get one.
#include "sim/gpu/device_api.hpp"

namespace meshsim::sim::gpu {

std::shared_ptr<DeviceApi> make_cuda_device_api() {
  throw runtime_error(
      "this meshsim was built without the NCCL backend (nvcc, the CUDA runtime, cuRAND or NCCL "
      "was not found); install the CUDA toolkit and NCCL, then `scripts/setup.sh build "
      "-Dnccl=enabled` (see README.md), or use --backend sim");
}

}  // namespace meshsim::sim::gpu
