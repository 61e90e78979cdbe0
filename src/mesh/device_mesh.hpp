// DeviceMesh as PyTorch models it: a layout over a rank table shared by a family of meshes, plus
// the calling rank's coordinate and process-group names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "src/comm/group_creator.hpp"
#include "src/mesh/mesh_layout.hpp"

namespace meshsim {

// A mesh dim given by index or by name.
using MeshDim = std::variant<int64_t, std::string>;
using DimNames = std::optional<std::vector<std::string>>;

class DeviceMesh {
 public:
  // The fields a save records of one mesh (docs/mesh.md 4.1) and a load restores.
  struct SavedFields {
    std::string device_type;
    std::vector<int64_t> rank_map;
    MeshLayout layout;
    DimNames mesh_dim_names;
    // PyTorch records the saving thread; a meshsim rank is a fiber, named by its rank. A loaded
    // mesh keeps the saver's rank and coordinate, as in PyTorch.
    int64_t thread_id = 0;
    std::optional<std::vector<int64_t>> coordinate_on_dim;
    std::optional<std::vector<std::string>> dim_group_names;  // absent: none saved
  };
  // A mesh with its family: the root's fields unless it is the root, and the root's flattened
  // meshes (a root carries them; a derived mesh reaches them through its root).
  struct Saved {
    SavedFields self;
    std::optional<SavedFields> root;
    std::map<std::string, SavedFields> flattened;
  };

  // init_device_mesh(device_type, shape, mesh_dim_names). Collective over WORLD: creates every
  // group of every dim in order. Throws RuntimeError for repeated or miscounted names, a device
  // type with an index, or a mesh bigger than the world.
  static DeviceMesh init(GroupCreator& groups, const std::string& device_type,
                         std::span<const int64_t> shape, const DimNames& dim_names = std::nullopt);

  // DeviceMesh(device_type, nested list): an explicit rank table, always a root. Collective over
  // WORLD like init(). Throws RuntimeError for ranks outside the world or repeated ranks.
  static DeviceMesh from_rank_table(GroupCreator& groups, const std::string& device_type,
                                    const RankTensor& table,
                                    const DimNames& dim_names = std::nullopt);

  // DeviceMesh.from_group: a root over `table` whose dims use groups that already exist
  // (`group_names`, one per dim, in dim order). Creates no group, so it is not collective. Checks
  // what PyTorch checks (ValueError: a table whose dim count is not the group count; a 1-D
  // table other than the group's ranks, `group_ranks`), and, where PyTorch goes on with a mesh
  // no lookup can use, ranks outside the world or repeated (RuntimeError).
  static DeviceMesh from_groups(GroupCreator& groups, const std::string& device_type,
                                const RankTensor& table, const DimNames& dim_names,
                                const std::vector<std::string>& group_names);

  // --- Rank-independent description -------------------------------------------------------
  const std::string& device_type() const { return state_.device_type; }
  const MeshLayout& layout() const { return state_.layout; }
  // The root's rank table, shared by every mesh derived from it.
  std::span<const int64_t> rank_map() const;
  const DimNames& dim_names() const { return state_.dim_names; }
  size_t ndim() const { return state_.layout.ndim(); }
  std::vector<int64_t> shape() const { return state_.layout.shape(); }
  int64_t size() const { return state_.layout.numel(); }
  int64_t size(size_t dim) const { return state_.layout[dim].numel(); }
  bool is_root() const { return is_root_; }
  // _get_root_mesh(): the mesh this one was sliced, flattened or unflattened from (itself when
  // it is a root).
  DeviceMesh root() const;
  // Index of a dim; names need mesh_dim_names (KeyError otherwise). Range-checked.
  size_t dim_index(const MeshDim& dim) const;
  // Every replica group of one dim (what new_group was called with), in creation order.
  std::vector<std::vector<int64_t>> groups(size_t dim) const;
  // `(replicas, *shape)`: every replica of this mesh in the rank table.
  RankTensor full_mesh() const;

  // --- The calling rank's view ------------------------------------------------------------
  int64_t rank() const { return state_.rank; }
  // Position in the replica containing the caller; nullopt when the caller is in none.
  const std::optional<std::vector<int64_t>>& coordinate() const { return state_.coordinate; }
  // Which replica holds the caller, as full_mesh() orders them (0 outside the mesh): ranks of
  // two pipeline stages have the same coordinates in their stage's submesh, but not its replica.
  int64_t replica() const { return state_.replica; }
  // The replica containing the caller (the whole mesh when there is one replica). Throws
  // RuntimeError when the caller is in no replica of a multi-replica mesh.
  RankTensor mesh() const;
  // Whether process-group names are attached (false after a decoupled load).
  bool has_group_names() const { return state_.group_names.has_value(); }
  // Group name of a dim, or of a flattened dim of the root by name. Throws RuntimeError "DeviceMesh
  // process groups not initialized!" without names, IndexError on a non-member rank.
  std::string group_name(std::optional<MeshDim> dim = std::nullopt) const;
  // Rank of the caller inside the group of `dim` (required when ndim > 1).
  int64_t local_rank(const GroupCreator& groups, std::optional<MeshDim> dim = std::nullopt) const;

