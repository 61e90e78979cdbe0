#include "src/io/torch_saved_dtensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "src/dtensor/shard_order.hpp"
#include "src/error.hpp"
#include "src/io/zip_format.hpp"
#include "src/printable.hpp"

namespace meshsim {
namespace {

using Kind = PickleValue::Kind;

// More than any real mesh has; a pickle claiming more is refused before anything is sized by it.
constexpr size_t kMaxMeshDims = 64;
constexpr size_t kMaxFlattenedMeshes = 1024;
// A _FlatLayout's shape may nest tuples (a flattened mesh over non-adjacent dims); never deeply,
// and never in many pieces: every tuple and integer visited counts (the memo lets one tuple be
// named many times, so nesting alone bounds nothing).
constexpr int kMaxLayoutNesting = 8;
constexpr size_t kMaxLayoutNodes = 256;
// Rank-table entries decoded for one file, over every mesh of the family (a table is shared
// through the memo, and decoded once): a world of 2^20 ranks with a dozen flattened meshes.
constexpr uint64_t kMaxRankEntries = uint64_t{1} << 24;
// An object's attributes are a handful; more is not a DTensor, mesh or layout PyTorch wrote.
constexpr size_t kMaxAttributes = 64;

constexpr std::string_view kMeshModule = "torch.distributed.device_mesh";
constexpr std::string_view kLayoutModule = "torch.distributed._mesh_layout";
constexpr std::string_view kSpecModule = "torch.distributed.tensor._dtensor_spec";
constexpr std::string_view kPlacementModule = "torch.distributed.tensor.placement_types";

const std::vector<PickleGlobalName>& allowed_globals() {
  static const std::vector<PickleGlobalName> globals = [] {
    std::vector<PickleGlobalName> out = torch_tensor_globals();
    out.insert(out.end(), {
                              {"torch._tensor", "_rebuild_from_type_v2"},
                              {"torch._utils", "_rebuild_wrapper_subclass"},
                              {"torch.distributed.tensor", "DTensor"},
                              {"torch.distributed.tensor._api", "DTensor"},
                              {kSpecModule, "DTensorSpec"},
                              {kSpecModule, "TensorMeta"},
                              {kSpecModule, "ShardOrderEntry"},
                              {kPlacementModule, "Shard"},
                              {kPlacementModule, "Replicate"},
                              {kPlacementModule, "Partial"},
                              {kPlacementModule, "_StridedShard"},
                              {kMeshModule, "DeviceMesh"},
                              {kLayoutModule, "_MeshLayout"},
                              {kLayoutModule, "_FlatLayout"},
                              {"torch", "Size"},
                              {"torch", "device"},
                              {"torch.serialization", "_get_layout"},
                          });
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                        DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool}) {
      out.push_back({"torch", dtype_name(dtype)});
    }
    return out;
  }();
  return globals;
}

// Walks the unpickled graph by attribute, naming the attribute path and byte offset in errors.
class Decoder {
 public:
  explicit Decoder(const TorchSaveArchive& archive)
      : archive_(archive), document_(archive.document) {}

  const TorchSaveArchive& archive() const { return archive_; }
  const PickleValue& at(uint32_t index) const { return document_.at(index); }

  [[noreturn]] void fail(uint32_t index, std::string_view path, std::string_view message) const {
    throw archive_.fail(fmt::format("{} (byte {}): {}", path, at(index).offset, message));
  }

  bool is_none(uint32_t index) const { return at(index).kind == Kind::kNone; }

  // Whether value `index` is a call of (an object of) module.name.
  bool is_call_of(uint32_t index, std::string_view module, std::string_view name) const {
    const PickleValue& value = at(index);
    return value.kind == Kind::kObject && is_pickle_global(document_, value.items[0], module, name);
  }

  void expect_call_of(uint32_t index, std::string_view path, std::string_view module,
                      std::string_view name) const {
    if (!is_call_of(index, module, name)) {
      fail(index, path,
           fmt::format("expected a {}.{}, found {}", module, name,
                       describe_pickle_value(document_, index, 1, 80)));
    }
  }

  // The arguments of a call (REDUCE, NEWOBJ), as a tuple.
  const PickleItems& call_args(uint32_t index, std::string_view path, size_t at_least) const {
    const PickleValue& args = at(at(index).items[1]);
    if (args.kind != Kind::kTuple || args.items.size() < at_least) {
      fail(index, path, fmt::format("its arguments are not a tuple of at least {}", at_least));
    }
    return args.items;
  }

