#include "sim/runtime/backend_decorators.hpp"

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

void ForwardingBackend::call(const Signature& signature, const CallBuffers& buffers,
                             const Group& group) {
  before(signature, group);
  try {
    inner_->call(signature, buffers, group);
  } catch (const Error&) {
    forget_unwound_frames();  // ASan: the frames the exception left may be reused by after()
    after(signature, group);
    throw;
  }
  after(signature, group);
}

void FaultInjectingBackend::before(const Signature& signature, const Group&) {
  const int64_t k = ++calls_;
  for (const Fault* f : faults_at(faults_, rank_, Fault::Trigger::kCollective, k)) {
    switch (f->kind) {
      case Fault::Kind::kStall:
        activity_.clock += f->seconds;
        break;
      case Fault::Kind::kCrash:
        throw InjectedCrash{fmt::format("injected crash entering {} ({}, {})", signature.describe(),
                                        f->describe(), f->where.to_string())};
      case Fault::Kind::kStackOverflow:
        overflow_fiber_stack();
      case Fault::Kind::kBackendError:
        throw runtime_error(fmt::format(
            "DistBackendError: NCCL error in {}: unhandled system error (injected: {}, {})",
            signature.describe(), f->describe(), f->where.to_string()));
    }
  }
}

void TracingBackend::after(const Signature& signature, const Group& group) {
  // A call refused before it met anyone (bad arguments, not a member) is not a collective.
  if (activity_.meetings_entered == meetings_before_) return;
  trace_.meeting(rank_, activity_.site, signature, group.id, group.size(), activity_.last_seq,
                 entered_at_, activity_.clock);
}

}  // namespace meshsim::sim
