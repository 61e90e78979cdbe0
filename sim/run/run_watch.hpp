// The wall clock of one scenario run: its --timeout limit, and the progress line a person at a
// terminal sees while a long run goes on. Ranks call it before each step; it reads the clock only
// every few dozen steps, so the run pays a counter per step.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/rank_activity.hpp"

namespace meshsim::sim {

struct RunWatchOptions {
  // Stop the run once this many wall-clock seconds have passed.
  std::optional<double> limit_s;
  // Where the progress line goes (a terminal's descriptor), or -1 for none.
  int progress_fd = -1;
};

class RunWatch {
 public:
  // `activity`: every rank's, read for the collectives they entered.
  RunWatch(RunWatchOptions options, std::string scenario,
           const std::vector<RankActivity>& activity);
  ~RunWatch();
  RunWatch(const RunWatch&) = delete;
  RunWatch& operator=(const RunWatch&) = delete;

  // Counts a step of `rank`; true once the limit has passed (from then on, for every rank).
  bool before_step(int64_t rank) {
    ++steps_[static_cast<size_t>(rank)];
    if (expired_) return true;
    if (++ticks_ % kStepsPerClockRead != 0) return false;
    return check_clock();
  }
  bool expired() const { return expired_; }
  double limit_s() const { return options_.limit_s.value_or(0); }
  // Takes the progress line off the terminal (also done when the watch goes away).
  void finish();

  // Seconds after the start before the first progress line, and between lines.
  static constexpr double kFirstLineAfterS = 2.0;
  static constexpr double kLineEveryS = 1.0;

 private:
  static constexpr uint32_t kStepsPerClockRead = 64;
  bool check_clock();
  void show_progress(double elapsed_s);

  RunWatchOptions options_;
  std::string scenario_;
  const std::vector<RankActivity>& activity_;
  std::chrono::steady_clock::time_point start_;
  std::vector<uint32_t> steps_;
  uint32_t ticks_ = 0;
  bool expired_ = false;
  double next_line_s_ = kFirstLineAfterS;
  double last_line_s_ = 0;
  int64_t last_meetings_ = 0;
  bool line_shown_ = false;
};

}  // namespace meshsim::sim
