// Waiting for work launched on CUDA streams without blocking in the driver: a blocking wait (or a
// copy into pageable memory) on a hung kernel never returns, so callers poll until a deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace meshsim::sim::gpu {

// Polls `is_done(i)` for every i in [0, n) not yet done, round after round, until all are or
// `timeout` has passed; `between` runs after each round that left some running (it may throw, to
// stop on an asynchronous error). Returns the indices still running, ascending (empty: all done).
std::vector<size_t> wait_until_done(size_t n, std::chrono::milliseconds timeout,
                                    const std::function<bool(size_t)>& is_done,
                                    const std::function<void()>& between = {});

}  // namespace meshsim::sim::gpu