  // The attribute dict BUILD gave an object: a few string keys, each once (Python would keep the
  // last of two, this reader would find the first).
  uint32_t state(uint32_t index, std::string_view path) const {
    const PickleValue& object = at(index);
    if (object.items.size() != 3 || at(object.items[2]).kind != Kind::kDict) {
      fail(index, path, "it has no attribute dict (the pickle never built it)");
    }
    check_attributes(object.items[2], path);
    return object.items[2];
  }

  void check_attributes(uint32_t dict, std::string_view path) const {
    const PickleItems& items = at(dict).items;
    if (items.size() / 2 > kMaxAttributes) {
      fail(dict, path,
           fmt::format("it has {} attributes, more than {}", items.size() / 2, kMaxAttributes));
    }
    for (size_t i = 0; i < items.size(); i += 2) {
      for (size_t j = 0; j < i; j += 2) {
        if (at(items[i]).kind == Kind::kString && at(items[j]).kind == Kind::kString &&
            at(items[i]).text == at(items[j]).text) {
          fail(items[i], path,
               fmt::format("it sets attribute '{}' twice", printable(at(items[i]).text)));
        }
      }
    }
  }

  std::optional<uint32_t> find(uint32_t dict, std::string_view key) const {
    const PickleItems& items = at(dict).items;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const PickleValue& k = at(items[i]);
      if (k.kind == Kind::kString && k.text == key) return items[i + 1];
    }
    return std::nullopt;
  }

  uint32_t field(uint32_t dict, std::string_view path, std::string_view key) const {
    const std::optional<uint32_t> found = find(dict, key);
    if (!found) fail(dict, path, fmt::format("it has no attribute '{}'", key));
    return *found;
  }

  int64_t integer(uint32_t index, std::string_view path) const {
    if (at(index).kind != Kind::kInt) {
      fail(index, path,
           fmt::format("expected an integer, found {}",
                       describe_pickle_value(document_, index, 1, 40)));
    }
    return at(index).integer;
  }

  bool flag(uint32_t index, std::string_view path) const {
    if (at(index).kind != Kind::kBool) fail(index, path, "expected True or False");
    return at(index).integer != 0;
  }

  std::string text(uint32_t index, std::string_view path) const {
    if (at(index).kind != Kind::kString) {
      fail(index, path,
           fmt::format("expected a string, found {}",
                       describe_pickle_value(document_, index, 1, 40)));
    }
    return std::string(at(index).text);
  }

  const PickleItems& sequence(uint32_t index, std::string_view path, size_t max_items) const {
    const PickleValue& value = at(index);
    if (value.kind != Kind::kTuple && value.kind != Kind::kList) {
      fail(index, path, "expected a tuple or list");
    }
    if (value.items.size() > max_items) {
      fail(index, path,
           fmt::format("it holds {} items, more than {}", value.items.size(), max_items));
    }
    return value.items;
  }

  std::vector<int64_t> integers(uint32_t index, std::string_view path, size_t max_items) const {
    std::vector<int64_t> out;
    for (uint32_t item : sequence(index, path, max_items)) out.push_back(integer(item, path));
    return out;
  }

  std::vector<std::string> strings(uint32_t index, std::string_view path, size_t max_items) const {
    std::vector<std::string> out;
    for (uint32_t item : sequence(index, path, max_items)) out.push_back(text(item, path));
    return out;
  }

  DType dtype(uint32_t index, std::string_view path) const {
    const PickleValue& value = at(index);
    if (value.kind == Kind::kGlobal && at(value.items[0]).text == "torch") {
      if (std::optional<DType> d = parse_dtype(at(value.items[1]).text)) return *d;
    }
    fail(index, path,
         fmt::format("expected a dtype meshsim has (torch.float32, ...), found {}",
                     describe_pickle_value(document_, index, 1, 60)));
  }

  Tensor tensor(uint32_t index, std::string_view path) const {
    try {
      return torch_saved_tensor_at(archive_, index);
    } catch (const Error& e) {
      throw Error(e.type(), fmt::format("{} ({})", e.what(), path));
    }
  }

  // The flattened rank table at `index`, a tensor of int32 or int64 ranks, decoded once however
  // many meshes share it; every table decoded counts against kMaxRankEntries.
  const std::vector<int64_t>& rank_table(uint32_t index, const std::string& path) const {
    if (const auto found = rank_tables_.find(index); found != rank_tables_.end()) {
      rank_entries_ += found->second.size();
      if (rank_entries_ > kMaxRankEntries) fail(index, path, "its meshes hold too many ranks");
      return found->second;
    }
    const Tensor table = tensor(index, path);
    if (table.dtype() != DType::kInt64 && table.dtype() != DType::kInt32) {
      fail(index, path, fmt::format("a rank table of {}", dtype_name(table.dtype())));
    }
    rank_entries_ += static_cast<uint64_t>(table.numel());
    if (rank_entries_ > kMaxRankEntries) fail(index, path, "its meshes hold too many ranks");
    const std::span<const std::byte> bytes = table.bytes();
    std::vector<int64_t> out(static_cast<size_t>(table.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      if (table.dtype() == DType::kInt64) {
        std::memcpy(&out[i], bytes.data() + i * 8, 8);
      } else {
        int32_t rank = 0;
        std::memcpy(&rank, bytes.data() + i * 4, 4);
        out[i] = rank;
      }
    }
    return rank_tables_.emplace(index, std::move(out)).first->second;
  }

 private:
  const TorchSaveArchive& archive_;
  const PickleDocument& document_;
  mutable std::map<uint32_t, std::vector<int64_t>> rank_tables_;
  mutable uint64_t rank_entries_ = 0;
};

