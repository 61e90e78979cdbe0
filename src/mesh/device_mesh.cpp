#include "src/mesh/device_mesh.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/fnv1a.hpp"

namespace meshsim {

std::string py_tuple(const std::vector<std::string>& names) {
  std::string out = "(";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + (names.size() == 1 ? ",)" : ")");
}

namespace {

std::string py_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

constexpr const char* kNotInMeshTensor =
    "In order to get the mesh Tensor of a DeviceMesh it needs to either have all its original "
    "dimensions (e.g., no slicing) or it needs to contain the local rank";

// Coordinate of `rank` inside the replica that holds it, and that replica's index.
struct Located {
  size_t replica;
  std::vector<int64_t> coordinate;
};

// PyTorch's view of a rank in a mesh: the replica holding it (the only one when there is one),
// and its position there. Throws RuntimeError when the rank is in no replica of several, and
// AssertionError when it appears more than once in its replica.
std::optional<Located> locate(const RankTensor& full, int64_t rank) {
  const size_t per_replica = full.values.size() / static_cast<size_t>(full.shape[0]);
  const auto it = std::find(full.values.begin(), full.values.end(), rank);
  if (it == full.values.end()) {
    if (full.shape[0] != 1) throw runtime_error(kNotInMeshTensor);
    return std::nullopt;
  }
  const auto first = static_cast<size_t>(it - full.values.begin());
  const size_t replica = first / per_replica;
  const auto begin = full.values.begin() + static_cast<ptrdiff_t>(replica * per_replica);
  const auto count = std::count(begin, begin + static_cast<ptrdiff_t>(per_replica), rank);
  if (count != 1) {
    throw Error(PyErrorType::kAssertionError,
                fmt::format("rank_coords.size(0) must be 0 or 1, got {}", count));
  }
  auto flat = static_cast<int64_t>(first);
  std::vector<int64_t> coordinate(full.shape.size() - 1);
  for (size_t d = full.shape.size(); d-- > 1;) {
    coordinate[d - 1] = flat % full.shape[d];
    flat /= full.shape[d];
  }
  return Located{replica, std::move(coordinate)};
}

// The same as locate(layout.full_mesh_tensor(map), rank) without building the table: when the
// layout's modes and their complement form one mixed-radix numbering of the table's positions,
// the rank's position splits into digits, and the digits of each dim (and of the complement) are
// its coordinate (and its replica). nullopt when the layout is not of that kind or the map repeats
// a rank; the caller then takes the general path.
std::optional<std::optional<Located>> locate_by_digits(const MeshLayout& layout, const RankMap& map,
                                                       int64_t rank) {
  if (map.has_repeats()) return std::nullopt;
  const auto table_size = static_cast<int64_t>(map.size());
  const Axis complement = layout.collapse().complement(table_size);
  struct Digit {
    int64_t size, stride;
    size_t owner;  // mesh dim, or ndim for the complement
  };
  std::vector<Digit> digits;
  for (size_t d = 0; d <= layout.ndim(); ++d) {
    const Axis& axis = d < layout.ndim() ? layout[d] : complement;
    for (const Mode& m : axis.modes()) digits.push_back({m.size, m.stride, d});
  }
  std::vector<Digit> by_stride = digits;
  std::sort(by_stride.begin(), by_stride.end(),
            [](const Digit& a, const Digit& b) { return a.stride < b.stride; });
  int64_t span = 1;
  for (const Digit& g : by_stride) {
    if (g.stride != span) return std::nullopt;
    span *= g.size;  // no overflow: the product covers the table once
  }
  if (span != table_size) return std::nullopt;
  const int64_t position = map.position(rank);
  const int64_t replicas = complement.numel();
  if (position < 0) {
    if (replicas != 1) throw runtime_error(kNotInMeshTensor);
    return std::optional<Located>{};
  }
  Located out{0, std::vector<int64_t>(layout.ndim(), 0)};
  int64_t replica = 0;
  for (const Digit& g : digits) {  // per owner, first mode most significant
    const int64_t digit = (position / g.stride) % g.size;
    int64_t& value = g.owner < layout.ndim() ? out.coordinate[g.owner] : replica;
    value = value * g.size + digit;
  }
  out.replica = static_cast<size_t>(replica);
  return std::optional<Located>{std::move(out)};
}

}  // namespace

std::span<const int64_t> DeviceMesh::rank_map() const {
  return family_->rank_map->ranks();
}

std::optional<std::string> DeviceMesh::create_groups(GroupCreator& groups, const Axis& axis,
                                                     const SharedRankMap& rank_map,
                                                     const std::string& dim_name) {
  // An axis as large as the world reuses the default group, on every rank.
  if (axis.numel() == groups.world_size()) return groups.world_group_name();
  return groups.new_groups(axis, rank_map, dim_name);
}

std::optional<std::vector<std::string>> DeviceMesh::create_all_groups(
    GroupCreator& groups, const MeshLayout& layout, const SharedRankMap& rank_map,
    std::span<const std::string> dim_names) {
  std::vector<std::string> names;
  bool member = true;
  for (size_t d = 0; d < layout.axes().size(); ++d) {
    const Axis& axis = layout.axes()[d];
    // Unnamed dims are "dim0", "dim1", ...; a 1-D mesh without names is the mesh itself.
    const std::string label = d < dim_names.size()        ? dim_names[d]
                              : layout.axes().size() == 1 ? std::string()
                                                          : fmt::format("dim{}", d);
    std::optional<std::string> name = create_groups(groups, axis, rank_map, label);
    member = member && name.has_value();
    names.push_back(name.value_or(""));
  }
  // A rank outside the mesh is in no group of any dim; PyTorch keeps an empty list for it.
  return member ? names : std::vector<std::string>{};
}

DeviceMesh::State DeviceMesh::derived_state(MeshLayout layout, DimNames dim_names) const {
  State s;
  s.device_type = state_.device_type;
  s.layout = std::move(layout);
  s.dim_names = std::move(dim_names);
  s.rank = state_.rank;
  std::optional<std::optional<Located>> where =
      locate_by_digits(s.layout, *family_->rank_map, s.rank);
  if (!where) where = locate(s.layout.full_mesh_tensor(rank_map()), s.rank);
  if (*where) {
    s.coordinate = (*where)->coordinate;
    s.replica = static_cast<int64_t>((*where)->replica);
  }
  return s;
}

namespace {

void check_device_type(const std::string& device_type) {
  if (device_type.empty() || !std::all_of(device_type.begin(), device_type.end(),
                                          [](unsigned char c) { return std::isalpha(c); })) {
    throw runtime_error(fmt::format(
        "Device type with index is not supported but got {}. If you maintained a 'torch.device' "
        "object, it's recommended to pass in 'device.type'.",
        device_type));
  }
}

}  // namespace

DeviceMesh DeviceMesh::make_root(GroupCreator& groups, const std::string& device_type,
                                 SharedRankMap rank_map, MeshLayout layout,
                                 const DimNames& dim_names) {
  check_device_type(device_type);
  if (layout.numel() > groups.world_size()) {
    throw runtime_error(
        fmt::format("Mesh should not be bigger than default world size {}, but found {} ranks!",
                    groups.world_size(), layout.numel()));
  }
  auto family = std::make_shared<Family>();
  family->rank_map = std::move(rank_map);
  DeviceMesh mesh(family, State{}, Role::kRoot);
  mesh.state_.device_type = device_type;
  mesh.state_.rank = groups.rank();
  // As PyTorch: every group first (collective), then the calling rank's coordinate.
  std::optional<std::vector<std::string>> names = create_all_groups(
      groups, layout, family->rank_map, dim_names ? *dim_names : std::vector<std::string>{});
  mesh.state_ = mesh.derived_state(std::move(layout), dim_names);
  mesh.state_.group_names = std::move(names);
  family->root = mesh.state_;
  return mesh;
}

DeviceMesh DeviceMesh::init(GroupCreator& groups, const std::string& device_type,
                            std::span<const int64_t> shape, const DimNames& dim_names) {
  if (dim_names) {
    const std::set<std::string> unique(dim_names->begin(), dim_names->end());
    if (unique.size() != dim_names->size()) {
      throw runtime_error(fmt::format(
          "Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names {}",
          py_tuple(*dim_names)));
    }
    if (dim_names->size() != shape.size()) {
      throw runtime_error(
          fmt::format("mesh_shape and mesh_dim_names should have same length! Found "
                      "len(mesh_dim_names): {} and len(mesh_shape):{}.",
                      dim_names->size(), shape.size()));
    }
  }
  for (int64_t s : shape) {
    if (s < 1) throw runtime_error(fmt::format("mesh sizes must be positive, got {}", s));
  }
  // Check the size before building anything of that size (the product may not even fit).
  const std::optional<int64_t> numel = checked_product(shape);
  if (!numel || *numel > groups.world_size()) {
    throw runtime_error(fmt::format(
        "Mesh should not be bigger than default world size {}, but found {} ranks!",
        groups.world_size(), numel ? std::to_string(*numel) : std::string("more than 2^63")));
  }
  MeshLayout layout = MeshLayout::from_sizes_strides(shape);
  SharedRankMap rank_map = groups.table().identity_map(layout.numel());
  return make_root(groups, device_type, std::move(rank_map), std::move(layout), dim_names);
}

DeviceMesh DeviceMesh::from_rank_table(GroupCreator& groups, const std::string& device_type,
                                       const RankTensor& table, const DimNames& dim_names) {
  const std::optional<int64_t> numel = checked_product(table.shape);
  MESHSIM_ASSERT(numel == static_cast<int64_t>(table.values.size()),
                 fmt::format("rank table shape [{}] does not hold its {} values",
                             fmt::join(table.shape, ", "), table.values.size()));
  // Ranks outside the world or repeated within a group fail in new_group, with c10d's errors; a
  // rank repeated across groups fails when its coordinate is computed.
  if (dim_names && dim_names->size() != table.shape.size()) {
    throw runtime_error(fmt::format("mesh has {} dims but {} mesh_dim_names", table.shape.size(),
                                    dim_names->size()));
  }
  return make_root(groups, device_type, groups.table().rank_map(table.values),
                   MeshLayout::from_sizes_strides(table.shape), dim_names);
}

DeviceMesh DeviceMesh::from_groups(GroupCreator& groups, const std::string& device_type,
                                   const RankTensor& table, const DimNames& dim_names,
                                   const std::vector<std::string>& group_names) {
  if (table.shape.size() != group_names.size()) {
    throw value_error(fmt::format(
        "Expects mesh with ndim equal to number of ProcessGroups but got mesh {} and {} "
        "ProcessGroups",
        py_nested_list(table), group_names.size()));
  }
  if (group_names.size() == 1) {
    const RankList members = groups.group_ranks(group_names[0]);
    if (!members || !std::ranges::equal(*members, table.values)) {
      throw value_error(fmt::format("Invalid mesh {} for ProcessGroup with ranks [{}]",
                                    py_nested_list(table),
                                    members ? fmt::format("{}", fmt::join(*members, ", ")) : ""));
    }
  }
  if (dim_names && dim_names->size() != table.shape.size()) {
    throw runtime_error(fmt::format("mesh has {} dims but {} mesh_dim_names", table.shape.size(),
                                    dim_names->size()));
  }
  check_device_type(device_type);
  std::vector<int64_t> seen = table.values;
  std::ranges::sort(seen);
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] < 0 || seen[i] >= groups.world_size() || (i > 0 && seen[i] == seen[i - 1])) {
      throw runtime_error(fmt::format(
          "mesh {} for DeviceMesh.from_group {} rank {}: every rank must be in the world of {} and "
          "appear once",
          py_nested_list(table), i > 0 && seen[i] == seen[i - 1] ? "repeats" : "holds", seen[i],
          groups.world_size()));
    }
  }
  auto family = std::make_shared<Family>();
  // Interned: every rank of a group shares one table, however many ranks make the mesh.
  family->rank_map = groups.table().rank_map(table.values);
  DeviceMesh mesh(family, State{}, Role::kRoot);
  mesh.state_.device_type = device_type;
  mesh.state_.rank = groups.rank();
  mesh.state_ = mesh.derived_state(MeshLayout::from_sizes_strides(table.shape), dim_names);
  mesh.state_.group_names = mesh.state_.coordinate ? group_names : std::vector<std::string>{};
  family->root = mesh.state_;
  return mesh;
}

