// PyTorch 2.15's min-cost redistribute planner, which it uses whenever a layout has a
// _StridedShard (FSDP2 over TP): a Dijkstra search over (placements, shard order) states, one
// mesh dim changing per step, each step priced by DTensor's communication cost model (bytes
// moved over the mesh dim's bandwidth plus latency; a local cut is free, all_to_all is priced as
// an all_gather plus a penalty). meshsim runs the same search
// with the same neighbour order and tie-breaks, so it picks the same path.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "src/dtensor/redistribute.hpp"
#include "src/dtensor/shard_order.hpp"

namespace meshsim {

// This rank's shape of `spec`'s tensor with every tensor dim cut by its mesh dims in `order`,
// the cut of mesh dim `except` left out (PyTorch's logical shape of a step on that mesh dim).
std::vector<int64_t> shape_after_cuts(const DTensorSpec& spec, const ShardOrder& order,
                                      std::optional<size_t> except = std::nullopt);

// The calling rank's plan from `spec` (its placements cut in `from_order`) to `to` cut in
// `to_order`; every cut in both is a Shard (a decoded _StridedShard becomes the Shard of its
// dim). `devices_per_host` shapes the cost model: mesh dims whose ranks span hosts are slower.
// Throws RuntimeError when the search grows past meshsim's bound (65,536 states queued; a mesh of
// up to six dims needs far fewer, one of eight can need more), MemoryError past the budget.
std::vector<RedistributeTransform> plan_min_cost(
    const DTensorSpec& spec, std::span<const Placement> from, const ShardOrder& from_order,
    std::span<const Placement> to, const ShardOrder& to_order, int64_t devices_per_host);

}  // namespace meshsim