// A _FlatLayout's shape and stride: ints or tuples nesting them, flattened in order. `visited`
// counts every node, tuples included.
void flat_modes(const Decoder& in, uint32_t shape, uint32_t stride, std::string_view path,
                int depth, size_t& visited, std::vector<Mode>& modes) {
  if (++visited > kMaxLayoutNodes) {
    in.fail(shape, path, fmt::format("its shape has more than {} parts", kMaxLayoutNodes));
  }
  const PickleValue& s = in.at(shape);
  const PickleValue& d = in.at(stride);
  if (s.kind == Kind::kInt && d.kind == Kind::kInt) {
    modes.push_back({s.integer, d.integer});
    return;
  }
  if (s.kind != Kind::kTuple || d.kind != Kind::kTuple || s.items.size() != d.items.size()) {
    in.fail(shape, path, "its shape and stride are not integers or tuples of one structure");
  }
  if (depth == kMaxLayoutNesting) {
    in.fail(shape, path, fmt::format("its tuples nest more than {} deep", kMaxLayoutNesting));
  }
  for (size_t i = 0; i < s.items.size(); ++i) {
    flat_modes(in, s.items[i], d.items[i], path, depth + 1, visited, modes);
  }
}

MeshLayout mesh_layout(const Decoder& in, uint32_t index, const std::string& path) {
  in.expect_call_of(index, path, kLayoutModule, "_MeshLayout");
  const uint32_t axes = in.field(in.state(index, path), path, "axes");
  std::vector<Axis> out;
  const PickleItems& items = in.sequence(axes, path + ".axes", kMaxMeshDims);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string axis_path = fmt::format("{}.axes[{}]", path, i);
    in.expect_call_of(items[i], axis_path, kLayoutModule, "_FlatLayout");
    const uint32_t state = in.state(items[i], axis_path);
    std::vector<Mode> modes;
    size_t visited = 0;
    flat_modes(in, in.field(state, axis_path, "shape"), in.field(state, axis_path, "stride"),
               axis_path, 0, visited, modes);
    try {
      out.push_back(Axis::canonical(std::move(modes)));
    } catch (const Error& e) {
      in.fail(items[i], axis_path, e.what());
    }
  }
  return MeshLayout(std::move(out));
}

// One mesh's own attributes (not its family).
DeviceMesh::SavedFields mesh_fields(const Decoder& in, uint32_t mesh, const std::string& path) {
  in.expect_call_of(mesh, path, kMeshModule, "DeviceMesh");
  const uint32_t state = in.state(mesh, path);
  const auto field = [&](std::string_view key) { return in.field(state, path, key); };
  const auto path_of = [&](std::string_view key) { return fmt::format("{}.{}", path, key); };
  DeviceMesh::SavedFields f;
  f.device_type = in.text(field("_device_type"), path_of("_device_type"));
  f.layout = mesh_layout(in, field("_layout"), path_of("_layout"));
  f.rank_map = in.rank_table(field("_rank_map"), path_of("_rank_map"));
  if (const uint32_t names = field("_mesh_dim_names"); !in.is_none(names)) {
    f.mesh_dim_names = in.strings(names, path_of("_mesh_dim_names"), kMaxMeshDims);
  }
  f.thread_id = in.integer(field("_rank"), path_of("_rank"));
  if (const uint32_t coordinate = field("_coordinate_on_dim"); !in.is_none(coordinate)) {
    f.coordinate_on_dim = in.integers(coordinate, path_of("_coordinate_on_dim"), kMaxMeshDims);
  }
  // A mesh made without process groups has no such attribute.
  if (const std::optional<uint32_t> names = in.find(state, "_dim_group_names");
      names && !in.is_none(*names)) {
    f.dim_group_names = in.strings(*names, path_of("_dim_group_names"), kMaxMeshDims);
  }
  return f;
}

