#include "src/dtensor/local_shard.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using namespace meshsim;
using Ints = std::vector<int64_t>;

namespace {

std::vector<Placement> parse_all(std::initializer_list<const char*> texts) {
  std::vector<Placement> out;
  for (const char* t : texts) out.push_back(parse_placement(t));
  return out;
}

// Coordinate of rank r in a row-major mesh.
Ints coordinate_of(int64_t r, const Ints& mesh) {
  Ints c(mesh.size());
  for (size_t d = mesh.size(); d-- > 0;) {
    c[d] = r % mesh[d];
    r /= mesh[d];
  }
  return c;
}

// "size@offset" for 1-D cases, per rank.
std::vector<std::string> table_1d(const Ints& global, const Ints& mesh,
                                  const std::vector<Placement>& placements) {
  std::vector<std::string> out;
  int64_t ranks = 1;
  for (int64_t m : mesh) ranks *= m;
  for (int64_t r = 0; r < ranks; ++r) {
    const LocalShard s =
        compute_local_shape_and_global_offset(global, mesh, coordinate_of(r, mesh), placements);
    out.push_back(std::to_string(s.shape[0]) + "@" + std::to_string(s.offset[0]));
  }
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("local_shard: mesh (4,) Shard(0), even, uneven and empty (mesh.md 3)",
          "[dtensor][local_shard]") {
  const auto s0 = parse_all({"Shard(0)"});
  CHECK(table_1d({8}, {4}, s0) == Strings{"2@0", "2@2", "2@4", "2@6"});
  CHECK(table_1d({10}, {4}, s0) == Strings{"3@0", "3@3", "3@6", "1@9"});
  CHECK(table_1d({5}, {4}, s0) == Strings{"2@0", "2@2", "1@4", "0@5"});
  CHECK(table_1d({2}, {4}, s0) == Strings{"1@0", "1@1", "0@2", "0@2"});
}

TEST_CASE("local_shard: one tensor dim sharded by two mesh dims (mesh.md 3)",
          "[dtensor][local_shard]") {
  CHECK(table_1d({5}, {2, 2}, parse_all({"Shard(0)", "Shard(0)"})) ==
        Strings{"2@0", "1@2", "1@3", "1@4"});
  const auto s1s1 = parse_all({"Shard(1)", "Shard(1)"});
  const std::vector<LocalShard> expected{
      {{2, 2}, {0, 0}}, {{2, 1}, {0, 2}}, {{2, 1}, {0, 3}}, {{2, 1}, {0, 4}}};
  for (int64_t r = 0; r < 4; ++r) {
    CHECK(compute_local_shape_and_global_offset(Ints{2, 5}, Ints{2, 2}, coordinate_of(r, {2, 2}),
                                                s1s1) == expected[static_cast<size_t>(r)]);
  }
}

TEST_CASE("local_shard: mesh (2,3) [S0,S1] on (5,7) (mesh.md 3)", "[dtensor][local_shard]") {
  const auto p = parse_all({"Shard(0)", "Shard(1)"});
  const std::vector<LocalShard> expected{{{3, 3}, {0, 0}}, {{3, 3}, {0, 3}}, {{3, 1}, {0, 6}},
                                         {{2, 3}, {3, 0}}, {{2, 3}, {3, 3}}, {{2, 1}, {3, 6}}};
  for (int64_t r = 0; r < 6; ++r) {
    INFO("rank " << r);
    CHECK(compute_local_shape_and_global_offset(Ints{5, 7}, Ints{2, 3}, coordinate_of(r, {2, 3}),
                                                p) == expected[static_cast<size_t>(r)]);
  }
}

TEST_CASE("local_shard: mesh (2,4) [S0,R] on (24,24) (mesh.md 3)", "[dtensor][local_shard]") {
  const auto p = parse_all({"Shard(0)", "Replicate()"});
  for (int64_t r = 0; r < 8; ++r) {
    CHECK(compute_local_shape_and_global_offset(Ints{24, 24}, Ints{2, 4}, coordinate_of(r, {2, 4}),
                                                p) == LocalShard{{12, 24}, {12 * (r / 4), 0}});
  }
}

TEST_CASE("local_shard: strided shard then shard, FSDP over TP (mesh.md 3)",
          "[dtensor][local_shard]") {
  const auto p = parse_all({"_StridedShard(0, split_factor=2)", "Shard(0)"});
  const std::vector<Ints> rows{{0, 1}, {4, 5}, {2, 3}, {6, 7}};
  for (int64_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const auto owned = owned_indices(Ints{8}, Ints{2, 2}, coordinate_of(r, {2, 2}), p);
    CHECK(owned[0] == rows[static_cast<size_t>(r)]);
    CHECK(compute_local_shape_and_global_offset(Ints{8}, Ints{2, 2}, coordinate_of(r, {2, 2}), p) ==
          LocalShard{{2}, {rows[static_cast<size_t>(r)][0]}});
  }
  // The strided step alone keeps piece a of every group.
  const auto alone = parse_all({"_StridedShard(0, split_factor=2)", "Replicate()"});
  CHECK(owned_indices(Ints{8}, Ints{2, 2}, Ints{0, 0}, alone)[0] == Ints{0, 1, 4, 5});
  CHECK(owned_indices(Ints{8}, Ints{2, 2}, Ints{1, 0}, alone)[0] == Ints{2, 3, 6, 7});
}

TEST_CASE("local_shard: Partial and Replicate keep the whole tensor; non-members get ((0,), ())",
          "[dtensor][local_shard]") {
  CHECK(compute_local_shape_and_global_offset(Ints{3, 4}, Ints{2}, Ints{1},
                                              parse_all({"Partial(sum)"})) ==
        LocalShard{{3, 4}, {0, 0}});
  CHECK(compute_local_shape_and_global_offset(Ints{8}, Ints{4}, std::nullopt,
                                              parse_all({"Shard(0)"})) == LocalShard{{0}, {}});
  CHECK(compute_local_shape_and_global_offset(
            Ints{6, 4}, Ints{2}, Ints{1}, parse_all({"Shard(-1)"})) == LocalShard{{6, 2}, {0, 2}});
}

TEST_CASE("local_shard: placements that do not fit are errors", "[dtensor][local_shard][errors]") {
  CHECK_THROWS_WITH(compute_local_shape_and_global_offset(Ints{8}, Ints{2, 2}, Ints{0, 0},
                                                          parse_all({"Shard(0)"})),
                    "1 placements given for a 2-d mesh");
  CHECK_THROWS_WITH(
      compute_local_shape_and_global_offset(Ints{8}, Ints{4}, Ints{0}, parse_all({"Shard(1)"})),
      "Shard(1) on mesh dim 0 is out of range for a 1-d tensor");
}
