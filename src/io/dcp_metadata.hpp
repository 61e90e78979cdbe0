// The `.metadata` file of a torch.distributed.checkpoint (DCP) directory, as PyTorch 2.15's
// FileSystemWriter writes it: a pickle of DCP's Metadata dataclass, read with the allow-list
// pickle reader into plain structs (every name's global shape, dtype and chunks, and where each
// chunk's bytes are). See docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/tensor/dtype.hpp"

namespace meshsim {

// One saved block of a tensor: its global offsets and sizes, and where its torch.save archive is.
struct DcpChunk {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  std::string file;     // relative to the checkpoint directory: "__2_0.distcp"
  uint64_t offset = 0;  // of the archive in that file
  uint64_t length = 0;
};

struct DcpEntry {
  std::string name;  // the flattened state-dict key: "model.layers.0.w"
  bool is_tensor = true;
  // Tensors only.
  std::string dtype_name;      // torch's: "float32", "float8_e4m3fn", ...
  std::optional<DType> dtype;  // when meshsim has that dtype
  uint64_t element_size = 0;
  std::vector<int64_t> shape;
  bool requires_grad = false;
  std::vector<DcpChunk> chunks;  // in the metadata's order (by writing rank)
  // Bytes entries (any non-tensor value, written with torch.save): where that archive is.
  DcpChunk object;
};

struct DcpMetadata {
  std::vector<DcpEntry> entries;                     // in the metadata's order
  std::map<std::string, size_t, std::less<>> index;  // name -> entry
  std::string version;                               // DCP's format version: "1.0.0"
  std::string save_id;        // a uuid4 per save, when the writer recorded one
  std::string checkpoint_id;  // the path the writer was given
};

// Decodes a `.metadata` file's bytes. Throws meshsim::Error (ValueError) naming `what`, the field
// (state_dict_metadata['model.w'].chunks[2].sizes) and the byte offset of the value for anything
// that is not DCP metadata, and for what would load wrong data: a name or storage key listed
// twice, a chunk outside its tensor, chunks that overlap, a chunk without a storage entry, a
// storage entry without a chunk, negative or overflowing sizes. (Chunks that leave part of a
// tensor uncovered are allowed, as DCP allows them; loads check what they need.)
DcpMetadata read_dcp_metadata(std::string bytes, std::string_view what);

// The same, from a file (at most 2 GiB: a 70B model saved by thousands of ranks has a few
// hundred MB); RuntimeError naming the file when it cannot be read.
DcpMetadata read_dcp_metadata_file(const std::string& path);

// "dcp_2x2/.metadata" and the like are found at this name inside a checkpoint directory.
inline constexpr std::string_view kDcpMetadataFileName = ".metadata";
// The Python modules that define the metadata's classes.
inline constexpr std::string_view kDcpMetadataModule = "torch.distributed.checkpoint.metadata";
inline constexpr std::string_view kDcpFilesystemModule = "torch.distributed.checkpoint.filesystem";

// The entry `name`, or nullptr.
const DcpEntry* find_dcp_entry(const DcpMetadata& metadata, std::string_view name);

// Element counts of every chunk of `entry` together (checked against overflow when read).
int64_t dcp_entry_numel(const DcpEntry& entry);
// "NAME: its chunks hold 8 of its 32 elements" when the chunks leave part of a tensor unsaved
// (allowed in a checkpoint, a problem for a load); "" otherwise.
std::string dcp_coverage_gap(const DcpEntry& entry);

}  // namespace meshsim
