#include "src/dtensor/placement.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using namespace meshsim;

TEST_CASE("placement: parse and print round trip", "[dtensor][placement]") {
  CHECK(parse_placement("Shard(0)") == Placement{Shard{0}});
  CHECK(parse_placement("S(1)") == Placement{Shard{1}});
  CHECK(parse_placement("Shard(dim=-1)") == Placement{Shard{-1}});
  CHECK(parse_placement("Replicate()") == Placement{Replicate{}});
  CHECK(parse_placement("R") == Placement{Replicate{}});
  CHECK(parse_placement("Partial()") == Placement{Partial{ReduceOp::kSum}});
  CHECK(parse_placement("Partial(\"avg\")") == Placement{Partial{ReduceOp::kAvg}});
  CHECK(parse_placement("_StridedShard(0, split_factor=2)") == Placement{StridedShard{0, 2}});
  CHECK(parse_placement("_StridedShard(dim=1, sf=4)") == Placement{StridedShard{1, 4}});
  for (const char* text : {"Shard(2)", "Replicate()", "Partial(max)", "_StridedShard(0, sf=2)"}) {
    CHECK(placement_name(parse_placement(text)) == text);
  }
}

TEST_CASE("placement: equality by kind and fields", "[dtensor][placement]") {
  CHECK(Placement{Replicate{}} == Placement{Replicate{}});
  CHECK_FALSE(Placement{Shard{0}} == Placement{Shard{1}});
  CHECK_FALSE(Placement{Partial{ReduceOp::kSum}} == Placement{Partial{ReduceOp::kMax}});
  CHECK_FALSE(Placement{Shard{0}} == Placement{StridedShard{0, 1}});
}

TEST_CASE("placement: bad spellings are rejected with a reason", "[dtensor][placement][errors]") {
  // The column is the offending argument's, not the end of the text.
  CHECK_THROWS_WITH(parse_placement("Shard(x)"),
                    "placement \"Shard(x)\": expected an integer dim (got \"x\") at column 7");
  CHECK_THROWS_WITH(
      parse_placement("_StridedShard(0, sf=0)"),
      "placement \"_StridedShard(0, sf=0)\": expected a split_factor >= 1 at column 21");
  CHECK_THROWS_WITH(parse_placement("Shard(0"), Catch::Contains("column"));
  CHECK_THROWS_WITH(parse_placement("Sharded(0)"), Catch::Contains("unknown placement"));
  CHECK_THROWS_WITH(parse_placement("Partial(mean)"), Catch::Contains("unknown reduce op"));
  CHECK_THROWS_WITH(parse_placement("_StridedShard(0, split_factor=0)"),
                    Catch::Contains("split_factor >= 1"));
  // PyTorch's split_factor is keyword-only: a second positional argument is a TypeError.
  CHECK_THROWS_WITH(parse_placement("_StridedShard(0, 2)"),
                    "placement \"_StridedShard(0, 2)\": split_factor is keyword-only (write "
                    "_StridedShard(0, split_factor=2)) at column 18");
  try {
    parse_placement("_StridedShard(0, 2)");
  } catch (const Error& e) {
    CHECK(e.type() == PyErrorType::kTypeError);
  }
  CHECK_THROWS_AS(parse_placement(""), Error);
  // Arguments a placement does not take are refused, not ignored.
  CHECK_THROWS_WITH(parse_placement("Shard(0, 1)"),
                    "placement \"Shard(0, 1)\": expected only dim as the arguments of Shard at "
                    "column 10");
  CHECK_THROWS_WITH(parse_placement("Shard(dim=0, dim=1)"),
                    Catch::Contains("expected dim given once at column 18"));
  CHECK_THROWS_WITH(parse_placement("Replicate(0)"),
                    Catch::Contains("expected no arguments to Replicate"));
  CHECK_THROWS_WITH(parse_placement("Partial(sum, max)"),
                    Catch::Contains("expected only reduce_op as the arguments of Partial"));
  CHECK_THROWS_WITH(parse_placement("_StridedShard(0, split_factor=2, dim=3)"),
                    Catch::Contains("expected dim given once"));
  CHECK_THROWS_WITH(parse_placement("_StridedShard(0, split=2)"),
                    Catch::Contains("expected only dim, split_factor as the arguments"));
  CHECK(parse_placement("_StridedShard(dim=0, sf=2)") == Placement{StridedShard{0, 2}});
  CHECK(parse_placement("_StridedShard(0, split_factor=2)") == Placement{StridedShard{0, 2}});
}
