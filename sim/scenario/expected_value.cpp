#include "sim/scenario/expected_value.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

// Text such as "bfloat16[8] (meta)" is compared as text; anything made only of the characters
// expressions use is parsed (and a mistake in it reported at load time).
bool looks_like_expression(const std::string& s) {
  return s.find_first_of("[].\"") == std::string::npos;
}

}  // namespace

ExpectedValue ExpectedValue::parse(const toml::node& node, const LoadContext& ctx, Strings strings,
                                   size_t depth) {
  ExpectedValue v;
  if ((node.is_array() || node.is_table()) && depth >= kMaxDepth) {
    ctx.fail(node, fmt::format("expected values nest at most {} levels deep", kMaxDepth));
  }
  if (const toml::array* array = node.as_array()) {
    v.list_.emplace();
    for (const toml::node& item : *array) v.list_->push_back(parse(item, ctx, strings, depth + 1));
  } else if (const toml::table* table = node.as_table()) {
    v.table_.emplace();
    for (const auto& [key, item] : *table) {
      v.table_->emplace(std::string(key.str()), parse(item, ctx, strings, depth + 1));
    }
  } else if (const auto* s = node.as_string()) {
    if (s->get() == "none") {
      v.literal_ = nullptr;
    } else if (strings == Strings::kExpressions && looks_like_expression(s->get())) {
      v.expression_ = ctx.expression_of(node, "an expected value");
    } else {
      v.literal_ = s->get();
    }
  } else if (const auto* i = node.as_integer()) {
    v.literal_ = i->get();
  } else if (const auto* f = node.as_floating_point()) {
    v.literal_ = f->get();
  } else if (const auto* b = node.as_boolean()) {
    v.literal_ = b->get();
  } else {
    ctx.fail(node, "an expected value must be a number, string, boolean, array or table, not " +
                       describe_type(node));
  }
  return v;
}

Json ExpectedValue::resolve(const ExpressionEnv& env) const {
  if (expression_) return expression_->evaluate(env);
  if (list_) {
    Json out = Json::array();
    for (const ExpectedValue& item : *list_) out.push_back(item.resolve(env));
    return out;
  }
  if (table_) {
    Json out = Json::object();
    for (const auto& [key, item] : *table_) out[key] = item.resolve(env);
    return out;
  }
  return literal_;
}

}  // namespace meshsim::sim
