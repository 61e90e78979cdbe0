#include "sim/gpu/device_random_kernel.hpp"

#include <optional>

#include <fmt/format.h>

#include "sim/gpu/device_ops.hpp"
#include "sim/gpu/device_types.hpp"
#include "sim/gpu/stream_wait.hpp"
#include "src/rng/rank_rng.hpp"

namespace meshsim::sim::gpu {

Tensor DeviceRandomKernel::run(const PhiloxState& state, const KernelLaunch& launch,
                               const RandomOp& op, DType dtype) {
  const std::optional<RandomDType> element = random_dtype(dtype);
  if (!element) {
    throw runtime_error(
        fmt::format("the CUDA random kernel fills floating tensors, not {}", dtype_name(dtype)));
  }
  DeviceApi& api = comms_.api();
  const int64_t device = comms_.device_of(rank_);
  const StreamHandle stream = comms_.stream(rank_);
  Tensor out({launch.numel}, dtype);
  const RandomFillLaunch fill{op.kind == RandomOp::Kind::kUniform ? RandomDistribution::kUniform
                                                                  : RandomDistribution::kNormal,
                              *element,
                              launch.numel,
                              state.seed,
                              state.offset,
                              launch.grid,
                              op.a,
                              op.b};
  try {
    DeviceBuffers buffers(api);
    const DevicePtr buffer = buffers.allocate(device, out.nbytes());
    api.fill_random(device, buffer, fill, stream);
    // Wait before copying back: a copy into pageable memory would block on the kernel.
    if (!wait_until_done(1, timeout_, [&](size_t) {
           return api.stream_done(device, stream);
         }).empty()) {
      throw GpuError("cudaStreamQuery", fmt::format("still running after {} ms", timeout_.count()));
    }
    api.copy_to_host(device, out.mutable_bytes().data(), buffer, out.nbytes(), stream);
  } catch (const GpuError& e) {
    throw runtime_error(
        fmt::format("rank {}: the CUDA random kernel ({} elements of {}) failed on "
                    "device {}: {}",
                    rank_, launch.numel, dtype_name(dtype), device, e.what()));
  }
  return out;
}

}  // namespace meshsim::sim::gpu
