#include "sim/report/report.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "sim/report/result_codec.hpp"
#include "sim/report/rng_overlap.hpp"
#include "sim/runtime/group_label.hpp"

namespace meshsim::sim {

namespace {

Json location_json(const SourceLocation& where) {
  return Json{{"file", where.file}, {"line", where.line}, {"column", where.column}};
}

// The texts, as the schema has always listed them; where and what raised each, apart.
Json warning_texts(const std::vector<Warning>& warnings) {
  Json out = Json::array();
  for (const Warning& w : warnings) out.push_back(w.text);
  return out;
}

Json warning_details(const std::vector<Warning>& warnings) {
  Json out = Json::array();
  for (const Warning& w : warnings)
    out.push_back({{"kind", w.kind}, {"text", w.text}, {"location", location_json(w.where)}});
  return out;
}

// How many warnings of each kind, by kind name.
std::map<std::string, size_t> count_kinds(const std::vector<const Warning*>& warnings) {
  std::map<std::string, size_t> out;
  for (const Warning* w : warnings) ++out[w->kind];
  return out;
}

Json warning_kinds(const std::vector<Warning>& warnings) {
  std::vector<const Warning*> all;
  for (const Warning& w : warnings) all.push_back(&w);
  Json out = Json::object();
  for (const auto& [kind, n] : count_kinds(all)) out[kind] = n;
  return out;
}

// Report lines told by several ranks, one line per distinct text, in the order first told. A
// "\t" in the text marks where the ranks go ("file:line:col\t: ..." becomes
// "file:line:col: ranks 0-3: ..."); a story of the whole run (rank -1) names no rank.
class SharedStories {
 public:
  void add(std::string text, int64_t rank) {
    const auto [it, fresh] = index_.emplace(std::move(text), stories_.size());
    if (fresh) stories_.push_back({it->first, {}});
    if (rank >= 0) stories_[it->second].second.push_back(rank);
  }
  void append_to(std::vector<std::string>& lines) const {
    for (const auto& [text, ranks] : stories_) {
      const size_t tab = text.find('\t');
      const std::string who =
          ranks.empty()
              ? std::string()
              : fmt::format(": rank{} {}", ranks.size() > 1 ? "s" : "", listed_ranks(ranks));
      lines.push_back(text.substr(0, tab) + who + text.substr(tab + 1));
    }
  }

  // Ranks as ranges, the list cut after about kListedChars characters: at scale a story's ranks
  // can take thousands of ranges, which the JSON report lists in full.
  static constexpr size_t kListedChars = 160;
  static std::string listed_ranks(const std::vector<int64_t>& ranks) {
    std::string listed = rank_ranges(ranks);
    if (listed.size() <= kListedChars) return listed;
    const size_t cut = listed.rfind(", ", kListedChars);
    if (cut == std::string::npos) return listed;  // one range cannot be that long
    return fmt::format("{}, ... ({} ranks in all; --json lists each)", listed.substr(0, cut),
                       ranks.size());
  }

 private:
  std::vector<std::pair<std::string, std::vector<int64_t>>> stories_;
  std::map<std::string, size_t> index_;
};

// Every line of `text` prefixed with `prefix`.
std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const size_t stop = end == std::string::npos ? text.size() : end;
    out += prefix + text.substr(start, stop - start) + "\n";
    start = stop + 1;
  }
  return out;
}

// A hang report's per-rank section cut to `limit` lines (the summary above it is always kept).
std::string cut_hang_details(const std::string& text, size_t limit) {
  const size_t section = text.find("\n  per rank:\n");
  if (section == std::string::npos || limit == SIZE_MAX) return text;
  size_t pos = section + std::string_view("\n  per rank:\n").size();
  size_t kept = 0;
  while (pos < text.size() && kept < limit) {
    pos = text.find('\n', pos);
    pos = pos == std::string::npos ? text.size() : pos + 1;
    ++kept;
  }
  if (pos >= text.size()) return text;
  size_t rest = 0;
  for (size_t i = pos; i < text.size(); ++i) rest += text[i] == '\n' ? 1 : 0;
  return text.substr(0, pos) +
         fmt::format("    ... and {} more lines (-v shows them all; --json has every rank)\n",
                     rest);
}

}  // namespace

