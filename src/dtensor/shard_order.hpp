// The order in which mesh dims cut a tensor dim (PyTorch 2.15's DTensorSpec.shard_order), and its
// encoding in placements: a mesh dim that cuts after a later mesh dim is a _StridedShard whose
// split factor is the number of pieces those earlier cuts made.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "src/dtensor/placement.hpp"

namespace meshsim {

// By tensor dim: the mesh dims that cut it, first cut first.
using ShardOrder = std::vector<std::vector<size_t>>;

// DTensorSpec._maybe_convert_StridedShard_to_shard_order: right to left, a mesh dim's split
// factor says how many pieces the mesh dims cutting before it made. nullopt when some split
// factor matches no such product. `mesh_shape` has one size per placement.
std::optional<ShardOrder> decode_shard_order(std::span<const Placement> placements,
                                             std::span<const int64_t> mesh_shape,
                                             size_t tensor_ndim);

// PyTorch's ShardOrderEntry: a tensor dim and the mesh dims that cut it, first cut first.
struct ShardOrderEntry {
  int64_t tensor_dim = 0;
  std::vector<int64_t> mesh_dims;
};

// DTensorSpec._convert_shard_order_to_StridedShard: each listed mesh dim becomes Shard(tensor
// dim), or _StridedShard(tensor dim, split_factor = the sizes of the mesh dims listed before it
// that come after it in the mesh); other mesh dims keep their placement. As PyTorch: ValueError
// when a listed mesh dim's placement is not a Shard ("Only Shard placement can be converted to
// _StridedShard, ..."); IndexError for a mesh dim outside the mesh. ValueError too when there is
// not one placement per mesh dim.
std::vector<Placement> encode_shard_order(std::span<const Placement> placements,
                                          std::span<const ShardOrderEntry> order,
                                          std::span<const int64_t> mesh_shape);

}  // namespace meshsim
