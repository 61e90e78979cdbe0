// kernel_parity: the CUDA random kernel on this machine's GPU against meshsim's prediction for
// the same GPU, over a fixed matrix of sizes, dtypes, seeds, offsets and distributions; prints one
// table and a summary line. Exit 0 all pass, 1 any failure, 77 (skipped) without a CUDA device.
// Used by scripts/gpu-check.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/gpu/kernel/device_runner.hpp"
#include "tests/gpu/kernel/random_fill_check.hpp"

using meshsim::DType;
using meshsim::GpuProfile;
using meshsim::sim::gpu::RandomDistribution;
using meshsim::testing::FillCase;

namespace {

constexpr const char* kRowFormat = "{:<15} {:<9} {:>9} {:>20} {:>6}  {:<22} {}\n";

struct Dist {
  RandomDistribution distribution;
  double a, b;
  const char* label;
};

std::string result_text(const FillCase& c, const meshsim::testing::FillVerdict& v) {
  if (c.distribution == RandomDistribution::kUniform)
    return fmt::format("{} mismatches", v.mismatches);
  if (v.pass()) return fmt::format("max err {:.2e}", v.max_error);
  return fmt::format("max err {:.2e} ({} out)", v.max_error, v.mismatches);
}

}  // namespace

int main() {
  int exit_status = 0;
  const std::optional<meshsim::testing::CudaDevice> cuda =
      meshsim::testing::open_cuda_device_or_report(exit_status);
  if (!cuda) return exit_status;
  const GpuProfile& gpu = cuda->profile;
  std::printf("kernel_parity: %s (sm_%d%d, %lld SMs x %lld threads per SM, grid cap %lld)\n",
              cuda->name.c_str(), cuda->compute_major, cuda->compute_minor,
              static_cast<long long>(gpu.sms), static_cast<long long>(gpu.max_threads_per_sm),
              static_cast<long long>(gpu.max_blocks()));
  const auto started = std::chrono::steady_clock::now();

  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  const uint64_t seeds[] = {0, 42, (uint64_t{1} << 63) + 5};
  const uint64_t offsets[] = {0, 4, 1000 * 4};
  const Dist dists[] = {{RandomDistribution::kUniform, 0.0, 1.0, "uniform(0,1)"},
                        {RandomDistribution::kUniform, -2.0, 3.0, "uniform(-2,3)"},
                        {RandomDistribution::kNormal, 0.0, 1.0, "normal(0,1)"}};

  int64_t cases = 0, failed = 0;
  std::string first_failure;
  fmt::print(kRowFormat, "dist", "dtype", "numel", "seed", "offset", "result", "verdict");
  try {
    meshsim::testing::DeviceFill device;
    for (const Dist& d : dists) {
      for (const DType dtype : dtypes) {
        // One wave: the elements one grid-stride loop covers on this GPU for this dtype.
        const int64_t w = gpu.max_blocks() * 256 * (dtype == DType::kFloat64 ? 2 : 4);
        for (const int64_t numel :
             {int64_t{1}, int64_t{5}, int64_t{1000}, w - 1, w, w + 1, 5 * w / 2}) {
          for (const uint64_t seed : seeds) {
            for (const uint64_t offset : offsets) {
              const FillCase c{d.distribution, dtype, numel, seed, offset, d.a, d.b};
              std::string result;
              bool pass = false;
              try {
                const auto got = device.run(meshsim::testing::fill_launch(c, gpu));
                const auto verdict =
                    meshsim::testing::compare_fill(c, meshsim::testing::predict_fill(c, gpu), got);
                pass = verdict.pass();
                result = result_text(c, verdict);
                if (!pass && first_failure.empty()) {
                  first_failure = describe(c) + ": " + describe(verdict);
                }
              } catch (const std::exception& e) {
                result = "error";
                if (first_failure.empty()) first_failure = describe(c) + ": " + e.what();
              }
              ++cases;
              failed += pass ? 0 : 1;
              fmt::print(kRowFormat, d.label, meshsim::dtype_name(dtype), numel, seed, offset,
                         result, pass ? "PASS" : "FAIL");
              std::fflush(stdout);
            }
          }
        }
      }
    }
  } catch (const std::exception& e) {
    ++failed;
    first_failure = fmt::format("setting up the device: {}", e.what());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!first_failure.empty()) std::printf("first failure: %s\n", first_failure.c_str());
  std::printf(
      "%s: %s, %lld cases, %lld failed (uniform bit for bit; normal within 2e-5*std + 1 ulp, "
      "float64 1e-12*std + 1 ulp), %.1f s\n",
      failed == 0 ? "PASS" : "FAIL", cuda->name.c_str(), static_cast<long long>(cases),
      static_cast<long long>(failed), seconds);
  return failed == 0 ? 0 : 1;
}
