// DeviceMesh::save and DeviceMesh::restore: the mesh side of checkpoints. The record format lives
// in src/io/mesh_record; this file turns a mesh into plain fields and checks fields read back
// before they become a mesh, since a mesh trusts its layout to stay inside its rank table.
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/mesh/device_mesh.hpp"
#include "src/printable.hpp"

namespace meshsim {

namespace {

[[noreturn]] void bad_record(std::string_view which, const std::string& why) {
  throw runtime_error(fmt::format("invalid DeviceMesh record ({}): {}", which, why));
}

// More mesh dims than any real mesh has (and than the queries that nest per dim should see).
constexpr size_t kMaxMeshDims = 64;

// A layout a mesh of this rank table could have: sizes and strides inside the table, no mode
// that repeats a position (stride 0), dims that do not overlap, and every replica inside the
// table.
void check_layout_fits(const MeshLayout& layout, int64_t table_size, std::string_view which) {
  if (layout.ndim() > kMaxMeshDims) {
    bad_record(which,
               fmt::format("its layout has {} dims, more than {}", layout.ndim(), kMaxMeshDims));
  }
  std::vector<int64_t> sizes;
  for (const Axis& axis : layout.axes()) {
    for (const Mode& m : axis.modes()) {
      if (m.size > table_size || m.stride > table_size) {
        bad_record(which, fmt::format("layout {} reaches past its rank table of {} entries",
                                      layout.to_string(), table_size));
      }
      if (m.stride == 0) {
        bad_record(which,
                   fmt::format("layout {} repeats positions (stride 0)", layout.to_string()));
      }
      sizes.push_back(m.size);
    }
  }
  const std::optional<int64_t> numel = checked_product(sizes);
  if (!numel || *numel > table_size || *numel < 1) {
    bad_record(which, fmt::format("layout {} has more positions than its rank table's {}",
                                  layout.to_string(), table_size));
  }
  const Axis merged = layout.collapse();
  if (!merged.is_orthogonal()) {
    bad_record(which, fmt::format("layout {} has overlapping dims", layout.to_string()));
  }
  std::vector<int64_t> offsets;
  try {
    offsets = layout.replica_offsets(table_size);
  } catch (const Error& e) {
    bad_record(which, e.what());
  }
  const int64_t last = merged.cosize() - 1;
  for (int64_t o : offsets) {
    if (o + last >= table_size) {
      bad_record(which, fmt::format("layout {} leaves its rank table of {} entries",
                                    layout.to_string(), table_size));
    }
  }
}

// What every mesh of one family shares with its root.
void check_fields(const DeviceMesh::SavedFields& f, const DeviceMesh::SavedFields& root,
                  int64_t world_size, std::string_view which) {
  const bool device_ok = !f.device_type.empty() && f.device_type.size() <= 64 &&
                         std::all_of(f.device_type.begin(), f.device_type.end(),
                                     [](unsigned char c) { return std::isalpha(c); });
  if (!device_ok)
    bad_record(which,
               fmt::format("device_type '{}' is not a device type", printable(f.device_type)));
  if (f.device_type != root.device_type || f.thread_id != root.thread_id) {
    bad_record(which, "its device_type or thread_id differs from its root mesh's");
  }
  if (!std::ranges::equal(f.rank_map, root.rank_map)) {
    bad_record(which, "its rank_map differs from its root mesh's");
  }
  if (static_cast<int64_t>(f.rank_map.size()) > world_size) {
    bad_record(which, fmt::format("its rank_map holds {} ranks, more than this world's {}",
                                  f.rank_map.size(), world_size));
  }
  std::vector<bool> seen(static_cast<size_t>(world_size), false);
  for (int64_t r : f.rank_map) {
    if (r < 0 || r >= world_size) {
      bad_record(which, fmt::format("rank_map names rank {}, outside this world of {} ranks", r,
                                    world_size));
    }
    if (seen[static_cast<size_t>(r)])
      bad_record(which, fmt::format("rank_map names rank {} twice", r));
    seen[static_cast<size_t>(r)] = true;
  }
  if (f.layout.ndim() == 0) bad_record(which, "its layout has no dims");
  check_layout_fits(f.layout, static_cast<int64_t>(f.rank_map.size()), which);
  if (f.mesh_dim_names && f.mesh_dim_names->size() != f.layout.ndim()) {
    bad_record(which, fmt::format("{} mesh_dim_names for {} dims", f.mesh_dim_names->size(),
                                  f.layout.ndim()));
  }
  if (f.mesh_dim_names &&
      std::set<std::string>(f.mesh_dim_names->begin(), f.mesh_dim_names->end()).size() !=
          f.mesh_dim_names->size()) {
    bad_record(which, fmt::format("mesh_dim_names {} repeat a name", py_tuple(*f.mesh_dim_names)));
  }
  if (f.dim_group_names && !f.dim_group_names->empty() &&
      f.dim_group_names->size() != f.layout.ndim()) {
    bad_record(which, fmt::format("{} dim_group_names for {} dims", f.dim_group_names->size(),
                                  f.layout.ndim()));
  }
  if (f.thread_id < 0 || f.thread_id >= world_size) {
    bad_record(which, fmt::format("thread_id {} is not a rank of this world of {} ranks",
                                  f.thread_id, world_size));
  }
}

}  // namespace

DeviceMesh::Saved DeviceMesh::save(bool with_group_names) const {
  const auto fields = [&](const State& s) {
    SavedFields f;
    f.device_type = s.device_type;
    const std::span<const int64_t> table = rank_map();
    f.rank_map.assign(table.begin(), table.end());
    f.layout = s.layout;
    f.mesh_dim_names = s.dim_names;
    f.thread_id = s.rank;
    f.coordinate_on_dim = s.coordinate;
    if (with_group_names) f.dim_group_names = s.group_names;
    return f;
  };
  Saved out;
  out.self = fields(state_);
  if (!is_root_) out.root = fields(family_->root);
  for (const auto& [name, flat] : family_->flattened) out.flattened.emplace(name, fields(flat));
  return out;
}

DeviceMesh DeviceMesh::restore(const Saved& saved, int64_t world_size) {
  const SavedFields& root_fields = saved.root ? *saved.root : saved.self;
  // The root's table is checked before a RankMap (sized by it) is built.
  check_fields(root_fields, root_fields, world_size, "root_mesh");
  auto family = std::make_shared<Family>();
  family->rank_map = std::make_shared<const RankMap>(root_fields.rank_map, world_size);
  const std::span<const int64_t> table = root_fields.rank_map;
  // Rebuilds one mesh's state on the family and checks its coordinate against the saved one.
  const auto state_of = [&](const SavedFields& f, std::string_view which) {
    check_fields(f, root_fields, world_size, which);
    State seed;
    seed.device_type = f.device_type;
    seed.rank = f.thread_id;
    State s;
    try {
      s = DeviceMesh(family, seed, Role::kDerived).derived_state(f.layout, f.mesh_dim_names);
    } catch (const Error& e) {
      bad_record(which, e.what());
    }
    if (s.coordinate != f.coordinate_on_dim) {
      bad_record(which,
                 fmt::format("coordinate_on_dim [{}] is not rank {}'s place in the mesh",
                             fmt::join(f.coordinate_on_dim.value_or(std::vector<int64_t>{}), ", "),
                             f.thread_id));
    }
    s.group_names = f.dim_group_names;
    return s;
  };
  family->root = state_of(root_fields, "root_mesh");
  if (family->root.layout.numel() != static_cast<int64_t>(table.size())) {
    bad_record("root_mesh", "the root mesh does not cover its rank table");
  }
  for (const auto& [name, flat] : saved.flattened) {
    State s = state_of(flat, "flatten_mapping");
    if (s.layout.ndim() != 1)
      bad_record("flatten_mapping", fmt::format("'{}' is not 1-d", printable(name)));
    if (s.dim_names != std::vector<std::string>{name}) {
      bad_record("flatten_mapping", fmt::format("'{}' names a mesh whose dim is not '{}'",
                                                printable(name), printable(name)));
    }
    family->flattened.emplace(name, std::move(s));
    family->flattened_order.push_back(name);
  }
  if (!saved.root) return DeviceMesh(family, family->root, Role::kRoot);
  return DeviceMesh(family, state_of(saved.self, "mesh"), Role::kDerived);
}

std::vector<DeviceMesh::StaleGroupName> DeviceMesh::stale_group_names(
    const GroupCreator& groups) const {
  std::vector<StaleGroupName> out;
  if (!state_.group_names || state_.group_names->empty()) return out;
  for (size_t dim = 0; dim < ndim(); ++dim) {
    const std::string& name = (*state_.group_names)[dim];
    std::vector<int64_t> expected;
    for (std::vector<int64_t>& ranks : global_ranks(state_.layout[dim], rank_map())) {
      if (std::find(ranks.begin(), ranks.end(), state_.rank) != ranks.end()) {
        expected = std::move(ranks);
      }
    }
    std::sort(expected.begin(), expected.end());
    const std::string dim_text =
        state_.dim_names ? fmt::format("'{}'", (*state_.dim_names)[dim]) : std::to_string(dim);
    const RankList live = groups.group_ranks(name);
    if (!live) {
      out.push_back({dim_text, fmt::format("saved group name '{}' is no process group of this "
                                           "world (the mesh's group has ranks [{}])",
                                           name, fmt::join(expected, ", "))});
    } else if (*live != expected) {
      out.push_back(
          {dim_text, fmt::format("saved group name '{}' names ranks [{}] in this world, "
                                 "but the mesh's group has ranks [{}]",
                                 name, fmt::join(*live, ", "), fmt::join(expected, ", "))});
    }
  }
  return out;
}

}  // namespace meshsim
