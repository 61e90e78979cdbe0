#include "sim/runtime/hang_report.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

constexpr size_t kListMembersUpTo = 64;  // larger groups are described by their size
constexpr size_t kMaxEdges = 4096;       // larger wait-for graphs are given per collective

const std::vector<int64_t> kNoRanks;

// Whether the collective-level wait graph has a cycle (iterative DFS in index order).
bool has_cycle(const std::vector<std::vector<int64_t>>& edges) {
  std::vector<int> color(edges.size(), 0);  // 0 new, 1 on the stack, 2 done
  for (size_t start = 0; start < edges.size(); ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<size_t, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == edges[node].size()) {
        color[node] = 2;
        stack.pop_back();
        continue;
      }
      const auto to = static_cast<size_t>(edges[node][next++]);
      if (color[to] == 1) return true;
      if (color[to] == 0) {
        color[to] = 1;
        stack.emplace_back(to, 0);
      }
    }
  }
  return false;
}

std::string location_text(const RankActivity& a) {
  return a.where.line > 0 ? fmt::format("{} ({})", a.where.to_string(), a.step) : "(no step)";
}

std::string group_text(const OpenWait& w) {
  const size_t n = w.members->size();
  if (n <= 16) return fmt::format("{} [{}]", display_group(w.group), fmt::join(*w.members, ", "));
  return fmt::format("{} ({} ranks)", display_group(w.group), n);
}

}  // namespace

std::string_view hang_cause_name(HangCause cause) {
  switch (cause) {
    case HangCause::kMissingRank:
      return "missing rank";
    case HangCause::kSignatureMismatch:
      return "signature mismatch";
    case HangCause::kOrderInversion:
      return "cross-group order inversion";
    case HangCause::kRankExitedEarly:
      return "rank exited early";
    case HangCause::kRankFailed:
      return "rank failed";
    case HangCause::kTimeout:
      return "watchdog timeout";
  }
  return "?";
}

std::string_view hang_kind_name(HangKind kind) {
  switch (kind) {
    case HangKind::kDeadlock:
      return "deadlock";
    case HangKind::kDesync:
      return "desync";
    case HangKind::kTimeout:
      return "timeout";
  }
  return "?";
}

