#include "src/io/dcp_metadata.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/pickle_reader.hpp"

namespace meshsim {
namespace {

using Kind = PickleValue::Kind;

// torch's dtypes by name, with their element sizes; the ones meshsim computes with map to DType.
struct TorchDType {
  std::string_view name;
  uint64_t size;
  std::optional<DType> dtype;
};
constexpr TorchDType kTorchDTypes[] = {
    {"float32", 4, DType::kFloat32},      {"float64", 8, DType::kFloat64},
    {"float16", 2, DType::kFloat16},      {"bfloat16", 2, DType::kBFloat16},
    {"int64", 8, DType::kInt64},          {"int32", 4, DType::kInt32},
    {"uint8", 1, DType::kUInt8},          {"bool", 1, DType::kBool},
    {"int16", 2, std::nullopt},           {"int8", 1, std::nullopt},
    {"uint16", 2, std::nullopt},          {"uint32", 4, std::nullopt},
    {"uint64", 8, std::nullopt},          {"complex32", 4, std::nullopt},
    {"complex64", 8, std::nullopt},       {"complex128", 16, std::nullopt},
    {"float8_e4m3fn", 1, std::nullopt},   {"float8_e5m2", 1, std::nullopt},
    {"float8_e4m3fnuz", 1, std::nullopt}, {"float8_e5m2fnuz", 1, std::nullopt},
    {"float8_e8m0fnu", 1, std::nullopt},  {"float4_e2m1fn_x2", 1, std::nullopt},
};

std::vector<PickleGlobalName> allowed_globals() {
  std::vector<PickleGlobalName> out = {
      {kDcpMetadataModule, "Metadata"},
      {kDcpMetadataModule, "TensorStorageMetadata"},
      {kDcpMetadataModule, "TensorProperties"},
      {kDcpMetadataModule, "ChunkStorageMetadata"},
      {kDcpMetadataModule, "BytesStorageMetadata"},
      {kDcpMetadataModule, "MetadataIndex"},
      {kDcpMetadataModule, "StorageMeta"},
      {kDcpMetadataModule, "_MEM_FORMAT_ENCODING"},
      {kDcpFilesystemModule, "_StorageInfo"},
      {"torch", "Size"},
      {"torch.serialization", "_get_layout"},
      {"pathlib", "PosixPath"},
      {"pathlib", "PurePosixPath"},
      {"pathlib", "WindowsPath"},
      {"pathlib", "PureWindowsPath"},
      {"collections", "OrderedDict"},
  };
  for (const TorchDType& dtype : kTorchDTypes) out.push_back({"torch", dtype.name});
  return out;
}

// A data file's name as DCP writes it: no directory, nothing that leaves the checkpoint.
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

// Walks the unpickled graph with the schema in hand, naming the field in every refusal.
class MetadataDecoder {
 public:
  MetadataDecoder(const PickleDocument& document, std::string_view what)
      : document_(document), what_(what) {}

  DcpMetadata decode() {
    DcpMetadata out;
    const uint32_t state = object_state(document_.root, "Metadata", "the file");
    // Every chunk and object needs a storage key: their count bounds what the entries may list,
    // before a graph that shares one chunk a million times is copied out.
    const std::optional<uint32_t> storage = optional_field(state, "storage_data");
    if (storage && at(*storage).kind == Kind::kDict) max_stored_ = at(*storage).items.size() / 2;
    const uint32_t entries = field(state, "state_dict_metadata", "Metadata");
    expect_kind(entries, Kind::kDict, "state_dict_metadata", "a dict");
    const PickleValue& entry_items = at(entries);
    for (size_t i = 0; i + 1 < entry_items.items.size(); i += 2) {
      std::string name = string_of(entry_items.items[i], "state_dict_metadata key");
      const std::string path = fmt::format("state_dict_metadata['{}']", name);
      if (index_.contains(name)) fail(entry_items.items[i], path, "the name is listed twice");
      index_.emplace(name, out.entries.size());
      out.entries.push_back(decode_entry(std::move(name), entry_items.items[i + 1], path));
    }
    if (storage) attach_storage(*storage, out);
    if (const auto version = optional_field(state, "version");
        version && at(*version).kind != Kind::kNone) {
      out.version = string_of(*version, "version");
    }
    if (const auto meta = optional_field(state, "storage_meta");
        meta && at(*meta).kind != Kind::kNone) {
      const uint32_t meta_state = object_state(*meta, "StorageMeta", "storage_meta");
      if (const auto id = optional_field(meta_state, "save_id");
          id && at(*id).kind == Kind::kString) {
        out.save_id = std::string(at(*id).text);
      }
      if (const auto id = optional_field(meta_state, "checkpoint_id")) {
        out.checkpoint_id = path_text(*id);
      }
    }
    for (const DcpEntry& entry : out.entries) check_storage_complete(entry);
    out.index = std::move(index_);
    return out;
  }