std::string format_failures(const ScenarioResult& result, size_t limit) {
  std::string out;
  if (!result.crash.empty()) out += "  crash: " + result.crash + "\n";
  for (const std::string& f : result.faults) out += "  injected: " + f + "\n";
  // The hang's root cause first: at scale everything else is a consequence of it.
  if (result.hang_text) out += indent(cut_hang_details(*result.hang_text, limit), "    ");
  std::vector<std::string> lines;
  // Ranks that failed on their own, then expectations, then the ranks aborted because of a hang,
  // then warnings. Ranks with the same failure share one line, in the order of their lowest rank.
  const auto add_failures = [&](bool aborted) {
    SharedStories stories;
    for (size_t r = 0; r < result.failures.size(); ++r) {
      const auto& f = result.failures[r];
      if (!f || (f->error_type == "aborted") != aborted) continue;
      stories.add(aborted ? fmt::format("{}\t ({}): {}", f->where.to_string(), f->step, f->message)
                          : fmt::format("{}\t: {} step failed: {}: {}", f->where.to_string(),
                                        f->step, f->error_type, f->message),
                  static_cast<int64_t>(r));
    }
    stories.append_to(lines);
  };
  add_failures(false);
  // Failed expectations by place in the file, then rank (not in the order ranks got there).
  std::vector<const ExpectationRecord*> failed;
  for (const ExpectationRecord& e : result.expectations) {
    if (!e.passed) failed.push_back(&e);
  }
  std::stable_sort(failed.begin(), failed.end(), [](const auto* a, const auto* b) {
    return std::tuple(a->where.line, a->where.column, a->rank) <
           std::tuple(b->where.line, b->where.column, b->rank);
  });
  // The same expectation failing the same way on several ranks is one line ("ranks 0-1023").
  SharedStories expected;
  for (const ExpectationRecord* e : failed) {
    expected.add(fmt::format("{}\t: expected {} == {}, got {}", e->where.to_string(), e->what,
                             json_text(e->expected), json_text(e->observed)),
                 e->rank);
  }
  expected.append_to(lines);
  add_failures(true);
  for (const Warning& w : result.warnings) lines.push_back("warning: " + w.shown());
  for (size_t i = 0; i < lines.size() && i < limit; ++i) out += "  " + lines[i] + "\n";
  if (lines.size() > limit) {
    out += fmt::format("  ... and {} more (-v shows them all; --json has everything)\n",
                       lines.size() - limit);
  }
  return out;
}

std::string format_table(const RunReport& report, bool with_time) {
  size_t width = 8;
  for (const ScenarioResult& r : report.results) width = std::max(width, r.name.size());
  std::string out = fmt::format("{:<{}}  {:<6}  {:>6}  {:>12}{}\n", "scenario", width, "result",
                                "ranks", "expectations", with_time ? "      time" : "");
  for (const ScenarioResult& r : report.results) {
    const std::string time = with_time ? fmt::format("  {:>7.1f} ms", r.wall_ms) : "";
    out += fmt::format("{:<{}}  {:<6}  {:>6}  {:>12}{}\n", r.name, width,
                       !r.crash.empty() ? "CRASH"
                       : r.passed()     ? "pass"
                                        : "FAIL",
                       r.world_size,
                       fmt::format("{}/{}",
                                   r.listed_checks() + r.unlisted_passed + r.unlisted_failed -
                                       r.failed_expectations(),
                                   r.listed_checks() + r.unlisted_passed + r.unlisted_failed),
                       time);
  }
  return out;
}

size_t warning_count(const RunReport& report) {
  size_t n = 0;
  for (const ScenarioResult& r : report.results) n += r.warnings.size();
  return n;
}

std::string format_warnings(const RunReport& report, size_t listed) {
  std::vector<const Warning*> all;
  std::vector<const ScenarioResult*> owner;
  for (const ScenarioResult& r : report.results) {
    for (const Warning& w : r.warnings) {
      all.push_back(&w);
      owner.push_back(&r);
    }
  }
  if (all.empty()) return "";
  std::vector<std::string> kinds;
  for (const auto& [kind, n] : count_kinds(all)) kinds.push_back(fmt::format("{} {}", kind, n));
  std::string out = fmt::format("warnings: {} ({})\n", all.size(), fmt::join(kinds, ", "));
  for (size_t i = 0; i < all.size() && i < listed; ++i) {
    // A warning of the whole run is told with its scenario's file.
    out += fmt::format("  {}{}\n", all[i]->where.line > 0 ? "" : owner[i]->file + ": ",
                       all[i]->shown());
  }
  if (all.size() > listed)
    out += fmt::format("  ... and {} more (-v lists them per scenario)\n", all.size() - listed);
  return out;
}

