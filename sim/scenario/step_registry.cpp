#include "sim/scenario/step_registry.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

void StepRegistry::add(std::string key, std::string args, std::string summary, StepParser parse) {
  kinds_.push_back({std::move(key), std::move(args), std::move(summary), std::move(parse)});
}

const StepRegistry::Kind* StepRegistry::find(std::string_view key) const {
  for (const Kind& k : kinds_) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

std::vector<std::string> StepRegistry::keys() const {
  std::vector<std::string> out;
  for (const Kind& k : kinds_) out.push_back(k.key);
  return out;
}

}  // namespace meshsim::sim
