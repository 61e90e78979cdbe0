#include "sim/scenario/outcome_expectation.hpp"

#include <set>

#include <fmt/format.h>

#include "sim/report/rng_overlap.hpp"
#include "sim/runtime/hang_report.hpp"

namespace meshsim::sim {

namespace {

// A send/recv abort with its peer by number ("(dst=5)") and the "waiting for rank(s) 5" clause
// meshsim 1 ended it with, so that old `contains` texts still match. Reports now name the peer
// relative to the rank ("(dst=rank+1)") so that a pipeline stage's aborts are one line.
std::string legacy_abort_text(int64_t rank, const std::string& message) {
  for (const char* key : {"(dst=rank", "(src=rank"}) {
    const size_t at = message.find(key);
    if (at == std::string::npos) continue;
    const size_t digits = at + std::string_view(key).size();
    const size_t close = message.find(')', digits);
    if (close == std::string::npos) return message;
    int64_t delta = 0;
    try {
      delta = std::stoll(message.substr(digits, close - digits));
    } catch (const std::exception&) {
      return message;
    }
    const int64_t peer = rank + delta;
    const size_t number = message.find('=', at) + 1;  // "(dst=" is kept
    std::string out = message.substr(0, number) + std::to_string(peer) + message.substr(close);
    if (out.find(" after a ") != std::string::npos)
      out += fmt::format(", waiting for rank(s) {}", peer);
    return out;
  }
  return message;
}

// A json scalar or the list of distinct values (a single value when all agree).
Json common(const std::vector<Json>& values) {
  std::vector<Json> distinct;
  for (const Json& v : values) {
    if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
  }
  if (distinct.size() == 1) return distinct[0];
  return Json(distinct);
}

// The names an expectation may give a group the report shows (`entry` is a wait, a desync or a
// timeout): the report's label ("world.tp#6", "WORLD"), a send/recv's channel ("WORLD p2p 0→1"),
// a wait's label with its members as printed ("world.tp#6 [48-55]") and c10d's id ("12", as
// scenarios named groups before labels existed).
Json group_aliases(const Json& entry) {
  Json out = Json::array({entry["group"]});
  for (const char* key : {"channel", "shown_as", "group_id"}) {
    if (entry.contains(key)) out.push_back(entry[key]);
  }
  return out;
}

// What the run shows for each key the expectation names. "group_aliases" lists, for each
// distinct group in "group" (in its order), the names that match it.
Json observe_hang(const std::string& kind, const ScenarioResult& result) {
  Json out = Json::object();
  if (!result.hang || (*result.hang)["kind"] != kind) return out;
  const Json& hang = *result.hang;
  out["cause"] = hang["cause"];
  out["cause_aliases"] = hang.value("cause_aliases", Json::array());
  out["culprits"] = hang["culprits"];
  // The report's first sentence: where the hang starts.
  out["root_cause"] = hang["summary"].empty() ? Json("") : hang["summary"][0];
  std::vector<Json> ops, groups, seqs, group_ranks;
  Json aliases = Json::array();
  std::vector<Json> distinct_groups;
  Json waiting = Json::array();
  Json waits_for = Json::object();           // rank -> the ranks it waits for
  Json waiting_in = Json::object();          // rank -> its group's label
  Json waiting_in_aliases = Json::object();  // rank -> every name of that group
  std::set<int64_t> missing;
  for (const Json& r : hang["ranks"]) {
    if (!r.contains("wait")) continue;
    const Json& w = hang["waits"][r["wait"].get<size_t>()];
    waiting.push_back(r["rank"]);
    const std::string rank_key = std::to_string(r["rank"].get<int64_t>());
    waits_for[rank_key] = w["missing"];
    waiting_in[rank_key] = w.contains("channel") ? w["channel"] : w["group"];
    waiting_in_aliases[rank_key] = group_aliases(w);
    ops.push_back(w["op"]);
    // One alias list per distinct group; send/recv waits on it add their directions.
    const auto seen = std::find(distinct_groups.begin(), distinct_groups.end(), w["group"]);
    if (seen == distinct_groups.end()) {
      distinct_groups.push_back(w["group"]);
      aliases.push_back(group_aliases(w));
    } else if (w.contains("channel")) {
      aliases[static_cast<size_t>(seen - distinct_groups.begin())].push_back(w["channel"]);
    }
    groups.push_back(w["group"]);
    seqs.push_back(w["seq"]);
    group_ranks.push_back(w.contains("group_ranks") ? w["group_ranks"] : Json(w["group_size"]));
    for (const Json& m : w["missing"]) missing.insert(m.get<int64_t>());
  }
  out["waiting"] = waiting;
  out["waits_for"] = std::move(waits_for);
  out["waiting_in"] = std::move(waiting_in);
  out["waiting_in_aliases"] = std::move(waiting_in_aliases);
  out["in"] = common(ops);
  out["group"] = common(groups);
  out["group_aliases"] = aliases;
  out["seq"] = common(seqs);
  out["group_ranks"] = common(group_ranks);
  out["missing"] = Json(std::vector<int64_t>(missing.begin(), missing.end()));
  std::vector<Json> missing_in;
  for (int64_t m : missing) {
    const Json& r = hang["ranks"][static_cast<size_t>(m)];
    missing_in.push_back(r.contains("wait") ? hang["waits"][r["wait"].get<size_t>()]["op"]
                                            : r["state"]);
  }
  out["missing_in"] = common(missing_in);
  if (hang.contains("desyncs")) {
    // Every desync, each as the keys a `desync` table may name; the first is also at the top.
    Json each = Json::array();
    for (const Json& d : hang["desyncs"]) {
      Json arrived = Json::array();
      Json signatures = Json::object();
      for (const Json& a : d["arrivals"]) {
        arrived.push_back(a["rank"]);
        signatures[std::to_string(a["rank"].get<int64_t>())] = a["signature"];
      }
      each.push_back({{"group", d["group"]},
                      {"group_aliases", Json::array({group_aliases(d)})},
                      {"seq", d["seq"]},
                      {"ranks", std::move(arrived)},
                      {"signatures", std::move(signatures)}});
    }
    for (const auto& [key, value] : each.front().items()) out[key] = value;
    out["count"] = each.size();
    out["desyncs"] = std::move(each);
  }
  if (hang.contains("timeout")) {
    out["group"] = hang["timeout"]["group"];
    out["group_aliases"] = Json::array({group_aliases(hang["timeout"])});
    out["seq"] = hang["timeout"]["seq"];
    out["waiting"] = hang["timeout"]["timed_out"];
    out["late"] = hang["timeout"]["late"];
    out["in"] = hang["timeout"]["op"];
  }
  return out;
}

// Expected tables name only the entries that matter; strings may give a prefix ("all_reduce"
// matches "all_reduce(float32[4], op=sum)"); everything else must be equal.
bool matches(const Json& observed, const Json& expected) {
  if (expected.is_object()) {
    if (!observed.is_object()) return false;
    for (const auto& [key, want] : expected.items()) {
      if (!observed.contains(key) || !matches(observed[key], want)) return false;
    }
    return true;
  }
  if (expected.is_string() && observed.is_string()) {
    return observed.get<std::string>().starts_with(expected.get<std::string>());
  }
  return observed == expected;
}

// A group is named exactly (today's "1" must not match "12"): one name for one group, a list
// for several, each matching one of its aliases.
bool group_matches(const Json& aliases, const Json& expected) {
  const auto one = [](const Json& names, const Json& want) {
    return std::find(names.begin(), names.end(), want) != names.end();
  };
  if (expected.is_string()) return aliases.size() == 1 && one(aliases[0], expected);
  if (!expected.is_array() || expected.size() != aliases.size()) return false;
  for (size_t i = 0; i < aliases.size(); ++i) {
    if (!one(aliases[i], expected[i])) return false;
  }
  return true;
}

class HangExpectation final : public OutcomeExpectation {
 private:
  bool matches_all(const Json& all) const {
    for (const auto& [key, want] : expected_.items()) {
      if (!all.contains(key)) return false;
      if (key == "group") {
        if (!group_matches(all["group_aliases"], want)) return false;
      } else if (key == "cause") {
        // Causes refined since a scenario was written still match their old name.
        const Json& old = all["cause_aliases"];
        if (all["cause"] != want && std::find(old.begin(), old.end(), want) == old.end())
          return false;
      } else if (key == "root_cause") {
        // Text the first sentence holds: "rank 19 skipped the all_reduce at line 21 (w=2)".
        if (all[key].get<std::string>().find(want.get<std::string>()) == std::string::npos)
          return false;
      } else if (key == "waiting_in") {
        // { 0 = "world.tp#0" }: each rank named waits in that group (exactly, any of its names).
        for (const auto& [rank, group] : want.items()) {
          const Json& names = all["waiting_in_aliases"];
          if (!names.contains(rank) || !group_matches(Json::array({names[rank]}), group))
            return false;
        }
      } else if (!matches(all[key], want)) {
        return false;
      }
    }
    return true;
  }

