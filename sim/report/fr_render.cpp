#include "sim/report/fr_render.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"

namespace meshsim::sim {

namespace {

bool has_culprit(const FrAnalysis& a, const std::vector<int64_t>& ranks) {
  return std::any_of(ranks.begin(), ranks.end(), [&](int64_t r) {
    return std::binary_search(a.culprits.begin(), a.culprits.end(), r);
  });
}

// Ranks that tell the same story, the culprits' first, then by lowest rank.
std::vector<std::pair<std::string, std::vector<int64_t>>> stories(const FrAnalysis& a) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> lines;
  std::map<std::string, size_t> line_of;
  for (const FrRank& r : a.ranks) {
    auto [it, fresh] = line_of.emplace(r.story, lines.size());
    if (fresh) lines.emplace_back(r.story, std::vector<int64_t>{});
    lines[it->second].second.push_back(r.rank);
  }
  std::stable_partition(lines.begin(), lines.end(),
                        [&](const auto& line) { return has_culprit(a, line.second); });
  return lines;
}

std::string dot_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

nlohmann::json variants_json(const std::vector<FrVariant>& variants) {
  nlohmann::json out = nlohmann::json::array();
  for (const FrVariant& v : variants) out.push_back({{"text", v.text}, {"ranks", v.ranks}});
  return out;
}

}  // namespace

std::string fr_analysis_text(const FrAnalysis& a) {
  std::string out;
  if (a.verdict == FrAnalysis::Verdict::kClean) {
    out = fmt::format(
        "no hang: no rank waits for another, and the members of every collective called it the "
        "same way ({} ranks, {} groups)\n",
        a.world_size, a.groups.size());
  } else {
    out = fmt::format("{}: {}\n", fr_verdict_name(a.verdict), hang_cause_name(a.cause));
    for (const std::string& line : a.summary) out += "  " + line + "\n";
  }
  const auto lines = stories(a);
  out += "  per rank:\n";
  for (const auto& [what, who] : lines)
    out += fmt::format("    rank{} {}: {}\n", who.size() > 1 ? "s" : "", rank_ranges(who), what);
  if (a.mismatches.size() > 1) {
    constexpr size_t kShown = 8;
    out += "  mismatches:\n";
    for (size_t i = 0; i < a.mismatches.size() && i < kShown; ++i) {
      const FrMismatch& m = a.mismatches[i];
      std::vector<std::string> parts;
      for (const FrVariant& v : m.variants)
        parts.push_back(fmt::format("{} {}", ranks_text(v.ranks), v.text));
      out += fmt::format("    {} seq {} ({}): {}\n", a.groups[m.group].label, m.seq, m.kind,
                         fmt::join(parts, "; "));
    }
    if (a.mismatches.size() > kShown)
      out += fmt::format("    ... {} in all (every one is in the JSON)\n", a.mismatches.size());
  }
  constexpr size_t kHistoriesShown = 6;
  size_t shown = 0;
  for (const auto& [what, who] : lines) {
    const FrRank& r = a.ranks[static_cast<size_t>(who.front())];
    if (shown == kHistoriesShown) break;
    if (r.last_calls.empty()) continue;
    out += fmt::format(
        "  last {} of rank {}{} ({} recorded, oldest first):\n",
        r.last_calls.size() == 1 ? std::string("call")
                                 : fmt::format("{} calls", r.last_calls.size()),
        r.rank, who.size() > 1 ? fmt::format(", the first of ranks {}", rank_ranges(who)) : "",
        r.entries);
    for (const std::string& c : r.last_calls) out += "    " + c + "\n";
    ++shown;
  }
  if (!a.evidence.empty()) {
    out += "  evidence:\n";
    for (const std::string& e : a.evidence) out += "    " + e + "\n";
  }
  return out;
}

nlohmann::json fr_analysis_json(const FrAnalysis& a) {
  nlohmann::json out = {{"verdict", fr_verdict_name(a.verdict)},
                        {"world_size", a.world_size},
                        {"culprits", a.culprits},
                        {"summary", a.summary},
                        {"evidence", a.evidence}};
  out["cause"] = a.verdict == FrAnalysis::Verdict::kClean
                     ? nlohmann::json()
                     : nlohmann::json(hang_cause_name(a.cause));
  out["groups"] = nlohmann::json::array();
  for (const FrGroup& g : a.groups)
    out["groups"].push_back({{"name", g.name},
                             {"desc", g.desc},
                             {"label", g.label},
                             {"members", g.members},
                             {"members_from", g.members_from},
                             {"unnamed_members", g.unnamed_members}});
  auto group_name = [&](size_t g) { return a.groups[g].name; };
  out["ranks"] = nlohmann::json::array();
  for (const FrRank& r : a.ranks) {
    nlohmann::json j = {{"rank", r.rank},
                        {"state", r.state == FrRank::State::kNoDump ? "no dump"
                                  : r.state == FrRank::State::kIdle ? "idle"
                                                                    : "blocked"},
                        {"story", r.story}};
    if (r.state != FrRank::State::kNoDump) {
      j["file"] = r.file;
      j["entries"] = r.entries;
      j["first_record"] = r.first_record;
      j["last_calls"] = r.last_calls;
    }
    if (r.open_call) {
      j["open_call"] = *r.open_call;
      j["waits_for"] = r.waits_for;
    }
    out["ranks"].push_back(std::move(j));
  }
  out["open_calls"] = nlohmann::json::array();
  for (const FrOpenCall& c : a.open_calls)
    out["open_calls"].push_back({{"group", group_name(c.group)},
                                 {"seq", c.seq},
                                 {"p2p", c.p2p},
                                 {"call", c.call},
                                 {"site", c.site},
                                 {"waiting", c.waiting},
                                 {"missing", c.missing},
                                 {"elsewhere", c.elsewhere},
                                 {"no_dump", c.no_dump},
                                 {"unnamed", c.unnamed}});
  out["mismatches"] = nlohmann::json::array();
  for (const FrMismatch& m : a.mismatches)
    out["mismatches"].push_back({{"group", group_name(m.group)},
                                 {"seq", m.seq},
                                 {"kind", m.kind},
                                 {"variants", variants_json(m.variants)},
                                 {"culprits", m.culprits}});
  out["divergences"] = nlohmann::json::array();
  for (const FrDivergence& d : a.divergences)
    out["divergences"].push_back(
        {{"group", group_name(d.group)}, {"seq", d.seq}, {"sites", variants_json(d.sites)}});
  out["cycles"] = a.cycles;
  return out;
}

std::string fr_analysis_dot(const FrAnalysis& a) {
  const auto lines = stories(a);
  std::vector<size_t> box_of(a.ranks.size());
  for (size_t b = 0; b < lines.size(); ++b)
    for (const int64_t r : lines[b].second) box_of[static_cast<size_t>(r)] = b;
  std::string out = "digraph waits {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (size_t b = 0; b < lines.size(); ++b) {
    const auto& [what, who] = lines[b];
    const bool culprit = has_culprit(a, who);
    out += fmt::format("  s{} [label=\"{}\\n{}\"{}];\n", b, dot_escape(ranks_text(who)),
                       dot_escape(what), culprit ? ", color=red, penwidth=2" : "");
  }
  std::set<std::pair<size_t, size_t>> edges;
  for (const FrRank& r : a.ranks)
    for (const int64_t w : r.waits_for)
      edges.emplace(box_of[static_cast<size_t>(r.rank)], box_of[static_cast<size_t>(w)]);
  for (const auto& [from, to] : edges) out += fmt::format("  s{} -> s{};\n", from, to);
  out += "}\n";
  return out;
}

}  // namespace meshsim::sim