std::string rank_ranges(const std::vector<int64_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += out.empty() ? "" : ", ";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

HangReport analyze_hang(const std::vector<RankActivity>& activity, const Rendezvous& rendezvous,
                        const std::optional<TimeoutRecord>& timeout) {
  HangReport report;
  report.desync = rendezvous.desync();
  report.timeout = timeout;
  std::vector<int64_t> wait_of;
  report.waits = rendezvous.open_waits(wait_of);
  for (size_t r = 0; r < activity.size(); ++r) {
    const auto rank = static_cast<int64_t>(r);
    report.ranks.push_back({rank, activity[r], rendezvous.wait_of(rank), wait_of[r]});
  }
  bool any_failed = false, any_exited = false, creating_group = false;
  std::vector<std::vector<int64_t>> edges(report.waits.size());
  for (size_t i = 0; i < report.waits.size(); ++i) {
    const auto& w = report.waits[i];
    creating_group = creating_group || w.signature.op == CollectiveOp::kNewGroup;
    std::set<int64_t> targets;
    for (int64_t m : w.missing) {
      const auto state = activity[static_cast<size_t>(m)].state;
      any_failed = any_failed || state == RankActivity::State::kFailed;
      any_exited = any_exited || state == RankActivity::State::kFinished;
      if (wait_of[static_cast<size_t>(m)] >= 0) targets.insert(wait_of[static_cast<size_t>(m)]);
    }
    edges[i].assign(targets.begin(), targets.end());
  }
  if (report.timeout) {
    report.kind = HangKind::kTimeout;
    report.cause = HangCause::kTimeout;
  } else if (report.desync) {
    report.kind = HangKind::kDesync;
    report.cause = HangCause::kSignatureMismatch;
  } else {
    report.kind = HangKind::kDeadlock;
    // A rank waiting to create a group means others skipped creating it; whatever they wait in
    // next closes a cycle, but the skipped creation is the cause.
    report.cause = any_failed         ? HangCause::kRankFailed
                   : creating_group   ? HangCause::kMissingRank
                   : has_cycle(edges) ? HangCause::kOrderInversion
                   : any_exited       ? HangCause::kRankExitedEarly
                                      : HangCause::kMissingRank;
  }
  return report;
}

std::vector<int64_t> HangReport::blocked() const {
  std::vector<int64_t> out;
  for (const Rank& r : ranks) {
    if (r.wait >= 0) out.push_back(r.rank);
  }
  return out;
}

std::vector<int64_t> HangReport::missing() const {
  std::set<int64_t> out;
  for (const auto& w : waits) out.insert(w.missing.begin(), w.missing.end());
  return {out.begin(), out.end()};
}

const std::vector<int64_t>& HangReport::waits_for(int64_t rank) const {
  const int64_t w = ranks.at(static_cast<size_t>(rank)).wait;
  return w < 0 ? kNoRanks : waits[static_cast<size_t>(w)].missing;
}

std::string HangReport::text() const {
  std::string out = fmt::format("{}: {}\n", hang_kind_name(kind), hang_cause_name(cause));
  if (desync) {
    out += fmt::format("  group {} seq {} was entered with different signatures:\n",
                       display_group(desync->group), desync->seq);
    std::map<std::string, std::vector<int64_t>> by_signature;
    for (const auto& [rank, sig] : desync->arrivals) {
      by_signature[fmt::format("{} at {}", sig.describe(),
                               location_text(ranks[static_cast<size_t>(rank)].activity))]
          .push_back(rank);
    }
    for (const auto& [what, who] : by_signature)
      out += fmt::format("    rank {}: {}\n", rank_ranges(who), what);
  }
  if (timeout) {
    out +=
        fmt::format("  {} on group {} seq {}: rank(s) {} waited {:.3f} s for rank(s) {}\n",
                    timeout->signature.describe(), display_group(timeout->group), timeout->seq,
                    rank_ranges(timeout->timed_out), timeout->waited_s, rank_ranges(timeout->late));
  }
  // Ranks with the same story share one line, in order of their lowest rank.
  std::vector<std::pair<std::string, std::vector<int64_t>>> lines;
  std::map<std::string, size_t> line_of;
  for (const Rank& r : ranks) {
    const RankActivity& a = r.activity;
    std::string what;
    if (r.wait >= 0) {
      const auto& w = waits[static_cast<size_t>(r.wait)];
      what = fmt::format("blocked in {} on group {} seq {}", r.waiting->signature.describe(),
                         group_text(w), w.seq);
      if (!w.missing.empty())
        what += fmt::format(", waiting for rank(s) {}", rank_ranges(w.missing));
    } else if (a.state == RankActivity::State::kFailed ||
               a.state == RankActivity::State::kAborted) {
      what = fmt::format("{}: {}", state_name(a.state), a.error);
    } else {
      what = std::string(state_name(a.state));
    }
    what += " at " + location_text(a);
    auto [it, fresh] = line_of.emplace(what, lines.size());
    if (fresh) lines.emplace_back(what, std::vector<int64_t>{});
    lines[it->second].second.push_back(r.rank);
  }
  // The original failure comes first: it is usually the cause of everything after it.
  std::stable_partition(lines.begin(), lines.end(), [&](const auto& line) {
    return ranks[static_cast<size_t>(line.second.front())].activity.state ==
           RankActivity::State::kFailed;
  });
  for (const auto& [what, who] : lines) {
    out += fmt::format("  rank{} {}: {}\n", who.size() > 1 ? "s" : "", rank_ranges(who), what);
  }
  return out;
}

nlohmann::json HangReport::json() const {
  nlohmann::json waits_json = nlohmann::json::array();
  for (const auto& w : waits) {
    nlohmann::json j{{"group", display_group(w.group)},
                     {"group_size", w.members->size()},
                     {"seq", w.seq},
                     {"op", collective_op_name(w.signature.op)},
                     {"signature", w.signature.describe()},
                     {"arrived", w.arrived},
                     {"missing", w.missing}};
    if (w.members->size() <= kListMembersUpTo) j["group_ranks"] = *w.members;
    waits_json.push_back(std::move(j));
  }
  nlohmann::json ranks_json = nlohmann::json::array();
  size_t edge_count = 0;
  for (const Rank& r : ranks) {
    nlohmann::json j{{"rank", r.rank},
                     {"state", state_name(r.activity.state)},
                     {"location",
                      {{"file", r.activity.where.file},
                       {"line", r.activity.where.line},
                       {"column", r.activity.where.column}}},
                     {"step", r.activity.step},
                     {"virtual_time_s", r.activity.clock}};
    if (r.wait >= 0) j["wait"] = r.wait;
    if (!r.activity.error.empty()) j["error"] = r.activity.error;
    edge_count += waits_for(r.rank).size();
    ranks_json.push_back(std::move(j));
  }
  nlohmann::json out{{"kind", hang_kind_name(kind)},
                     {"cause", hang_cause_name(cause)},
                     {"waits", waits_json},
                     {"ranks", ranks_json},
                     {"dot", dot()}};
  if (edge_count <= kMaxEdges) {
    nlohmann::json edges = nlohmann::json::array();
    for (const Rank& r : ranks) {
      for (int64_t to : waits_for(r.rank)) edges.push_back({r.rank, to});
    }
    out["edges"] = edges;
  } else {
    out["edges_omitted"] = edge_count;  // arrived x missing of each entry of "waits"
  }
  if (desync) {
    nlohmann::json arrivals = nlohmann::json::array();
    for (const auto& [rank, sig] : desync->arrivals) {
      arrivals.push_back({{"rank", rank}, {"signature", sig.describe()}});
    }
    out["desync"] = {
        {"group", display_group(desync->group)}, {"seq", desync->seq}, {"arrivals", arrivals}};
  }
  if (timeout) {
    out["timeout"] = {{"group", display_group(timeout->group)},
                      {"seq", timeout->seq},
                      {"op", timeout->signature.describe()},
                      {"timed_out", timeout->timed_out},
                      {"late", timeout->late},
                      {"waited_s", timeout->waited_s}};
  }
  return out;
}

std::string HangReport::dot() const {
  std::string out = "digraph wait_for {\n  rankdir=LR;\n";
  auto color_of = [](RankActivity::State s) {
    return s == RankActivity::State::kBlocked    ? "orange"
           : s == RankActivity::State::kFailed   ? "red"
           : s == RankActivity::State::kFinished ? "gray"
                                                 : "black";
  };
  if (ranks.size() <= kListMembersUpTo) {
    for (const Rank& r : ranks) {
      std::string label = fmt::format("rank {}\\n{}", r.rank, state_name(r.activity.state));
      if (r.wait >= 0) {
        const auto& w = waits[static_cast<size_t>(r.wait)];
        label += fmt::format("\\n{} {} #{}", collective_op_name(w.signature.op),
                             display_group(w.group), w.seq);
      }
      out += fmt::format("  r{} [label=\"{}\", color={}];\n", r.rank, label,
                         color_of(r.activity.state));
    }
    for (const Rank& r : ranks) {
      for (int64_t to : waits_for(r.rank)) out += fmt::format("  r{} -> r{};\n", r.rank, to);
    }
    return out + "}\n";
  }
  // Large worlds: one node per collective waited in, one per group of missing ranks elsewhere.
  std::map<std::string, std::vector<int64_t>> elsewhere;  // state -> ranks not parked anywhere
  for (size_t i = 0; i < waits.size(); ++i) {
    const auto& w = waits[i];
    out += fmt::format("  w{} [label=\"{} {} #{}\\n{} waiting\", color=orange];\n", i,
                       collective_op_name(w.signature.op), display_group(w.group), w.seq,
                       w.arrived.size());
    std::set<int64_t> targets;
    std::set<std::string> states;
    for (int64_t m : w.missing) {
      const Rank& target = ranks[static_cast<size_t>(m)];
      if (target.wait >= 0) {
        targets.insert(target.wait);
      } else {
        const std::string state(state_name(target.activity.state));
        elsewhere[state].push_back(m);
        states.insert(state);
      }
    }
    for (int64_t t : targets) out += fmt::format("  w{} -> w{};\n", i, t);
    for (const std::string& s : states) out += fmt::format("  w{} -> {};\n", i, s);
  }
  for (auto& [state, who] : elsewhere) {
    std::sort(who.begin(), who.end());
    who.erase(std::unique(who.begin(), who.end()), who.end());
    const std::string list = rank_ranges(who);
    out += fmt::format("  {} [label=\"{}\\nranks {}\", color=gray];\n", state, state,
                       list.size() > 60 ? list.substr(0, 57) + "..." : list);
  }
  return out + "}\n";
}

}  // namespace meshsim::sim
