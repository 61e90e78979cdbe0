#include "src/mesh/axis.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::Axis;

TEST_CASE("axis: canonical form coalesces and drops size-1 modes (docs/mesh.md 1)",
          "[mesh][axis]") {
  CHECK(Axis::parse("(3,2):(2,1)").to_string() == "(6:1)");
  CHECK(Axis::parse("(3,2):(4,1)").to_string() == "(3,2):(4,1)");
  CHECK(Axis::parse("(1,3,1,5,1):(0,10,17,2,1)").to_string() == "(15:2)");
  CHECK(Axis::parse("((7,(5,3)),2):((30,(6,2)),1)").to_string() == "(210:1)");
  CHECK(Axis::parse("(1,1):(5,7)").to_string() == "():()");
  CHECK(Axis::parse("(1,1):(5,7)").numel() == 1);
}

TEST_CASE("axis: codomain enumerates with the last mode fastest, unsorted", "[mesh][axis]") {
  CHECK(Axis::parse("(2,2):(2,4)").codomain() == std::vector<int64_t>{0, 4, 2, 6});
  CHECK(Axis::parse("(3:2)").codomain() == std::vector<int64_t>{0, 2, 4});
}

TEST_CASE("axis: complement tiles the world (docs/mesh.md 1 checks)", "[mesh][axis]") {
  CHECK(Axis::parse("(4:2)").complement(8).to_string() == "(2:1)");
  CHECK(Axis::parse("(4:2)").complement(16).to_string() == "(2,2):(8,1)");
  CHECK(Axis::parse("(4:2)").complement(16).codomain() == std::vector<int64_t>{0, 1, 8, 9});
  CHECK(Axis::parse("(2,2):(4,1)").complement(16).to_string() == "(2,2):(8,2)");
  CHECK(Axis::parse("(2,2):(4,1)").complement(16).codomain() == std::vector<int64_t>{0, 2, 8, 10});
  CHECK(Axis::parse("(2,2):(2,4)").complement(16).to_string() == "(2,2):(8,1)");
}

TEST_CASE("axis: split is composition with a row-major layout", "[mesh][axis]") {
  const std::vector<int64_t> sizes{2, 2};
  const auto parts = Axis::parse("(4:2)").split(sizes);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].to_string() == "(2:4)");
  CHECK(parts[1].to_string() == "(2:2)");
  // A non-contiguous flattened axis splits along its modes.
  const auto modes = Axis::parse("(2,2):(4,1)").split(sizes);
  CHECK(modes[0].to_string() == "(2:4)");
  CHECK(modes[1].to_string() == "(2:1)");
  const std::vector<int64_t> bad{3};
  CHECK_THROWS_AS(Axis::parse("(4:2)").split(bad), meshsim::Error);
}

TEST_CASE("axis: orthogonality and sortedness (docs/mesh.md 1)", "[mesh][axis]") {
  for (const char* yes : {"(2,3):(6,1)", "(2,3):(3,1)", "(2,2,2):(4,1,2)"}) {
    INFO(yes);
    CHECK(Axis::parse(yes).is_orthogonal());
  }
  for (const char* no : {"(2,3):(2,1)", "(2,3):(1,1)", "(3,2):(2,3)"}) {
    INFO(no);
    CHECK_FALSE(Axis::parse(no).is_orthogonal());
  }
  CHECK(Axis::parse("(2,3):(6,1)").is_non_increasing());
  CHECK(Axis::parse("(2,2):(1,1)").is_non_increasing());  // ties pass, as in PyTorch
  CHECK_FALSE(Axis::parse("(2,2):(1,4)").is_non_increasing());
}

TEST_CASE("axis: parse rejects malformed layouts with the column", "[mesh][axis][errors]") {
  CHECK_THROWS_WITH(Axis::parse("(2,3):(1)"), Catch::Contains("2 sizes but 1 strides"));
  CHECK_THROWS_WITH(Axis::parse("(2,3:(1,1)"), Catch::Contains("column"));
  CHECK_THROWS_WITH(Axis::parse("(0:1)"), Catch::Contains("size must be >= 1"));
  CHECK_THROWS_AS(Axis::parse(""), meshsim::Error);
}
