#include "src/dtensor/shard_order.hpp"

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"

namespace meshsim {

namespace {

// Listed mesh dims may repeat in a user's order, so their product may not fit.
int64_t times(int64_t a, int64_t b) {
  const std::optional<int64_t> product = checked_mul(a, b);
  if (!product) throw overflow_error(fmt::format("{} * {} overflows int64", a, b));
  return *product;
}

}  // namespace

std::optional<ShardOrder> decode_shard_order(std::span<const Placement> placements,
                                             std::span<const int64_t> mesh_shape,
                                             size_t tensor_ndim) {
  ShardOrder order(tensor_ndim);
  for (size_t m = placements.size(); m-- > 0;) {
    const int64_t dim = sharded_dim(placements[m]);
    if (dim < 0) continue;
    const auto* strided = std::get_if<StridedShard>(&placements[m]);
    const int64_t factor = strided ? strided->split_factor : 1;
    std::vector<size_t>& dims = order.at(static_cast<size_t>(dim));
    int64_t pieces = 1;
    size_t at = 0;
    for (; at < dims.size() && pieces != factor; ++at) pieces = times(pieces, mesh_shape[dims[at]]);
    if (pieces != factor) return std::nullopt;
    dims.insert(dims.begin() + static_cast<ptrdiff_t>(at), m);
  }
  return order;
}

std::vector<Placement> encode_shard_order(std::span<const Placement> placements,
                                          std::span<const ShardOrderEntry> order,
                                          std::span<const int64_t> mesh_shape) {
  if (placements.size() != mesh_shape.size()) {
    throw value_error(
        fmt::format("{} placements for a {}-d mesh", placements.size(), mesh_shape.size()));
  }
  std::vector<Placement> out(placements.begin(), placements.end());
  const auto in_mesh = [&](int64_t m) {
    if (m < 0 || static_cast<size_t>(m) >= placements.size())
      throw Error(PyErrorType::kIndexError,
                  fmt::format("tuple index out of range (mesh dim {} of a {}-d mesh)", m,
                              placements.size()));
    return static_cast<size_t>(m);
  };
  for (const ShardOrderEntry& entry : order) {
    for (size_t i = 0; i < entry.mesh_dims.size(); ++i) {
      const size_t m = in_mesh(entry.mesh_dims[i]);
      if (!std::holds_alternative<Shard>(placements[m])) {
        throw value_error(fmt::format(
            "Only Shard placement can be converted to _StridedShard, found {} in placements={}.",
            placement_repr(placements[m]), placements_repr(placements)));
      }
      int64_t split_factor = 1;
      for (size_t j = 0; j < i; ++j) {
        const size_t earlier = in_mesh(entry.mesh_dims[j]);
        if (earlier > m) split_factor = times(split_factor, mesh_shape[earlier]);
      }
      out[m] = split_factor == 1 ? Placement{Shard{entry.tensor_dim}}
                                 : Placement{StridedShard{entry.tensor_dim, split_factor}};
    }
  }
  return out;
}

}  // namespace meshsim