// `_root_mesh` of a mesh: nullopt for a root (PyTorch stores None; the mesh itself is read so too).
std::optional<uint32_t> root_of(const Decoder& in, uint32_t mesh, const std::string& path) {
  const uint32_t root = in.field(in.state(mesh, path), path, "_root_mesh");
  if (in.is_none(root) || root == mesh) return std::nullopt;
  return root;
}

DeviceMesh::Saved mesh_family(const Decoder& in, uint32_t mesh, const std::string& path) {
  DeviceMesh::Saved out;
  out.self = mesh_fields(in, mesh, path);
  uint32_t root = mesh;
  std::string root_path = path;
  if (const std::optional<uint32_t> found = root_of(in, mesh, path)) {
    root = *found;
    root_path = path + "._root_mesh";
    out.root = mesh_fields(in, root, root_path);
    if (root_of(in, root, root_path)) {
      in.fail(root, root_path, "the root mesh has a root of its own");
    }
    const uint32_t own = in.field(in.state(mesh, path), path, "_flatten_mapping");
    if (in.at(own).kind != Kind::kDict || !in.at(own).items.empty()) {
      in.fail(own, path + "._flatten_mapping", "a mesh that is not a root lists flattened meshes");
    }
  }
  const std::string mapping_path = root_path + "._flatten_mapping";
  const uint32_t mapping = in.field(in.state(root, root_path), root_path, "_flatten_mapping");
  const PickleValue& dict = in.at(mapping);
  if (dict.kind != Kind::kDict) in.fail(mapping, mapping_path, "expected a dict");
  if (dict.items.size() / 2 > kMaxFlattenedMeshes) {
    in.fail(mapping, mapping_path, fmt::format("more than {} meshes", kMaxFlattenedMeshes));
  }
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const std::string name = in.text(dict.items[i], mapping_path);
    const std::string flat_path = fmt::format("{}['{}']", mapping_path, printable(name));
    DeviceMesh::SavedFields fields = mesh_fields(in, dict.items[i + 1], flat_path);
    if (const std::optional<uint32_t> its_root = root_of(in, dict.items[i + 1], flat_path);
        its_root && *its_root != root) {
      in.fail(dict.items[i + 1], flat_path, "it belongs to another root mesh");
    }
    if (!out.flattened.emplace(name, std::move(fields)).second) {
      in.fail(dict.items[i], mapping_path, fmt::format("'{}' is listed twice", printable(name)));
    }
  }
  return out;
}

Placement placement(const Decoder& in, uint32_t index, const std::string& path) {
  const auto is = [&](std::string_view name) {
    return in.is_call_of(index, kPlacementModule, name);
  };
  if (is("Replicate")) return Replicate{};
  if (!is("Shard") && !is("Partial") && !is("_StridedShard")) {
    in.fail(index, path,
            fmt::format("expected a placement (Shard, Replicate, Partial or _StridedShard), "
                        "found {}",
                        describe_pickle_value(in.archive().document, index, 1, 80)));
  }
  const uint32_t state = in.state(index, path);
  if (is("Partial")) {
    const uint32_t op = in.field(state, path, "reduce_op");
    const std::string name = in.text(op, path + ".reduce_op");
    try {
      return Partial{parse_reduce_op(name)};
    } catch (const Error&) {
      in.fail(
          op, path + ".reduce_op",
          fmt::format("'{}' is not a reduce op (sum, avg, min, max, product)", printable(name)));
    }
  }
  const int64_t dim = in.integer(in.field(state, path, "dim"), path + ".dim");
  if (is("Shard")) return Shard{dim};
  const uint32_t split_at = in.field(state, path, "split_factor");
  const int64_t split = in.integer(split_at, path + ".split_factor");
  if (split < 1)
    in.fail(split_at, path + ".split_factor", fmt::format("{} is not positive", split));
  return StridedShard{dim, split};
}

