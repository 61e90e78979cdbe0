// The CUDA random kernel on device 0 against the CPU model: uniform_ bit for bit, normal_ within
// the documented tolerance, for small custom grids, the H200's grid and this GPU's own. The grid
// is a launch parameter, so any GPU checks any profile's element mapping. Exits 77 (skipped)
// without a CUDA device.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/gpu/kernel/random_kernel.hpp"
#include "tests/gpu/kernel/device_runner.hpp"
#include "tests/gpu/kernel/random_fill_check.hpp"

using meshsim::DType;
using meshsim::GpuProfile;
using meshsim::sim::gpu::RandomDistribution;
using meshsim::testing::FillCase;

namespace {

struct Tally {
  int64_t cases = 0;
  int64_t failed = 0;

  void record(bool pass, const std::string& what) {
    ++cases;
    if (pass) return;
    // Enough lines to see a pattern, not a flood.
    if (++failed <= 20) std::printf("FAIL %s\n", what.c_str());
  }
};

int64_t wave(DType dtype, const GpuProfile& gpu) {
  // The grid is at its cap (docs/rng.md 2.3): 256 threads per block, 4 floats or 2 doubles each.
  return gpu.max_blocks() * 256 * (dtype == DType::kFloat64 ? 2 : 4);
}

void check_case(meshsim::testing::DeviceFill& device, const FillCase& c, const GpuProfile& gpu,
                Tally& tally) {
  const std::string what = gpu.name + ": " + describe(c);
  try {
    const auto got = device.run(meshsim::testing::fill_launch(c, gpu));
    const auto verdict =
        meshsim::testing::compare_fill(c, meshsim::testing::predict_fill(c, gpu), got);
    tally.record(verdict.pass(), what + ": " + describe(verdict));
  } catch (const std::exception& e) {
    tally.record(false, what + ": " + e.what());
  }
}

// What launch_random_fill answers without running anything.
void check_launch_edges(meshsim::testing::DeviceFill& device, Tally& tally) {
  meshsim::sim::gpu::RandomFillLaunch empty;
  empty.numel = 0;
  tally.record(meshsim::sim::gpu::launch_random_fill(device.stream(), nullptr, empty) == 0,
               "numel 0 launches nothing and succeeds");
  meshsim::sim::gpu::RandomFillLaunch no_grid;
  no_grid.numel = 10;
  no_grid.grid = 0;
  int dummy = 0;
  tally.record(meshsim::sim::gpu::launch_random_fill(device.stream(), &dummy, no_grid) ==
                   static_cast<int>(cudaErrorInvalidValue),
               "grid 0 is cudaErrorInvalidValue");
}

}  // namespace

int main() {
  int exit_status = 0;
  const std::optional<meshsim::testing::CudaDevice> cuda =
      meshsim::testing::open_cuda_device_or_report(exit_status);
  if (!cuda) return exit_status;
  std::printf("device 0: %s (sm_%d%d, %lld SMs x %lld threads)\n", cuda->name.c_str(),
              cuda->compute_major, cuda->compute_minor, static_cast<long long>(cuda->profile.sms),
              static_cast<long long>(cuda->profile.max_threads_per_sm));
  Tally tally;
  try {
    meshsim::testing::DeviceFill device;
    check_launch_edges(device, tally);
    const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
    // Each case pairs a seed with an offset (multiples of 4, as PyTorch's offsets always are).
    const std::pair<uint64_t, uint64_t> seed_offsets[] = {
        {0, 0}, {42, 4}, {(uint64_t{1} << 63) + 5, 4000}, {~uint64_t{0}, uint64_t{1} << 42}};
    struct Dist {
      RandomDistribution distribution;
      double a, b;
    };
    const Dist dists[] = {{RandomDistribution::kUniform, 0.0, 1.0},
                          {RandomDistribution::kUniform, -2.0, 3.0},
                          {RandomDistribution::kUniform, 1.0, 1.0625},
                          {RandomDistribution::kNormal, 0.0, 1.0},
                          {RandomDistribution::kNormal, 0.5, 2.0}};
    // Small grids: every size around one and two waves, every seed, offset and distribution.
    for (const GpuProfile& gpu : {GpuProfile::custom(1, 256), GpuProfile::custom(3, 512)}) {
      for (const DType dtype : dtypes) {
        const int64_t w = wave(dtype, gpu);
        for (const int64_t numel :
             {int64_t{1}, int64_t{5}, int64_t{257}, w - 1, w, w + 1, 2 * w + 1, 5 * w / 2 + 3}) {
          for (const auto& [seed, offset] : seed_offsets) {
            for (const Dist& d : dists) {
              check_case(device, {d.distribution, dtype, numel, seed, offset, d.a, d.b}, gpu,
                         tally);
            }
          }
        }
      }
    }
    // The H200's grid and this GPU's own, around one and two waves: fewer combinations, since
    // the model takes a while for millions of elements.
    for (const GpuProfile& gpu : {*meshsim::find_gpu("H200"), cuda->profile}) {
      for (const DType dtype : dtypes) {
        const int64_t w = wave(dtype, gpu);
        size_t i = 0;
        for (const int64_t numel : {w - 1, w + 1, 2 * w + 1}) {
          for (const Dist& d : {dists[0], dists[1], dists[3]}) {
            const auto& [seed, offset] = seed_offsets[i++ % std::size(seed_offsets)];
            check_case(device, {d.distribution, dtype, numel, seed, offset, d.a, d.b}, gpu, tally);
          }
        }
      }
    }
  } catch (const std::exception& e) {
    tally.record(false, fmt::format("setting up the device: {}", e.what()));
  }
  std::printf("%s: %lld cases, %lld failed\n", tally.failed == 0 ? "PASS" : "FAIL",
              static_cast<long long>(tally.cases), static_cast<long long>(tally.failed));
  return tally.failed == 0 ? 0 : 1;
}
