// libFuzzer target: the DeviceMesh, DTensor and checkpoint metadata record loaders (record trees
// in Boost archives, then the typed readers). Inputs that start with the envelope's magic are
// whole files; any other input is a payload sealed into a valid envelope, its first byte choosing
// the record kind (bits 0-1: mesh, DTensor, metadata, shard file), the archive format and the
// record version (bits 2-6) and the loader (strict or not, bit 7), so that
// mutations reach the archive parsers and the typed checks past the checksum. Loads may only
// refuse with a meshsim::Error; meshes and DTensors they accept must save back to a record that
// loads equal, and metadata must hold exactly its tensors' elements.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/error.hpp"
#include "src/io/dtensor_record.hpp"
#include "src/io/mesh_record.hpp"
#include "src/io/world_checkpoint.hpp"

namespace {

constexpr int64_t kWorld = 8;

void load_and_check(std::string_view bytes, bool strict) {
  const meshsim::OpenedEnvelope opened = meshsim::open_envelope(bytes);
  const meshsim::ArchiveFormat format = opened.header.format;
  if (opened.header.kind == meshsim::RecordKind::kDeviceMesh) {
    const meshsim::DeviceMesh mesh = meshsim::open_mesh(bytes, kWorld, strict);
    const std::string again = meshsim::seal_mesh(mesh, mesh.has_group_names(), format);
    if (!(meshsim::open_mesh(again, kWorld, true) == mesh)) __builtin_trap();
  } else if (opened.header.kind == meshsim::RecordKind::kCheckpointMetadata) {
    for (const meshsim::CheckpointTensor& t : meshsim::open_checkpoint_metadata(bytes).tensors) {
      int64_t held = 0;
      for (const meshsim::CheckpointChunk& c : t.chunks) {
        int64_t n = 1;
        for (const meshsim::IndexRuns& d : c.indices) n *= d.size();
        held += n;
      }
      int64_t numel = 1;
      for (int64_t s : t.shape) numel *= s;
      if (held != numel) __builtin_trap();
    }
  } else if (opened.header.kind == meshsim::RecordKind::kShard) {
    // Every chunk a shard file holds is a view into the file or its record, and there once.
    const meshsim::CheckpointShard shard = meshsim::open_checkpoint_shard(bytes);
    for (const auto& [key, data] : shard.chunks) {
      if (data.size() > bytes.size()) __builtin_trap();
    }
  } else {
    const meshsim::DTensor t = meshsim::open_dtensor(bytes, kWorld, strict);
    const std::string again = meshsim::seal_dtensor(t, true, format);
    if (!(meshsim::open_dtensor(again, kWorld, true) == t)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.empty()) return 0;
  const auto choice = static_cast<uint8_t>(input[0]);
  std::string sealed;
  if (!input.starts_with("MSIMCKPT")) {
    const meshsim::RecordKind kinds[] = {
        meshsim::RecordKind::kDeviceMesh, meshsim::RecordKind::kDTensor,
        meshsim::RecordKind::kCheckpointMetadata, meshsim::RecordKind::kShard};
    const meshsim::RecordKind kind = kinds[choice & 3];
    const auto format = static_cast<meshsim::ArchiveFormat>(1 + ((choice >> 2) & 31) % 3);
    // Bits 2-6 also pick the record version of metadata (1 to 3) and shard files (1 or 2).
    const uint32_t layout = ((choice >> 2) & 31) / 3;
    const uint32_t version = kind == meshsim::RecordKind::kCheckpointMetadata ? 1 + layout % 3
                             : kind == meshsim::RecordKind::kShard            ? 1 + layout % 2
                                                                              : 1;
    sealed = meshsim::seal_envelope({kind, format, version, 0}, input.substr(1));
  }
  try {
    load_and_check(sealed.empty() ? input : std::string_view(sealed), (choice & 0x80) != 0);
  } catch (const meshsim::Error&) {
  }
  return 0;
}
