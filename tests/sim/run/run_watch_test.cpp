// The wall clock of a run: --timeout stops a scenario that is still going and reports where every
// rank was, as a failure distinct from the virtual-time watchdog; the progress line of a long run
// goes to its descriptor only, and is taken off at the end.
#include "sim/run/run_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"

using namespace meshsim::sim;

namespace {

// Eight ranks all-reducing four million times each: minutes, unless stopped.
Scenario long_run() {
  return load_scenario_text(R"toml([scenario]
name = "long-run"
world_size = 8
[[step]]
repeat = { var = "i", count = 2000 }
  [[step]]
  repeat = { var = "j", count = 2000 }
    [[step]]
    all_reduce = { tensor = "ones(2)", out = "x" }
  [[step]]
  end_repeat = "j"
[[step]]
end_repeat = "i"
)toml",
                            "long.toml");
}

// What was written to the read end of a pipe, without blocking.
std::string drain(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("run watch: --timeout stops a run still going and says where every rank was",
          "[sim][run][watch]") {
  RunOptions options;
  options.watch.limit_s = 0.3;
  const ScenarioResult r = run_scenario(long_run(), options);
  CHECK_FALSE(r.passed());
  REQUIRE(r.hang.has_value());
  CHECK((*r.hang)["kind"] == "wall_clock");
  CHECK((*r.hang)["cause"] == "wall-clock limit");
  REQUIRE(r.hang_text.has_value());
  CHECK_THAT(*r.hang_text, Catch::StartsWith("wall_clock: wall-clock limit\n  the run was stopped "
                                             "after 0.3 s of wall-clock time (--timeout)"));
  CHECK_THAT(*r.hang_text, Catch::Contains("  per rank:\n"));
  CHECK_THAT(*r.hang_text, Catch::Contains("of its 8 ranks, "));
  CHECK_THAT(*r.hang_text, Catch::Contains(": running at long.toml:8:5 (all_reduce, i="));
  // Every rank stopped: none finished the loop, none is left running.
  CHECK(r.failed_ranks() == 8);
  for (const auto& f : r.failures) {
    REQUIRE(f.has_value());
    CHECK(f->error_type == "aborted");
    CHECK(f->message == "stopped: the run reached its wall-clock limit of 0.3 s (--timeout)");
  }
}

TEST_CASE("run watch: a long run's progress line goes to its descriptor and is taken off",
          "[sim][run][watch]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  REQUIRE(::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK) == 0);
  RunOptions options;
  options.watch.limit_s = RunWatch::kFirstLineAfterS + 1.5 * RunWatch::kLineEveryS;
  options.watch.progress_fd = pipe_fds[1];
  const ScenarioResult r = run_scenario(long_run(), options);
  ::close(pipe_fds[1]);
  const std::string shown = drain(pipe_fds[0]);
  ::close(pipe_fds[0]);
  CHECK(r.hang.has_value());
  // Two lines (at 2 s and 3 s), each over the last, then the line cleared.
  CHECK_THAT(shown, Catch::StartsWith("\r\033[Klong-run: 2 s, 8 ranks at step"));
  CHECK_THAT(shown, Catch::Contains("\r\033[Klong-run: 3 s, 8 ranks at step"));
  CHECK_THAT(shown, Catch::Contains(" collective calls/s"));
  CHECK_THAT(shown, Catch::EndsWith("\r\033[K"));
  // Nothing of it reaches the report.
  CHECK_THAT(*r.hang_text, !Catch::Contains("collective calls/s"));
}
