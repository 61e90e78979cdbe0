// Walks a scenario's program on one rank: which step runs next, through repeat loops, whose
// variables it keeps in the rank's state (where expressions read them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/run/rank_state.hpp"
#include "sim/scenario/scenario.hpp"

namespace meshsim::sim {

class ProgramCounter {
 public:
  ProgramCounter(const std::vector<std::unique_ptr<Step>>& steps, RankState& rank)
      : steps_(steps), rank_(rank) {}

  // The next step to run (never a loop mark), or null at the end of the program. A repeat's
  // `when` and count are evaluated here: their errors (meshsim::Error, ValueError for a count
  // outside [0, LoopMark::kMaxCount], or more passes of loop bodies than that in all) are
  // thrown with current() at the repeat or end_repeat.
  const Step* next();
  // The step last returned, or the repeat being evaluated.
  const Step& current() const { return *steps_[current_]; }
  size_t index() const { return current_; }  // of current() in the program
  // "mb=3", "mb=3, i=0" inside loops; empty outside.
  std::string loop_position() const;

 private:
  struct Frame {
    size_t begin;  // index of the repeat
    int64_t count;
  };
  const std::vector<std::unique_ptr<Step>>& steps_;
  RankState& rank_;
  size_t next_ = 0;
  size_t current_ = 0;
  std::vector<Frame> frames_;
  int64_t passes_ = 0;  // of loop bodies, every loop together

  // Counts one more pass of `loop`'s body; ValueError past LoopMark::kMaxCount in all.
  void count_pass(const LoopMark& loop);
};

}  // namespace meshsim::sim