DeviceMesh DeviceMesh::root() const {
  return is_root_ ? *this : DeviceMesh(family_, family_->root, Role::kRoot);
}

size_t DeviceMesh::dim_index(const MeshDim& dim) const {
  if (const auto* index = std::get_if<int64_t>(&dim)) {
    if (*index < 0 || static_cast<size_t>(*index) >= ndim()) {
      throw value_error(fmt::format("mesh dim {} is out of range for a {}-d mesh", *index, ndim()));
    }
    return static_cast<size_t>(*index);
  }
  const std::string& name = std::get<std::string>(dim);
  if (!state_.dim_names || state_.dim_names->empty()) throw key_error("No `mesh_dim_names` found.");
  const auto& names = *state_.dim_names;
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    throw key_error(fmt::format(
        "Mesh dimension '{}' does not exist. Available mesh dimensions are: mesh_dim_names={}",
        name, py_tuple(names)));
  }
  return static_cast<size_t>(it - names.begin());
}

std::vector<std::vector<int64_t>> DeviceMesh::groups(size_t dim) const {
  return global_ranks(state_.layout[dim], rank_map());
}

RankTensor DeviceMesh::full_mesh() const {
  return state_.layout.full_mesh_tensor(rank_map());
}

RankTensor DeviceMesh::mesh() const {
  RankTensor full = full_mesh();
  std::optional<Located> where = locate(full, state_.rank);
  const size_t replica = where ? where->replica : 0;
  const size_t per_replica = full.values.size() / static_cast<size_t>(full.shape[0]);
  RankTensor out;
  out.shape.assign(full.shape.begin() + 1, full.shape.end());
  const auto begin = full.values.begin() + static_cast<ptrdiff_t>(replica * per_replica);
  out.values.assign(begin, begin + static_cast<ptrdiff_t>(per_replica));
  return out;
}