 private:
  const PickleValue& at(uint32_t index) const { return document_.at(index); }

  [[noreturn]] void fail(uint32_t index, std::string_view path, std::string_view message) const {
    throw value_error(fmt::format("{}: byte {}: {}: {}", what_, at(index).offset, path, message));
  }
  void expect_kind(uint32_t index, Kind kind, std::string_view path, std::string_view expected) {
    if (at(index).kind != kind) {
      fail(index, path,
           fmt::format("expected {}, found {}", expected,
                       describe_pickle_value(document_, index, 2, 80)));
    }
  }
  bool is_global(uint32_t index, std::string_view module, std::string_view name) const {
    return is_pickle_global(document_, index, module, name);
  }
  // The state BUILD gave an object of DCP's class `name` (an empty dict when it had none).
  uint32_t object_state(uint32_t index, std::string_view name, std::string_view path) {
    const PickleValue& value = at(index);
    if (value.kind != Kind::kObject || !is_global(value.items[0], kDcpMetadataModule, name)) {
      fail(index, path,
           fmt::format("expected a {}, found {}", name,
                       describe_pickle_value(document_, index, 1, 80)));
    }
    if (value.items.size() < 3) return kNoState;
    const uint32_t state = value.items[2];
    // (dict, slots) as a class with __slots__ pickles; the slots hold the fields.
    if (at(state).kind == Kind::kTuple && at(state).items.size() == 2 &&
        at(at(state).items[1]).kind == Kind::kDict) {
      return at(state).items[1];
    }
    return state;
  }
  std::optional<uint32_t> optional_field(uint32_t state, std::string_view key) const {
    if (state == kNoState || at(state).kind != Kind::kDict) return std::nullopt;
    const PickleValue& dict = at(state);
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const PickleValue& k = at(dict.items[i]);
      if (k.kind == Kind::kString && k.text == key) return dict.items[i + 1];
    }
    return std::nullopt;
  }
  uint32_t field(uint32_t state, std::string_view key, std::string_view path) {
    if (state == kNoState) fail(document_.root, path, fmt::format("it has no fields ({})", key));
    expect_kind(state, Kind::kDict, path, "the object's fields as a dict");
    if (const auto found = optional_field(state, key)) return *found;
    fail(state, path, fmt::format("it has no field '{}'", key));
  }
  std::string string_of(uint32_t index, std::string_view path) {
    expect_kind(index, Kind::kString, path, "a string");
    return std::string(at(index).text);
  }
  int64_t int_of(uint32_t index, std::string_view path) {
    expect_kind(index, Kind::kInt, path, "an integer");
    return at(index).integer;
  }
  uint64_t unsigned_of(uint32_t index, std::string_view path) {
    const int64_t value = int_of(index, path);
    if (value < 0) fail(index, path, fmt::format("{} is negative", value));
    return static_cast<uint64_t>(value);
  }
  // torch.Size((d0, d1, ...)): non-negative dimensions.
  std::vector<int64_t> size_of(uint32_t index, std::string_view path) {
    const PickleValue& value = at(index);
    if (value.kind != Kind::kObject || !is_global(value.items[0], "torch", "Size") ||
        at(value.items[1]).items.size() != 1) {
      fail(index, path,
           fmt::format("expected a torch.Size, found {}",
                       describe_pickle_value(document_, index, 2, 80)));
    }
    const uint32_t dims = at(value.items[1]).items[0];
    if (at(dims).kind != Kind::kTuple && at(dims).kind != Kind::kList) {
      fail(dims, path, "the torch.Size is not built from a tuple");
    }
    if (at(dims).items.size() > kMaxDims) {
      fail(dims, path,
           fmt::format("{} dimensions; a tensor has at most {}", at(dims).items.size(), kMaxDims));
    }
    std::vector<int64_t> out;
    for (uint32_t d : at(dims).items) {
      out.push_back(static_cast<int64_t>(unsigned_of(d, path)));
    }
    if (!checked_product(out)) fail(index, path, "the sizes multiply past 2^63");
    return out;
  }
  // pathlib.PosixPath('a', 'b') and the like, or a plain string.
  std::string path_text(uint32_t index) {
    const PickleValue& value = at(index);
    if (value.kind == Kind::kString) return std::string(value.text);
    if (value.kind != Kind::kObject) return {};
    std::string out;
    for (uint32_t part : at(value.items[1]).items) {
      if (at(part).kind != Kind::kString) continue;
      if (!out.empty() && out.back() != '/') out += '/';
      out += at(part).text;
    }
    return out;
  }

