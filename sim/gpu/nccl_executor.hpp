// The NCCL executor: once the rendezvous has met every member of a collective with agreeing
// signatures, copies each member's tensor to its GPU, issues every member's NCCL call inside one
// group start/end on the members' streams, copies the results back and waits. Object collectives
// and the store's new_group stay on the host. Hangs, desyncs and reports are the rendezvous's, so
// they read exactly as with the simulated backend.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sim/gpu/device_ops.hpp"
#include "sim/gpu/nccl_communicators.hpp"
#include "sim/runtime/meeting.hpp"
#include "sim/runtime/sim_executor.hpp"
#include "sim/runtime/virtual_time.hpp"

namespace meshsim::sim::gpu {

class NcclExecutor final : public Executor {
 public:
  // `device_timeout`: how long (wall clock) a launched collective may run on the devices before
  // its communicators are aborted and every member fails.
  NcclExecutor(NcclCommunicators& comms, VirtualTime& time,
               std::chrono::milliseconds device_timeout = std::chrono::minutes(5))
      : comms_(comms), time_(time), host_(time), device_timeout_(device_timeout) {}

  // Fills every member's exchange, or fails every member with one error naming the collective,
  // the group and the rank whose CUDA or NCCL call failed (that group's communicators are then
  // aborted). Meta tensors are refused: there is no data to move.
  void execute(Meeting& meeting) override;

 private:
  void run_on_devices(Meeting& m, DeviceBuffers& buffers);

  NcclCommunicators& comms_;
  VirtualTime& time_;
  SimExecutor host_;  // object collectives go through the host
  std::chrono::milliseconds device_timeout_;
};

}  // namespace meshsim::sim::gpu
