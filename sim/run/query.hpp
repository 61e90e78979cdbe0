// Observable facts about a rank (its coordinate in a mesh, the groups of a dim, a local shard...),
// shared by the `dump` step and by expectations.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/run/rank_state.hpp"
#include "sim/scenario/expression.hpp"
#include "sim/scenario/load_context.hpp"
#include "src/dtensor/placement.hpp"
#include "src/dtensor/shard_order.hpp"

namespace meshsim::sim {

class Query {
 public:
  // The query keys an [[expect]] table may hold, with what each needs.
  static const std::vector<std::string_view>& keys();
  // Parses the value of query key `key`; throws InputError naming the node.
  static Query parse(std::string_view key, const toml::node& node, LoadContext& ctx);

  Json observe(const RankState& rank) const;
  // The expected value in the form observe() reports: owned indices written as plain index lists
  // per dim become half-open runs [[start, stop], ...].
  Json canonical_expected(Json expected) const;
  // "coordinate(world)", "groups(world, tp)", ...
  std::string describe() const;
  // Whether the observed value is made of integers, so expected strings are expressions.
  bool yields_integers() const;

 private:
  static Query parse_collectives(const toml::node& node, LoadContext& ctx);
  Json observe_collectives(const RankState& rank) const;

  std::string key_;
  std::string mesh_;
  std::string dim_;               // "" = unspecified
  std::string tensor_;            // the `tensor` query's tensor
  std::string other_tensor_;      // the second tensor (or mesh) of `same`
  bool meshes_ = false;           // `same` compares two meshes
  std::optional<int64_t> first_;  // ... and how many of its values
  // The `rng_state` query's generator, `process_groups`' count, the `dtensor` field, the op
  // `collectives` counts ("" for all, per op; "total").
  std::string generator_;
  std::vector<int64_t> global_shape_;
  std::vector<Placement> placements_;
  std::optional<Expression> expression_;
};

// An array of placement strings ("Shard(0)", "Replicate()", ...) for a DTensor on `mesh`: one per
// mesh dim, and, when the tensor's dim count is known, no shard of a dim it does not have (both
// left to the run in an entry with `raises`, where PyTorch raises them).
// InputError at the array or the bad entry.
std::vector<Placement> placements_of(const toml::node& node, const LoadContext& ctx,
                                     const std::string& mesh,
                                     std::optional<size_t> tensor_ndim = std::nullopt);

// shard_order = [{ tensor_dim = 0, mesh_dims = [1, 0] }, ...]: PyTorch's ShardOrderEntry list,
// which turns the placements' Shards into the _StridedShards that encode that order
// (encode_shard_order, applied where the mesh's sizes are known). InputError at the bad entry.
std::vector<ShardOrderEntry> shard_order_of(const toml::node& node, const LoadContext& ctx);

// What the `dtensor` query reports: shape, stride, dtype, placements, shard_order, mesh_shape,
// mesh_dims, local_shape and requires_grad.
const std::vector<std::string>& dtensor_fields();

// What the `layout` query reports of a tensor or view: shape, stride, storage_offset,
// is_contiguous and dtype.
const std::vector<std::string>& layout_fields();

// The first `n` values of a materialized tensor, as the report shows them.
Json first_values(const Tensor& t, int64_t n);

// A tensor or DTensor on one rank (spec, local shard, its first values), for `dump`.
Json describe_value(const RankState& rank, const std::string& name);
// The rank's default generator and DTensor tracker, for `dump`.
Json describe_rng(const RankRng& rng);

// Everything about one mesh on one rank, for `dump`.
Json describe_mesh(const RankState& rank, const std::string& name);

}  // namespace meshsim::sim
