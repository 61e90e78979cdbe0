// libFuzzer target: any bytes as a swarm shard file (`meshsim swarm merge` reads them from other
// machines). The reader may only refuse them with an InputError; what it accepts must encode
// to a file that reads back to the same encoding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/base/source_location.hpp"
#include "sim/swarm/swarm_json.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshsim::sim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ShardResults read = read_shard_json(bytes, "fuzz.json");
    const std::string text = swarm_json_text(shard_json(read));
    if (swarm_json_text(shard_json(read_shard_json(text, "again.json"))) != text) __builtin_trap();
  } catch (const InputError&) {
  }
  return 0;
}
