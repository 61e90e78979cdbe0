// Property: on random expressions, the compiled stack machine (constant folding, short-circuit
// jumps, int64 checks) agrees with a plain recursive evaluator of the same tree written here with
// Python's rules and 128-bit arithmetic: the same value, or a failure of the same kind.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <variant>

#include "sim/scenario/expression.hpp"
#include "src/error.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::sim::Expression;
using meshsim::sim::ExpressionError;

using meshsim::testing::SplitMix;

namespace {

// 128-bit integers hold every exact intermediate of int64 arithmetic (a GCC/clang extension).
__extension__ typedef __int128 Wide;

struct Env : meshsim::sim::ExpressionEnv {
  int64_t r = 0;
  int64_t rank() const override { return r; }
  int64_t world_size() const override { return 8; }
  int64_t coord(const std::string&, const std::string&) const override { return 0; }
  int64_t local_rank(const std::string&, const std::string&) const override { return 0; }
  int64_t mesh_size(const std::string&, const std::string&) const override { return 1; }
};

// A value, or why there is none (the kind of error Python-with-int64 would raise).
enum class Fault { kNone, kOverflow, kZeroDivision };
struct Outcome {
  Wide value = 0;
  Fault fault = Fault::kNone;
};

constexpr Wide kMin = INT64_MIN;
constexpr Wide kMax = INT64_MAX;

Outcome checked(Wide v) {
  return v < kMin || v > kMax ? Outcome{0, Fault::kOverflow} : Outcome{v, Fault::kNone};
}

// A random expression as a tree, rendered to text and evaluated directly.
struct Node {
  std::string op;  // "num", "rank", unary ops, binary ops, "?:", "min", "max", "abs"
  Wide number = 0;
  std::vector<std::unique_ptr<Node>> args;

  std::string text() const {
    if (op == "num") return std::to_string(static_cast<int64_t>(number));
    if (op == "rank") return "rank";
    if (op == "-" && args.size() == 1) return "(-" + args[0]->text() + ")";
    if (op == "not") return "(not " + args[0]->text() + ")";
    if (op == "abs") return "abs(" + args[0]->text() + ")";
    if (op == "min" || op == "max") {
      std::string out = op + "(";
      for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i]->text();
      return out + ")";
    }
    if (op == "?:") {
      return "(" + args[0]->text() + " ? " + args[1]->text() + " : " + args[2]->text() + ")";
    }
    return "(" + args[0]->text() + " " + op + " " + args[1]->text() + ")";
  }

  Outcome eval(int64_t rank) const {
    if (op == "num") return {number};
    if (op == "rank") return {rank};
    const Outcome a = args[0]->eval(rank);
    if (a.fault != Fault::kNone) return a;
    if (op == "and" || op == "or") {
      const bool decided = (a.value != 0) == (op == "or");
      if (decided) return {op == "or" ? 1 : 0};
      const Outcome b = args[1]->eval(rank);
      return b.fault != Fault::kNone ? b : Outcome{b.value != 0 ? 1 : 0};
    }
    if (op == "?:") return args[a.value != 0 ? 1 : 2]->eval(rank);
    if (op == "not") return {a.value == 0 ? 1 : 0};
    if (op == "-" && args.size() == 1) return checked(-a.value);
    if (op == "abs") return checked(a.value < 0 ? -a.value : a.value);
    if (op == "min" || op == "max") {
      Wide out = a.value;
      for (size_t i = 1; i < args.size(); ++i) {
        const Outcome b = args[i]->eval(rank);
        if (b.fault != Fault::kNone) return b;
        out = op == "min" ? std::min(out, b.value) : std::max(out, b.value);
      }
      return {out};
    }
    const Outcome b = args[1]->eval(rank);
    if (b.fault != Fault::kNone) return b;
    const Wide x = a.value, y = b.value;
    if (op == "+") return checked(x + y);
    if (op == "-") return checked(x - y);
    if (op == "*") return checked(x * y);
    if (op == "//" || op == "%") {
      if (y == 0) return {0, Fault::kZeroDivision};
      Wide q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // floor, as Python
      return op == "//" ? checked(q) : checked(x - q * y);
    }
    if (op == "==") return {x == y};
    if (op == "!=") return {x != y};
    if (op == "<") return {x < y};
    if (op == "<=") return {x <= y};
    if (op == ">") return {x > y};
    return {x >= y};
  }
};

std::unique_ptr<Node> random_node(SplitMix& rng, int depth) {
  auto n = std::make_unique<Node>();
  if (depth == 0 || rng.below(4) == 0) {
    if (rng.below(3) == 0) {
      n->op = "rank";
    } else {
      static const int64_t kEdges[] = {0, 1, 2, 3, 7, 4294967296, INT64_MAX, INT64_MAX - 1};
      n->op = "num";
      n->number = rng.below(2) ? kEdges[rng.below(8)] : rng.below(100);
    }
    return n;
  }
  static const char* kBinary[] = {
      "+", "-", "*", "//", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or"};
  switch (rng.below(6)) {
    case 0:
      n->op = rng.below(2) ? "-" : (rng.below(2) ? "not" : "abs");
      n->args.push_back(random_node(rng, depth - 1));
      break;
    case 1:
      n->op = "?:";
      for (int i = 0; i < 3; ++i) n->args.push_back(random_node(rng, depth - 1));
      break;
    case 2:
      n->op = rng.below(2) ? "min" : "max";
      for (int64_t i = 0, k = 1 + rng.below(3); i < k; ++i)
        n->args.push_back(random_node(rng, depth - 1));
      break;
    default:
      n->op = kBinary[rng.below(13)];
      n->args.push_back(random_node(rng, depth - 1));
      n->args.push_back(random_node(rng, depth - 1));
      break;
  }
  return n;
}

// What meshsim says: a value, or the kind of error (at load time or on the rank).
Outcome meshsim_outcome(const std::string& text, int64_t rank) {
  auto kind = [](const std::string& message) {
    return message.find("division by zero") != std::string::npos ? Fault::kZeroDivision
                                                                 : Fault::kOverflow;
  };
  try {
    Env env;
    env.r = rank;
    return {Expression::parse(text).evaluate(env)};
  } catch (const ExpressionError& e) {
    return {0, kind(e.what())};
  } catch (const meshsim::Error& e) {
    return {0, kind(e.what())};
  }
}

}  // namespace

TEST_CASE("expression property: the stack machine agrees with a direct evaluator",
          "[sim][expression][property]") {
  SplitMix rng{20261130};
  for (int trial = 0; trial < 20000; ++trial) {
    const std::unique_ptr<Node> tree = random_node(rng, 1 + static_cast<int>(rng.below(6)));
    const std::string text = tree->text();
    for (int64_t rank : {0, 3}) {
      const Outcome want = tree->eval(rank);
      const Outcome got = meshsim_outcome(text, rank);
      INFO(text << " on rank " << rank);
      REQUIRE(got.fault == want.fault);
      REQUIRE(got.value == want.value);
    }
  }
}
