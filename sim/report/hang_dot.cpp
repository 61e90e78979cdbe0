#include "sim/report/hang_render.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"

namespace meshsim::sim {

namespace {

constexpr size_t kListMembersUpTo = 64;  // larger worlds are drawn collective by collective

// Text inside a quoted DOT label.
std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Strongly connected components (Kosaraju, iterative: no recursion however long a chain), as a
// component number per node. u -> v lies on a cycle exactly when both share a component.
std::vector<size_t> components(const std::vector<std::set<size_t>>& edges) {
  const size_t n = edges.size();
  std::vector<std::vector<size_t>> reverse(n);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v : edges[u]) reverse[v].push_back(u);
  }
  // 1. Nodes in order of finishing a depth-first walk.
  std::vector<size_t> finished;
  std::vector<bool> seen(n, false);
  for (size_t start = 0; start < n; ++start) {
    if (seen[start]) continue;
    seen[start] = true;
    std::vector<std::pair<size_t, std::set<size_t>::const_iterator>> stack{
        {start, edges[start].begin()}};
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == edges[node].end()) {
        finished.push_back(node);
        stack.pop_back();
        continue;
      }
      const size_t to = *next++;
      if (!seen[to]) {
        seen[to] = true;
        stack.emplace_back(to, edges[to].begin());
      }
    }
  }
  // 2. Walks of the reversed graph, latest finished first, each one component.
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> component(n, kNone);
  size_t count = 0;
  for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
    if (component[*it] != kNone) continue;
    std::vector<size_t> todo{*it};
    component[*it] = count;
    while (!todo.empty()) {
      const size_t x = todo.back();
      todo.pop_back();
      for (size_t y : reverse[x]) {
        if (component[y] == kNone) {
          component[y] = count;
          todo.push_back(y);
        }
      }
    }
    ++count;
  }
  return component;
}

std::string edge_lines(const std::vector<std::string>& names,
                       const std::vector<std::set<size_t>>& edges) {
  const std::vector<size_t> component = components(edges);
  std::string out;
  for (size_t u = 0; u < edges.size(); ++u) {
    for (size_t v : edges[u]) {
      const bool on_cycle = u == v || component[u] == component[v];
      out += fmt::format("  {} -> {}{};\n", names[u], names[v],
                         on_cycle ? " [color=red, penwidth=2]" : "");
    }
  }
  return out;
}

}  // namespace

