// A DTensor or DeviceMesh as `torch.save` writes it in PyTorch 2.15: the object's attributes
// pickled as they are (a mesh's `__dict__` minus its process-group registry, so its group names
// travel with it), read by an allow-list of the classes those pickles name. See
// docs/checkpoints.md, "torch.save files of a DTensor or DeviceMesh".
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/io/torch_save_archive.hpp"
#include "src/mesh/device_mesh.hpp"

namespace meshsim {

// A pickled DeviceMesh: its fields and its family (root and the root's flattened meshes). The
// saver's rank (PyTorch's `_rank`) is the fields' thread_id, as meshsim's own records keep it.
struct TorchSavedMesh {
  DeviceMesh::Saved saved;
};

// A pickled DTensor: its mesh, placements (an explicit shard order already folded into
// _StridedShard placements), global shape and dtype, requires_grad and the saver's shard.
struct TorchSavedDTensor {
  TorchSavedMesh mesh;
  std::vector<Placement> placements;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  Tensor local;
};

using TorchSavedObject = std::variant<TorchSavedDTensor, TorchSavedMesh>;

// Whether `bytes` start as a zip archive does (torch.save's format since PyTorch 1.6), as
// opposed to one of meshsim's own records.
bool looks_like_zip_archive(std::string_view bytes);

// The DTensor or DeviceMesh `torch.save` wrote. Throws meshsim::Error (ValueError) naming `what`,
// the attribute path ("_spec.mesh._layout") and the pickle's byte offset for anything else: a
// class outside the allow-list, a missing or ill-typed attribute, a dtype meshsim does not have,
// a shard that does not match its tensor_meta.
TorchSavedObject read_torch_saved_object(std::string_view archive, std::string_view what,
                                         ZipChecksums checksums = ZipChecksums::kVerify);

// The mesh or DTensor itself, restored in a world of `world_size` ranks with the checks
// DeviceMesh::restore and DTensor::from_local_shard make (RuntimeError naming `what`), and a
// ValueError when the file holds the other kind.
DeviceMesh open_torch_saved_mesh(std::string_view archive, std::string_view what,
                                 int64_t world_size);
DTensor open_torch_saved_dtensor(std::string_view archive, std::string_view what,
                                 int64_t world_size);

}  // namespace meshsim
