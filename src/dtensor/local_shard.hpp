// Which part of a global tensor each rank holds, given a mesh and placements
// (PyTorch's compute_local_shape_and_global_offset).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "src/dtensor/index_runs.hpp"
#include "src/dtensor/placement.hpp"

namespace meshsim {

struct LocalShard {
  std::vector<int64_t> shape;
  // Global index of the first local element per dim; the global size for an empty dim. When a
  // strided shard makes ownership non-contiguous, only the first index is reported.
  std::vector<int64_t> offset;
  friend bool operator==(const LocalShard&, const LocalShard&) = default;
};

// For each tensor dim, the global indices the rank at `coordinate` holds, in local order, as runs.
// Mesh dims apply left to right, as PyTorch's distribute_tensor does; a Shard cuts the indices held
// so far with torch.chunk rules and keeps piece c; a StridedShard first cuts them into
// split_factor pieces (torch.chunk), cuts each piece into k (torch.chunk), and keeps piece c of
// every one. Negative dims count from the end. Throws meshsim::Error: ValueError when the
// placements do not match the mesh, IndexError (PyTorch's "tuple index out of range") for a dim
// outside the tensor, ValueError when a strided shard would fragment a dim into more than
// kMaxRuns runs (listing them is the point; compute_local_shape_and_global_offset has no limit).
inline constexpr int64_t kMaxRuns = int64_t{1} << 16;
std::vector<IndexRuns> owned_indices(std::span<const int64_t> global_shape,
                                     std::span<const int64_t> mesh_shape,
                                     std::span<const int64_t> coordinate,
                                     std::span<const Placement> placements);

// Shape and offset of the local shard, in closed form (no index lists, any size); a rank outside
// the mesh (no coordinate) gets ((0,), ()). Throws as owned_indices does, but never for runs.
LocalShard compute_local_shape_and_global_offset(
    std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
    const std::optional<std::vector<int64_t>>& coordinate, std::span<const Placement> placements);

// torch.chunk's piece `index` of `n` items cut into `pieces`: (start, size). Pieces past the
// last non-empty one are empty, as torch.chunk returns fewer chunks than asked.
std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t pieces, int64_t index);

}  // namespace meshsim
