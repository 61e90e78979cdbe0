#include "sim/scenario/name_template.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

NameTemplate NameTemplate::parse(const toml::node& node, const LoadContext& ctx,
                                 std::string_view what) {
  NameTemplate out;
  out.text_ = ctx.string_of(node, what);
  const std::string& text = out.text_;
  std::string literal;
  for (size_t at = 0; at < text.size(); ++at) {
    if (text[at] == '}')
      ctx.fail(node, fmt::format("{}: '}}' at column {} closes nothing", what, at + 1));
    if (text[at] != '{') {
      literal += text[at];
      continue;
    }
    const size_t close = text.find('}', at);
    if (close == std::string::npos)
      ctx.fail(node, fmt::format("{}: '{{' at column {} is never closed", what, at + 1));
    const std::string inside = text.substr(at + 1, close - at - 1);
    if (inside.find('{') != std::string::npos || inside.empty())
      ctx.fail(node, fmt::format("{}: '{{' at column {} holds no expression", what, at + 1));
    try {
      Expression e = Expression::parse(inside);
      e.check(ctx);
      out.expressions_.push_back(std::move(e));
    } catch (const ExpressionError& e) {
      ctx.fail(node, fmt::format("{}: in {{{}}}: {}", what, inside, e.what()));
    }
    out.literals_.push_back(std::move(literal));
    literal.clear();
    at = close;
  }
  out.literals_.push_back(std::move(literal));
  return out;
}

std::string NameTemplate::resolve(const ExpressionEnv& env) const {
  std::string out = literals_.front();
  for (size_t i = 0; i < expressions_.size(); ++i) {
    out += std::to_string(expressions_[i].evaluate(env));
    out += literals_[i + 1];
  }
  return out;
}

std::string NameTemplate::with_expressions_as(std::string_view stand_in) const {
  std::string out = literals_.front();
  for (size_t i = 1; i < literals_.size(); ++i) {
    out += stand_in;
    out += literals_[i];
  }
  return out;
}

}  // namespace meshsim::sim
