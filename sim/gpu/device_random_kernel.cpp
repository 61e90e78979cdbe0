#include "sim/gpu/device_random_kernel.hpp"

#include <thread>

#include <fmt/format.h>

#include "sim/gpu/device_ops.hpp"

namespace meshsim::sim::gpu {

namespace {

RandomDType random_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return RandomDType::kFloat64;
    case DType::kFloat16:
      return RandomDType::kFloat16;
    case DType::kBFloat16:
      return RandomDType::kBFloat16;
    case DType::kFloat32:
      return RandomDType::kFloat32;
    default:
      throw runtime_error(
          fmt::format("the CUDA random kernel fills floating tensors, not {}", dtype_name(dtype)));
  }
}

}  // namespace

Tensor DeviceRandomKernel::run(const PhiloxState& state, const KernelLaunch& launch,
                               Distribution kind, DType dtype, double a, double b) {
  DeviceApi& api = comms_.api();
  const int64_t device = comms_.device_of(rank_);
  const StreamHandle stream = comms_.stream(rank_);
  Tensor out({launch.numel}, dtype);
  const RandomFillLaunch fill{
      kind == Distribution::kUniform ? RandomDistribution::kUniform : RandomDistribution::kNormal,
      random_dtype(dtype),
      launch.numel,
      state.seed,
      state.offset,
      launch.grid,
      a,
      b};
  try {
    DeviceBuffers buffers(api);
    const DevicePtr buffer = buffers.allocate(device, out.nbytes());
    api.fill_random(device, buffer, fill, stream);
    // Wait before copying back: a copy into pageable memory would block on the kernel.
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!api.stream_done(device, stream)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        throw GpuError("cudaStreamQuery",
                       fmt::format("still running after {} ms", timeout_.count()));
      }
      std::this_thread::yield();
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
