#include "sim/gpu/stream_wait.hpp"

#include <thread>

namespace meshsim::sim::gpu {

std::vector<size_t> wait_until_done(size_t n, std::chrono::milliseconds timeout,
                                    const std::function<bool(size_t)>& is_done,
                                    const std::function<void()>& between) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<bool> done(n, false);
  for (size_t left = n;;) {
    for (size_t i = 0; i < n; ++i) {
      if (!done[i] && is_done(i)) {
        done[i] = true;
        --left;
      }
    }
    if (left == 0) return {};
    if (between) between();
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<size_t> running;
      for (size_t i = 0; i < n; ++i) {
        if (!done[i]) running.push_back(i);
      }
      return running;
    }
    std::this_thread::yield();
  }
}

}  // namespace meshsim::sim::gpu
