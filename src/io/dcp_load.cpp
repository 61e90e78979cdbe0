#include "src/io/dcp_load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/io/dcp_read_plan.hpp"
#include "src/io/torch_save_archive.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim {
namespace {

// Copies the block `sizes` at `from` in a row-major tensor of `from_shape` to `to` in one of
// `to_shape`, a row of the last dim at a time.
void copy_block(const std::byte* source, const std::vector<int64_t>& source_shape,
                const std::vector<int64_t>& source_start, std::byte* target,
                const std::vector<int64_t>& target_shape, const std::vector<int64_t>& target_start,
                const std::vector<int64_t>& sizes, size_t element) {
  const size_t dims = sizes.size();
  if (dims == 0) {
    std::memcpy(target, source, element);
    return;
  }
  const auto offset_of = [&](const std::vector<int64_t>& shape, const std::vector<int64_t>& start,
                             const std::vector<int64_t>& index) {
    int64_t at = 0;
    for (size_t d = 0; d < dims; ++d) at = at * shape[d] + start[d] + index[d];
    return static_cast<size_t>(at) * element;
  };
  const size_t row = static_cast<size_t>(sizes[dims - 1]) * element;
  std::vector<int64_t> index(dims, 0);
  while (true) {
    std::memcpy(target + offset_of(target_shape, target_start, index),
                source + offset_of(source_shape, source_start, index), row);
    size_t d = dims - 1;
    while (d-- > 0) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// The bytes of one item: only its range is read (a rank needs a few items of a large file).
std::string read_item(const std::string& path, const DcpEntry& entry, const DcpChunk& chunk) {
  std::ifstream file(path, std::ios::binary);
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  if (!file || error || !std::filesystem::is_regular_file(path, error)) {
    throw runtime_error(
        fmt::format("cannot read {}: {}", path, error ? error.message() : std::strerror(errno)));
  }
  if (chunk.offset > size || chunk.length > size - chunk.offset) {
    throw runtime_error(
        fmt::format("{}: {} bytes, but the metadata puts a chunk of '{}' at bytes {} to {}", path,
                    size, entry.name, chunk.offset, chunk.offset + chunk.length));
  }
  const MemoryReservation reserved(chunk.length, fmt::format("reading {}", path));
  std::string out(chunk.length, '\0');
  file.seekg(static_cast<std::streamoff>(chunk.offset));
  file.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (!file)
    throw runtime_error(fmt::format("{}: the read of bytes {} to {} failed", path, chunk.offset,
                                    chunk.offset + chunk.length));
  return out;
}

// Fills `out` (the region at `region.offset` of `entry`) from the checkpoint's chunks.
void fill_region(const std::string& dir, const DcpEntry& entry, const LocalShard& region,
                 Tensor& out) {
  int64_t copied = 0;
  const DcpChunkIndex index(entry);
  for (const DcpRead& read : index.overlapping(0, region)) {
    const DcpChunk& chunk = entry.chunks[read.chunk];
    const std::string path = (std::filesystem::path(dir) / chunk.file).string();
    const std::string item = read_item(path, entry, chunk);
    const std::string what =
        fmt::format("{} (the chunk of '{}' at [{}], bytes {} to {})", path, entry.name,
                    fmt::join(chunk.offsets, ", "), chunk.offset, chunk.offset + chunk.length);
    const Tensor saved = read_torch_saved_tensor(item, what);
    if (saved.shape() != chunk.sizes || saved.dtype() != out.dtype()) {
      throw runtime_error(fmt::format("{}: it holds {}[{}], but the metadata says {}[{}]", what,
                                      dtype_name(saved.dtype()), fmt::join(saved.shape(), ", "),
                                      dtype_name(out.dtype()), fmt::join(chunk.sizes, ", ")));
    }
    std::vector<int64_t> in_chunk(read.offsets.size()), in_region(read.offsets.size());
    for (size_t d = 0; d < read.offsets.size(); ++d) {
      in_chunk[d] = read.offsets[d] - chunk.offsets[d];
      in_region[d] = read.offsets[d] - region.offset[d];
    }
    copy_block(saved.bytes().data(), chunk.sizes, in_chunk, out.mutable_bytes().data(),
               region.shape, in_region, read.sizes, dtype_size(out.dtype()));
    copied += *checked_product(read.sizes);
  }
  // Chunks never overlap (the metadata reader checks): the copies fill the region exactly when
  // their volumes add up to it.
  if (copied != out.numel()) {
    throw runtime_error(fmt::format(
        "the checkpoint in {} does not hold all of '{}' this rank loads: its chunks cover {} of "
        "the {} elements at [{}] + [{}]",
        dir, entry.name, copied, out.numel(), fmt::join(region.offset, ", "),
        fmt::join(region.shape, ", ")));
  }
}

DType dtype_of(const DcpEntry& entry) {
  if (!entry.is_tensor) {
    throw runtime_error(
        fmt::format("'{}' is an object in the checkpoint, not a tensor", entry.name));
  }
  if (!entry.dtype) {
    throw runtime_error(fmt::format("'{}' was saved as {}, which meshsim does not have", entry.name,
                                    entry.dtype_name));
  }
  return *entry.dtype;
}

}  // namespace

DcpMetadata load_dcp_metadata(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kDcpMetadataFileName).string();
  return read_dcp_metadata_file(path);
}

DTensor load_dcp_dtensor(const std::string& dir, const DcpEntry& entry, const DeviceMesh& mesh,
                         std::vector<Placement> placements) {
  const DTensor layout =
      DTensor::zeros(DTensorSpec{mesh, std::move(placements), entry.shape, dtype_of(entry)},
                     Tensor::Storage::kMeta);
  if (!layout.participates()) return DTensor::zeros(layout.spec());
  const DTensorSpec& spec = layout.spec();
  // DCP's own shard arithmetic (the first index of a strided shard, as DCP 2.15 records it).
  const LocalShard region = compute_local_shape_and_global_offset(
      spec.shape, spec.mesh.shape(), spec.mesh.coordinate(), spec.placements);
  Tensor local(region.shape, spec.dtype);
  if (local.numel() > 0) fill_region(dir, entry, region, local);
  return DTensor::from_local_shard(spec, std::move(local));
}

Tensor load_dcp_tensor(const std::string& dir, const DcpEntry& entry) {
  Tensor out(entry.shape, dtype_of(entry));
  const LocalShard whole{entry.shape, std::vector<int64_t>(entry.shape.size(), 0)};
  if (out.numel() > 0) fill_region(dir, entry, whole, out);
  return out;
}

}  // namespace meshsim