  DcpEntry decode_entry(std::string name, uint32_t index, const std::string& path) {
    DcpEntry entry;
    entry.name = std::move(name);
    const PickleValue& value = at(index);
    if (value.kind == Kind::kObject &&
        is_global(value.items[0], kDcpMetadataModule, "BytesStorageMetadata")) {
      entry.is_tensor = false;
      count_stored(index, path);
      return entry;
    }
    const uint32_t state = object_state(index, "TensorStorageMetadata", path);
    decode_properties(field(state, "properties", path), path + ".properties", entry);
    entry.shape = size_of(field(state, "size", path), path + ".size");
    const uint32_t chunks = field(state, "chunks", path);
    expect_kind(chunks, Kind::kList, path + ".chunks", "a list");
    for (size_t c = 0; c < at(chunks).items.size(); ++c) {
      const std::string chunk_path = fmt::format("{}.chunks[{}]", path, c);
      const uint32_t chunk = at(chunks).items[c];
      count_stored(chunk, chunk_path);
      const uint32_t chunk_state = object_state(chunk, "ChunkStorageMetadata", chunk_path);
      DcpChunk out;
      out.offsets = size_of(field(chunk_state, "offsets", chunk_path), chunk_path + ".offsets");
      out.sizes = size_of(field(chunk_state, "sizes", chunk_path), chunk_path + ".sizes");
      if (out.offsets.size() != entry.shape.size() || out.sizes.size() != entry.shape.size()) {
        fail(chunk, chunk_path,
             fmt::format("offsets {} and sizes {} do not have the tensor's {} dimensions",
                         fmt::join(out.offsets, ", "), fmt::join(out.sizes, ", "),
                         entry.shape.size()));
      }
      for (size_t d = 0; d < entry.shape.size(); ++d) {
        if (out.sizes[d] > entry.shape[d] || out.offsets[d] > entry.shape[d] - out.sizes[d]) {
          fail(chunk, chunk_path,
               fmt::format("[{}] + [{}] runs past the tensor's shape [{}]",
                           fmt::join(out.offsets, ", "), fmt::join(out.sizes, ", "),
                           fmt::join(entry.shape, ", ")));
        }
      }
      entry.chunks.push_back(std::move(out));
    }
    if (entry.shape.empty() && entry.chunks.size() > 1) {
      fail(at(chunks).items[1], path + ".chunks",
           fmt::format("a 0-d tensor with {} chunks: they overlap", entry.chunks.size()));
    }
    check_no_overlap(entry, chunks, path);
    return entry;
  }

  void count_stored(uint32_t index, std::string_view path) {
    if (++stored_ > max_stored_) {
      fail(index, path,
           fmt::format("more chunks and objects than storage_data has keys ({})", max_stored_));
    }
  }

  void decode_properties(uint32_t index, const std::string& path, DcpEntry& entry) {
    const PickleValue& value = at(index);
    if (value.kind != Kind::kObject ||
        !is_global(value.items[0], kDcpMetadataModule, "TensorProperties") ||
        value.items.size() < 3) {
      fail(index, path, "expected a TensorProperties with its state");
    }
    // 2.x pickles the fields as a tuple (dtype, layout, requires_grad, memory_format,
    // pin_memory[, strides]); older writers as a dict.
    const uint32_t state = value.items[2];
    uint32_t dtype = 0;
    std::optional<uint32_t> requires_grad;
    if (at(state).kind == Kind::kTuple && !at(state).items.empty()) {
      dtype = at(state).items[0];
      if (at(state).items.size() > 2) requires_grad = at(state).items[2];
    } else if (at(state).kind == Kind::kDict) {
      dtype = field(state, "dtype", path);
      requires_grad = optional_field(state, "requires_grad");
    } else {
      fail(state, path, "its state is neither a tuple nor a dict");
    }
    const PickleValue& global = at(dtype);
    const auto known =
        std::find_if(std::begin(kTorchDTypes), std::end(kTorchDTypes),
                     [&](const TorchDType& t) { return is_global(dtype, "torch", t.name); });
    if (global.kind != Kind::kGlobal || known == std::end(kTorchDTypes)) {
      fail(dtype, path + ".dtype",
           fmt::format("expected a torch dtype, found {}",
                       describe_pickle_value(document_, dtype, 1, 60)));
    }
    entry.dtype_name = std::string(known->name);
    entry.dtype = known->dtype;
    entry.element_size = known->size;
    if (requires_grad && at(*requires_grad).kind == Kind::kBool) {
      entry.requires_grad = at(*requires_grad).integer != 0;
    }
  }

