#include "src/dtensor/shard_order.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::Placement;
using meshsim::Replicate;
using meshsim::Shard;
using meshsim::ShardOrder;
using meshsim::ShardOrderEntry;
using meshsim::StridedShard;
using Placements = std::vector<Placement>;
using Ints = std::vector<int64_t>;

TEST_CASE("shard order: DTensorSpec's worked example on a (4, 3, 2) mesh",
          "[dtensor][shard_order]") {
  // Tensor dim 0 cut by mesh dims 2, 0, 1 in that order: mesh dims 0 and 1 come after mesh dim 2
  // in the order but before it in the mesh, so each is split in mesh dim 2's 2 pieces.
  const Ints mesh{4, 3, 2};
  const Placements plain{Shard{0}, Shard{0}, Shard{0}};
  const std::vector<ShardOrderEntry> order{{0, {2, 0, 1}}};
  const Placements encoded = meshsim::encode_shard_order(plain, order, mesh);
  CHECK(encoded == Placements{StridedShard{0, 2}, StridedShard{0, 2}, Shard{0}});
  CHECK(meshsim::decode_shard_order(encoded, mesh, 1) == ShardOrder{{2, 0, 1}});
  // The default order (left to right) needs no _StridedShard.
  CHECK(meshsim::encode_shard_order(plain, std::vector<ShardOrderEntry>{{0, {0, 1, 2}}}, mesh) ==
        plain);
  CHECK(meshsim::decode_shard_order(plain, mesh, 1) == ShardOrder{{0, 1, 2}});
}

TEST_CASE("shard order: split factors that match no order, and PyTorch's refusals",
          "[dtensor][shard_order]") {
  const Ints mesh{2, 4};
  CHECK_FALSE(meshsim::decode_shard_order(Placements{StridedShard{0, 3}, Shard{0}}, mesh, 1));
  // Two tensor dims, each in its own order; Replicate dims are left alone.
  const Placements two{Shard{1}, Replicate{}};
  CHECK(meshsim::decode_shard_order(two, mesh, 2) == ShardOrder{{}, {0}});
  CHECK_THROWS_WITH(meshsim::encode_shard_order(two, std::vector<ShardOrderEntry>{{1, {1}}}, mesh),
                    "Only Shard placement can be converted to _StridedShard, found Replicate() in "
                    "placements=(Shard(dim=1), Replicate()).");
  CHECK_THROWS_AS(meshsim::encode_shard_order(two, std::vector<ShardOrderEntry>{{1, {2}}}, mesh),
                  meshsim::Error);
}
