// The fiber stacks of one world's ranks, and how an overflow is caught. A stack that overflows must
// never go unnoticed: it would silently corrupt the neighbouring stack or heap block.
//
// - Guard pages: each stack is its own mapping with an inaccessible page below it, so an overflow
//   faults at once and the crash handler names the rank. Each guarded stack costs two memory maps,
//   and the kernel allows vm.max_map_count (65,530 by default) per process, so guard pages are
//   used only while they fit (about 28,000 stacks with the default limit).
// - Canaries: past that (65,536 ranks and more), each stack's lowest page is left zero and never
//   written, and is checked whenever the rank's fiber switches out (it blocks, yields or ends),
//   before any other fiber runs: any nonzero word means the stack ran into it. A page that is only
//   read costs no memory (the kernel maps its one zero page there), where a written pattern cost
//   every rank a page. A fault while a rank runs is also checked against that rank's stack. What
//   no canary can see is a frame that steps past the page, or writes only zeros into it, and
//   writes only into memory that does not fault: for certainty at that scale, raise
//   vm.max_map_count.
// Either way the process stops with a message that names the rank, its scenario location and the
// --stack-kib to try; a corrupted process cannot be trusted to continue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <boost/context/stack_context.hpp>

#include "src/enum_names.hpp"

namespace meshsim::sim {

enum class StackGuard { kAuto, kGuardPages, kCanary };
// As `meshsim run --stack-guard` names them.
inline constexpr EnumName<StackGuard> kStackGuardNames[] = {
    {StackGuard::kAuto, "auto"},
    {StackGuard::kGuardPages, "pages"},
    {StackGuard::kCanary, "canary"},
};

class RankStacks {
 public:
  // kAuto picks guard pages when `ranks` guarded stacks fit the memory-map budget, else canaries.
  // Throws meshsim::Error (RuntimeError) when kGuardPages is asked for more than fit.
  RankStacks(int64_t ranks, size_t stack_bytes, StackGuard guard);
  ~RankStacks();
  RankStacks(const RankStacks&) = delete;
  RankStacks& operator=(const RankStacks&) = delete;

  StackGuard mode() const { return mode_; }
  size_t stack_bytes() const { return stack_bytes_; }

  // Allocates every rank's stack, before any fiber exists, so that a failure (MemoryError) leaves
  // nothing half-created. Called by World::run; stacks live until the next prepare() or the end.
  void prepare();

  // Boost.Fiber's StackAllocator for one rank's fiber: hands out the prepared stack.
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
  // Whether `address` is where an overflow of rank's stack lands: its guard page or canary, or
  // (canary mode) anywhere below it in the world's reservation. Async-signal-safe.
  bool below_stack(int64_t rank, uintptr_t address) const noexcept;

  // How many guarded stacks the memory-map budget allows now: (vm.max_map_count - maps in use -
  // a reserve for the allocator and libraries) / 2.
  static int64_t guarded_stacks_that_fit();

  // One page: frames up to this size cannot step over it without writing into it.
  static constexpr size_t kCanaryBytes = 4096;

 private:
  struct Slot {
    uintptr_t base = 0;  // lowest address: the guard page, or the canary
    size_t bytes = 0;    // the whole block, guard or canary included
  };
  StackGuard mode_;
  size_t stack_bytes_;
  size_t page_;
  void release() noexcept;
  size_t guard_bytes() const;  // at the bottom of each block: the guard page or the canary

  std::vector<Slot> slots_;  // by rank
  void* slab_ = nullptr;     // every rank's block, in one reservation
  size_t slab_bytes_ = 0;
};

}  // namespace meshsim::sim
