// Small RAII helpers over DeviceApi that every NCCL-backend caller needs on every path: a group
// call that is always ended (NCCL's group depth is per thread: one left open would swallow every
// later launch), and device buffers that are always released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/gpu/device_api.hpp"

namespace meshsim::sim::gpu {

// ncclGroupStart in the constructor; end() ends it and reports its error; a group left by an
// exception is ended anyway (its error dropped: the first one is reported).
class GroupCall {
 public:
  explicit GroupCall(DeviceApi& api) : api_(api) { api_.group_start(); }
  ~GroupCall() {
    if (!open_) return;
    try {
      api_.group_end();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one reported
    }
  }
  GroupCall(const GroupCall&) = delete;
  GroupCall& operator=(const GroupCall&) = delete;
  void end() {
    open_ = false;
    api_.group_end();
  }

 private:
  DeviceApi& api_;
  bool open_ = true;
};

// Device memory released, newest first, when this goes away. Callers that may leave work
// running on the device (a timeout) abort it before this is destroyed: cudaFree waits for it.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(DeviceApi& api) : api_(api) {}
  ~DeviceBuffers() {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
      try {
        api_.release(it->first, it->second);
      } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's own outcome is reported
      }
    }
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  // cudaMalloc of 0 bytes gives no pointer; NCCL wants one even for empty tensors.
  DevicePtr allocate(int64_t device, size_t bytes) {
    held_.reserve(held_.size() + 1);  // so recording the buffer cannot fail after it exists
    const DevicePtr ptr = api_.allocate(device, bytes == 0 ? 1 : bytes);
    held_.emplace_back(device, ptr);
    return ptr;
  }

 private:
  DeviceApi& api_;
  std::vector<std::pair<int64_t, DevicePtr>> held_;
};

}  // namespace meshsim::sim::gpu
