// DTensor.redistribute as one rank runs it: PyTorch's greedy plan of per-mesh-dim transforms and,
// for each, the collective DTensor issues (all_gather_into_tensor for Shard -> Replicate,
// all_reduce for Partial -> Replicate, reduce_scatter for Partial -> Shard, all_to_all for
// Shard(a) -> Shard(b), a local chunk for Replicate -> Shard, the piece in zeros for Shard ->
// Partial(sum)), padding uneven shards around the
// collective as DTensor does, so the signatures every rank meets with are PyTorch's.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "src/comm/collective.hpp"
#include "src/dtensor/dtensor.hpp"

namespace meshsim {

// One step of a plan: mesh dim `mesh_dim` goes from `from` to `to`; `logical_shape` is the shape
// the tensor has on that mesh dim (before its shard), which sizes the padding.
struct RedistributeTransform {
  size_t mesh_dim;
  Placement from;
  Placement to;
  std::vector<int64_t> logical_shape;
};

// The calling rank's plan from `spec` to `to` (placements with non-negative dims, one per mesh
// dim; the rank is in the mesh): nested shardings that differ are replicated first, inner mesh dims
// before outer ones, then every mesh dim still different goes to its target, outer first.
std::vector<RedistributeTransform> plan_redistribute(const DTensorSpec& spec,
                                                     std::span<const Placement> to);

// The process group of one dim of a mesh, as the calling rank holds it.
using MeshDimGroup = std::function<Group(const DeviceMesh& mesh, size_t dim)>;
// Where a redistribution says what PyTorch would warn about (or gets wrong without a word).
using RedistributeWarning = std::function<void(std::string)>;

// t.redistribute(mesh, placements): the DTensor laid out as `to`, through `backend`. Checks as
// DTensor.redistribute does and throws meshsim::Error: NotImplementedError for another mesh
// ("Cross device mesh comm not supported yet!"), RuntimeError for a new Partial other than
// Shard -> Partial(sum) ("only Shard to Partial(sum) redistribution is supported!"), ValueError for
// mixed Partial reduce ops, ValueError / IndexError for placements that do not fit,
// RuntimeError ("redistribute from S(0) to _S(0, 2) not supported yet") for a Shard or Partial
// moved into a _StridedShard outside a shard order, NotImplementedError for a Partial that
// changes next to a _StridedShard (meshsim does not model it), and what the
// backend throws. A layout with _StridedShards that encode a shard order (FSDP2 over TP) is
// planned as PyTorch plans it, by the min-cost search of redistribute_planner.hpp, whose cost
// model sees hosts of `devices_per_host` devices (torch.cuda.device_count(); 1 for "cpu")
// (NotImplementedError where uneven sizes make the target's layout another than that order's
// cut); other _StridedShards are gathered (and cut) on their mesh dim. Collectives PyTorch 2.15
// merges over a flattened mesh are merged (redistribute_merge.hpp; AssertionError, as PyTorch
// raises, for a merged _StridedShard). A rank outside the mesh takes part in nothing and keeps its
// empty shard. `warn` hears of Gloo's all_to_all fallback, of the merges PyTorch warns it cannot
// make and of the values it gets wrong without a word.
DTensor redistribute(const DTensor& t, const DeviceMesh& mesh, std::vector<Placement> to,
                     Backend& backend, const MeshDimGroup& group_of,
                     const RedistributeWarning& warn, int64_t devices_per_host);

}  // namespace meshsim
