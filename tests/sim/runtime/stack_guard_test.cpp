// A rank that overflows its fiber stack stops the process with a message naming the rank and the
// --stack-kib to try, with guard pages and with canaries. Each case runs in a child process.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "sim/runtime/crash_handler.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/rank_stacks.hpp"
#include "sim/runtime/world.hpp"

using namespace meshsim::sim;

namespace {

// Recurses through frames of about 512 bytes, each written in full, until `depth` is reached.
__attribute__((noinline)) int64_t recurse(int64_t depth) {
  volatile char frame[512];
  std::memset(const_cast<char*>(frame), static_cast<int>(depth), sizeof(frame));
  if (depth == 0) return frame[0];
  return recurse(depth - 1) + frame[7];
}

// Frames of 2 KiB of which only one byte is written: an overflow that writes little.
__attribute__((noinline)) int64_t recurse_sparse(int64_t depth) {
  volatile char frame[2048];
  frame[0] = static_cast<char>(depth);
  if (depth == 0) return frame[0];
  return recurse_sparse(depth - 1) + frame[0];
}

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs a 4-rank world with 16 KiB stacks in a child; rank 1 recurses `depth` frames.
ChildResult run_world_in_child(StackGuard guard, int64_t depth, bool sparse = false) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    WorldOptions options;
    options.stack_size = 16 * 1024;
    options.stack_guard = guard;
    World world(4, options);
    crash::watch(&world.stacks(), nullptr);
    int64_t sink = 0;
    world.run(
        [&](int64_t r) { sink += r != 1   ? r
                                 : sparse ? recurse_sparse(depth)
                                          : recurse(depth); },
        [] { return std::vector<std::optional<std::string>>(4); });
    _exit(sink == 12345 ? 9 : 0);
  }
  close(pipe_fds[1]);
  ChildResult out;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;)
    out.stderr_text.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

}  // namespace

TEST_CASE("stack guard: an overflow is reported by guard page or canary, never silent",
          "[sim][runtime][stack]") {
  if (built_with_asan()) {
    WARN("skipped under AddressSanitizer, which reports overflows itself");
    return;
  }
  for (StackGuard guard : {StackGuard::kGuardPages, StackGuard::kCanary}) {
    INFO((guard == StackGuard::kGuardPages ? "guard pages" : "canaries"));
    // A shallow recursion fits in 16 KiB.
    CHECK(run_world_in_child(guard, 4).exit_code == 0);
    // Deep ones do not: just past the bottom, far past it, and with frames that write one byte in
    // 2 KiB. Each time rank 1 is named, with the flag to change.
    for (const auto& [depth, sparse] :
         {std::pair{int64_t{40}, false}, std::pair{int64_t{100}, false},
          std::pair{int64_t{4000}, false}, std::pair{int64_t{50}, true}}) {
      INFO("depth " << depth << (sparse ? " (sparse frames)" : ""));
      const ChildResult deep = run_world_in_child(guard, depth, sparse);
      CHECK(deep.exit_code == crash::kExitStackOverflow);
      CHECK_THAT(
          deep.stderr_text,
          Catch::StartsWith("meshsim: fatal: rank 1 overflowed its 16 KiB fiber stack (") &&
              Catch::EndsWith("). Rerun with a larger stack, for example --stack-kib 64.\n"));
    }
  }
}

TEST_CASE("stack guard: guard pages are used while the memory-map budget allows them",
          "[sim][runtime][stack]") {
  const int64_t fit = RankStacks::guarded_stacks_that_fit();
  CHECK(fit > 1000);  // the default vm.max_map_count (65,530) leaves room for ~28,000
  CHECK(RankStacks(16, 64 * 1024, StackGuard::kAuto).mode() == StackGuard::kGuardPages);
  CHECK(RankStacks(fit + 1, 64 * 1024, StackGuard::kAuto).mode() == StackGuard::kCanary);
}
