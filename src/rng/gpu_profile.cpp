#include "src/rng/gpu_profile.hpp"

#include <cctype>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

GpuProfile GpuProfile::custom(int64_t sms, int64_t max_threads_per_sm) {
  if (sms < 1 || sms > 4096) {
    throw runtime_error(fmt::format("a GPU has 1 to 4096 SMs, got {}", sms));
  }
  if (max_threads_per_sm < 256 || max_threads_per_sm > 4096 || max_threads_per_sm % 256 != 0) {
    throw runtime_error(
        fmt::format("max threads per SM must be a multiple of 256 from 256 to 4096, got {}",
                    max_threads_per_sm));
  }
  return {fmt::format("custom ({} SMs x {} threads)", sms, max_threads_per_sm), sms,
          max_threads_per_sm};
}

const std::vector<GpuProfile>& known_gpus() {
  static const std::vector<GpuProfile> gpus{
      {"H200", 132, 2048}, {"H100 SXM", 132, 2048}, {"H100 PCIe", 114, 2048}, {"A100", 108, 2048},
      {"L40S", 142, 1536}, {"L40", 142, 1536},      {"A10G", 80, 1536},       {"L4", 58, 1536},
      {"T4", 40, 1024},    {"V100", 80, 2048},      {"RTX 4090", 128, 1536},
  };
  return gpus;
}

const std::vector<std::pair<std::string, std::string>>& gpu_aliases() {
  // Names as people (and nvidia-smi) write them, for models of one SM count and thread limit.
  static const std::vector<std::pair<std::string, std::string>> aliases{
      {"H100", "H100 SXM"},  {"H100 SXM5", "H100 SXM"}, {"H200 SXM", "H200"},
      {"A100 SXM", "A100"},  {"A100 PCIe", "A100"},     {"A100 40GB", "A100"},
      {"A100 80GB", "A100"}, {"V100 SXM2", "V100"},
  };
  return aliases;
}

std::optional<GpuProfile> find_gpu(std::string_view name) {
  const auto key = [](std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
      if (!std::isspace(c) && c != '-' && c != '_') out += static_cast<char>(std::tolower(c));
    }
    return out;
  };
  std::string wanted = key(name);
  for (const auto& [alias, model] : gpu_aliases()) {
    if (key(alias) == wanted) wanted = key(model);
  }
  for (const GpuProfile& g : known_gpus()) {
    if (key(g.name) == wanted) return g;
  }
  return std::nullopt;
}

}  // namespace meshsim