 public:
  HangExpectation(std::string kind, Json expected)
      : kind_(std::move(kind)), expected_(std::move(expected)) {}

  ExpectationRecord check(const ScenarioResult& result) const override {
    Json all = observe_hang(kind_, result);
    if (all.empty()) {
      const Json observed = result.hang ? Json{{"kind", (*result.hang)["kind"]}} : Json("no hang");
      return {where, -1, kind_, false, observed, expected_};
    }
    // Several desyncs: the table describes one of them, whichever it matches.
    if (all.contains("desyncs")) {
      for (const Json& one : all["desyncs"]) {
        Json candidate = all;
        for (const auto& [key, value] : one.items()) candidate[key] = value;
        if (matches_all(candidate)) {
          all = std::move(candidate);
          break;
        }
      }
    }
    Json observed = Json::object();
    for (const auto& [key, want] : expected_.items())
      observed[key] = all.contains(key) ? all[key] : Json(nullptr);
    return {where, -1, kind_, matches_all(all), observed, expected_};
  }

 private:
  std::string kind_;
  Json expected_;
};

class RankFailedExpectation final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    Json observed = "finished";
    bool passed = false;
    if (rank_ < static_cast<int64_t>(result.failures.size())) {
      if (const auto& f = result.failures[static_cast<size_t>(rank_)]) {
        observed = Json{{"type", f->error_type}, {"message", f->message}, {"line", f->where.line}};
        passed = (type_.empty() || f->error_type == type_) &&
                 (f->message.find(contains_) != std::string::npos ||
                  legacy_abort_text(rank_, f->message).find(contains_) != std::string::npos) &&
                 (line_ == 0 || f->where.line == line_);
      }
    }
    Json expected{{"rank", rank_}, {"contains", contains_}};
    if (!type_.empty()) expected["type"] = type_;
    if (line_ != 0) expected["line"] = line_;
    return {where, rank_, "rank_failed", passed, observed, expected};
  }