void DeviceMesh::require_dim_unless_1d() const {
  if (ndim() > 1) {
    throw runtime_error(fmt::format(
        "Found the DeviceMesh have {} dimensions. Optional kwarg `mesh_dim` needs to be specified "
        "when device_mesh.ndim > 1.",
        ndim()));
  }
}

const std::string& DeviceMesh::group_name_at(size_t dim) const {
  if (!state_.group_names) throw runtime_error("DeviceMesh process groups not initialized!");
  if (dim >= state_.group_names->size()) {
    throw Error(PyErrorType::kIndexError, "list index out of range");
  }
  return (*state_.group_names)[dim];
}

std::string DeviceMesh::group_name(std::optional<MeshDim> dim) const {
  if (!state_.group_names) throw runtime_error("DeviceMesh process groups not initialized!");
  if (!dim) {
    require_dim_unless_1d();
    return group_name_at(0);
  }
  if (const auto* name = std::get_if<std::string>(&*dim)) {
    const auto it = family_->flattened.find(*name);
    if (it != family_->flattened.end()) {
      const auto& names = it->second.group_names;
      if (!names) throw runtime_error("DeviceMesh process groups not initialized!");
      if (names->empty()) throw Error(PyErrorType::kIndexError, "list index out of range");
      return names->front();
    }
  }
  return group_name_at(dim_index(*dim));
}

