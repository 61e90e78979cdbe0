// [[expect]]: a query, and the value it must have on every rank (`equals`) or per rank (`by_rank`).
#include <cmath>

#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/scenario/expected_value.hpp"
#include "sim/steps/step_kinds.hpp"

namespace meshsim::sim {

namespace {

// Equal, except that numbers may differ by `tolerance` (values printed to a few decimals).
bool close(const Json& observed, const Json& expected, double tolerance) {
  if (observed.is_number() && expected.is_number())
    return std::abs(observed.get<double>() - expected.get<double>()) <= tolerance;
  if (observed.is_array() && expected.is_array()) {
    if (observed.size() != expected.size()) return false;
    for (size_t i = 0; i < observed.size(); ++i) {
      if (!close(observed[i], expected[i], tolerance)) return false;
    }
    return true;
  }
  return observed == expected;
}

class ExpectStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const ExpectedValue* e = equals_ ? &*equals_ : by_rank_[static_cast<size_t>(rank.rank())].get();
    if (e == nullptr) return;  // by_rank names other ranks only
    const Json observed = query_->observe(rank);
    Json expected = query_->canonical_expected(e->resolve(rank));
    const bool passed = tolerance_ ? close(observed, expected, *tolerance_) : observed == expected;
    rank.record_expectation(*this, query_->describe(), passed, observed, std::move(expected));
  }

  std::optional<Query> query_;
  std::optional<double> tolerance_;  // numbers may differ by this much
  std::optional<ExpectedValue> equals_;
  std::vector<std::unique_ptr<ExpectedValue>> by_rank_;  // null: a rank by_rank leaves out
};

}  // namespace

std::unique_ptr<Step> parse_expectation(const toml::table& table, LoadContext& ctx) {
  auto step = std::make_unique<ExpectStep>();
  std::vector<std::string_view> allowed(Query::keys().begin(), Query::keys().end());
  for (std::string_view k : {"equals", "by_rank", "when", "tolerance"}) allowed.push_back(k);
  // Query keys in source order (toml++ iterates keys alphabetically).
  std::vector<std::pair<const toml::key*, const toml::node*>> queries;
  for (const auto& [key, value] : table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
      throw InputError(ctx.at(key.source()),
                       fmt::format("unknown key \"{}\" in an expectation (expected one query of: "
                                   "{}; then equals or by_rank; optionally when, tolerance)",
                                   key.str(), fmt::join(Query::keys(), ", ")));
    }
    if (std::find(Query::keys().begin(), Query::keys().end(), key.str()) != Query::keys().end()) {
      queries.emplace_back(&key, &value);
    }
  }
  std::sort(queries.begin(), queries.end(), [](const auto& a, const auto& b) {
    const auto& pa = a.first->source().begin;
    const auto& pb = b.first->source().begin;
    return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
  });
  if (queries.size() > 1) {
    throw InputError(ctx.at(queries[1].first->source()),
                     fmt::format("an expectation checks one query; found both \"{}\" and \"{}\"",
                                 queries[0].first->str(), queries[1].first->str()));
  }
  const toml::node* query_node = queries.empty() ? nullptr : queries[0].second;
  const std::string_view query_key = queries.empty() ? "" : queries[0].first->str();
  if (query_node == nullptr) {
    ctx.fail(table, fmt::format("an expectation needs one query key ({})",
                                fmt::join(Query::keys(), ", ")));
  }
  step->query_ = Query::parse(query_key, *query_node, ctx);
  if (const toml::node* t = table.get("tolerance")) {
    step->tolerance_ = ctx.number_of(*t, "tolerance");
    if (*step->tolerance_ < 0) ctx.fail(*t, "tolerance must be zero or positive");
  }
  const auto strings = step->query_->yields_integers() ? ExpectedValue::Strings::kExpressions
                                                       : ExpectedValue::Strings::kLiterals;
  const toml::node* equals = table.get("equals");
  const toml::node* by_rank = table.get("by_rank");
  if ((equals == nullptr) == (by_rank == nullptr)) {
    ctx.fail(table, "an expectation needs exactly one of equals or by_rank");
  }
  if (equals != nullptr) {
    step->equals_ = ExpectedValue::parse(*equals, ctx, strings);
  } else {
    step->by_rank_.resize(static_cast<size_t>(ctx.world_size()));
    if (const toml::table* some = by_rank->as_table()) {
      // { 0 = ..., 3 = ... }: only the ranks named.
      if (some->empty()) ctx.fail(*by_rank, "by_rank names no rank");
      for (const auto& [key, item] : *some) {
        const int64_t r = ctx.rank_of_key(key, "by_rank");
        step->by_rank_[static_cast<size_t>(r)] =
            std::make_unique<ExpectedValue>(ExpectedValue::parse(item, ctx, strings));
      }
      return step;
    }
    const toml::array* per_rank = by_rank->as_array();
    if (per_rank == nullptr || static_cast<int64_t>(per_rank->size()) != ctx.world_size()) {
      ctx.fail(*by_rank,
               fmt::format("by_rank must be an array with one value per rank ({}), or a table "
                           "of some ranks ({{ 0 = ..., 3 = ... }})",
                           ctx.world_size()));
    }
    for (size_t r = 0; r < per_rank->size(); ++r) {
      step->by_rank_[r] =
          std::make_unique<ExpectedValue>(ExpectedValue::parse(*per_rank->get(r), ctx, strings));
    }
  }
  return step;
}

}  // namespace meshsim::sim
