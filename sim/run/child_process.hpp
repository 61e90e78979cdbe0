// The small pieces of talking to a forked child process: writing a whole buffer to a pipe,
// waiting for the child, and saying how it ended.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace meshsim::sim {

// All of `text` to `fd`, again after a signal interrupts; false when the reader is gone.
bool write_all(int fd, std::string_view text);

// Waits for child `pid` (again after a signal interrupts) and returns its wait status.
int wait_for_child(pid_t pid);

// Whether a wait status is a clean exit (status 0).
bool ended_cleanly(int status);

// "exit status 3", "signal 9 (Killed)": how a child with wait status `status` ended.
std::string how_it_ended(int status);

}  // namespace meshsim::sim
