#include "sim/runtime/rendezvous_backend.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim::sim {

namespace {

// Kept out of call's frame, which every parked rank's stack holds.
[[noreturn]] __attribute__((noinline)) void refuse_self(std::string_view kind) {
  throw value_error(fmt::format(
      "Invalid {0} rank: {0} rank should not be the same as the rank of the current process.",
      kind));
}

// c10d refuses point-to-point with oneself before anything is sent (it would never complete).
void check_not_self(int64_t rank, int64_t peer, std::string_view kind) {
  if (rank == peer) refuse_self(kind);
}

}  // namespace

void RendezvousBackend::call(const Signature& signature, const CallBuffers& buffers,
                             const Group& group) {
  switch (signature.op) {
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      call_pair(signature, buffers, group);
      return;
    case CollectiveOp::kAllToAll:
      MESHSIM_ASSERT(buffers.inputs && buffers.outputs, "an all_to_all has inputs and outputs");
      if (static_cast<int64_t>(buffers.inputs->size()) != group.size()) {
        throw runtime_error("all_to_all needs one input tensor per group rank");
      }
      break;
    default:
      break;
  }
  // The last thing done, with nothing of this frame needed after: a jump, so this frame is not
  // on the stack while the rank is parked.
  rendezvous_.meet(rank_, group, signature, buffers, executor_);
}

void RendezvousBackend::call_pair(const Signature& signature, const CallBuffers& buffers,
                                  const Group& group) {
  // The n-th message from src to dst meets the n-th receive of it.
  const bool sends = signature.op == CollectiveOp::kSend;
  MESHSIM_ASSERT(signature.root && (sends ? buffers.input : buffers.output) != nullptr,
                 "a send or recv names its peer and its tensor");
  const int64_t peer = *signature.root;
  check_not_self(rank_, peer, sends ? "destination" : "source");
  rendezvous_.meet_pair(rank_, sends ? rank_ : peer, sends ? peer : rank_, group, signature,
                        buffers, executor_);
}

}  // namespace meshsim::sim
