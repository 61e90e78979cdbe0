#include "sim/run/program_counter.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim::sim {

const Step* ProgramCounter::next() {
  while (next_ < steps_.size()) {
    current_ = next_;
    const Step& step = *steps_[next_];
    if (!step.loop) {
      ++next_;
      return &step;
    }
    const LoopMark& mark = *step.loop;
    auto& loops = rank_.loops();
    if (mark.opens) {
      const bool runs = !step.when || step.when->evaluate(rank_) != 0;
      const int64_t count = runs ? mark.count->evaluate(rank_) : 0;
      if (count < 0 || count > LoopMark::kMaxCount) {
        throw value_error(fmt::format("repeat \"{}\": count {} is outside [0, {}]", mark.var, count,
                                      LoopMark::kMaxCount));
      }
      if (count == 0) {
        next_ = mark.partner + 1;
        continue;
      }
      count_pass(mark);
      frames_.push_back({next_, count});
      loops.emplace_back(mark.var, 0);
      ++next_;
    } else if (++loops.back().second < frames_.back().count) {
      count_pass(*steps_[frames_.back().begin]->loop);
      next_ = frames_.back().begin + 1;
    } else {
      frames_.pop_back();
      loops.pop_back();
      ++next_;
    }
  }
  return nullptr;
}

void ProgramCounter::count_pass(const LoopMark& loop) {
  if (++passes_ <= LoopMark::kMaxCount) return;
  throw value_error(
      fmt::format("repeat \"{}\": this rank's loop bodies ran {} times in all, the "
                  "most allowed (nested counts multiply)",
                  loop.var, LoopMark::kMaxCount));
}

std::string ProgramCounter::loop_position() const {
  std::string out;
  for (const auto& [var, value] : rank_.loops())
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", var, value);
  return out;
}

}  // namespace meshsim::sim
