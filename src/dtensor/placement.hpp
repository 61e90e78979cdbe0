// DTensor placements: how a tensor is laid out over one mesh dim.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "src/comm/reduce_op.hpp"

namespace meshsim {

struct Shard {
  int64_t dim;
  friend bool operator==(const Shard&, const Shard&) = default;
};
struct Replicate {
  friend bool operator==(const Replicate&, const Replicate&) = default;
};
struct Partial {
  ReduceOp op = ReduceOp::kSum;
  friend bool operator==(const Partial&, const Partial&) = default;
};
// FSDP over TP: this mesh dim's shard is taken before the later mesh dims that shard the same
// tensor dim, cutting the dim into split_factor groups.
struct StridedShard {
  int64_t dim;
  int64_t split_factor;
  friend bool operator==(const StridedShard&, const StridedShard&) = default;
};

using Placement = std::variant<Shard, Replicate, Partial, StridedShard>;

// Python-like spelling: "Shard(0)", "Replicate()", "Partial(sum)", "_StridedShard(0, sf=2)".
std::string placement_name(const Placement& p);
// As PyTorch's repr() prints it: "Shard(dim=1)", "Replicate()", "_StridedShard(dim=0, sf=2)"; and
// a tuple of them: "(Shard(dim=1), Replicate())".
std::string placement_repr(const Placement& p);
std::string placements_repr(std::span<const Placement> placements);
// As PyTorch's str() prints it in messages: "S(0)", "R", "P(sum)", "_S(0, 2)".
std::string placement_str(const Placement& p);
// A list of them so: "[S(0), R]".
std::string placements_str(std::span<const Placement> placements);
// ValueError, as DTensor.from_local, distribute_tensor and redistribute raise it, when
// `placements` hold Partials of more than one reduce op (sum and avg together are allowed).
void check_no_mixed_partials(const std::vector<Placement>& placements);
// Accepts the spellings above plus "S(0)", "R", "P", "Partial()", "_StridedShard(dim=0,
// split_factor=2)". Throws meshsim::Error (ValueError) naming the column of the problem.
Placement parse_placement(std::string_view text);

// The tensor dim a Shard or StridedShard splits, or -1.
int64_t sharded_dim(const Placement& p);
// Shard(-1) of a `tensor_ndim`-d tensor as Shard(tensor_ndim - 1) (likewise _StridedShard), as
// distribute_tensor, from_local and redistribute normalise it; other placements unchanged.
Placement with_dim_normalized(Placement p, int64_t tensor_ndim);

}  // namespace meshsim