int64_t DeviceMesh::local_rank(const GroupCreator& groups, std::optional<MeshDim> dim) const {
  if (!dim) require_dim_unless_1d();
  const std::string name = group_name(dim ? *dim : MeshDim{int64_t{0}});
  const RankList ranks = groups.group_ranks(name);
  if (!ranks) throw runtime_error(fmt::format("process group {} does not exist", name));
  // Group members are sorted (new_group sorts them).
  const auto it = std::lower_bound(ranks->begin(), ranks->end(), state_.rank);
  return it == ranks->end() || *it != state_.rank ? -1 : static_cast<int64_t>(it - ranks->begin());
}

DeviceMesh DeviceMesh::slice(const std::vector<std::string>& names) const {
  if (!state_.dim_names || state_.dim_names->empty()) {
    throw runtime_error("Cannot slice a DeviceMesh without mesh_dim_names!");
  }
  if (names == *state_.dim_names) return *this;
  const std::vector<std::string>& own = *state_.dim_names;
  std::vector<std::string> valid = own;
  if (is_root_) {
    valid.insert(valid.end(), family_->flattened_order.begin(), family_->flattened_order.end());
  }
  for (const std::string& n : names) {
    if (std::find(valid.begin(), valid.end(), n) == valid.end()) {
      throw key_error(
          fmt::format("Invalid mesh_dim_names {} specified. Valid mesh_dim_names are {}.",
                      py_tuple(names), py_list(valid)));
    }
  }
  std::vector<Axis> axes;
  for (const std::string& n : names) {
    const auto it = std::find(own.begin(), own.end(), n);
    axes.push_back(it != own.end() ? state_.layout[static_cast<size_t>(it - own.begin())]
                                   : family_->flattened.at(n).layout[0]);
  }
  // Both checks look at all the selected dims merged into one coalesced layout: its strides may
  // not grow (ties allowed, size-1 dims vanish), and its dims may not overlap. They run on every
  // rank, in or out of the mesh.
  MeshLayout layout(std::move(axes));
  const Axis merged = layout.collapse();
  if (!merged.is_non_increasing()) {
    throw key_error(fmt::format(
        "Invalid mesh_dim_names {} specified. Mesh dim indices should be in ascending order.",
        py_tuple(names)));
  }
  if (!merged.is_orthogonal()) {
    throw runtime_error(
        fmt::format("Slicing overlapping dim_names {} is not allowed.", py_tuple(names)));
  }
  // A rank in the mesh copies its groups' names; a rank outside it has none to copy.
  std::optional<std::vector<std::string>> group_names;
  if (state_.group_names) {
    group_names.emplace();
    for (const std::string& n : names) {
      if (state_.group_names->empty()) break;
      const auto it = std::find(own.begin(), own.end(), n);
      if (it != own.end()) {
        group_names->push_back(group_name_at(static_cast<size_t>(it - own.begin())));
      } else {
        const State& flat = family_->flattened.at(n);
        if (!flat.group_names || flat.group_names->empty()) {
          throw Error(PyErrorType::kIndexError, "list index out of range");
        }
        group_names->push_back(flat.group_names->front());
      }
    }
  }
  State s = derived_state(std::move(layout), names);  // RuntimeError outside several replicas
  s.group_names = std::move(group_names);
  return DeviceMesh(family_, std::move(s), Role::kDerived);
}

