#include "src/io/mesh_record.hpp"

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/io/record_archive.hpp"
#include "src/printable.hpp"

namespace meshsim {

namespace {

constexpr std::string_view kMeshType = "DeviceMesh";
constexpr std::string_view kDictType = "dict";

RecordObject fields_record(const DeviceMesh::SavedFields& f) {
  RecordObject out{std::string(kMeshType), {}};
  out.set("device_type", RecordValue::of(f.device_type));
  out.set("rank_map", RecordValue::of(f.rank_map));
  std::vector<std::string> axes;
  for (const Axis& axis : f.layout.axes()) axes.push_back(axis.to_string());
  out.set("layout", RecordValue::of(std::move(axes)));
  out.set("mesh_dim_names",
          f.mesh_dim_names ? RecordValue::of(*f.mesh_dim_names) : RecordValue::none());
  out.set("thread_id", RecordValue::of(f.thread_id));
  out.set("coordinate_on_dim",
          f.coordinate_on_dim ? RecordValue::of(*f.coordinate_on_dim) : RecordValue::none());
  return out;
}

// root_mesh and flatten_mapping come after the fields of the mesh itself, then the group names.
RecordObject with_family(RecordObject record, const DeviceMesh::SavedFields& f,
                         std::optional<RecordObject> root,
                         const std::map<std::string, DeviceMesh::SavedFields>& flattened) {
  record.set("root_mesh", root ? RecordValue::of(std::move(*root)) : RecordValue::none());
  RecordObject mapping{std::string(kDictType), {}};
  for (const auto& [name, flat] : flattened) {
    mapping.set(name, RecordValue::of(with_family(fields_record(flat), flat, std::nullopt, {})));
  }
  record.set("flatten_mapping", RecordValue::of(std::move(mapping)));
  if (f.dim_group_names) record.set("dim_group_names", RecordValue::of(*f.dim_group_names));
  return record;
}

std::optional<std::vector<std::string>> optional_strings(const RecordReader& r,
                                                         std::string_view key) {
  if (r.is_none(key)) return std::nullopt;
  return r.strings(key);
}

DeviceMesh::SavedFields read_fields(const RecordReader& r) {
  r.expect_type(kMeshType).require({"device_type", "rank_map", "layout", "mesh_dim_names",
                                    "thread_id", "coordinate_on_dim", "root_mesh",
                                    "flatten_mapping"});
  DeviceMesh::SavedFields f;
  f.device_type = r.str("device_type");
  f.rank_map = r.integers("rank_map");
  std::vector<Axis> axes;
  for (const std::string& text : r.strings("layout")) {
    try {
      axes.push_back(Axis::parse(text));
    } catch (const Error& e) {
      throw runtime_error(fmt::format("{}.layout '{}': {}", r.path(), printable(text), e.what()));
    }
  }
  f.layout = MeshLayout(std::move(axes));
  f.mesh_dim_names = optional_strings(r, "mesh_dim_names");
  f.thread_id = r.integer("thread_id");
  if (!r.is_none("coordinate_on_dim")) f.coordinate_on_dim = r.integers("coordinate_on_dim");
  if (r.has("dim_group_names")) f.dim_group_names = r.strings("dim_group_names");
  return f;
}

std::map<std::string, DeviceMesh::SavedFields> read_flattened(const RecordReader& r) {
  const RecordReader mapping = r.object("flatten_mapping");
  mapping.expect_type(kDictType);
  std::map<std::string, DeviceMesh::SavedFields> out;
  for (const auto& [name, value] : mapping.raw().fields) {
    const RecordReader flat = mapping.object(name);
    DeviceMesh::SavedFields fields = read_fields(flat);
    if (!flat.is_none("root_mesh") || !flat.object("flatten_mapping").raw().fields.empty()) {
      throw runtime_error(
          fmt::format("{} nests another family inside a root's flatten_mapping", flat.path()));
    }
    flat.finish();
    if (!out.emplace(name, std::move(fields)).second) {
      throw runtime_error(fmt::format("{} holds '{}' twice", mapping.path(), printable(name)));
    }
  }
  mapping.finish();
  return out;
}

}  // namespace

const std::set<std::string, std::less<>>& mesh_record_types() {
  static const std::set<std::string, std::less<>> types{std::string(kMeshType),
                                                        std::string(kDictType)};
  return types;
}

RecordObject mesh_to_record(const DeviceMesh& mesh, bool with_group_names) {
  const DeviceMesh::Saved saved = mesh.save(with_group_names);
  if (!saved.root)
    return with_family(fields_record(saved.self), saved.self, std::nullopt, saved.flattened);
  RecordObject root =
      with_family(fields_record(*saved.root), *saved.root, std::nullopt, saved.flattened);
  return with_family(fields_record(saved.self), saved.self, std::move(root), {});
}

DeviceMesh mesh_from_record(const RecordReader& record, int64_t world_size) {
  DeviceMesh::Saved saved;
  saved.self = read_fields(record);
  if (record.is_none("root_mesh")) {
    saved.flattened = read_flattened(record);
  } else {
    const RecordReader root = record.object("root_mesh");
    saved.root = read_fields(root);
    if (!root.is_none("root_mesh")) {
      throw runtime_error(fmt::format("{} has a root_mesh of its own", root.path()));
    }
    saved.flattened = read_flattened(root);
    root.finish();
    if (!record.object("flatten_mapping").raw().fields.empty()) {
      throw runtime_error(
          fmt::format("{}.flatten_mapping belongs on its root_mesh", record.path()));
    }
  }
  record.finish();
  return DeviceMesh::restore(saved, world_size);
}

std::string seal_mesh(const DeviceMesh& mesh, bool with_group_names, ArchiveFormat format) {
  return seal_record(RecordKind::kDeviceMesh, kMeshRecordVersion,
                     mesh_to_record(mesh, with_group_names), format);
}

DeviceMesh open_mesh(std::string_view file, int64_t world_size, bool strict) {
  const OpenedRecord opened = open_record(file, RecordKind::kDeviceMesh, kMeshRecordVersion);
  if (strict) check_record_types(opened.root, mesh_record_types(), "a DeviceMesh");
  return mesh_from_record(RecordReader(opened.root, std::string(kMeshType), strict), world_size);
}

}  // namespace meshsim
