#include "sim/expression.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::sim::Expression;
using meshsim::sim::ExpressionError;

namespace {

// Rank 5 of 8 in a (2,2,2) mesh "world" with dims pp, dp, tp.
struct FakeEnv : meshsim::sim::ExpressionEnv {
  int64_t rank() const override { return 5; }
  int64_t world_size() const override { return 8; }
  int64_t coord(const std::string& mesh, const std::string& dim) const override {
    if (mesh != "world") throw meshsim::runtime_error("no mesh " + mesh);
    return dim == "pp" ? 1 : dim == "dp" ? 0 : 1;
  }
  int64_t local_rank(const std::string& mesh, const std::string& dim) const override {
    return coord(mesh, dim);
  }
  int64_t mesh_size(const std::string&, const std::string& dim) const override {
    return dim.empty() ? 8 : 2;
  }
};

struct FakeSchema : meshsim::sim::ExpressionSchema {
  std::optional<std::vector<std::string>> mesh_dims(const std::string& mesh) const override {
    if (mesh == "world") return std::vector<std::string>{"pp", "dp", "tp"};
    return std::nullopt;
  }
};

int64_t eval(const char* text) {
  return Expression::parse(text).evaluate(FakeEnv{});
}

size_t error_offset(const char* text) {
  try {
    Expression::parse(text).check(FakeSchema{});
  } catch (const ExpressionError& e) {
    return e.offset();
  }
  FAIL("no error for " << text);
  return 0;
}

}  // namespace

TEST_CASE("expression: arithmetic follows Python integer semantics", "[sim][expression]") {
  CHECK(eval("1 + 2 * 3") == 7);
  CHECK(eval("(1 + 2) * 3") == 9);
  CHECK(eval("-7 / 2") == -4);
  CHECK(eval("-7 // 2") == -4);
  CHECK(eval("-7 % 3") == 2);
  CHECK(eval("7 % -3") == -2);
  CHECK(eval("rank / 2 % 2") == 0);
  CHECK(eval("- -3") == 3);
}

TEST_CASE("expression: comparisons, logic and the ternary", "[sim][expression]") {
  CHECK(eval("rank != 3") == 1);
  CHECK(eval("rank >= 5 and rank < 6") == 1);
  CHECK(eval("rank == 1 || rank == 5") == 1);
  CHECK(eval("not (rank > 4)") == 0);
  CHECK(eval("!false") == 1);
  CHECK(eval("rank < 4 ? 10 : 20") == 20);
  CHECK(eval("1 ? 2 ? 3 : 4 : 5") == 3);
}

TEST_CASE("expression: rank, mesh functions and helpers", "[sim][expression]") {
  CHECK(eval("123 + coord(world, pp)") == 124);
  CHECK(eval("coord('world', tp)") == 1);
  CHECK(eval("local_rank(world, dp)") == 0);
  CHECK(eval("size(world)") == 8);
  CHECK(eval("size(world, 0)") == 2);
  CHECK(eval("world_size - rank") == 3);
  CHECK(eval("min(3, rank, 9)") == 3);
  CHECK(eval("max(3, rank, 9)") == 9);
  CHECK(eval("abs(-4)") == 4);
  CHECK(Expression::parse("1 + 2").is_constant());
  CHECK_FALSE(Expression::parse("rank").is_constant());
}

TEST_CASE("expression: errors point at the offending character", "[sim][expression][errors]") {
  CHECK(error_offset("rank +* 2") == 6);
  CHECK(error_offset("rnk + 1") == 0);
  CHECK(error_offset("coord(world, xx)") == 13);
  CHECK(error_offset("coord(nowhere, pp)") == 6);
  CHECK(error_offset("coord(world)") == 0);
  CHECK(error_offset("frob(1)") == 0);
  CHECK(error_offset("(1 + 2") == 6);
  CHECK(error_offset("1 = 2") == 2);
  CHECK(error_offset("12abc") == 2);
  CHECK(error_offset("") == 0);
  CHECK(error_offset("99999999999999999999") == 0);
  CHECK_THROWS_WITH(eval("rank / (rank - 5)"), Catch::Contains("division by zero at column 6"));
}
