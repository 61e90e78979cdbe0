// libFuzzer target: any bytes as one rank's Flight Recorder dump (pickle or JSON): the pickle
// reader with nothing allowed, the tree conversion and the schema decoding. A refusal must be a
// meshsim::Error; a crash, a hang or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/error.hpp"
#include "src/io/fr_dump.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const meshsim::FrDump dump =
        meshsim::read_fr_dump(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // Every entry came from the input: never more entries than bytes.
    if (dump.entries.size() > size) __builtin_trap();
  } catch (const meshsim::Error&) {
  }
  return 0;
}