  // Chunks of one tensor may not share an element: a reader would take either copy. Swept along
  // the largest dimension, so disjoint layouts cost a sort.
  void check_no_overlap(const DcpEntry& entry, uint32_t chunks_index, const std::string& path) {
    if (entry.shape.empty() || entry.chunks.size() < 2) return;
    const size_t dims = entry.shape.size();
    const size_t sweep = static_cast<size_t>(
        std::max_element(entry.shape.begin(), entry.shape.end()) - entry.shape.begin());
    std::vector<size_t> order(entry.chunks.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return entry.chunks[a].offsets[sweep] < entry.chunks[b].offsets[sweep];
    });
    const auto empty = [&](const DcpChunk& c) {
      return std::any_of(c.sizes.begin(), c.sizes.end(), [](int64_t s) { return s == 0; });
    };
    std::vector<size_t> active;
    for (size_t i : order) {
      const DcpChunk& chunk = entry.chunks[i];
      if (empty(chunk)) continue;
      std::erase_if(active, [&](size_t a) {
        const DcpChunk& other = entry.chunks[a];
        return other.offsets[sweep] + other.sizes[sweep] <= chunk.offsets[sweep];
      });
      for (size_t a : active) {
        const DcpChunk& other = entry.chunks[a];
        bool overlap = true;
        for (size_t d = 0; d < dims && overlap; ++d) {
          overlap = chunk.offsets[d] < other.offsets[d] + other.sizes[d] &&
                    other.offsets[d] < chunk.offsets[d] + chunk.sizes[d];
        }
        if (overlap) {
          fail(at(chunks_index).items[std::max(a, i)], fmt::format("{}.chunks", path),
               fmt::format("chunks {} ([{}] + [{}]) and {} ([{}] + [{}]) overlap", std::min(a, i),
                           fmt::join(entry.chunks[std::min(a, i)].offsets, ", "),
                           fmt::join(entry.chunks[std::min(a, i)].sizes, ", "), std::max(a, i),
                           fmt::join(entry.chunks[std::max(a, i)].offsets, ", "),
                           fmt::join(entry.chunks[std::max(a, i)].sizes, ", ")));
        }
      }
      active.push_back(i);
    }
  }

