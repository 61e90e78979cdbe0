#include "sim/run/run_watch.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

void write_text(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;  // a terminal that went away: the run goes on without its line
    done += static_cast<size_t>(n);
  }
}

// 1,234,567 -> "1.2M": a rate that fits a line.
std::string short_count(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.0f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace

RunWatch::RunWatch(RunWatchOptions options, std::string scenario,
                   const std::vector<RankActivity>& activity)
    : options_(options),
      scenario_(std::move(scenario)),
      activity_(activity),
      start_(std::chrono::steady_clock::now()),
      steps_(activity.size(), 0) {}

RunWatch::~RunWatch() {
  finish();
}

bool RunWatch::check_clock() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (options_.limit_s && elapsed >= *options_.limit_s) {
    expired_ = true;
    return true;
  }
  if (options_.progress_fd >= 0 && elapsed >= next_line_s_) {
    show_progress(elapsed);
    next_line_s_ = elapsed + kLineEveryS;
  }
  return false;
}

// "training-step: 12 s, ranks at steps 40-97, 1.2M collective calls/s", over itself.
void RunWatch::show_progress(double elapsed_s) {
  const auto [low, high] = std::minmax_element(steps_.begin(), steps_.end());
  int64_t meetings = 0;
  for (const RankActivity& a : activity_) meetings += a.meetings_entered;
  const double rate =
      static_cast<double>(meetings - last_meetings_) / std::max(elapsed_s - last_line_s_, 1e-3);
  last_meetings_ = meetings;
  last_line_s_ = elapsed_s;
  const std::string steps =
      *low == *high ? fmt::format("step {}", *low) : fmt::format("steps {}-{}", *low, *high);
  write_text(options_.progress_fd,
             fmt::format("\r\033[K{}: {:.0f} s, {} ranks at {}, {} collective calls/s", scenario_,
                         elapsed_s, steps_.size(), steps, short_count(rate)));
  line_shown_ = true;
}

void RunWatch::finish() {
  if (!line_shown_) return;
  write_text(options_.progress_fd, "\r\033[K");
  line_shown_ = false;
}

}  // namespace meshsim::sim
