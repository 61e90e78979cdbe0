// What AddressSanitizer needs to hear about fiber stacks. Debian's Boost.Context does not announce
// stack switches to ASan, so when an exception unwinds frames on a fiber stack their redzones stay
// poisoned (ASan can only clean the thread's own stack) and later calls trip on them. Stacks are
// registered here, and code that catches on a fiber calls forget_unwound_frames(). Without ASan
// all three are free.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meshsim::sim {

// Clears any poison ASan's shadow still holds for fresh stack memory: frames of fibers that never
// returned leave theirs behind, and a new mapping may reuse the same addresses.
void unpoison_stack_memory(void* start, size_t size) noexcept;
void register_fiber_stack(uintptr_t bottom, size_t size) noexcept;
void unregister_fiber_stack(uintptr_t bottom) noexcept;

// Call right after catching an exception on a fiber: clears the poison the unwound frames left
// below the caller. No effect outside ASan builds or off fiber stacks.
void forget_unwound_frames() noexcept;

// Whether this build runs under AddressSanitizer (which brings its own SIGSEGV reports).
bool built_with_asan() noexcept;

}  // namespace meshsim::sim
