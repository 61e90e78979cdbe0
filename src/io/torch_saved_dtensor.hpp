// A DTensor or DeviceMesh as `torch.save` writes it in PyTorch 2.15: the object's attributes
// pickled as they are (a mesh's `__dict__` minus its process-group registry, so its group names
// travel with it), read by an allow-list of the classes those pickles name. See
// docs/checkpoints.md, "torch.save files of a DTensor or DeviceMesh".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/dtensor/shard_order.hpp"
#include "src/io/torch_save_archive.hpp"
#include "src/mesh/device_mesh.hpp"

namespace meshsim {

// A pickled DTensor: its mesh (fields and family; the saver's rank, PyTorch's `_rank`, is the
// fields' thread_id, as meshsim's own records keep it), placements and shard order as saved,
// global shape, stride and dtype, requires_grad and the saver's shard.
struct TorchSavedDTensor {
  DeviceMesh::Saved mesh;
  std::vector<Placement> placements;
  std::optional<std::vector<ShardOrderEntry>> shard_order;  // None: the placements say it all
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  Tensor local;
};

// A DTensor, or a DeviceMesh (its fields and family).
using TorchSavedObject = std::variant<TorchSavedDTensor, DeviceMesh::Saved>;

// Whether `bytes` start as a zip archive does (torch.save's format since PyTorch 1.6), as
// opposed to one of meshsim's own records.
bool looks_like_zip_archive(std::string_view bytes);

// The DTensor or DeviceMesh `torch.save` wrote. Throws meshsim::Error (ValueError) naming `what`,
// the attribute path ("_spec.mesh._layout") and the pickle's byte offset for anything else: a
// class outside the allow-list, a missing or ill-typed attribute, a dtype meshsim does not have,
// a shard that does not match its tensor_meta.
TorchSavedObject read_torch_saved_object(std::string_view archive, std::string_view what,
                                         ZipChecksums checksums = ZipChecksums::kVerify);

// The DTensor's spec in a world of `world_size` ranks: its mesh restored with the checks
// DeviceMesh::restore makes, an explicit shard order folded into _StridedShard placements (as
// DTensorSpec does), and its stride checked to be contiguous (meshsim's DTensors are). Throws
// meshsim::Error.
DTensorSpec torch_saved_spec(const TorchSavedDTensor& saved, int64_t world_size);

// The mesh or DTensor itself, restored in a world of `world_size` ranks (torch_saved_spec, then
// DTensor::from_local_shard's checks; errors name `what`), and a ValueError when the file holds
// the other kind.
DeviceMesh open_torch_saved_mesh(std::string_view archive, std::string_view what,
                                 int64_t world_size);
DTensor open_torch_saved_dtensor(std::string_view archive, std::string_view what,
                                 int64_t world_size);

}  // namespace meshsim
