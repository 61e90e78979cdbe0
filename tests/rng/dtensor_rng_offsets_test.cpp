#include "src/rng/dtensor_rng_offsets.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::Placement;
using meshsim::Replicate;
using meshsim::Shard;
using Ints = std::vector<int64_t>;

namespace {

// Every rank of `mesh` in row-major order: (shard index, pre-op increment).
std::vector<std::pair<int64_t, int64_t>> per_rank(const Ints& shape, const Ints& mesh,
                                                  const std::vector<Placement>& placements) {
  int64_t ranks = 1;
  for (int64_t m : mesh) ranks *= m;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t r = 0; r < ranks; ++r) {
    Ints coordinate(mesh.size());
    int64_t rest = r;
    for (size_t d = mesh.size(); d-- > 0;) {
      coordinate[d] = rest % mesh[d];
      rest /= mesh[d];
    }
    const auto o = meshsim::dtensor_rng_offsets(shape, mesh, coordinate, placements);
    out.emplace_back(o.shard_linear_index, o.pre_op_increment);
  }
  return out;
}

Ints indices(const std::vector<std::pair<int64_t, int64_t>>& v) {
  Ints out;
  for (const auto& p : v) out.push_back(p.first);
  return out;
}

Ints pres(const std::vector<std::pair<int64_t, int64_t>>& v) {
  Ints out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

}  // namespace

TEST_CASE("dtensor rng offsets: docs/rng.md 3.3's worked examples", "[rng][dtensor]") {
  const Ints s84{8, 4};
  auto r = per_rank(s84, {4}, {Shard{0}});
  CHECK(indices(r) == Ints{0, 1, 2, 3});
  CHECK(pres(r) == Ints{0, 8, 16, 24});
  CHECK(meshsim::dtensor_rng_offsets(s84, Ints{4}, Ints{0}, std::vector<Placement>{Shard{0}})
            .post_op_increment == 32);
  CHECK(indices(per_rank(s84, {2, 2}, {Shard{0}, Shard{1}})) == Ints{0, 1, 2, 3});
  r = per_rank(s84, {2, 2}, {Replicate{}, Shard{0}});
  CHECK(indices(r) == Ints{0, 1, 0, 1});
  CHECK(pres(r) == Ints{0, 16, 0, 16});
  // Uneven 5x3 over 4: first shard 2 rows of 3.
  r = per_rank({5, 3}, {4}, {Shard{0}});
  CHECK(pres(r) == Ints{0, 8, 12, 20});
  CHECK(meshsim::dtensor_rng_offsets(Ints{5, 3}, Ints{4}, Ints{2}, std::vector<Placement>{Shard{0}})
            .post_op_increment == 16);
  // (2,2,2) [S1, R, S0], 8x16: j = 2 c2 + c0, L0 = 32; rank 5 = (1, 0, 1): j 3, pre 96.
  const auto five =
      meshsim::dtensor_rng_offsets(Ints{8, 16}, Ints{2, 2, 2}, Ints{1, 0, 1},
                                   std::vector<Placement>{Shard{1}, Replicate{}, Shard{0}});
  CHECK(five.shard_linear_index == 3);
  CHECK(five.first_shard_numel == 32);
  CHECK(five.pre_op_increment == 96);
  CHECK(five.post_op_increment == 128);
}

TEST_CASE("dtensor rng offsets: docs/rng.md's other placement tables on a (2,2) mesh",
          "[rng][dtensor]") {
  const Ints s84{8, 4}, m22{2, 2};
  CHECK(indices(per_rank(s84, m22, {Shard{1}, Shard{0}})) == Ints{0, 2, 1, 3});
  CHECK(indices(per_rank(s84, m22, {Shard{0}, Replicate{}})) == Ints{0, 0, 1, 1});
  CHECK(indices(per_rank(s84, m22, {Shard{1}, Replicate{}})) == Ints{0, 0, 1, 1});
  CHECK(indices(per_rank(s84, m22, {Replicate{}, Shard{1}})) == Ints{0, 1, 0, 1});
  CHECK(indices(per_rank(s84, m22, {Replicate{}, Replicate{}})) == Ints{0, 0, 0, 0});
  // Partial draws as if unsharded in PyTorch 2.15 (docs/rng.md says it is refused; the release
  // wins).
  CHECK(indices(per_rank(s84, m22, {meshsim::Partial{}, Shard{0}})) == Ints{0, 1, 0, 1});
}

TEST_CASE("dtensor rng offsets: the quirks the formula produces", "[rng][dtensor]") {
  // A dim sharded twice overstates the first shard: pre 0,16,32,48 while post is 32.
  auto r = per_rank({8, 4}, {2, 2}, {Shard{0}, Shard{0}});
  CHECK(pres(r) == Ints{0, 16, 32, 48});
  // Shards under 4 elements collide: (4,) over 4 ranks gives 0, 4, 4, 4.
  r = per_rank({4}, {4}, {Shard{0}});
  CHECK(pres(r) == Ints{0, 4, 4, 4});
}

TEST_CASE("dtensor rng offsets: strided shards, negative dims and errors", "[rng][dtensor]") {
  // _StridedShard(0, sf=2) of 9 rows over 4: rank 0 holds rows {0, 1, 5}: first shard 3 rows.
  const auto strided = meshsim::dtensor_rng_offsets(
      Ints{9}, Ints{4}, Ints{1}, std::vector<Placement>{meshsim::StridedShard{0, 2}});
  CHECK(strided.first_shard_numel == 3);
  CHECK(strided.pre_op_increment == 4);
  CHECK(
      meshsim::dtensor_rng_offsets(Ints{8, 4}, Ints{2}, Ints{1}, std::vector<Placement>{Shard{-1}})
          .pre_op_increment == 16);
  CHECK_THROWS_WITH(
      meshsim::dtensor_rng_offsets(Ints{8}, Ints{2}, Ints{1}, std::vector<Placement>{Shard{1}}),
      "list index out of range");
  CHECK_THROWS_AS(meshsim::dtensor_rng_offsets(Ints{8}, Ints{2, 2}, Ints{1, 1},
                                               std::vector<Placement>{Shard{0}}),
                  meshsim::Error);
  const int64_t huge = int64_t{1} << 62;
  CHECK_THROWS_WITH(meshsim::dtensor_rng_offsets(Ints{huge, 4}, Ints{2}, Ints{1},
                                                 std::vector<Placement>{Shard{0}}),
                    "a DTensor random op's Philox offset does not fit in int64");
}
