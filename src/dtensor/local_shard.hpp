// Which part of a global tensor each rank holds, given a mesh and placements
// (PyTorch's compute_local_shape_and_global_offset).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "src/dtensor/placement.hpp"

namespace meshsim {

struct LocalShard {
  std::vector<int64_t> shape;
  // Global index of the first local element per dim; the global size for an empty dim. When a
  // strided shard makes ownership non-contiguous, only the first index is reported.
  std::vector<int64_t> offset;
  friend bool operator==(const LocalShard&, const LocalShard&) = default;
};

// For each tensor dim, the global indices the rank at `coordinate` holds, in local order. Mesh dims
// apply left to right; a Shard splits the indices held so far with torch.chunk rules; a
// StridedShard cuts them into k*split_factor chunks and keeps chunks c, c+k, .... Throws
// meshsim::Error (ValueError) when the placements do not fit the mesh or the tensor.
std::vector<std::vector<int64_t>> owned_indices(std::span<const int64_t> global_shape,
                                                std::span<const int64_t> mesh_shape,
                                                std::span<const int64_t> coordinate,
                                                std::span<const Placement> placements);

// Shape and offset of the local shard; a rank outside the mesh (no coordinate) gets ((0,), ()).
LocalShard compute_local_shape_and_global_offset(
    std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
    const std::optional<std::vector<int64_t>>& coordinate, std::span<const Placement> placements);

// torch.chunk's piece `index` of `n` items cut into `pieces`: (start, size).
std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t pieces, int64_t index);

}  // namespace meshsim
