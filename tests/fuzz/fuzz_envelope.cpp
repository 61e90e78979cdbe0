// libFuzzer target: any bytes as a checkpoint file. The envelope may only refuse them with a
// meshsim::Error; a crash, a read past the input or any other exception is a bug. (The archive
// loaders behind it get their own targets as they arrive.)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/error.hpp"
#include "src/io/envelope.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const meshsim::OpenedEnvelope opened = meshsim::open_envelope(bytes);
    // What opens must be exactly what a writer would have sealed.
    if (meshsim::seal_envelope(opened.header, opened.payload) != bytes) __builtin_trap();
  } catch (const meshsim::Error&) {
  }
  return 0;
}