  // --- Derived meshes ---------------------------------------------------------------------
  // mesh[names]: no new groups; group names are copied. See docs/mesh.md section 2 for the errors.
  DeviceMesh slice(const std::vector<std::string>& names) const;
  // _flatten(name = "_".join(names)): one axis over all dims; creates groups unless cached on
  // the root under the same name and layout. Not const: as in PyTorch, the flattened mesh is
  // registered on the root, which every mesh of this family shares.
  DeviceMesh flatten(GroupCreator& groups, std::optional<std::string> name = std::nullopt);
  // _unflatten(dim, sizes, names): splits one dim; creates groups of the new dims every time.
  DeviceMesh unflatten(GroupCreator& groups, const MeshDim& dim, std::span<const int64_t> sizes,
                       const std::vector<std::string>& names) const;
  // Names of the root's flattened meshes, in creation order (a loaded mesh: by name).
  std::vector<std::string> flattened_names() const;
  // The first flattened mesh of the root (in creation order) laid out as `dims` of this mesh
  // merged into one, as DTensor looks one up to issue a single collective over several mesh
  // dims; nullopt when none is, or this mesh has no dim names. `dims` ascending, in range.
  std::optional<DeviceMesh> flattened_over(std::span<const size_t> dims) const;

  // Re-attaches live group names to a mesh that has none, by layout: collective-free lookup of
  // the groups `groups` already created with exactly these ranks. Throws RuntimeError if absent.
  void rebind_groups(const GroupCreator& groups);
  // The same mesh with no group names attached, as a save without them (decoupled from the
  // backend) loads: every group lookup fails until rebind_groups().
  DeviceMesh without_group_names() const;

  // What a save writes; group names only when `with_group_names` and the mesh has them.
  Saved save(bool with_group_names) const;
  // The mesh a load rebuilds, in a world of `world_size` ranks. Checks everything a record could
  // get wrong (RuntimeError naming the field): layouts that leave the rank table, ranks outside
  // the world, a coordinate that is not the saved rank's, a rank table differing from its root's.
  static DeviceMesh restore(const Saved& saved, int64_t world_size);
  // For a mesh loaded with group names: every dim whose name, in the live world `groups`, is
  // unknown or names a group other than the mesh's group along that dim on this rank (a world
  // that created its groups in another order). Empty when every name holds.
  struct StaleGroupName {
    std::string dim;     // "'tp'", or the index of a dim without a name
    std::string detail;  // what the name means here and what it should
  };
  std::vector<StaleGroupName> stale_group_names(const GroupCreator& groups) const;

  // Equality and hash by (rank table, layout, device type, dim names); group names are ignored,
  // so equal meshes on different ranks compare equal.
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b);
  uint64_t hash() const;
  std::string to_string() const;

 private:
  struct State {
    std::string device_type;
    MeshLayout layout;
    DimNames dim_names;
    int64_t rank = 0;
    std::optional<std::vector<int64_t>> coordinate;
    int64_t replica = 0;  // the copy of the mesh in the rank table holding the caller (full_mesh)
    // nullopt: never attached; empty: caller is in no group of this mesh.
    std::optional<std::vector<std::string>> group_names;
  };
  // What a root and all meshes derived from it share.
  struct Family {
    SharedRankMap rank_map;  // one per world, shared by every rank's family
    State root;
    std::map<std::string, State> flattened;
    // Their names in creation order, the order PyTorch's lookups go through them in (a loaded
    // mesh lists them by name).
    std::vector<std::string> flattened_order;
  };

  enum class Role { kRoot, kDerived };
  DeviceMesh(std::shared_ptr<Family> family, State state, Role role)
      : family_(std::move(family)), state_(std::move(state)), is_root_(role == Role::kRoot) {}
  static DeviceMesh make_root(GroupCreator& groups, const std::string& device_type,
                              SharedRankMap rank_map, MeshLayout layout, const DimNames& dim_names);
  State derived_state(MeshLayout layout, DimNames dim_names) const;
  static std::optional<std::string> create_groups(GroupCreator& groups, const Axis& axis,
                                                  const SharedRankMap& rank_map,
                                                  const std::string& dim_name);
  // `dim_names` label the groups in reports (one per axis, or none).
  static std::optional<std::vector<std::string>> create_all_groups(
      GroupCreator& groups, const MeshLayout& layout, const SharedRankMap& rank_map,
      std::span<const std::string> dim_names);
  const std::string& group_name_at(size_t dim) const;
  // PyTorch's error for a dim-less query on a mesh of more than one dim.
  void require_dim_unless_1d() const;

  std::shared_ptr<Family> family_;
  State state_;
  bool is_root_;
};

// Python's repr of a tuple of strings, as PyTorch's messages print it: ('dp', 'tp').
std::string py_tuple(const std::vector<std::string>& names);

}  // namespace meshsim
