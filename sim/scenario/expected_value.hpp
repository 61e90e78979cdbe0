// The right-hand side of an expectation: a TOML value whose strings may be per-rank expressions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/results.hpp"
#include "sim/scenario/expression.hpp"
#include "sim/scenario/load_context.hpp"

namespace meshsim::sim {

class ExpectedValue {
 public:
  enum class Strings { kExpressions, kLiterals };
  // With kExpressions, strings become per-rank expressions, except "none" (a missing value) and
  // text with characters no expression uses ("[", "]", ".", quotes), which stays text.
  // Lists and tables nest at most kMaxDepth levels, so resolve() (on a rank's fiber) stays shallow.
  static ExpectedValue parse(const toml::node& node, const LoadContext& ctx, Strings strings,
                             size_t depth = 0);
  static constexpr size_t kMaxDepth = 32;
  // The value on one rank, with every expression evaluated.
  Json resolve(const ExpressionEnv& env) const;

 private:
  Json literal_;
  std::optional<Expression> expression_;
  std::optional<std::vector<ExpectedValue>> list_;
  std::optional<std::map<std::string, ExpectedValue>> table_;
};

}  // namespace meshsim::sim
