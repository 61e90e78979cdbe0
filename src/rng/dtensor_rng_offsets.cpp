#include "src/rng/dtensor_rng_offsets.hpp"

#include <array>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

namespace {

int64_t require(std::optional<int64_t> v) {
  if (!v) throw overflow_error("a DTensor random op's Philox offset does not fit in int64");
  return *v;
}

int64_t ceil4(int64_t x) {
  return require(checked_add(x, 3)) / 4 * 4;
}

// Rank 0's size along the dim when `p` splits a dim of `n` over `m` ranks.
int64_t first_shard_size(const Placement& p, int64_t n, int64_t m) {
  if (const auto* s = std::get_if<StridedShard>(&p)) {
    // Rare (FSDP over TP); the closed form allocates its small result.
    const int64_t one_dim[] = {n}, mesh[] = {m};
    const Placement strided[] = {StridedShard{0, s->split_factor}};
    return compute_local_shape_and_global_offset(one_dim, mesh, std::vector<int64_t>{0}, strided)
        .shape[0];
  }
  // torch.chunk: pieces of ceil(n / m); rank 0 holds the first (all of n when smaller).
  return n == 0 ? 0 : (n - 1) / m + 1;
}

}  // namespace

DTensorRngOffsets dtensor_rng_offsets(std::span<const int64_t> global_shape,
                                      std::span<const int64_t> mesh_shape,
                                      std::span<const int64_t> coordinate,
                                      std::span<const Placement> placements) {
  if (placements.size() != mesh_shape.size() || coordinate.size() != mesh_shape.size()) {
    throw value_error(fmt::format("{} placements and a {}-coordinate for a {}-d mesh",
                                  placements.size(), coordinate.size(), mesh_shape.size()));
  }
  const auto ndim = static_cast<int64_t>(global_shape.size());
  MESHSIM_ASSERT(global_shape.size() <= Tensor::kMaxDims,
                 fmt::format("a {}-d tensor", global_shape.size()));
  // Per tensor dim: the shard index and the number of shards, over the mesh dims sharding it in
  // mesh-dim order; and the first shard's size.
  // Only the first ndim entries are used, and set here (no zeroing of the rest: this runs on
  // every random op).
  std::array<int64_t, Tensor::kMaxDims> index, shards, first;
  for (int64_t d = 0; d < ndim; ++d) {
    index[static_cast<size_t>(d)] = 0;
    shards[static_cast<size_t>(d)] = 1;
    first[static_cast<size_t>(d)] = global_shape[static_cast<size_t>(d)];
  }
  for (size_t i = 0; i < placements.size(); ++i) {
    if (!std::holds_alternative<Shard>(placements[i]) &&
        !std::holds_alternative<StridedShard>(placements[i])) {
      continue;  // Replicate and Partial draw as if unsharded
    }
    const int64_t dim = sharded_dim(placements[i]);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim) throw Error(PyErrorType::kIndexError, "list index out of range");
    const auto k = static_cast<size_t>(d);
    index[k] = require(checked_add(require(checked_mul(index[k], mesh_shape[i])), coordinate[i]));
    shards[k] = require(checked_mul(shards[k], mesh_shape[i]));
    first[k] = first_shard_size(placements[i], global_shape[k], mesh_shape[i]);
  }
  DTensorRngOffsets out;
  int64_t stride = 1, numel = 1, first_numel = 1;
  for (int64_t d = ndim; d-- > 0;) {
    const auto k = static_cast<size_t>(d);
    out.shard_linear_index =
        require(checked_add(out.shard_linear_index, require(checked_mul(index[k], stride))));
    stride = require(checked_mul(stride, shards[k]));
    numel = require(checked_mul(numel, global_shape[k]));
    first_numel = require(checked_mul(first_numel, first[k]));
  }
  out.first_shard_numel = first_numel;
  out.pre_op_increment = ceil4(require(checked_mul(out.shard_linear_index, first_numel)));
  out.post_op_increment = ceil4(numel);
  return out;
}

}  // namespace meshsim