  int64_t rank_ = 0;
  std::string type_;
  std::string contains_;
  int64_t line_ = 0;
};

// `rng_overlap = { count = 2, contains = "shard 1" }`: how many overlapping draws the run found
// (and text one of their descriptions holds).
class RngOverlapExpectation final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    Json described = Json::array();
    bool found = contains_.empty();
    for (const RngOverlap& o : result.overlaps) {
      std::string text = describe_overlap(o);
      found = found || text.find(contains_) != std::string::npos;
      // A few are enough to read here; the report's rng section lists them all.
      if (described.size() < 3) described.push_back(std::move(text));
    }
    Json observed{{"count", result.overlap_count}, {"overlaps", std::move(described)}};
    Json expected = Json::object();
    if (count_) expected["count"] = *count_;
    if (!contains_.empty()) expected["contains"] = contains_;
    const bool passed = (!count_ || result.overlap_count == *count_) && found;
    return {where, -1, "rng_overlap", passed, std::move(observed), std::move(expected)};
  }
  bool declares_run_outcome() const override { return false; }

  std::optional<uint64_t> count_;
  std::string contains_;
};

// `warning = { contains = "...", count = 1 }`: warnings of the run that contain the text (count:
// exactly that many; count = 0 says there is none).
class WarningExpectation final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    Json matching = Json::array();
    for (const Warning& w : result.warnings) {
      if (const std::string shown = w.shown(); shown.find(contains_) != std::string::npos)
        matching.push_back(shown);
    }
    const bool passed = count_ ? matching.size() == *count_ : !matching.empty();
    Json expected{{"contains", contains_}};
    if (count_) expected["count"] = *count_;
    return {
        where, -1, "warning", passed, Json{{"matching", std::move(matching)}}, std::move(expected)};
  }
  bool declares_run_outcome() const override { return false; }

  std::optional<uint64_t> count_;
  std::string contains_;
};

