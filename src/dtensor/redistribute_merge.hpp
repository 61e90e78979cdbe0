// The last pass of PyTorch 2.15's redistribute planning: transforms next to each other in the
// plan that issue the same kind of collective with the same placements (all_gather, all_reduce
// or reduce_scatter) become one collective over a flattened mesh the script created
// (mesh["dp", "tp"]._flatten()), when one is laid out as their mesh dims merged. Where it cannot
// merge, PyTorch warns; so does meshsim.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "src/dtensor/redistribute.hpp"

namespace meshsim {

// One collective's worth of a plan: a transform on one mesh dim of the DTensor's mesh, or
// several merged into one on dim 0 of a flattened mesh.
struct PlannedTransform {
  RedistributeTransform transform;  // merged: mesh_dim 0 of `flattened`
  std::optional<DeviceMesh> flattened;
  // A merged mix of Partial(sum) and Partial(avg) reduces as a sum and divides by the size of
  // the avg mesh dims afterwards.
  int64_t avg_scale = 1;
};

// `plan` (for `spec`, moving to `to`) with PyTorch's merges made. `warn` hears what PyTorch
// warns about a run of collectives it cannot merge, and of a merged all_gather whose uneven
// nested shards it gathers as if they were even (PyTorch gives wrong values without a word).
std::vector<PlannedTransform> merge_over_flattened_meshes(
    const std::vector<RedistributeTransform>& plan, const DTensorSpec& spec,
    std::span<const Placement> to, const RedistributeWarning& warn);

}  // namespace meshsim
