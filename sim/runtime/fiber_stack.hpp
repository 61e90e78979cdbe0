// Fiber stacks, and what AddressSanitizer needs to hear about them. Debian's Boost.Context does
// not announce stack switches to ASan, so when an exception unwinds frames on a fiber stack their
// redzones stay poisoned (ASan can only clean the thread's own stack) and later calls trip on
// them. Stacks are registered here, and code that catches on a fiber calls
// forget_unwound_frames(). Without ASan both are free.
#pragma once

#include <cstddef>

#include <boost/context/fixedsize_stack.hpp>
#include <boost/context/stack_context.hpp>

namespace meshsim::sim {

// boost::fibers::fixedsize_stack that remembers where each stack lives (under ASan).
class TrackedStack {
 public:
  explicit TrackedStack(size_t size) : inner_(size) {}
  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& sc) noexcept;

 private:
  boost::context::fixedsize_stack inner_;
};

// Call right after catching an exception on a fiber: clears the poison the unwound frames left
// below the caller. No effect outside ASan builds or off fiber stacks.
void forget_unwound_frames() noexcept;

}  // namespace meshsim::sim
