// libFuzzer target: any bytes as a scenario file. The loader may only refuse them with an
// InputError; anything else escaping (or a crash, a hang, runaway memory) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/steps/builtin_steps.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)meshsim::sim::load_scenario_text(std::string(reinterpret_cast<const char*>(data), size),
                                           "fuzz.toml");
  } catch (const meshsim::sim::InputError&) {
  }
  return 0;
}
