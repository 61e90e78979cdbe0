// The NCCL backend, "nccl": real collectives on one GPU per rank, random ops as the CUDA kernel on
// each rank's own device.
#pragma once

#include <memory>

#include "sim/gpu/device_api.hpp"
#include "sim/runtime/backend_registry.hpp"

namespace meshsim::sim::gpu {

// Registers it as "nccl" over `api` (null: this build's CUDA runtime and NCCL; tests pass a
// recording fake).
void register_nccl_backend(BackendRegistry& registry, std::shared_ptr<DeviceApi> api = nullptr);

}  // namespace meshsim::sim::gpu
