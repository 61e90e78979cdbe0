// One rank's handle on the collectives, behind the Backend interface, for every backend: the
// shared rendezvous meets the ranks, the backend's executor (simulated or NCCL) computes or
// launches what they get.
#pragma once

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

class RendezvousBackend final : public Backend {
 public:
  RendezvousBackend(int64_t rank, Rendezvous& rendezvous, Executor& executor)
      : rank_(rank), rendezvous_(rendezvous), executor_(executor) {}

  void call(const Signature& signature, const CallBuffers& buffers, const Group& group) override;

 private:
  // Send and recv; out of `call`, whose collectives jump to the rendezvous with no frame of their
  // own.
  __attribute__((noinline)) void call_pair(const Signature& signature, const CallBuffers& buffers,
                                           const Group& group);

  int64_t rank_;
  Rendezvous& rendezvous_;
  Executor& executor_;
};

}  // namespace meshsim::sim
