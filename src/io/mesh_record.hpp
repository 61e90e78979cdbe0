// DeviceMesh checkpoint records (docs/mesh.md 4.1): exactly the keys device_type, rank_map, layout,
// mesh_dim_names, thread_id, coordinate_on_dim, root_mesh, flatten_mapping, plus dim_group_names
// only when group names are saved.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "src/io/envelope.hpp"
#include "src/io/record_tree.hpp"
#include "src/mesh/device_mesh.hpp"

namespace meshsim {

inline constexpr uint32_t kMeshRecordVersion = 1;

// Logged by a save that writes group names (decouple_backend_at_save off).
inline constexpr std::string_view kGroupNamesSavedWarning =
    "saving a DeviceMesh with its process group names is deprecated: a name only means the same "
    "group in a world that creates its groups in the same order. Use distributed checkpointing, "
    "or set decouple_backend_at_save and re-bind the loaded mesh to live groups";

// The object types a mesh record holds, for strict loaders.
const std::set<std::string, std::less<>>& mesh_record_types();

// `with_group_names`: the negation of decouple_backend_at_save (or of a save's override). Group
// names are written only when the mesh has them.
RecordObject mesh_to_record(const DeviceMesh& mesh, bool with_group_names);
// Checks the required keys (ValueError listing the missing ones) and every field, then restores
// the mesh for a world of `world_size` ranks (see DeviceMesh::restore).
DeviceMesh mesh_from_record(const RecordReader& record, int64_t world_size);

// One mesh per file.
std::string seal_mesh(const DeviceMesh& mesh, bool with_group_names, ArchiveFormat format);
// `strict`: also refuses unknown types and fields (torch.load's weights_only analogue).
DeviceMesh open_mesh(std::string_view file, int64_t world_size, bool strict);

}  // namespace meshsim
