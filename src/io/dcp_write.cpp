#include "src/io/dcp_write.hpp"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/dcp_metadata.hpp"
#include "src/io/pickle_writer.hpp"
#include "src/io/torch_save_writer.hpp"
#include "src/io/xxh3_stream.hpp"

namespace meshsim {

namespace {

// DCP describes a chunk as a box: offsets and sizes per dim. A dim of an empty chunk starts at
// the dim's size, where PyTorch puts the offset of an empty shard.
struct Box {
  std::vector<int64_t> offsets, sizes;
};

Box box_of(const std::vector<IndexRuns>& indices, const std::vector<int64_t>& shape,
           const std::string& name) {
  Box box;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (indices[d].runs().size() > 1) {
      throw runtime_error(fmt::format(
          "'{}' is saved in strided chunks (its elements on a rank are not one block of the "
          "tensor): DCP's format holds blocks only; save it in meshsim's own format",
          name));
    }
    box.offsets.push_back(indices[d].empty() ? shape[d] : indices[d].first());
    box.sizes.push_back(indices[d].size());
  }
  return box;
}

// An instance of a dataclass, as pickle writes one: the class called with no arguments, then its
// fields set from a dict.
template <typename Fields>
void dataclass(PickleWriter& w, std::string_view module, std::string_view name, Fields&& fields) {
  w.global(module, name);
  w.empty_tuple();
  w.new_object();
  w.empty_dict();
  w.mark();
  fields();
  w.set_items_from_mark();
  w.build();
}

void torch_size(PickleWriter& w, std::span<const int64_t> dims) {
  w.global("torch", "Size");
  w.int_tuple(dims);
  w.tuple1();
  w.reduce();
}

// TensorProperties pickles its fields as a tuple: (dtype, layout, requires_grad, memory format,
// pin_memory, strides), the layout and memory format as calls that rebuild them.
void tensor_properties(PickleWriter& w, DType dtype, bool requires_grad,
                       std::span<const int64_t> strides) {
  w.global(kDcpMetadataModule, "TensorProperties");
  w.empty_tuple();
  w.new_object();
  w.mark();
  w.global("torch", dtype_name(dtype));
  w.global("torch.serialization", "_get_layout");
  w.string("torch.strided");
  w.tuple1();
  w.reduce();
  w.boolean(requires_grad);
  w.global(kDcpMetadataModule, "_MEM_FORMAT_ENCODING");
  w.integer(0);  // TORCH_CONTIGUOUS_FORMAT
  w.tuple1();
  w.reduce();
  w.boolean(false);
  w.int_tuple(strides);
  w.tuple_from_mark();
  w.build();
}

const SaveItem* find_item(const LocalSavePlan& plan, const std::string& name) {
  for (const SaveItem& item : plan.items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

// A UUID-shaped id of the save (DCP writes a random uuid4): derived from what was saved, so
// equal saves write equal metadata.
std::string save_id(const CheckpointMetadata& plan,
                    std::span<const std::vector<DcpWrittenItem>> written) {
  Xxh3Stream hash;
  for (const CheckpointTensor& t : plan.tensors) hash.add(t.name.data(), t.name.size() + 1);
  for (const auto& items : written) {
    for (const DcpWrittenItem& item : items) {
      hash.add(&item.offset, sizeof item.offset);
      hash.add(&item.length, sizeof item.length);
    }
  }
  const uint64_t a = hash.digest();
  const uint64_t b = a * 0x9e3779b97f4a7c15ull + 1;
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffull);
}

}  // namespace

std::string dcp_data_file_name(int64_t rank) {
  return fmt::format("__{}_0.distcp", rank);
}

std::vector<DcpWrittenItem> save_dcp_shard(const std::string& dir, const LocalSavePlan& mine,
                                           std::span<const PlannedWrite> writes,
                                           Durability durability) {
  const std::string file = dcp_data_file_name(mine.rank);
  for (const SaveItem& item : mine.items)
    box_of(item.indices, item.shape, item.name);  // refuses a strided chunk on every rank
  std::vector<DcpWrittenItem> written;
  std::deque<StoredZipWriter> archives;
  std::vector<std::string_view> pieces;
  uint64_t offset = 0;
  for (const PlannedWrite& w : writes) {
    const SaveItem& item = mine.items.at(w.item);
    const StoredZipWriter& archive = archives.emplace_back(torch_save_tensor(*item.data));
    pieces.insert(pieces.end(), archive.pieces().begin(), archive.pieces().end());
    written.push_back({item.name, w.chunk, file, offset, archive.size()});
    offset += archive.size();
  }
  write_file_atomically((std::filesystem::path(dir) / file).string(), pieces, nullptr, durability);
  return written;
}

void save_dcp_metadata(const std::string& dir, const CheckpointMetadata& plan,
                       std::span<const LocalSavePlan> plans,
                       std::span<const std::vector<DcpWrittenItem>> written,
                       std::string_view checkpoint_id, Durability durability) {
  // Each tensor's chunks as boxes, computed once, and each tensor by name; every chunk must have
  // been written by some rank.
  std::unordered_map<std::string_view, size_t> tensor_of;
  std::vector<std::vector<Box>> boxes(plan.tensors.size());
  std::vector<std::vector<bool>> chunk_written(plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const CheckpointTensor& t = plan.tensors[i];
    MESHSIM_ASSERT(!t.chunks.empty(), "a saved tensor without chunks");
    tensor_of.emplace(t.name, i);
    for (const CheckpointChunk& c : t.chunks)
      boxes[i].push_back(box_of(c.indices, t.shape, t.name));
    chunk_written[i].assign(t.chunks.size(), false);
  }
  for (const auto& items : written) {
    for (const DcpWrittenItem& item : items) {
      const auto t = tensor_of.find(item.name);
      MESHSIM_ASSERT(t != tensor_of.end() && item.chunk < boxes[t->second].size(),
                     "a written item is not in the plan");
      chunk_written[t->second][item.chunk] = true;
    }
  }
  for (const std::vector<bool>& chunks : chunk_written) {
    MESHSIM_ASSERT(std::find(chunks.begin(), chunks.end(), false) == chunks.end(),
                   "a planned chunk was not written");
  }
  PickleWriter w;
  dataclass(w, kDcpMetadataModule, "Metadata", [&] {
    w.string("state_dict_metadata");
    w.empty_dict();
    w.mark();
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const CheckpointTensor& t = plan.tensors[i];
      // DCP keeps the properties of the first chunk it meets: the first writer's local tensor.
      const CheckpointChunk& first = t.chunks.front();
      const SaveItem* item = find_item(plans[static_cast<size_t>(first.file_rank)], t.name);
      MESHSIM_ASSERT(item != nullptr, "a chunk's writer does not hold its tensor");
      w.string(t.name);
      dataclass(w, kDcpMetadataModule, "TensorStorageMetadata", [&] {
        w.string("properties");
        tensor_properties(w, t.dtype, item->requires_grad,
                          torch_contiguous_strides(boxes[i].front().sizes));
        w.string("size");
        torch_size(w, t.shape);
        w.string("chunks");
        w.empty_list();
        w.mark();
        for (const Box& box : boxes[i]) {
          dataclass(w, kDcpMetadataModule, "ChunkStorageMetadata", [&] {
            w.string("offsets");
            torch_size(w, box.offsets);
            w.string("sizes");
            torch_size(w, box.sizes);
          });
        }
        w.append_from_mark();
      });
    }
    w.set_items_from_mark();
    // How the flattened names map back to the state dict's nesting: one level, as given.
    w.string("planner_data");
    w.empty_dict();
    w.mark();
    for (const CheckpointTensor& t : plan.tensors) {
      w.string(t.name);
      w.mark();
      w.string(t.name);
      w.tuple_from_mark();
    }
    w.set_items_from_mark();
    // Storage keys in write order: rank by rank, each in its file's order.
    w.string("storage_data");
    w.empty_dict();
    w.mark();
    for (const auto& items : written) {
      for (const DcpWrittenItem& item : items) {
        dataclass(w, kDcpMetadataModule, "MetadataIndex", [&] {
          w.string("fqn");
          w.string(item.name);
          w.string("index");
          w.integer(static_cast<int64_t>(item.chunk));
          w.string("offset");
          torch_size(w, boxes[tensor_of.at(item.name)][item.chunk].offsets);
        });
        dataclass(w, kDcpFilesystemModule, "_StorageInfo", [&] {
          w.string("relative_path");
          w.string(item.file);
          w.string("offset");
          w.integer(static_cast<int64_t>(item.offset));
          w.string("length");
          w.integer(static_cast<int64_t>(item.length));
        });
      }
    }
    w.set_items_from_mark();
    w.string("storage_meta");
    dataclass(w, kDcpMetadataModule, "StorageMeta", [&] {
      w.string("checkpoint_id");
      w.string(checkpoint_id);
      w.string("save_id");
      w.string(save_id(plan, written));
      w.string("load_id");
      w.none();
      w.string("modules");
      w.empty_list();
    });
    w.string("version");
    w.string("1.0.0");
  });
  write_file_atomically((std::filesystem::path(dir) / kDcpMetadataFileName).string(), w.finish(),
                        nullptr, durability);
}

}  // namespace meshsim
