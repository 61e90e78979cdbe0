#include "sim/gpu/nccl_backend.hpp"

#include "sim/gpu/device_random_kernel.hpp"
#include "sim/gpu/nccl_communicators.hpp"
#include "sim/gpu/nccl_executor.hpp"

namespace meshsim::sim::gpu {

namespace {

class NcclWorldBackend final : public WorldBackend {
 public:
  // Creates a stream and WORLD's communicator for every rank first; throws RuntimeError (or
  // GpuError) when that is impossible (no GPU, fewer GPUs than ranks, a build without NCCL).
  NcclWorldBackend(std::shared_ptr<DeviceApi> api, const BackendContext& context)
      : comms_(std::move(api), context.world_size),
        executor_(comms_, context.time, context.device_timeout),
        timeout_(context.device_timeout) {}

  Executor& executor() override { return executor_; }
  GroupListener* group_listener() override { return &comms_; }
  std::shared_ptr<RandomKernelRunner> random_kernel(int64_t rank) override {
    return std::make_shared<DeviceRandomKernel>(comms_, rank, timeout_);
  }
  std::optional<GpuProfile> gpu_profile() const override { return comms_.gpu_profile(); }

 private:
  NcclCommunicators comms_;
  NcclExecutor executor_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

void register_nccl_backend(BackendRegistry& registry, std::shared_ptr<DeviceApi> api) {
  registry.add({.name = "nccl",
                .summary = "real collectives on one GPU per rank",
                .simulated = false,
                .make = [api](const BackendContext& context) -> std::unique_ptr<WorldBackend> {
                  return std::make_unique<NcclWorldBackend>(api ? api : make_cuda_device_api(),
                                                            context);
                }});
}

}  // namespace meshsim::sim::gpu