// DTensorSpec.shard_order: None, or ShardOrderEntry(tensor_dim, mesh_dims) per sharded dim.
std::optional<std::vector<ShardOrderEntry>> shard_order(const Decoder& in, uint32_t index,
                                                        const std::string& path) {
  if (in.is_none(index)) return std::nullopt;
  std::vector<ShardOrderEntry> out;
  const PickleItems& entries = in.sequence(index, path, Tensor::kMaxDims);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string entry_path = fmt::format("{}[{}]", path, i);
    in.expect_call_of(entries[i], entry_path, kSpecModule, "ShardOrderEntry");
    const PickleItems& args = in.call_args(entries[i], entry_path, 2);
    out.push_back({in.integer(args[0], entry_path + ".tensor_dim"),
                   in.integers(args[1], entry_path + ".mesh_dims", kMaxMeshDims)});
  }
  return out;
}

// The left-to-right order PyTorch assumes when a spec names none.
std::vector<ShardOrderEntry> default_shard_order(std::span<const Placement> placements) {
  std::map<int64_t, std::vector<int64_t>> by_dim;
  for (size_t mesh_dim = 0; mesh_dim < placements.size(); ++mesh_dim) {
    if (const int64_t dim = sharded_dim(placements[mesh_dim]); dim >= 0) {
      by_dim[dim].push_back(static_cast<int64_t>(mesh_dim));
    }
  }
  std::vector<ShardOrderEntry> out;
  for (auto& [dim, mesh_dims] : by_dim) out.push_back({dim, std::move(mesh_dims)});
  return out;
}

bool same_order(const std::vector<ShardOrderEntry>& a, const std::vector<ShardOrderEntry>& b) {
  return std::ranges::equal(a, b, [](const ShardOrderEntry& x, const ShardOrderEntry& y) {
    return x.tensor_dim == y.tensor_dim && x.mesh_dims == y.mesh_dims;
  });
}

TorchSavedDTensor dtensor(const Decoder& in, uint32_t root) {
  const std::string path = "DTensor";
  // _rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, wrapper args, attributes)
  const PickleItems& rebuild = in.call_args(root, path, 4);
  if (!in.is_call_of(root, "torch._tensor", "_rebuild_from_type_v2") ||
      !is_pickle_global(in.archive().document, rebuild[0], "torch._utils",
                        "_rebuild_wrapper_subclass")) {
    in.fail(root, path, "expected a DTensor (torch._tensor._rebuild_from_type_v2 of a wrapper)");
  }
  const PickleValue& wrapper = in.at(rebuild[2]);
  if (wrapper.kind != Kind::kTuple || wrapper.items.size() < 8) {
    in.fail(rebuild[2], path, "its wrapper arguments are not (cls, dtype, size, stride, ...)");
  }
  TorchSavedDTensor out;
  out.dtype = in.dtype(wrapper.items[1], path + ".dtype");
  out.requires_grad = in.flag(wrapper.items[7], path + ".requires_grad");
  const std::vector<int64_t> wrapper_shape =
      in.integers(wrapper.items[2], path + ".shape", Tensor::kMaxDims);

  // The state is a dict, or (dict or None, slot dict or None) for a class with __slots__, as
  // DTensor has.
  uint32_t attributes = rebuild[3];
  if (const PickleValue& state = in.at(attributes);
      state.kind == Kind::kTuple && state.items.size() == 2) {
    attributes = in.is_none(state.items[1]) ? state.items[0] : state.items[1];
  }
  if (in.at(attributes).kind != Kind::kDict) {
    in.fail(attributes, path, "its state is not a dict (nor a dict of slots)");
  }
  const uint32_t spec = in.field(attributes, path, "_spec");
  const std::string spec_path = path + "._spec";
  in.expect_call_of(spec, spec_path, kSpecModule, "DTensorSpec");
  const uint32_t spec_state = in.state(spec, spec_path);
  const auto spec_field = [&](std::string_view key) {
    return in.field(spec_state, spec_path, key);
  };
  out.mesh = mesh_family(in, spec_field("mesh"), spec_path + ".mesh");

  const uint32_t meta = spec_field("tensor_meta");
  const std::string meta_path = spec_path + ".tensor_meta";
  in.expect_call_of(meta, meta_path, kSpecModule, "TensorMeta");
  const PickleItems& meta_args = in.call_args(meta, meta_path, 3);
  in.expect_call_of(meta_args[0], meta_path + ".shape", "torch", "Size");
  const PickleItems& size_args = in.call_args(meta_args[0], meta_path + ".shape", 1);
  out.shape = in.integers(size_args[0], meta_path + ".shape", Tensor::kMaxDims);
  out.stride = in.integers(meta_args[1], meta_path + ".stride", Tensor::kMaxDims);
  if (in.dtype(meta_args[2], meta_path + ".dtype") != out.dtype || out.shape != wrapper_shape) {
    in.fail(meta, meta_path, "its shape or dtype is not the DTensor's");
  }

  const std::string placements_path = spec_path + ".placements";
  const PickleItems& placements =
      in.sequence(spec_field("placements"), placements_path, kMaxMeshDims);
  for (size_t i = 0; i < placements.size(); ++i) {
    out.placements.push_back(
        placement(in, placements[i], fmt::format("{}[{}]", placements_path, i)));
  }
  // Folded into the placements once the mesh is restored (torch_saved_spec).
  out.shard_order = shard_order(in, spec_field("shard_order"), spec_path + ".shard_order");
  out.local = in.tensor(in.field(attributes, path, "_local_tensor"), path + "._local_tensor");
  return out;
}

}  // namespace

