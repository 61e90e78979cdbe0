// libFuzzer target: any bytes as one torch.save archive (a DCP item): the zip reader, the
// pickle reader with torch.save's allow-list, and the tensor rebuild. A refusal must be a
// meshsim::Error; a crash, a read past the input or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/error.hpp"
#include "src/io/torch_save_archive.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    // Checksums ignored: a mutation would otherwise stop at the first CRC-32, never reaching the
    // directory, pickle and view checks behind it.
    const meshsim::Tensor t =
        meshsim::read_torch_saved_tensor(bytes, "fuzz", meshsim::ZipChecksums::kIgnore);
    // A tensor read from an archive holds its bytes: never more than the archive has.
    if (t.nbytes() > size) __builtin_trap();
  } catch (const meshsim::Error&) {
  }
  return 0;
}
