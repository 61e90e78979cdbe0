// libFuzzer target: any bytes as a torch.distributed.checkpoint `.metadata` file, through the
// allow-list pickle reader and DCP's schema. A refusal must be a meshsim::Error; a crash, a read
// past the input, unbounded memory or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/error.hpp"
#include "src/io/dcp_metadata.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The unpickled graph is counted against the budget: a small one catches growth past a small
  // multiple of the input.
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const meshsim::DcpMetadata metadata =
        meshsim::read_dcp_metadata(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // What reads must hold together: every chunk inside its tensor, with a place on disk.
    for (const meshsim::DcpEntry& entry : metadata.entries) {
      if (entry.is_tensor && entry.chunks.size() > 0 && meshsim::dcp_entry_numel(entry) < 0) {
        __builtin_trap();
      }
      for (const meshsim::DcpChunk& chunk : entry.chunks) {
        if (chunk.file.empty() || chunk.offsets.size() != entry.shape.size()) __builtin_trap();
      }
    }
  } catch (const meshsim::Error&) {
  }
  return 0;
}