DeviceMesh DeviceMesh::flatten(GroupCreator& groups, std::optional<std::string> name) {
  if (!state_.dim_names || state_.dim_names->empty()) {
    throw runtime_error("Cannot flatten a DeviceMesh without mesh_dim_names!");
  }
  const std::vector<std::string>& own = *state_.dim_names;
  if (!name || name->empty()) {
    std::string joined;
    for (const std::string& n : own) joined += (joined.empty() ? "" : "_") + n;
    name = joined;
  }
  if (ndim() == 1 && std::find(own.begin(), own.end(), *name) != own.end()) return *this;
  const std::vector<std::string> root_names =
      family_->root.dim_names.value_or(std::vector<std::string>{});
  if (std::find(root_names.begin(), root_names.end(), *name) != root_names.end()) {
    throw value_error(fmt::format(
        "{} already exists for submesh of the {}. The mesh_dim_names of submesh and flattened "
        "mesh are {}. Please specify another valid mesh_dim_name.",
        *name, root().to_string(), py_tuple(root_names)));
  }
  MeshLayout layout({state_.layout.collapse()});
  const auto cached = family_->flattened.find(*name);
  if (cached != family_->flattened.end()) {
    if (cached->second.layout == layout) return DeviceMesh(family_, cached->second, Role::kDerived);
    throw value_error(fmt::format(
        "Flatten mesh with mesh_dim_name {} has been created before, Please specify another valid "
        "mesh_dim_name.",
        *name));
  }
  State s = derived_state(std::move(layout), std::vector<std::string>{*name});
  s.group_names = create_all_groups(groups, s.layout, family_->rank_map, *s.dim_names);
  family_->flattened.emplace(*name, s);
  family_->flattened_order.push_back(*name);
  return DeviceMesh(family_, std::move(s), Role::kDerived);
}

DeviceMesh DeviceMesh::unflatten(GroupCreator& groups, const MeshDim& dim,
                                 std::span<const int64_t> sizes,
                                 const std::vector<std::string>& names) const {
  if (!state_.dim_names || state_.dim_names->empty()) {
    // PyTorch 2.15 fails on the missing names with its generic None check.
    throw type_error(
        "Invariant encountered: value was None when it should not be (_unflatten needs a mesh "
        "with mesh_dim_names)");
  }
  const std::vector<std::string>& own = *state_.dim_names;
  if (const auto* index = std::get_if<int64_t>(&dim); index && *index >= int64_t(ndim())) {
    throw value_error(
        fmt::format("dim {} specified in `_unflatten` is out of range {}", *index, ndim()));
  }
  if (const auto* n = std::get_if<std::string>(&dim);
      n && std::find(own.begin(), own.end(), *n) == own.end()) {
    throw value_error(
        fmt::format("dim {} specified in `_unflatten` is not in {}", *n, py_tuple(own)));
  }
  if (sizes.size() != names.size()) {
    throw runtime_error("mesh_dim_names must have same length as mesh_sizes in _unflatten!");
  }
  const size_t d = dim_index(dim);
  const std::optional<int64_t> product = checked_product(sizes);
  if (product != size(d)) {
    throw value_error(fmt::format(
        "The product of mesh_sizes=({}{}) is {}, but the original dimension at dim={} has size "
        "{}. These must be equal for unflatten to work correctly.",
        fmt::join(sizes, ", "), sizes.size() == 1 ? "," : "",
        product ? std::to_string(*product) : std::string("more than 2^63"), d, size(d)));
  }
  const std::vector<Axis> parts = state_.layout[d].split(sizes);
  std::vector<std::string> new_names = own;
  new_names.erase(new_names.begin() + static_cast<ptrdiff_t>(d));
  new_names.insert(new_names.begin() + static_cast<ptrdiff_t>(d), names.begin(), names.end());
  State s = derived_state(state_.layout.splice(d, d + 1, parts), new_names);
  if (state_.group_names) {
    const std::optional<std::vector<std::string>> created =
        create_all_groups(groups, MeshLayout(parts), family_->rank_map, names);
    std::vector<std::string> merged = *state_.group_names;
    if (!merged.empty() && created && !created->empty()) {
      merged.erase(merged.begin() + static_cast<ptrdiff_t>(d));
      merged.insert(merged.begin() + static_cast<ptrdiff_t>(d), created->begin(), created->end());
    } else {
      merged.clear();
    }
    s.group_names = std::move(merged);
  }
  return DeviceMesh(family_, std::move(s), Role::kDerived);
}

