#include "sim/runtime/hang_report.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace meshsim::sim {

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
      return "timeout";
  }
  return "?";
}

namespace {

// Whether the wait-for graph has a cycle (iterative DFS, ranks in ascending order).
bool has_cycle(const std::vector<HangReport::Rank>& ranks) {
  std::vector<int> color(ranks.size(), 0);  // 0 new, 1 on stack, 2 done
  for (size_t start = 0; start < ranks.size(); ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<size_t, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const auto& edges = ranks[node].waits_for;
      if (next == edges.size()) {
        color[node] = 2;
        stack.pop_back();
        continue;
      }
      const auto to = static_cast<size_t>(edges[next++]);
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

}  // namespace

HangReport analyze_hang(const std::vector<RankActivity>& activity, const SimCollectives& backend) {
  HangReport report;
  report.desync = backend.desync();
  report.timeout = backend.timeout();
  bool any_failed = false, any_exited = false, creating_group = false;
  for (size_t r = 0; r < activity.size(); ++r) {
    HangReport::Rank line{static_cast<int64_t>(r), activity[r], {}};
    if (activity[r].state == RankActivity::State::kBlocked) {
      line.waits_for = backend.missing_for(static_cast<int64_t>(r));
      creating_group = creating_group || activity[r].wait->signature.op == CollectiveOp::kNewGroup;
      for (int64_t m : line.waits_for) {
        const auto state = activity[static_cast<size_t>(m)].state;
        any_failed = any_failed || state == RankActivity::State::kFailed;
        any_exited = any_exited || state == RankActivity::State::kFinished;
      }
    }
    report.ranks.push_back(std::move(line));
  }
  if (report.timeout) {
    report.kind = "timeout";
    report.cause = HangCause::kTimeout;
  } else if (report.desync) {
    report.kind = "desync";
    report.cause = HangCause::kSignatureMismatch;
  } else {
    report.kind = "deadlock";
    // A rank waiting to create a group means others skipped creating it; whatever they wait in
    // next closes a cycle, but the skipped creation is the cause.
    report.cause = any_failed                ? HangCause::kRankFailed
                   : creating_group          ? HangCause::kMissingRank
                   : has_cycle(report.ranks) ? HangCause::kOrderInversion
                   : any_exited              ? HangCause::kRankExitedEarly
                                             : HangCause::kMissingRank;
  }
  return report;
}

std::vector<int64_t> HangReport::blocked() const {
  std::vector<int64_t> out;
  for (const Rank& r : ranks) {
    if (r.activity.state == RankActivity::State::kBlocked) out.push_back(r.rank);
  }
  return out;
}

std::vector<int64_t> HangReport::missing() const {
  std::set<int64_t> out;
  for (const Rank& r : ranks) out.insert(r.waits_for.begin(), r.waits_for.end());
  return {out.begin(), out.end()};
}

std::string HangReport::text() const {
  std::string out = fmt::format("{}: {}\n", kind, hang_cause_name(cause));
  if (desync) {
    out += fmt::format("  group {} seq {} (members {}) was entered with different signatures:\n",
                       display_group(desync->group), desync->seq, fmt::join(desync->members, ", "));
    for (const auto& [rank, sig] : desync->arrivals) {
      out += fmt::format("    rank {}: {} at {}\n", rank, sig.describe(),
                         location_text(ranks[static_cast<size_t>(rank)].activity));
    }
  }
  if (timeout) {
    out += fmt::format("  {} on group {} seq {}: rank(s) {} waited {:.3f} s for rank(s) {}\n",
                       timeout->signature.describe(), display_group(timeout->group), timeout->seq,
                       fmt::join(timeout->timed_out, ", "), timeout->waited_s,
                       fmt::join(timeout->late, ", "));
  }
  for (const Rank& r : ranks) {
    const RankActivity& a = r.activity;
    std::string what;
    switch (a.state) {
      case RankActivity::State::kBlocked:
        what = fmt::format(
            "blocked in {} on group {} [{}] seq {}{}", a.wait->signature.describe(),
            display_group(a.wait->group), fmt::join(a.wait->members, ", "), a.wait->seq,
            r.waits_for.empty()
                ? std::string()
                : fmt::format(", waiting for rank(s) {}", fmt::join(r.waits_for, ", ")));
        break;
      case RankActivity::State::kFailed:
      case RankActivity::State::kAborted:
        what = fmt::format("{}: {}", state_name(a.state), a.error);
        break;
      default:
        what = std::string(state_name(a.state));
    }
    out += fmt::format("  rank {}: {} at {}\n", r.rank, what, location_text(a));
  }
  return out;
}

nlohmann::json HangReport::json() const {
  nlohmann::json ranks_json = nlohmann::json::array();
  nlohmann::json edges = nlohmann::json::array();
  for (const Rank& r : ranks) {
    nlohmann::json j{{"rank", r.rank},
                     {"state", state_name(r.activity.state)},
                     {"location",
                      {{"file", r.activity.where.file},
                       {"line", r.activity.where.line},
                       {"column", r.activity.where.column}}},
                     {"step", r.activity.step},
                     {"virtual_time_s", r.activity.clock}};
    if (r.activity.wait) {
      const WaitInfo& w = *r.activity.wait;
      j["waiting"] = {{"op", collective_op_name(w.signature.op)},
                      {"group", w.group},
                      {"group_ranks", w.members},
                      {"seq", w.seq},
                      {"signature", w.signature.describe()}};
    }
    if (!r.activity.error.empty()) j["error"] = r.activity.error;
    j["waits_for"] = r.waits_for;
    for (int64_t to : r.waits_for) edges.push_back({r.rank, to});
    ranks_json.push_back(std::move(j));
  }
  nlohmann::json out{{"kind", kind},
                     {"cause", hang_cause_name(cause)},
                     {"ranks", ranks_json},
                     {"edges", edges},
                     {"dot", dot()}};
  if (desync) {
    nlohmann::json arrivals = nlohmann::json::array();
    for (const auto& [rank, sig] : desync->arrivals) {
      arrivals.push_back({{"rank", rank}, {"signature", sig.describe()}});
    }
    out["desync"] = {{"group", desync->group}, {"seq", desync->seq}, {"arrivals", arrivals}};
  }
  if (timeout) {
    out["timeout"] = {{"group", timeout->group},
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
  for (const Rank& r : ranks) {
    const RankActivity& a = r.activity;
    std::string label = fmt::format("rank {}\\n{}", r.rank, state_name(a.state));
    if (a.wait)
      label += fmt::format("\\n{} {} #{}", collective_op_name(a.wait->signature.op),
                           display_group(a.wait->group), a.wait->seq);
    const char* color = a.state == RankActivity::State::kBlocked    ? "orange"
                        : a.state == RankActivity::State::kFailed   ? "red"
                        : a.state == RankActivity::State::kFinished ? "gray"
                                                                    : "black";
    out += fmt::format("  r{} [label=\"{}\", color={}];\n", r.rank, label, color);
  }
  for (const Rank& r : ranks) {
    for (int64_t to : r.waits_for) out += fmt::format("  r{} -> r{};\n", r.rank, to);
  }
  return out + "}\n";
}

}  // namespace meshsim::sim
