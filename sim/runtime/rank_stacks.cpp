#include "sim/runtime/rank_stacks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

// Maps kept free for the heap (large allocations are maps of their own), libraries and threads.
constexpr int64_t kMapReserve = 8192;

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
  const int64_t fit = guarded_stacks_that_fit();
  if (mode_ == StackGuard::kAuto) {
    mode_ = ranks <= fit ? StackGuard::kGuardPages : StackGuard::kCanary;
  } else if (mode_ == StackGuard::kGuardPages && ranks > fit) {
    throw Error(PyErrorType::kRuntimeError,
                fmt::format("{} ranks with guard pages need {} memory maps, but vm.max_map_count "
                            "leaves room for {} guarded stacks; use --stack-guard canary (or "
                            "auto), or raise vm.max_map_count",
                            ranks, 2 * ranks, fit));
  }
}

RankStacks::~RankStacks() {
  release();
}

void RankStacks::release() noexcept {
  for (Slot& slot : slots_) {
    if (slot.base != 0) unregister_fiber_stack(slot.base + guard_bytes());
    slot = Slot{};
  }
  if (slab_ != nullptr) {
    unpoison_stack_memory(slab_, slab_bytes_);  // leave no stale poison for the next mapping
    munmap(slab_, slab_bytes_);
  }
  slab_ = nullptr;
}

size_t RankStacks::guard_bytes() const {
  return mode_ == StackGuard::kGuardPages ? page_ : kCanaryBytes;
}

void RankStacks::prepare() {
  release();
  // One reservation for the whole world, rank 0 lowest. With guard pages each rank's block starts
  // with its own inaccessible page (mprotect splits the mapping: two maps per rank). With
  // canaries each block starts with its canary page and only the reservation's lowest page is
  // inaccessible, so even an overflow that runs through every stack below faults there, never in
  // the program's own data.
  const bool own_guard = mode_ == StackGuard::kGuardPages;
  const size_t block = own_guard ? page_ + stack_bytes_ : stack_bytes_;
  slab_bytes_ = (own_guard ? 0 : page_) + block * slots_.size();
  void* p = mmap(nullptr, slab_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(PyErrorType::kMemoryError, fmt::format("cannot reserve {} fiber stacks of {} KiB",
                                                       slots_.size(), stack_bytes_ / 1024));
  }
  slab_ = p;
  unpoison_stack_memory(p, slab_bytes_);
  const auto start = reinterpret_cast<uintptr_t>(p) + (own_guard ? 0 : page_);
  if (!own_guard && mprotect(p, page_, PROT_NONE) != 0) {
    release();
    throw Error(PyErrorType::kMemoryError, "cannot protect the page below the fiber stacks");
  }
  for (size_t r = 0; r < slots_.size(); ++r) {
    const uintptr_t base = start + r * block;
    if (own_guard) {
      if (mprotect(reinterpret_cast<void*>(base), page_, PROT_NONE) != 0) {
        release();
        throw Error(PyErrorType::kMemoryError,
                    fmt::format("cannot place the guard page of rank {}'s fiber stack (the "
                                "memory-map limit?); use --stack-guard canary",
                                r));
      }
    }
    // A canary is left as the fresh mapping made it: zero, and never written.
    slots_[r] = Slot{base, block};
    register_fiber_stack(base + guard_bytes(), block - guard_bytes());
  }
}

boost::context::stack_context RankStacks::Allocator::allocate() {
  const Slot& slot = owner_->slots_[static_cast<size_t>(rank_)];
  MESHSIM_ASSERT(slot.base != 0, fmt::format("rank {}'s stack was not prepared", rank_));
  boost::context::stack_context sc;
  sc.size = slot.bytes - owner_->guard_bytes();
  sc.sp = reinterpret_cast<void*>(slot.base + slot.bytes);  // stacks grow down from the top
  return sc;
}

void RankStacks::Allocator::deallocate(boost::context::stack_context&) noexcept {
  // The stacks live until the world releases them all.
}

bool RankStacks::intact(int64_t rank) const {
  if (mode_ != StackGuard::kCanary) return true;
  const Slot& slot = slots_[static_cast<size_t>(rank)];
  if (slot.base == 0) return true;
  // An intact canary was only ever read, so the kernel backs every rank's with its one zero page
  // and the loads hit the cache. memcmp is the C library's vectorised compare, for the machine it
  // runs on: a word-by-word loop (which the compiler leaves scalar) cost 170 ns per switch.
  static const std::array<unsigned char, kCanaryBytes> kZeros{};
  return std::memcmp(reinterpret_cast<const void*>(slot.base), kZeros.data(), kCanaryBytes) == 0;
}

int64_t RankStacks::overflowed_rank(uintptr_t address) const noexcept {
  if (mode_ != StackGuard::kGuardPages) return -1;  // canaries: see below_stack
  for (size_t r = 0; r < slots_.size(); ++r) {
    const Slot& s = slots_[r];
    if (s.base != 0 && address >= s.base && address < s.base + page_) {
      return static_cast<int64_t>(r);
    }
  }
  return -1;
}

bool RankStacks::below_stack(int64_t rank, uintptr_t address) const noexcept {
  if (rank < 0 || static_cast<size_t>(rank) >= slots_.size() || slab_ == nullptr) return false;
  const Slot& s = slots_[static_cast<size_t>(rank)];
  // From the reservation's start up to the top of this rank's guard or canary: where its
  // overflow runs (through the stacks of lower ranks, in canary mode).
  return s.base != 0 && address >= reinterpret_cast<uintptr_t>(slab_) &&
         address < s.base + guard_bytes();
}

}  // namespace meshsim::sim
