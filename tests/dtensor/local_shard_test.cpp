#include "src/dtensor/local_shard.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using namespace meshsim;
using Ints = std::vector<int64_t>;

namespace {

std::vector<Placement> parse_all(const std::vector<std::string>& texts) {
  std::vector<Placement> out;
  for (const std::string& t : texts) out.push_back(parse_placement(t));
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

TEST_CASE("local_shard: mesh (4,) Shard(0), even, uneven and empty (docs/mesh.md 3)",
          "[dtensor][local_shard]") {
  const auto s0 = parse_all({"Shard(0)"});
  CHECK(table_1d({8}, {4}, s0) == Strings{"2@0", "2@2", "2@4", "2@6"});
  CHECK(table_1d({10}, {4}, s0) == Strings{"3@0", "3@3", "3@6", "1@9"});
  CHECK(table_1d({5}, {4}, s0) == Strings{"2@0", "2@2", "1@4", "0@5"});
  CHECK(table_1d({2}, {4}, s0) == Strings{"1@0", "1@1", "0@2", "0@2"});
}

TEST_CASE("local_shard: one tensor dim sharded by two mesh dims (docs/mesh.md 3)",
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

TEST_CASE("local_shard: mesh (2,3) [S0,S1] on (5,7) (docs/mesh.md 3)", "[dtensor][local_shard]") {
  const auto p = parse_all({"Shard(0)", "Shard(1)"});
  const std::vector<LocalShard> expected{{{3, 3}, {0, 0}}, {{3, 3}, {0, 3}}, {{3, 1}, {0, 6}},
                                         {{2, 3}, {3, 0}}, {{2, 3}, {3, 3}}, {{2, 1}, {3, 6}}};
  for (int64_t r = 0; r < 6; ++r) {
    INFO("rank " << r);
    CHECK(compute_local_shape_and_global_offset(Ints{5, 7}, Ints{2, 3}, coordinate_of(r, {2, 3}),
                                                p) == expected[static_cast<size_t>(r)]);
  }
}

TEST_CASE("local_shard: mesh (2,4) [S0,R] on (24,24) (docs/mesh.md 3)", "[dtensor][local_shard]") {
  const auto p = parse_all({"Shard(0)", "Replicate()"});
  for (int64_t r = 0; r < 8; ++r) {
    CHECK(compute_local_shape_and_global_offset(Ints{24, 24}, Ints{2, 4}, coordinate_of(r, {2, 4}),
                                                p) == LocalShard{{12, 24}, {12 * (r / 4), 0}});
  }
}

TEST_CASE("local_shard: strided shard then shard, FSDP over TP (docs/mesh.md 3)",
          "[dtensor][local_shard]") {
  const auto p = parse_all({"_StridedShard(0, split_factor=2)", "Shard(0)"});
  const std::vector<Ints> rows{{0, 1}, {4, 5}, {2, 3}, {6, 7}};
  for (int64_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const auto owned = owned_indices(Ints{8}, Ints{2, 2}, coordinate_of(r, {2, 2}), p);
    CHECK(owned[0].expand() == rows[static_cast<size_t>(r)]);
    CHECK(compute_local_shape_and_global_offset(Ints{8}, Ints{2, 2}, coordinate_of(r, {2, 2}), p) ==
          LocalShard{{2}, {rows[static_cast<size_t>(r)][0]}});
  }
  // The strided step alone keeps piece a of every group.
  const auto alone = parse_all({"_StridedShard(0, split_factor=2)", "Replicate()"});
  CHECK(owned_indices(Ints{8}, Ints{2, 2}, Ints{0, 0}, alone)[0].expand() == Ints{0, 1, 4, 5});
  CHECK(owned_indices(Ints{8}, Ints{2, 2}, Ints{1, 0}, alone)[0].expand() == Ints{2, 3, 6, 7});
}

namespace {

// The rows each rank of a mesh holds, in rank order.
std::vector<Ints> rows_by_rank(int64_t rows, const Ints& mesh, const std::vector<std::string>& p) {
  std::vector<Ints> out;
  int64_t ranks = 1;
  for (int64_t m : mesh) ranks *= m;
  for (int64_t r = 0; r < ranks; ++r) {
    out.push_back(
        owned_indices(Ints{rows}, mesh, coordinate_of(r, mesh), parse_all(p))[0].expand());
  }
  return out;
}

}  // namespace

TEST_CASE("local_shard: uneven strided shards split in two torch.chunk steps (docs/mesh.md 3)",
          "[dtensor][local_shard]") {
  // The spec's example: groups {0..4}, {5..8}, each cut into 4.
  CHECK(rows_by_rank(9, {4}, {"_StridedShard(0, split_factor=2)"}) ==
        std::vector<Ints>{{0, 1, 5}, {2, 3, 6}, {4, 7}, {8}});
  CHECK(compute_local_shape_and_global_offset(Ints{9}, Ints{4}, Ints{3},
                                              parse_all({"_StridedShard(0, split_factor=2)"})) ==
        LocalShard{{1}, {8}});
  // What PyTorch 2.15 gives for these (checked with its fake process group).
  const std::vector<std::string> fsdp_tp2{"_StridedShard(0, split_factor=2)", "Shard(0)"};
  CHECK(rows_by_rank(7, {2, 2}, fsdp_tp2) == std::vector<Ints>{{0, 1}, {4, 5}, {2, 3}, {6}});
  CHECK(rows_by_rank(3, {2, 2}, fsdp_tp2) == std::vector<Ints>{{0}, {2}, {1}, {}});
  const std::vector<std::string> fsdp_tp3{"_StridedShard(0, split_factor=3)", "Shard(0)"};
  CHECK(rows_by_rank(10, {2, 2}, fsdp_tp3) ==
        std::vector<Ints>{{0, 1, 4}, {5, 8}, {2, 3, 6}, {7, 9}});
  CHECK(rows_by_rank(13, {2, 3}, fsdp_tp3) ==
        std::vector<Ints>{{0, 1, 2}, {5, 6, 7}, {10, 11}, {3, 4}, {8, 9}, {12}});
  CHECK(rows_by_rank(5, {2, 2}, {"Shard(0)", "_StridedShard(0, split_factor=2)"}) ==
        std::vector<Ints>{{0, 2}, {1}, {3, 4}, {}});
  // A split factor far beyond the rows: one row per piece, all kept by coordinate 0.
  CHECK(rows_by_rank(5, {4}, {"_StridedShard(0, split_factor=1000)"}) ==
        std::vector<Ints>{{0, 1, 2, 3, 4}, {}, {}, {}});
  CHECK(compute_local_shape_and_global_offset(Ints{5}, Ints{4}, Ints{2},
                                              parse_all({"_StridedShard(0, split_factor=1000)"})) ==
        LocalShard{{0}, {5}});
}

TEST_CASE("local_shard: huge dims cost runs, not indices", "[dtensor][local_shard][limits]") {
  const int64_t rows = 100'000'000'000;  // 1e11
  const auto owned = owned_indices(Ints{rows, 7}, Ints{2, 4}, Ints{1, 3},
                                   parse_all({"Shard(0)", "_StridedShard(0, split_factor=2)"}));
  // Rank (1, 3) holds the last quarter of each half of the second half of the rows.
  CHECK(owned[0].runs() == std::vector<IndexRuns::Run>{{68'750'000'000, 75'000'000'000},
                                                       {93'750'000'000, 100'000'000'000}});
  CHECK(owned[1].runs() == std::vector<IndexRuns::Run>{{0, 7}});
  // A split factor of 2^63-1 finishes at once: every row is a piece of its own.
  const std::vector<Placement> huge{StridedShard{0, INT64_MAX}};
  CHECK(owned_indices(Ints{rows}, Ints{4}, Ints{0}, huge)[0].runs() ==
        std::vector<IndexRuns::Run>{{0, rows}});
  CHECK(owned_indices(Ints{rows}, Ints{4}, Ints{1}, huge)[0].empty());
  // Listing a dim cut into millions of runs is refused, not attempted...
  const std::vector<Placement> fine{StridedShard{0, 50'000'000}};
  CHECK_THROWS_WITH(owned_indices(Ints{rows}, Ints{3}, Ints{1}, fine),
                    "_StridedShard(0, sf=50000000) cuts a dim of 100000000000 into 50000000 "
                    "separate runs on this rank; meshsim lists at most 65536");
  // ...but its shape and offset come in closed form: 50,000,000 pieces of 2,000 rows, each cut
  // into 3 (667, 667, 666): rank 1 keeps rows 667..1333 of each.
  CHECK(compute_local_shape_and_global_offset(Ints{rows}, Ints{3}, Ints{1}, fine) ==
        LocalShard{{50'000'000LL * 667}, {667}});
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
  // PyTorch's compute_local_shape_and_global_offset fails indexing the shape.
  CHECK_THROWS_WITH(
      compute_local_shape_and_global_offset(Ints{8}, Ints{4}, Ints{0}, parse_all({"Shard(1)"})),
      "tuple index out of range (Shard(1) on mesh dim 0 of a 1-d tensor)");
}

TEST_CASE("index runs: slices, merging and impossible indices", "[dtensor][index_runs]") {
  IndexRuns runs = IndexRuns::range(10).slice(2, 3);  // 2, 3, 4
  runs.append(IndexRuns::range(10).slice(5, 2));      // 5, 6: merges into one run
  runs.append(IndexRuns::range(10).slice(8, 5));      // 8, 9 (clamped)
  CHECK(runs.runs() == std::vector<IndexRuns::Run>{{2, 7}, {8, 10}});
  CHECK(runs.size() == 7);
  CHECK(runs.slice(4, 2).expand() == Ints{6, 8});  // across the gap
  CHECK(IndexRuns::from_indices({5, 6, 1})->runs() ==
        std::vector<IndexRuns::Run>{{5, 7}, {1, 2}});  // local order kept
  CHECK_FALSE(IndexRuns::from_indices({INT64_MAX}).has_value());
  CHECK_FALSE(IndexRuns::from_indices({-1}).has_value());
}
