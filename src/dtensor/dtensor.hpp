// A DTensor as one rank sees it: the local shard it holds plus the spec every rank shares (mesh,
// placements, global shape, stride and dtype), as torch.distributed.tensor.DTensor.
#pragma once

#include <string>
#include <vector>

#include "src/dtensor/placement.hpp"
#include "src/mesh/device_mesh.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

struct DTensorSpec {
  DeviceMesh mesh;
  std::vector<Placement> placements;  // one per mesh dim
  std::vector<int64_t> shape;         // global
  DType dtype = DType::kFloat32;

  // Row-major strides of the global shape, as DTensor factories make them.
  std::vector<int64_t> stride() const;
  int64_t numel() const;
  // The local shard's shape on the calling rank; (0,) on a rank outside the mesh, as PyTorch.
  std::vector<int64_t> local_shape() const;
  // "float32[8, 4] on mesh (2, 2) ('dp', 'tp') as [Shard(0), Replicate()]".
  std::string describe() const;
};

class DTensor {
 public:
  // A zero-filled DTensor (meta: shape only), each rank holding its shard. Throws meshsim::Error:
  // ValueError when the placements do not match the mesh, IndexError for a shard dim outside the
  // tensor, what Tensor's constructor throws for impossible sizes.
  static DTensor zeros(DTensorSpec spec, Tensor::Storage storage = Tensor::Storage::kMaterialized);
  // A DTensor whose every element holds its flat (row-major) global index, so that any layout of
  // the same global tensor can be checked element by element. Throws ValueError when some index
  // would not be exact in the dtype (float32 holds up to 2^24 exactly), and what zeros() throws.
  static DTensor global_indices(DTensorSpec spec);
  // A DTensor around a shard it already has (a checkpoint's): what zeros() throws, and
  // RuntimeError unless the shard has the spec's local shape and dtype.
  static DTensor from_local_shard(DTensorSpec spec, Tensor local);

  const DTensorSpec& spec() const { return spec_; }
  const Tensor& local() const { return local_; }
  // Replaces the local shard (a random op's result, to_empty's storage); RuntimeError unless it
  // has the spec's local shape and dtype.
  void set_local(Tensor local);
  // Whether the calling rank holds part of it (is in the mesh).
  bool participates() const { return spec_.mesh.coordinate().has_value(); }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool value) { requires_grad_ = value; }
  // `dtensor._spec.mesh = mesh`: a loaded DTensor handed the live mesh (the seed test). Throws
  // RuntimeError unless the meshes are equal (same ranks, layout, device type and names).
  void reassign_mesh(DeviceMesh mesh);

  // Same spec (meshes compared as DeviceMesh ==), same local bits, same requires_grad.
  friend bool operator==(const DTensor& a, const DTensor& b);

  // The same global tensor on another mesh and placements; its local shard is meta when this one
  // is, zero-filled otherwise (only the layout moves, for parallelize and fully_shard on meta
  // modules).
  DTensor relaid(DeviceMesh mesh, std::vector<Placement> placements) const;

 private:
  explicit DTensor(DTensorSpec spec, Tensor local)
      : spec_(std::move(spec)), local_(std::move(local)) {}
  DTensorSpec spec_;
  Tensor local_;
  bool requires_grad_ = false;
};

}  // namespace meshsim
