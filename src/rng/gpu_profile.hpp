// What a CUDA random kernel's launch depends on: the GPU's number of SMs and threads per SM
// (docs/rng.md 2.3). Above one "wave" of elements, torch.rand's values depend on the GPU model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshsim {

struct GpuProfile {
  std::string name;
  int64_t sms = 0;
  int64_t max_threads_per_sm = 0;

  // A profile of the user's own: RuntimeError unless 1 <= sms <= 4096 and max_threads_per_sm
  // is a multiple of 256 in [256, 4096].
  static GpuProfile custom(int64_t sms, int64_t max_threads_per_sm);
  // The kernel's grid cap: SMs times blocks of 256 threads per SM.
  int64_t max_blocks() const { return sms * (max_threads_per_sm / 256); }
};

// The GPU models meshsim knows, with their SM counts and thread limits.
const std::vector<GpuProfile>& known_gpus();
// By name, ignoring case and spaces ("h200", "H100 SXM", "a100"); nullopt when unknown.
std::optional<GpuProfile> find_gpu(std::string_view name);
// Other names of known models ("H100" for "H100 SXM"), as (alias, model).
const std::vector<std::pair<std::string, std::string>>& gpu_aliases();

}  // namespace meshsim
