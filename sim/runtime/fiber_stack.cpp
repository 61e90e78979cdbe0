#include "sim/runtime/fiber_stack.hpp"

#include <map>

#if defined(__SANITIZE_ADDRESS__)
#define MESHSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MESHSIM_ASAN 1
#endif
#endif

#if defined(MESHSIM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace meshsim::sim {

#if defined(MESHSIM_ASAN)
namespace {
// Lowest address -> size of every live fiber stack (one OS thread runs them all).
std::map<uintptr_t, size_t>& stacks() {
  static std::map<uintptr_t, size_t> registry;
  return registry;
}
}  // namespace
#endif

void unpoison_stack_memory([[maybe_unused]] void* start, [[maybe_unused]] size_t size) noexcept {
#if defined(MESHSIM_ASAN)
  __asan_unpoison_memory_region(start, size);
#endif
}

void register_fiber_stack([[maybe_unused]] uintptr_t bottom,
                          [[maybe_unused]] size_t size) noexcept {
#if defined(MESHSIM_ASAN)
  stacks()[bottom] = size;
#endif
}

void unregister_fiber_stack([[maybe_unused]] uintptr_t bottom) noexcept {
#if defined(MESHSIM_ASAN)
  stacks().erase(bottom);
#endif
}

bool built_with_asan() noexcept {
#if defined(MESHSIM_ASAN)
  return true;
#else
  return false;
#endif
}

__attribute__((noinline)) void forget_unwound_frames() noexcept {
#if defined(MESHSIM_ASAN)
  volatile char probe = 0;
  const auto here = reinterpret_cast<uintptr_t>(&probe);
  auto it = stacks().upper_bound(here);
  if (it == stacks().begin()) return;
  --it;
  const uintptr_t bottom = it->first;
  if (here >= bottom + it->second) return;  // not on a fiber stack
  // Everything below this (non-inlined) frame belongs to frames that are gone; clearing this
  // frame's own redzones too is harmless, its epilogue clears them anyway.
  __asan_unpoison_memory_region(reinterpret_cast<void*>(bottom), here - bottom);
  (void)probe;
#endif
}

}  // namespace meshsim::sim