std::string hang_dot(const HangReport& report) {
  // Titled with the kind and cause (and the collective a watchdog gave up on); culprits drawn
  // bold in red, the edges of a cycle in red.
  std::string title =
      fmt::format("{}: {}", hang_kind_name(report.kind), hang_cause_name(report.cause));
  if (report.timeout) {
    title += fmt::format(
        "\\n{} on {} #{} after {} s", dot_escape(report.timeout->signature.describe()),
        dot_escape(report.timeout->channel), report.timeout->seq, report.timeout->waited_s);
  }
  std::string out = fmt::format(
      "digraph wait_for {{\n  rankdir=LR;\n  labelloc=t;\n  label=\"{}\";\n  node [shape=box];\n",
      title);
  auto color_of = [](RankActivity::State s) {
    return s == RankActivity::State::kBlocked    ? "orange"
           : s == RankActivity::State::kFailed   ? "red"
           : s == RankActivity::State::kFinished ? "gray"
                                                 : "black";
  };
  auto culprit = [&](int64_t rank) {
    return std::binary_search(report.culprits.begin(), report.culprits.end(), rank);
  };
  auto style_of = [&](bool blamed, RankActivity::State state) {
    return blamed ? std::string("color=red, penwidth=3, style=bold, fontcolor=red")
                  : fmt::format("color={}", color_of(state));
  };
  if (report.ranks.size() <= kListMembersUpTo) {
    // Ranks that look the same (state, wait, line, blame, whom they wait for, what they called
    // in a desync) share one node: a barrier's fan-in is one box, not one per rank.
    std::map<int64_t, std::string> called;  // a desync's arrivals: rank -> its own signature
    for (const DesyncRecord& d : report.desyncs) {
      for (const auto& [rank, sig] : d.arrivals) called.emplace(rank, sig.describe());
    }
    auto role_in_timeout = [&](int64_t rank) -> std::string {
      if (!report.timeout) return "";
      if (std::find(report.timeout->timed_out.begin(), report.timeout->timed_out.end(), rank) !=
          report.timeout->timed_out.end())
        return "watchdog fired";
      if (std::find(report.timeout->late.begin(), report.timeout->late.end(), rank) !=
          report.timeout->late.end())
        return "late";
      return "";
    };
    using Key =
        std::tuple<int64_t, int, int64_t, bool, std::vector<int64_t>, std::string, std::string>;
    std::map<Key, std::vector<int64_t>> by_look;
    for (const HangReport::Rank& r : report.ranks) {
      const auto it = called.find(r.rank);
      by_look[{r.wait, static_cast<int>(r.activity.state), r.activity.where.line, culprit(r.rank),
               report.waits_for(r.rank), it == called.end() ? "" : it->second,
               role_in_timeout(r.rank)}]
          .push_back(r.rank);
    }
    std::vector<std::vector<int64_t>> nodes;
    for (auto& [look, who] : by_look) nodes.push_back(std::move(who));
    std::sort(nodes.begin(), nodes.end());  // by lowest rank: names stay stable
    std::vector<size_t> node_of(report.ranks.size());
    std::vector<std::string> names;
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (int64_t rank : nodes[n]) node_of[static_cast<size_t>(rank)] = n;
      names.push_back(fmt::format("r{}", nodes[n].front()));
    }
    std::vector<std::set<size_t>> edges(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      const HangReport::Rank& r = report.ranks[static_cast<size_t>(nodes[n].front())];
      std::string label = fmt::format("{} {}\\n{}", nodes[n].size() == 1 ? "rank" : "ranks",
                                      rank_ranges(nodes[n]), state_name(r.activity.state));
      const auto own = called.find(r.rank);
      if (r.wait >= 0) {
        // In a desync the wait's op is another member's: each node says what it called.
        const auto& w = report.waits[static_cast<size_t>(r.wait)];
        label += own == called.end()
                     ? fmt::format("\\n{} {} #{}", collective_op_name(w.signature.op),
                                   dot_escape(w.channel), w.seq)
                     : fmt::format("\\n{} #{}\\ncalled {}", dot_escape(w.channel), w.seq,
                                   dot_escape(own->second));
      }
      if (const std::string role = role_in_timeout(r.rank); !role.empty()) label += "\\n" + role;
      if (r.activity.where.line > 0) label += fmt::format("\\nline {}", r.activity.where.line);
      out += fmt::format("  {} [label=\"{}\", {}];\n", names[n], label,
                         style_of(culprit(r.rank), r.activity.state));
      for (int64_t to : report.waits_for(r.rank)) edges[n].insert(node_of[static_cast<size_t>(to)]);
    }
    return out + edge_lines(names, edges) + "}\n";
  }
  // Large worlds: one node per kind of collective waited in (op, the group or the mesh dim of its
  // group, seq and line: the 256 recvs of a pipeline stage are one box, and so are the dp
  // all_reduces of all its dp groups), its culprits in a node of their own; one node per state of
  // the missing ranks not parked anywhere, its culprits apart too.
  const auto family = [](const std::string& group) { return group.substr(0, group.find('#')); };
  using ClassKey = std::tuple<int, std::string, int64_t, int64_t, int, int64_t>;
  std::map<ClassKey, size_t> class_of_key;
  std::vector<size_t> class_of(report.waits.size());
  std::vector<std::vector<size_t>> classes;  // wait indices, in order of first appearance
  for (size_t i = 0; i < report.waits.size(); ++i) {
    const OpenWait& w = report.waits[i];
    // ... and what the first rank it misses does (parked or not, and where): a stage that waits
    // for a finished stage is not the one waiting for it.
    const HangReport::Rank& target =
        report
            .ranks[static_cast<size_t>(w.missing.empty() ? w.arrived.front() : w.missing.front())];
    const ClassKey key{static_cast<int>(w.signature.op),
                       family(w.group),
                       w.seq,
                       report.ranks[static_cast<size_t>(w.arrived.front())].activity.where.line,
                       target.wait >= 0 ? -1 : static_cast<int>(target.activity.state),
                       target.activity.where.line};
    const auto [it, added] = class_of_key.emplace(key, classes.size());
    if (added) classes.emplace_back();
    classes[it->second].push_back(i);
    class_of[i] = it->second;
  }
  std::vector<std::string> names;
  std::vector<size_t> base(classes.size());
  std::vector<std::optional<size_t>> blamed_node(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    const OpenWait& first = report.waits[classes[c].front()];
    std::vector<int64_t> arrived, blamed;
    for (size_t i : classes[c])
      arrived.insert(arrived.end(), report.waits[i].arrived.begin(), report.waits[i].arrived.end());
    std::sort(arrived.begin(), arrived.end());
    std::copy_if(arrived.begin(), arrived.end(), std::back_inserter(blamed), culprit);
    std::string what =
        classes[c].size() == 1
            ? fmt::format("{} {} #{}", collective_op_name(first.signature.op),
                          dot_escape(first.channel), first.seq)
            : fmt::format("{} {} #{}\\n{} of them ({}, ...)",
                          collective_op_name(first.signature.op), dot_escape(family(first.group)),
                          first.seq, classes[c].size(), dot_escape(first.channel));
    if (const int64_t line =
            report.ranks[static_cast<size_t>(first.arrived.front())].activity.where.line;
        line > 0)
      what += fmt::format("\\nline {}", line);
    auto ranks_line = [](const std::vector<int64_t>& who) {
      const std::string list = rank_ranges(who);
      // Through fmt: g++ 12 misreads a std::string cut and appended to as an overflow.
      return list.size() > 60 ? fmt::format("{}...", std::string_view(list).substr(0, 57)) : list;
    };
    base[c] = names.size();
    names.push_back(fmt::format("w{}", c));
    if (blamed.size() == arrived.size()) {
      out += fmt::format("  w{} [label=\"{}\\nranks {} waiting\", {}];\n", c, what,
                         ranks_line(arrived), style_of(true, RankActivity::State::kBlocked));
      continue;
    }
    std::vector<int64_t> others;
    std::set_difference(arrived.begin(), arrived.end(), blamed.begin(), blamed.end(),
                        std::back_inserter(others));
    out += fmt::format("  w{} [label=\"{}\\n{} waiting: {}\", color=orange];\n", c, what,
                       others.size(), ranks_line(others));
    if (blamed.empty()) continue;
    blamed_node[c] = names.size();
    names.push_back(fmt::format("w{}c", c));
    out += fmt::format("  w{}c [label=\"{} {}\\n{}\", {}];\n", c,
                       blamed.size() == 1 ? "rank" : "ranks", ranks_line(blamed), what,
                       style_of(true, RankActivity::State::kBlocked));
  }
  // Missing ranks not parked anywhere, by state and blame.
  std::map<std::pair<std::string, bool>, std::vector<int64_t>> elsewhere;
  for (const OpenWait& w : report.waits) {
    for (int64_t m : w.missing) {
      const HangReport::Rank& target = report.ranks[static_cast<size_t>(m)];
      if (target.wait < 0)
        elsewhere[{std::string(state_name(target.activity.state)), culprit(m)}].push_back(m);
    }
  }
  std::map<std::pair<std::string, bool>, size_t> state_node;
  for (auto& [look, who] : elsewhere) {
    std::sort(who.begin(), who.end());
    who.erase(std::unique(who.begin(), who.end()), who.end());
    const std::string list = rank_ranges(who);
    const std::string name = look.first + (look.second ? "_blamed" : "");
    state_node[look] = names.size();
    names.push_back(name);
    out += fmt::format("  {} [label=\"{}\\n{} {}\", {}];\n", name, look.first,
                       who.size() == 1 ? "rank" : "ranks",
                       list.size() > 60 ? list.substr(0, 57) + "..." : list,
                       look.second ? style_of(true, RankActivity::State::kFinished) : "color=gray");
  }
  // A missing rank parked elsewhere points at its collective's node (its culprits' node when it
  // is one of them); one not parked, at its state's node.
  auto node_of = [&](int64_t m) {
    const HangReport::Rank& target = report.ranks[static_cast<size_t>(m)];
    if (target.wait < 0)
      return state_node.at({std::string(state_name(target.activity.state)), culprit(m)});
    const size_t c = class_of[static_cast<size_t>(target.wait)];
    return culprit(m) && blamed_node[c] ? *blamed_node[c] : base[c];
  };
  std::vector<std::set<size_t>> edges(names.size());
  for (size_t i = 0; i < report.waits.size(); ++i) {
    const size_t c = class_of[i];
    for (int64_t m : report.waits[i].missing) {
      edges[base[c]].insert(node_of(m));
      if (blamed_node[c]) edges[*blamed_node[c]].insert(node_of(m));
    }
  }
  return out + edge_lines(names, edges) + "}\n";
}

}  // namespace meshsim::sim
