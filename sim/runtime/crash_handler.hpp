// Turns a fatal fault on a rank's fiber into a message that names the rank, where it was in the
// scenario and what to try (as SimGrid does): a SIGSEGV/SIGBUS handler running on an alternate
// stack, and the canary check the scheduler runs whenever a rank's fiber switches out.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rank_stacks.hpp"

namespace meshsim::sim::crash {

// What messages draw on while one world runs; watch(nullptr, nullptr) when it is done.
void watch(const RankStacks* stacks, const std::vector<RankActivity>* activity);

// The rank whose fiber runs now (-1: none). Called by the scheduler at every switch.
void set_running_rank(int64_t rank) noexcept;

// Checks the canary of `rank`'s stack (the rank that just switched out); on damage, reports the
// overflow and ends the process with kExitStackOverflow.
void check_stack(int64_t rank) noexcept;

// Installs the handlers (World::run calls it). Not under ASan, whose own reports say more.
void install_handlers();

// Exit status after a rank overflowed its stack (0-2 are the command's normal statuses).
inline constexpr int kExitStackOverflow = 3;

}  // namespace meshsim::sim::crash
