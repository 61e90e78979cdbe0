// The host twin of the CUDA random kernel: random_fill_thread compiled by the host compiler and
// run for every thread of the grid in turn, so tests without a GPU check the kernel's own code.
#include "sim/gpu/kernel/random_fill_thread.hpp"
#include "sim/gpu/kernel/random_kernel.hpp"

namespace meshsim::sim::gpu {

void random_fill_on_host(void* out, const RandomFillLaunch& launch) {
  if (launch.numel <= 0 || launch.grid < 1) return;
  const RandomFillThreadArgs args = random_fill_thread_args(launch);
  // Threads are independent (each writes only its own elements), so their order is free.
  for (uint64_t thread = 0; thread < args.stride; ++thread) random_fill_thread(args, thread, out);
}

}  // namespace meshsim::sim::gpu
