// A name written with expressions of the rank in braces, "rng.pp{coord(world, pp)}": each rank
// resolves it to its own name (a state dict key that differs per pipeline stage, say).
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/scenario/expression.hpp"
#include "sim/scenario/load_context.hpp"

namespace meshsim::sim {

class NameTemplate {
 public:
  // The string at `node`, its `{...}` parts parsed and checked as expressions. InputError at the
  // node for an unclosed or empty brace, a stray '}', or an expression that does not parse.
  static NameTemplate parse(const toml::node& node, const LoadContext& ctx, std::string_view what);

  // The name on the rank `env` describes. Throws what Expression::evaluate throws.
  std::string resolve(const ExpressionEnv& env) const;
  const std::string& text() const { return text_; }
  // Whether the name is the same on every rank (it has no expressions).
  bool constant() const { return expressions_.empty(); }
  // The literal text with `stand_in` for every expression: what checks of the name's characters
  // look at before any rank resolves it.
  std::string with_expressions_as(std::string_view stand_in) const;

 private:
  std::string text_;
  // Literal text and expressions alternate, starting and ending with literal text.
  std::vector<std::string> literals_;
  std::vector<Expression> expressions_;
};

}  // namespace meshsim::sim