std::string format_totals(const RunReport& report) {
  size_t passed = 0;
  for (const ScenarioResult& r : report.results) passed += r.passed() ? 1 : 0;
  std::string out = fmt::format("{} passed, {} failed", passed, report.results.size() - passed);
  if (!report.unusable.empty()) out += fmt::format(" ({} unusable input)", report.unusable.size());
  return out + "\n";
}

Json report_json(const RunReport& report, const std::string& version) {
  Json scenarios = Json::array();
  size_t passed = 0;
  for (const ScenarioResult& r : report.results) {
    passed += r.passed() ? 1 : 0;
    Json expectations = Json::array();
    for (const ExpectationRecord& e : r.expectations) {
      Json one{{"location", location_json(e.where)},
               {"rank", e.rank >= 0 ? Json(e.rank) : Json(nullptr)},
               {"what", e.what},
               {"passed", e.passed},
               {"observed", e.observed},
               {"expected", e.expected}};
      // A record every rank of a range passed alike: the ranks as [first, last] pairs.
      if (!e.ranks.empty()) one["ranks"] = e.ranks.ranges();
      if (e.checks > 1) one["checks"] = e.checks;
      expectations.push_back(std::move(one));
    }
    Json dumps = Json::array();
    for (const DumpRecord& d : r.dumps) {
      dumps.push_back({{"location", location_json(d.where)},
                       {"rank", d.rank},
                       {"what", d.what},
                       {"value", d.value}});
    }
    Json ranks = Json::array();
    for (size_t i = 0; i < r.failures.size(); ++i) {
      Json rank{{"rank", i}, {"status", r.failures[i] ? "failed" : "finished"}};
      if (const auto& f = r.failures[i]) {
        rank["failure"] = {{"location", location_json(f->where)},
                           {"step", f->step},
                           {"type", f->error_type},
                           {"message", f->message}};
      }
      ranks.push_back(std::move(rank));
    }
    Json scenario_hang = r.hang ? *r.hang : Json(nullptr);
    if (r.hang) scenario_hang["dot"] = r.hang_dot;
    Json draws = Json::array();
    auto listed = [](const DrawRecord& d) {
      Json j = draw_json(d);
      j.erase("where");
      return j;
    };
    for (const DrawRecord& d : r.draws) draws.push_back(listed(d));
    Json overlaps = Json::array();
    for (const RngOverlap& o : r.overlaps) {
      overlaps.push_back({{"seed", o.first.draw.seed},
                          {"blocks", {o.block_begin, o.block_end}},
                          {"first", {{"draw", listed(o.first)}, {"ranks", o.first_ranks}}},
                          {"second", {{"draw", listed(o.second)}, {"ranks", o.second_ranks}}},
                          {"text", describe_overlap(o)}});
    }
    scenarios.push_back({{"name", r.name},
                         {"file", r.file},
                         {"description", r.description},
                         {"world_size", r.world_size},
                         {"result", !r.crash.empty() ? "crash"
                                    : r.passed()     ? "pass"
                                                     : "fail"},
                         {"crash", r.crash.empty() ? Json(nullptr) : Json(r.crash)},
                         {"expectations", std::move(expectations)},
                         {"dumps", std::move(dumps)},
                         {"ranks", std::move(ranks)},
                         {"hang", std::move(scenario_hang)},
                         {"warnings", warning_texts(r.warnings)},
                         {"warning_kinds", warning_kinds(r.warnings)},
                         {"warning_details", warning_details(r.warnings)},
                         {"rng",
                          {{"draws", std::move(draws)},
                           {"draws_total", r.draws_total},
                           {"overlaps", std::move(overlaps)},
                           {"overlap_count", r.overlap_count}}},
                         {"faults", r.faults},
                         {"schedule",
                          {{"decisions", r.schedule_decisions},
                           {"digest", fmt::format("{:016x}", r.schedule_digest)}}}});
  }
  Json unusable = Json::array();
  for (const UnusableInput& u : report.unusable) {
    unusable.push_back({{"location", location_json(u.where)}, {"message", u.message}});
  }
  return Json{{"schema_version", 1},
              {"meshsim_version", version},
              {"summary",
               {{"scenarios", report.results.size()},
                {"passed", passed},
                {"failed", report.results.size() - passed},
                {"unusable", report.unusable.size()}}},
              {"unusable_inputs", std::move(unusable)},
              {"scenarios", std::move(scenarios)}};
}

}  // namespace meshsim::sim