std::vector<std::string> DeviceMesh::flattened_names() const {
  return family_->flattened_order;
}

std::optional<DeviceMesh> DeviceMesh::flattened_over(std::span<const size_t> dims) const {
  if (!state_.dim_names) return std::nullopt;
  MESHSIM_ASSERT(std::is_sorted(dims.begin(), dims.end()) && (dims.empty() || dims.back() < ndim()),
                 "flattened_over needs ascending mesh dims in range");
  std::vector<Axis> axes;
  for (const size_t d : dims) axes.push_back(state_.layout[d]);
  const MeshLayout wanted({MeshLayout(std::move(axes)).collapse()});
  for (const std::string& name : family_->flattened_order) {
    const State& flat = family_->flattened.at(name);
    if (flat.layout == wanted) return DeviceMesh(family_, flat, Role::kDerived);
  }
  return std::nullopt;
}

void DeviceMesh::rebind_groups(const GroupCreator& groups) {
  if (!state_.coordinate) {
    state_.group_names = std::vector<std::string>{};
    return;
  }
  std::vector<std::string> names;
  for (size_t dim = 0; dim < ndim(); ++dim) {
    const Axis& axis = state_.layout[dim];
    if (axis.numel() == groups.world_size()) {
      names.push_back(groups.world_group_name());
      continue;
    }
    std::optional<std::string> found;
    for (const std::vector<int64_t>& ranks : global_ranks(axis, rank_map())) {
      if (std::find(ranks.begin(), ranks.end(), state_.rank) != ranks.end()) {
        found = groups.find_group(ranks);
      }
    }
    if (!found) {
      throw runtime_error(
          fmt::format("cannot rebind mesh dim {} of {}: no live process group has its ranks", dim,
                      to_string()));
    }
    names.push_back(*found);
  }
  state_.group_names = std::move(names);
}

DeviceMesh DeviceMesh::without_group_names() const {
  DeviceMesh out = *this;
  out.state_.group_names.reset();
  return out;
}

bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
  const bool same_table =
      a.family_->rank_map == b.family_->rank_map || std::ranges::equal(a.rank_map(), b.rank_map());
  return same_table && a.state_.layout == b.state_.layout &&
         a.state_.device_type == b.state_.device_type && a.state_.dim_names == b.state_.dim_names;
}

uint64_t DeviceMesh::hash() const {
  uint64_t h = kFnv1aOffset;
  for (int64_t r : rank_map()) h = fnv1a(h, std::to_string(r) + ",");
  h = fnv1a(h, state_.layout.to_string());
  h = fnv1a(h, state_.device_type);
  if (state_.dim_names) h = fnv1a(h, py_tuple(*state_.dim_names));
  return h;
}

std::string DeviceMesh::to_string() const {
  std::string dims;
  const std::vector<int64_t> sizes = shape();
  for (size_t i = 0; i < sizes.size(); ++i) {
    dims += i ? ", " : "";
    dims += state_.dim_names ? fmt::format("{}={}", (*state_.dim_names)[i], sizes[i])
                             : std::to_string(sizes[i]);
  }
  return fmt::format("DeviceMesh(({}), '{}', layout={})", dims, state_.device_type,
                     state_.layout.to_string());
}

}  // namespace meshsim
