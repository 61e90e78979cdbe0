#include "sim/run/child_process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace meshsim::sim {

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

int wait_for_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

bool ended_cleanly(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return "an unknown status";
}

}  // namespace meshsim::sim
