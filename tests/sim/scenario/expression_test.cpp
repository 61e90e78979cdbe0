#include "sim/scenario/expression.hpp"

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

namespace {

// The error an evaluation raises, as "Type: message".
std::string eval_error(const std::string& text) {
  try {
    Expression::parse(text).evaluate(FakeEnv{});
  } catch (const meshsim::Error& e) {
    return std::string(meshsim::py_error_type_name(e.type())) + ": " + e.what();
  }
  return "no error";
}

std::string parse_error(const std::string& text) {
  try {
    Expression::parse(text);
  } catch (const ExpressionError& e) {
    return std::to_string(e.offset()) + ": " + e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("expression: int64 limits are errors, never wrapped values", "[sim][expression]") {
  CHECK(eval("9223372036854775807") == INT64_MAX);
  CHECK(eval("-9223372036854775807 - 1") == INT64_MIN);
  CHECK(parse_error("9223372036854775808") ==
        "0: integer literal is too large (the largest is "
        "9223372036854775807)");
  // Constant parts fold at load time, so their overflow is a load-time error with its column.
  CHECK(parse_error("4294967296*4294967296") ==
        "10: integer overflow in '*': the result does not fit in int64");
  CHECK(parse_error("abs(-9223372036854775807 - 1)") ==
        "0: integer overflow in 'abs': the result does not fit in int64");
  CHECK(parse_error("(-9223372036854775807 - 1) // -1").find("overflow in '//'") !=
        std::string::npos);
  CHECK(parse_error("1 // 0") == "2: division by zero");
  CHECK(parse_error("1 % 0") == "2: division by zero");
  // Python's answer: x % -1 is 0 for every x, INT64_MIN included.
  CHECK(eval("(-9223372036854775807 - 1) % -1") == 0);
  // Rank-dependent parts fail on the rank, with a Python error type and the column.
  CHECK(eval_error("rank * 4611686018427387904") ==
        "OverflowError: integer overflow in '*' at column 6 of \"rank * 4611686018427387904\": "
        "the result does not fit in int64");
  CHECK(eval_error("-(rank - 9223372036854775807 - 1 - 5)").rfind("OverflowError", 0) == 0);
  CHECK(eval_error("(rank - 5 - 9223372036854775807 - 1) // -1").rfind("OverflowError", 0) == 0);
  CHECK(eval_error("abs(rank - 5 - 9223372036854775807 - 1)").rfind("OverflowError", 0) == 0);
  CHECK(eval_error("(rank + 9223372036854775807)").rfind("OverflowError", 0) == 0);
  CHECK(eval_error("rank % (rank - 5)") ==
        "ZeroDivisionError: division by zero at column 6 of \"rank % (rank - 5)\"");
}

TEST_CASE("expression: nesting is bounded and long chains evaluate without recursion",
          "[sim][expression]") {
  const size_t limit = Expression::kMaxNesting;
  // Parentheses, unary operators and ternaries up to the limit work...
  CHECK(eval((std::string(limit - 1, '(') + "rank" + std::string(limit - 1, ')')).c_str()) == 5);
  // ...and one level more is a load-time error at the offending character.
  const std::string deep = std::string(10000, '(') + "1" + std::string(10000, ')');
  CHECK(parse_error(deep) == std::to_string(limit) +
                                 ": expression nests deeper than 64 "
                                 "levels (parentheses, unary operators, "
                                 "ternaries and calls)");
  std::string minuses;
  for (int i = 0; i < 500; ++i) minuses += "-";
  CHECK(parse_error(minuses + "rank").find("nests deeper than 64 levels") != std::string::npos);
  std::string nots;
  for (int i = 0; i < 500; ++i) nots += "not ";
  CHECK(parse_error(nots + "rank").find("nests deeper than 64 levels") != std::string::npos);
  // A flat chain is not nesting: 100,000 terms evaluate on an explicit stack.
  std::string chain = "rank";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  CHECK(eval(chain.c_str()) == 100005);
  std::string ors = "rank == 0";
  for (int i = 1; i < 20000; ++i) ors += " or rank == " + std::to_string(i);
  CHECK(eval(ors.c_str()) == 1);
}

TEST_CASE("expression: branches never taken never fail, as in Python", "[sim][expression]") {
  CHECK(Expression::parse("0 and 1 // 0").constant_value() == 0);
  CHECK(Expression::parse("1 or 9223372036854775807 + 1").constant_value() == 1);
  CHECK(Expression::parse("1 ? 7 : 1 // 0").constant_value() == 7);
  CHECK(Expression::parse("1 and 0 or 5").constant_value() == 1);
  CHECK(eval("0 ? 1 // 0 : (rank == 5 or rank // 0)") == 1);  // jumps move with the kept branch
  // Rank-dependent: only the ranks that take the branch fail, with the column.
  CHECK(eval("rank < 6 or 9223372036854775807 + 1") == 1);
  CHECK(eval_error("rank > 6 or 9223372036854775807 + 1") ==
        "OverflowError: integer overflow in '+' at column 33 of \"rank > 6 or 9223372036854775807 "
        "+ 1\": the result does not fit in int64");
  // A fault every rank reaches is a load-time error.
  CHECK(parse_error("rank + 1 // 0") == "9: division by zero");
  // Python chains comparisons (3 > 2 > 1 is True); meshsim refuses rather than answer otherwise.
  CHECK(parse_error("3 > 2 > 1") ==
        "6: chained comparisons (a < b < c) are not supported; write a < b and b < c");
}

TEST_CASE("expression: constants fold, rank-dependent parts stay", "[sim][expression]") {
  CHECK(Expression::parse("2 * (3 + 4) - 1").constant_value() == 13);
  CHECK(Expression::parse("1 ? 2 : 3").constant_value() == 2);
  CHECK(Expression::parse("0 and rank").constant_value() == 0);  // the left side decides
  CHECK(Expression::parse("1 and rank").constant_value() == std::nullopt);
  CHECK(Expression::parse("min(4, 2, 9)").constant_value() == 2);
  CHECK(Expression::parse("rank + 1").constant_value() == std::nullopt);
  // Short-circuit: the right side is not evaluated when the left decides.
  CHECK(eval("rank == 5 or rank // 0") == 1);
  CHECK(eval("rank != 5 and rank // 0") == 0);
  CHECK(eval("rank == 5 ? 7 : rank // 0") == 7);
  CHECK(eval("min(rank, 3) + max(rank, 3, 4)") == 8);
  CHECK(parse_error("coord(world, (1))") == "13: coord() takes a dim name or index after the mesh");
}
