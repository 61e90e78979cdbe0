#include "sim/runtime/rank_stacks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "sim/runtime/fiber_stack.hpp"

namespace meshsim::sim {

namespace {

// Maps kept free for the heap (large allocations are maps of their own), libraries and threads.
constexpr int64_t kMapReserve = 8192;

constexpr unsigned char kCanaryByte = 0xA5;

int64_t read_first_integer(const char* path) {
  std::ifstream in(path);
  int64_t v = -1;
  in >> v;
  return in ? v : -1;
}

int64_t maps_in_use() {
  std::ifstream in("/proc/self/maps");
  int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  return lines;
}

}  // namespace

int64_t RankStacks::guarded_stacks_that_fit() {
  const int64_t limit = read_first_integer("/proc/sys/vm/max_map_count");
  if (limit <= 0) return 0;
  return std::max<int64_t>(0, (limit - maps_in_use() - kMapReserve) / 2);
}

RankStacks::RankStacks(int64_t ranks, size_t stack_bytes, StackGuard guard)
    : mode_(guard),
      page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))),
      slots_(static_cast<size_t>(ranks)) {
  stack_bytes_ = (stack_bytes + page_ - 1) / page_ * page_;
  if (mode_ == StackGuard::kAuto) {
    mode_ = ranks <= guarded_stacks_that_fit() ? StackGuard::kGuardPages : StackGuard::kCanary;
  }
}

RankStacks::~RankStacks() {
  if (slab_ != nullptr) munmap(slab_, (stack_bytes_ + page_) * slots_.size());
}

boost::context::stack_context RankStacks::Allocator::allocate() {
  RankStacks& o = *owner_;
  Slot& slot = o.slots_[static_cast<size_t>(rank_)];
  boost::context::stack_context sc;
  if (o.mode_ == StackGuard::kGuardPages) {
    // One reservation for the whole world, made on first use; each rank's block starts with its
    // guard page. mprotect splits the mapping, so each rank still costs two maps, but only one
    // system call.
    slot.bytes = o.stack_bytes_ + o.page_;
    if (o.slab_ == nullptr) {
      void* p = mmap(nullptr, slot.bytes * o.slots_.size(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      o.slab_ = p;
    }
    slot.base = reinterpret_cast<uintptr_t>(o.slab_) + static_cast<size_t>(rank_) * slot.bytes;
    if (mprotect(reinterpret_cast<void*>(slot.base), o.page_, PROT_NONE) != 0) {
      throw std::bad_alloc();  // the kernel's map limit: reported as an allocation failure
    }
    sc.size = o.stack_bytes_;
  } else {
    slot.bytes = o.stack_bytes_;
    void* p = std::malloc(slot.bytes);
    if (p == nullptr) throw std::bad_alloc();
    slot.base = reinterpret_cast<uintptr_t>(p);
    std::memset(p, kCanaryByte, kCanaryBytes);
    sc.size = slot.bytes - kCanaryBytes;
  }
  sc.sp = reinterpret_cast<void*>(slot.base + slot.bytes);  // stacks grow down from the top
  register_fiber_stack(slot.base + slot.bytes - sc.size, sc.size);
  return sc;
}

void RankStacks::Allocator::deallocate(boost::context::stack_context& sc) noexcept {
  RankStacks& o = *owner_;
  Slot& slot = o.slots_[static_cast<size_t>(rank_)];
  unregister_fiber_stack(reinterpret_cast<uintptr_t>(sc.sp) - sc.size);
  // Guarded stacks stay reserved, guard included, until the world ends and unmaps them all.
  if (o.mode_ != StackGuard::kGuardPages) std::free(reinterpret_cast<void*>(slot.base));
  slot = Slot{};
}

bool RankStacks::intact(int64_t rank) const {
  if (mode_ != StackGuard::kCanary) return true;
  const Slot& slot = slots_[static_cast<size_t>(rank)];
  if (slot.base == 0) return true;
  const auto* p = reinterpret_cast<const unsigned char*>(slot.base);
  return std::all_of(p, p + kCanaryBytes, [](unsigned char b) { return b == kCanaryByte; });
}

int64_t RankStacks::overflowed_rank(uintptr_t address) const noexcept {
  const size_t guard = mode_ == StackGuard::kGuardPages ? page_ : kCanaryBytes;
  for (size_t r = 0; r < slots_.size(); ++r) {
    const Slot& s = slots_[r];
    // The guard page itself, or just below the block (a frame that skipped past the canary).
    if (s.base != 0 && address + page_ >= s.base && address < s.base + guard) {
      return static_cast<int64_t>(r);
    }
  }
  return -1;
}

}  // namespace meshsim::sim
