// libFuzzer target: any bytes as a torch.save file of a DTensor or DeviceMesh: the zip and pickle
// readers with the DTensor allow-list, the attribute walk, and the restore a scenario load does
// (mesh checks, the shard against its spec) in a world of 8 ranks. A refusal must be a
// meshsim::Error; a crash, a read past the input or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/error.hpp"
#include "src/io/torch_saved_dtensor.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    // Checksums ignored, as a resealed file would pass them: the walk behind them is the target.
    const meshsim::TorchSavedObject object =
        meshsim::read_torch_saved_object(bytes, "fuzz", meshsim::ZipChecksums::kIgnore);
    if (const auto* mesh = std::get_if<meshsim::DeviceMesh::Saved>(&object)) {
      meshsim::DeviceMesh::restore(*mesh, 8);
    } else {
      const auto& t = std::get<meshsim::TorchSavedDTensor>(object);
      // A shard read from an archive holds its bytes: never more than the archive has.
      if (t.local.nbytes() > size) __builtin_trap();
      meshsim::DTensor::from_local_shard(meshsim::torch_saved_spec(t, 8), t.local);
    }
  } catch (const meshsim::Error&) {
  }
  return 0;
}