  // storage_data: {MetadataIndex(fqn, offset): _StorageInfo(relative_path, offset, length)}.
  void attach_storage(uint32_t storage, DcpMetadata& out) {
    expect_kind(storage, Kind::kDict, "storage_data", "a dict");
    const PickleValue& dict = at(storage);
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const std::string key_path = fmt::format("storage_data key {}", i / 2);
      const uint32_t key_state = object_state(dict.items[i], "MetadataIndex", key_path);
      const std::string name = string_of(field(key_state, "fqn", key_path), key_path + ".fqn");
      std::string path = fmt::format("storage_data['{}']", name);
      const auto entry_at = index_.find(name);
      if (entry_at == index_.end()) {
        fail(dict.items[i], key_path,
             fmt::format("'{}' is not a name of state_dict_metadata", name));
      }
      DcpEntry& entry = out.entries[entry_at->second];
      DcpChunk* target = &entry.object;
      const auto offset = optional_field(key_state, "offset");
      if (entry.is_tensor) {
        if (!offset || at(*offset).kind == Kind::kNone) {
          fail(dict.items[i], path, "a tensor's storage key has no offset");
        }
        std::vector<int64_t> offsets = size_of(*offset, path + ".offset");
        path = fmt::format("storage_data['{}' at [{}]]", name, fmt::join(offsets, ", "));
        const std::optional<size_t> chunk =
            find_chunk(entry, entry_at->second, offsets, optional_field(key_state, "index"));
        if (!chunk) {
          fail(*offset, path,
               fmt::format("no chunk of '{}' starts at [{}]", name, fmt::join(offsets, ", ")));
        }
        target = &entry.chunks[*chunk];
      } else if (offset && at(*offset).kind != Kind::kNone) {
        fail(*offset, path, "a bytes entry's storage key has an offset");
      }
      if (!target->file.empty()) fail(dict.items[i], path, "this storage key is listed twice");
      const std::string info_path = path + " value";
      const PickleValue& info = at(dict.items[i + 1]);
      if (info.kind != Kind::kObject ||
          !is_global(info.items[0], kDcpFilesystemModule, "_StorageInfo") ||
          info.items.size() < 3) {
        fail(dict.items[i + 1], info_path, "expected a _StorageInfo with its fields");
      }
      const uint32_t info_state = info.items[2];
      target->file =
          string_of(field(info_state, "relative_path", info_path), info_path + ".relative_path");
      if (!is_plain_file_name(target->file)) {
        fail(dict.items[i + 1], info_path + ".relative_path",
             fmt::format("'{}' is not a file name inside the checkpoint directory (DCP writes "
                         "__<rank>_<n>.distcp)",
                         target->file));
      }
      target->offset = unsigned_of(field(info_state, "offset", info_path), info_path + ".offset");
      target->length = unsigned_of(field(info_state, "length", info_path), info_path + ".length");
      if (!checked_add(static_cast<int64_t>(target->offset),
                       static_cast<int64_t>(target->length))) {
        fail(dict.items[i + 1], info_path, "offset + length overflows");
      }
      if (const auto transforms = optional_field(info_state, "transform_descriptors");
          transforms && at(*transforms).kind != Kind::kNone &&
          !(at(*transforms).kind == Kind::kList && at(*transforms).items.empty())) {
        fail(*transforms, info_path,
             "the item was written through stream transforms (compression or encryption), which "
             "meshsim does not read");
      }
    }
  }

  // The chunk a storage key names: DCP matches by offsets; the key's `index` is the chunk's
  // position when the writer was DCP, so it is tried first, and a map of the entry's chunks is
  // built only when it is wrong.
  std::optional<size_t> find_chunk(const DcpEntry& entry, size_t entry_index,
                                   const std::vector<int64_t>& offsets,
                                   std::optional<uint32_t> hint) {
    if (hint && at(*hint).kind == Kind::kInt && at(*hint).integer >= 0 &&
        static_cast<uint64_t>(at(*hint).integer) < entry.chunks.size() &&
        entry.chunks[static_cast<size_t>(at(*hint).integer)].offsets == offsets) {
      return static_cast<size_t>(at(*hint).integer);
    }
    auto [map, fresh] = chunk_at_.try_emplace(entry_index);
    if (fresh) {
      for (size_t c = 0; c < entry.chunks.size(); ++c)
        map->second.emplace(entry.chunks[c].offsets, c);
    }
    const auto found = map->second.find(offsets);
    if (found == map->second.end()) return std::nullopt;
    return found->second;
  }

  void check_storage_complete(const DcpEntry& entry) {
    const auto missing = [&](std::string_view where) {
      throw value_error(
          fmt::format("{}: state_dict_metadata['{}']{}: no storage_data entry says "
                      "where its bytes are",
                      what_, entry.name, where));
    };
    if (!entry.is_tensor) {
      if (entry.object.file.empty()) missing("");
      return;
    }
    for (size_t c = 0; c < entry.chunks.size(); ++c) {
      if (entry.chunks[c].file.empty()) missing(fmt::format(".chunks[{}]", c));
    }
  }

  static constexpr uint32_t kNoState = UINT32_MAX;
  // PyTorch's own limit on a tensor's dimensions.
  static constexpr size_t kMaxDims = 64;
  size_t max_stored_ = 0;
  size_t stored_ = 0;
  const PickleDocument& document_;
  std::string_view what_;
  std::map<std::string, size_t, std::less<>> index_;
  // entry -> chunk offsets -> chunk, for entries whose storage keys' hints were wrong.
  std::map<size_t, std::map<std::vector<int64_t>, size_t>> chunk_at_;
};

}  // namespace

DcpMetadata read_dcp_metadata(std::string bytes, std::string_view what) {
  static const std::vector<PickleGlobalName> allowed = allowed_globals();
  const PickleDocument document = read_pickle(std::move(bytes), allowed, what);
  return MetadataDecoder(document, what).decode();
}

DcpMetadata read_dcp_metadata_file(const std::string& path) {
  return read_dcp_metadata(read_file_bounded(path, uint64_t{1} << 31), path);
}

std::string dcp_coverage_gap(const DcpEntry& entry) {
  if (!entry.is_tensor) return "";
  const int64_t covered = dcp_entry_numel(entry);
  const int64_t numel = *checked_product(entry.shape);
  if (covered == numel) return "";
  return fmt::format("{}: its chunks hold {} of its {} elements", entry.name, covered, numel);
}

const DcpEntry* find_dcp_entry(const DcpMetadata& metadata, std::string_view name) {
  const auto found = metadata.index.find(name);
  return found == metadata.index.end() ? nullptr : &metadata.entries[found->second];
}

int64_t dcp_entry_numel(const DcpEntry& entry) {
  int64_t total = 0;
  for (const DcpChunk& chunk : entry.chunks) total += *checked_product(chunk.sizes);
  return total;
}

}  // namespace meshsim
