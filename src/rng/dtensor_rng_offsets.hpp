// Where a DTensor random op draws on one rank (PyTorch's _compute_rng_offsets, docs/rng.md 3.3):
// the rank's shard gets a linear index over all shards, the op starts that many first-shard sizes
// into the generator's stream, and every rank ends past the whole global tensor.
#pragma once

#include <cstdint>
#include <span>

#include "src/dtensor/placement.hpp"

namespace meshsim {

struct DTensorRngOffsets {
  int64_t shard_linear_index = 0;
  int64_t first_shard_numel = 0;  // the numel of shard 0, from the global sizes
  // Added to the generator's offset before the op runs on the rank (`ceil4(j * L0)`), and after
  // it on every rank (`ceil4(numel)`); both multiples of 4.
  int64_t pre_op_increment = 0;
  int64_t post_op_increment = 0;
};

// For the rank at `coordinate` in a mesh of `mesh_shape`, a DTensor of `global_shape` placed by
// `placements` (one per mesh dim). Shard and _StridedShard count; Replicate and Partial do not,
// as in PyTorch 2.15. A tensor dim sharded over several mesh dims indexes them in mesh-dim order,
// and its first-shard size comes from the global size and the last of those mesh dims (the
// quirk that makes such shards overlap the next op's draws). Allocates nothing for Shard.
// Throws meshsim::Error: ValueError when the placements do not match the mesh, IndexError for a
// shard dim outside the tensor, OverflowError when an offset does not fit in int64.
DTensorRngOffsets dtensor_rng_offsets(std::span<const int64_t> global_shape,
                                      std::span<const int64_t> mesh_shape,
                                      std::span<const int64_t> coordinate,
                                      std::span<const Placement> placements);

}  // namespace meshsim