// `no_hang = true`: the run ended without a deadlock, desync or timeout (next to rank_failed: the
// failure stays on its rank and the others finish).
class NoHangExpectation final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    const Json observed =
        result.hang ? Json{{"kind", (*result.hang)["kind"]}, {"cause", (*result.hang)["cause"]}}
                    : Json("no hang");
    return {where, -1, "no_hang", !result.hang, observed, true};
  }
  // Failed ranks still fail the scenario unless a rank_failed expects them.
  bool declares_run_outcome() const override { return false; }
};

// waits_for = { 0 = [1, 2] } (ranks) and waiting_in = { 0 = "world.tp#0" } (a group name, or a
// list of them): a non-empty table keyed by ranks.
// An array of ranks of the world.
void check_ranks(const toml::node& node, std::string_view what, const LoadContext& ctx) {
  const std::vector<int64_t> ranks = ctx.integers_of(node, what);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= ctx.world_size()) {
      ctx.fail(*node.as_array()->get(i), fmt::format("{} is not a rank of this world (0 to {})",
                                                     ranks[i], ctx.world_size() - 1));
    }
  }
}

void check_rank_table(const toml::table& table, std::string_view key, const LoadContext& ctx) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return;
  const toml::table* ranks = node->as_table();
  if (ranks == nullptr || ranks->empty()) {
    ctx.fail(*node, fmt::format("{} is a table keyed by rank: {{ 0 = {} }}", key,
                                key == "waits_for" ? "[1, 2]" : "\"world.tp#0\""));
  }
  for (const auto& [rank, value] : *ranks) {
    ctx.rank_of_key(rank, key);
    if (key == "waits_for") {
      check_ranks(value, "the ranks it waits for", ctx);
    } else if (!value.is_string()) {
      ctx.fail(value, "waiting_in names a group: \"world.tp#0\", \"WORLD\" or c10d's id");
    }
  }
}

Json to_json(const toml::node& node, const LoadContext& ctx) {
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* i = node.as_integer()) return i->get();
  if (const auto* b = node.as_boolean()) return b->get();
  if (const auto* a = node.as_array()) {
    Json out = Json::array();
    for (const toml::node& item : *a) out.push_back(to_json(item, ctx));
    return out;
  }
  if (const auto* t = node.as_table()) {
    Json out = Json::object();
    for (const auto& [k, v] : *t) out[std::string(k.str())] = to_json(v, ctx);
    return out;
  }
  ctx.fail(node, "expected a string, integer, boolean, array or table, not " + describe_type(node));
}

}  // namespace

const std::vector<std::string_view>& outcome_keys() {
  static const std::vector<std::string_view> k{"deadlock",    "desync",  "timeout", "rank_failed",
                                               "rng_overlap", "warning", "no_hang"};
  return k;
}

