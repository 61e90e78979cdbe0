#include "sim/runtime/crash_handler.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "sim/runtime/fiber_stack.hpp"

namespace meshsim::sim::crash {

namespace {

std::atomic<const RankStacks*> g_stacks{nullptr};
std::atomic<const std::vector<RankActivity>*> g_activity{nullptr};
std::atomic<int64_t> g_running{-1};

// Message building without allocation: a signal handler may not call malloc.
class Message {
 public:
  Message& operator<<(const char* s) { return append(s, std::strlen(s)); }
  Message& operator<<(const std::string& s) { return append(s.data(), s.size()); }
  Message& operator<<(int64_t v) {
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) append("-", 1);
    while (n > 0) append(&digits[--n], 1);
    return *this;
  }
  void write_to_stderr() const {
    size_t done = 0;
    while (done < used_) {
      const ssize_t w = ::write(STDERR_FILENO, buffer_ + done, used_ - done);
      if (w <= 0) return;
      done += static_cast<size_t>(w);
    }
  }

 private:
  Message& append(const char* s, size_t n) {
    n = std::min(n, sizeof(buffer_) - used_);
    std::memcpy(buffer_ + used_, s, n);
    used_ += n;
    return *this;
  }
  char buffer_[1024];
  size_t used_ = 0;
};

// "at FILE:LINE:COL (STEP step)" for a rank, when known.
void describe_location(Message& m, int64_t rank) {
  const std::vector<RankActivity>* activity = g_activity.load();
  if (activity == nullptr || rank < 0 || static_cast<size_t>(rank) >= activity->size()) return;
  const RankActivity& a = (*activity)[static_cast<size_t>(rank)];
  if (a.where.file.empty()) return;
  m << " at " << a.where.file << ":" << a.where.line << ":" << a.where.column;
  if (!a.step.empty()) m << " (" << a.step << " step)";
}

[[noreturn]] void report_overflow(int64_t rank, const char* how) {
  const RankStacks* stacks = g_stacks.load();
  const auto kib = static_cast<int64_t>(stacks ? stacks->stack_bytes() / 1024 : 0);
  Message m;
  m << "meshsim: fatal: rank " << rank << " overflowed its " << kib << " KiB fiber stack (" << how
    << ")";
  describe_location(m, rank);
  m << ". Rerun with a larger stack, for example --stack-kib " << kib * 4 << ".\n";
  m.write_to_stderr();
  _exit(kExitStackOverflow);
}

void on_fault(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  const RankStacks* stacks = g_stacks.load();
  const int64_t overflowed = stacks ? stacks->overflowed_rank(address) : -1;
  if (overflowed >= 0) {
    report_overflow(overflowed, stacks->mode() == StackGuard::kGuardPages
                                    ? "it touched the guard page below it"
                                    : "it wrote past its canary");
  }
  const int64_t running = g_running.load();
  // A fiber that ran far past the bottom of its stack faults somewhere below it, or leaves its
  // canary broken before it faults elsewhere.
  if (stacks != nullptr && running >= 0 &&
      (stacks->below_stack(running, address) || !stacks->intact(running))) {
    report_overflow(running, "it faulted below its stack");
  }
  Message m;
  m << "meshsim: fatal: " << (signal == SIGBUS ? "SIGBUS" : "SIGSEGV") << " (a bug in meshsim)";
  if (running >= 0) {
    m << " while rank " << running << " was running";
    describe_location(m, running);
    m << ". If its fiber stack overflowed, rerun with a larger --stack-kib.";
  }
  m << "\n";
  m.write_to_stderr();
  // SA_RESETHAND restored the default action: returning re-runs the access and dumps core.
}

}  // namespace

void watch(const RankStacks* stacks, const std::vector<RankActivity>* activity) {
  g_stacks = stacks;
  g_activity = activity;
  g_running = -1;
}

void set_running_rank(int64_t rank) noexcept {
  g_running.store(rank, std::memory_order_relaxed);
}

void check_stack(int64_t rank) noexcept {
  const RankStacks* stacks = g_stacks.load(std::memory_order_relaxed);
  if (stacks != nullptr && !stacks->intact(rank)) {
    report_overflow(rank, "its canary was overwritten");
  }
}

void install_handlers() {
  // Installed again at every call: a host program (a test framework) may have replaced them.
  if (built_with_asan()) return;
  // The handler must not run on the stack that just overflowed.
  static char alternate[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alternate;
  ss.ss_size = sizeof(alternate);
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace meshsim::sim::crash
