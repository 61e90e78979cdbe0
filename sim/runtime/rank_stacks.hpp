// The fiber stacks of one world's ranks, and how an overflow is caught. A stack that overflows must
// never go unnoticed: it would silently corrupt the neighbouring stack or heap block.
//
// - Guard pages: each stack is its own mapping with an inaccessible page below it, so an overflow
//   faults at once and the crash handler names the rank. Each guarded stack costs two memory maps,
//   and the kernel allows vm.max_map_count (65,530 by default) per process, so guard pages are
//   used only while they fit (about 28,000 stacks with the default limit).
// - Canaries: past that (65,536 ranks and more), each stack's lowest 256 bytes hold a pattern that
//   is checked every time the rank's fiber switches out. An overflow is reported right after the
//   step that caused it, before any other rank runs.
// Either way the process stops with a message that names the rank, its scenario location and the
// --stack-kib to try; a corrupted process cannot be trusted to continue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <boost/context/stack_context.hpp>

namespace meshsim::sim {

enum class StackGuard { kAuto, kGuardPages, kCanary };

class RankStacks {
 public:
  // kAuto picks guard pages when `ranks` guarded stacks fit the memory-map budget, else canaries.
  RankStacks(int64_t ranks, size_t stack_bytes, StackGuard guard);
  ~RankStacks();
  RankStacks(const RankStacks&) = delete;
  RankStacks& operator=(const RankStacks&) = delete;

  StackGuard mode() const { return mode_; }
  size_t stack_bytes() const { return stack_bytes_; }

  // Boost.Fiber's StackAllocator for one rank's fiber.
  class Allocator {
   public:
    Allocator(RankStacks& owner, int64_t rank) : owner_(&owner), rank_(rank) {}
    boost::context::stack_context allocate();
    void deallocate(boost::context::stack_context& sc) noexcept;

   private:
    RankStacks* owner_;
    int64_t rank_;
  };
  Allocator allocator(int64_t rank) { return Allocator(*this, rank); }

  // Canary mode: whether rank's canary is intact (always true with guard pages).
  bool intact(int64_t rank) const;
  // The rank whose guard page or canary holds `address`, or -1. Async-signal-safe.
  int64_t overflowed_rank(uintptr_t address) const noexcept;

  // How many guarded stacks the memory-map budget allows now: (vm.max_map_count - maps in use -
  // a reserve for the allocator and libraries) / 2.
  static int64_t guarded_stacks_that_fit();

  static constexpr size_t kCanaryBytes = 256;

 private:
  struct Slot {
    uintptr_t base = 0;  // lowest address: the guard page, or the canary
    size_t bytes = 0;    // whole block, guard page included
  };
  StackGuard mode_;
  size_t stack_bytes_;
  size_t page_;
  std::vector<Slot> slots_;  // by rank
  void* slab_ = nullptr;     // guard pages: every rank's block, reserved at the first allocation
};

}  // namespace meshsim::sim