bool looks_like_zip_archive(std::string_view bytes) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])); };
  return bytes.size() >= 4 &&
         (byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24) == kZipLocalHeader;
}

TorchSavedObject read_torch_saved_object(std::string_view archive, std::string_view what,
                                         ZipChecksums checksums) {
  const TorchSaveArchive opened = open_torch_save(archive, what, allowed_globals(), checksums);
  const Decoder in(opened);
  const uint32_t root = opened.document.root;
  if (in.is_call_of(root, kMeshModule, "DeviceMesh")) return mesh_family(in, root, "DeviceMesh");
  if (in.is_call_of(root, "torch._tensor", "_rebuild_from_type_v2")) return dtensor(in, root);
  in.fail(root, "the saved object",
          fmt::format("expected a DTensor or DeviceMesh, found {}",
                      describe_pickle_value(opened.document, root, 1, 80)));
}

DTensorSpec torch_saved_spec(const TorchSavedDTensor& saved, int64_t world_size) {
  DTensorSpec spec{DeviceMesh::restore(saved.mesh, world_size), saved.placements, saved.shape,
                   saved.dtype};
  // An explicit order other than left to right is what _StridedShard placements encode.
  if (saved.shard_order && !same_order(*saved.shard_order, default_shard_order(spec.placements))) {
    try {
      spec.placements = encode_shard_order(spec.placements, *saved.shard_order, spec.mesh.shape());
    } catch (const Error& e) {
      throw Error(e.type(), fmt::format("the DTensor's shard_order: {}", e.what()));
    }
  }
  if (spec.stride() != saved.stride) {
    throw runtime_error(fmt::format(
        "the DTensor's stride [{}] is not the contiguous stride of its shape [{}]; meshsim's "
        "DTensors are contiguous",
        fmt::join(saved.stride, ", "), fmt::join(saved.shape, ", ")));
  }
  return spec;
}

DeviceMesh open_torch_saved_mesh(std::string_view archive, std::string_view what,
                                 int64_t world_size) {
  TorchSavedObject object = read_torch_saved_object(archive, what);
  const DeviceMesh::Saved* mesh = std::get_if<DeviceMesh::Saved>(&object);
  if (mesh == nullptr) {
    throw value_error(fmt::format("{}: torch.save wrote a DTensor here, not a DeviceMesh", what));
  }
  try {
    return DeviceMesh::restore(*mesh, world_size);
  } catch (const Error& e) {
    throw Error(e.type(), fmt::format("{}: {}", what, e.what()));
  }
}

DTensor open_torch_saved_dtensor(std::string_view archive, std::string_view what,
                                 int64_t world_size) {
  TorchSavedObject object = read_torch_saved_object(archive, what);
  TorchSavedDTensor* saved = std::get_if<TorchSavedDTensor>(&object);
  if (saved == nullptr) {
    throw value_error(fmt::format("{}: torch.save wrote a DeviceMesh here, not a DTensor", what));
  }
  try {
    DTensor out =
        DTensor::from_local_shard(torch_saved_spec(*saved, world_size), std::move(saved->local));
    out.set_requires_grad(saved->requires_grad);
    return out;
  } catch (const Error& e) {
    throw Error(e.type(), fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace meshsim