std::unique_ptr<OutcomeExpectation> parse_outcome(std::string_view key, const toml::node& node,
                                                  const LoadContext& ctx) {
  std::unique_ptr<OutcomeExpectation> out;
  if (key == "no_hang") {
    if (!ctx.boolean_of(node, "no_hang"))
      ctx.fail(node,
               "no_hang = true says the run ends without a hang; to expect one, write "
               "deadlock, desync or timeout");
    out = std::make_unique<NoHangExpectation>();
    out->where = ctx.at(node);
    return out;
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) ctx.fail(node, fmt::format("{} must be a table", key));
  if (key == "rng_overlap") {
    ctx.only_keys(*table, {"count", "contains"}, "rng_overlap");
    auto e = std::make_unique<RngOverlapExpectation>();
    if (const toml::node* c = table->get("count")) {
      const int64_t count = ctx.integer_of(*c, "count");
      if (count < 0) ctx.fail(*c, "count must be zero or positive");
      e->count_ = static_cast<uint64_t>(count);
    }
    if (const toml::node* c = table->get("contains")) e->contains_ = ctx.string_of(*c, "contains");
    if (!e->count_ && e->contains_.empty()) {
      ctx.fail(node, "rng_overlap needs count (0 for none) or contains");
    }
    out = std::move(e);
  } else if (key == "warning") {
    ctx.only_keys(*table, {"contains", "count"}, "warning");
    auto e = std::make_unique<WarningExpectation>();
    e->contains_ = ctx.string_of(ctx.require(*table, "contains", "warning"), "contains");
    if (const toml::node* c = table->get("count")) {
      const int64_t count = ctx.integer_of(*c, "count");
      if (count < 0) ctx.fail(*c, "count must be zero or positive");
      e->count_ = static_cast<uint64_t>(count);
    }
    out = std::move(e);
  } else if (key == "rank_failed") {
    ctx.only_keys(*table, {"rank", "type", "contains", "line"}, "rank_failed");
    auto e = std::make_unique<RankFailedExpectation>();
    e->rank_ = ctx.integer_of(ctx.require(*table, "rank", "rank_failed"), "rank");
    if (e->rank_ < 0 || e->rank_ >= ctx.world_size())
      ctx.fail(*table->get("rank"), "rank is outside the world");
    if (const toml::node* t = table->get("type")) e->type_ = ctx.string_of(*t, "type");
    if (const toml::node* c = table->get("contains")) e->contains_ = ctx.string_of(*c, "contains");
    if (const toml::node* l = table->get("line")) e->line_ = ctx.integer_of(*l, "line");
    out = std::move(e);
  } else {
    if (key == "desync") {
      ctx.only_keys(*table,
                    {"cause", "group", "seq", "ranks", "signatures", "waiting", "missing",
                     "culprits", "count", "root_cause"},
                    "desync");
    } else if (key == "timeout") {
      ctx.only_keys(*table, {"group", "seq", "waiting", "late", "in", "culprits", "root_cause"},
                    "timeout");
    } else {
      ctx.only_keys(*table,
                    {"cause", "waiting", "in", "group", "group_ranks", "seq", "missing",
                     "missing_in", "culprits", "waits_for", "waiting_in", "root_cause"},
                    "deadlock");
      check_rank_table(*table, "waits_for", ctx);
      check_rank_table(*table, "waiting_in", ctx);
    }
    if (const toml::node* r = table->get("root_cause")) ctx.string_of(*r, "root_cause");
    for (const char* ranks : {"culprits", "waiting", "missing", "late", "ranks"}) {
      if (const toml::node* n = table->get(ranks)) check_ranks(*n, ranks, ctx);
    }
    if (const toml::node* c = table->get("count"); c && ctx.integer_of(*c, "count") < 1) {
      ctx.fail(*c, "a desync expectation's count is at least 1 (no desync: write no_hang = true)");
    }
    if (const toml::node* cause = table->get("cause")) {
      const std::string c = ctx.string_of(*cause, "cause");
      if (!value_in(kHangCauseNames, c)) {
        std::vector<std::string_view> names;
        for (const auto& [cause_value, name] : kHangCauseNames) names.push_back(name);
        ctx.fail(*cause, fmt::format("unknown cause \"{}\" (expected one of: {})", c,
                                     fmt::join(names, ", ")));
      }
    }
    out = std::make_unique<HangExpectation>(std::string(key), to_json(node, ctx));
  }
  out->where = ctx.at(node);
  return out;
}

}  // namespace meshsim::sim
