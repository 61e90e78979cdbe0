#include "sim/report/hang_render.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"

namespace meshsim::sim {

std::string hang_text(const HangReport& report) {
  std::string out =
      fmt::format("{}: {}\n", hang_kind_name(report.kind), hang_cause_name(report.cause));
  for (const std::string& line : report.summary) out += "  " + line + "\n";
  // Ranks with the same story share one line, in order of their lowest rank. A send or recv is
  // told relative to the rank ("src=rank-256") when other ranks tell the same story that way: a
  // pipeline stage waiting on the one before is one line, not one per rank.
  std::vector<std::string> absolute(report.ranks.size()), relative(report.ranks.size());
  std::map<std::string, size_t> relative_count;
  for (const HangReport::Rank& r : report.ranks) {
    const RankActivity& a = r.activity;
    std::string& what = absolute[static_cast<size_t>(r.rank)];
    if (r.wait >= 0) {
      const auto& w = report.waits[static_cast<size_t>(r.wait)];
      what = "blocked in " + call_text(w, r.waiting->signature);
      if (!w.missing.empty()) what += fmt::format(", waiting for {}", ranks_text(w.missing));
      const Signature& sig = r.waiting->signature;
      if ((sig.op == CollectiveOp::kSend || sig.op == CollectiveOp::kRecv) && sig.root) {
        relative[static_cast<size_t>(r.rank)] = fmt::format(
            "blocked in {} on {} p2p seq {}, waiting for rank{:+} at {}",
            relative_call(sig, r.rank), w.group, w.seq, *sig.root - r.rank, location_text(a));
        ++relative_count[relative[static_cast<size_t>(r.rank)]];
      }
    } else if (a.state == RankActivity::State::kFailed ||
               a.state == RankActivity::State::kAborted) {
      what = fmt::format("{}: {}", state_name(a.state), a.error);
    } else if (a.state == RankActivity::State::kFinished) {
      what = finished_text(a);
      continue;
    } else {
      what = std::string(state_name(a.state));
    }
    what += " at " + location_text(a);
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> lines;
  std::map<std::string, size_t> line_of;
  for (const HangReport::Rank& r : report.ranks) {
    const std::string& rel = relative[static_cast<size_t>(r.rank)];
    const std::string& what =
        !rel.empty() && relative_count[rel] > 1 ? rel : absolute[static_cast<size_t>(r.rank)];
    auto [it, fresh] = line_of.emplace(what, lines.size());
    if (fresh) lines.emplace_back(what, std::vector<int64_t>{});
    lines[it->second].second.push_back(r.rank);
  }
  // The culprits' lines first: they are what the summary talks about.
  std::stable_partition(lines.begin(), lines.end(), [&](const auto& line) {
    return std::binary_search(report.culprits.begin(), report.culprits.end(), line.second.front());
  });
  out += "  per rank:\n";
  for (const auto& [what, who] : lines) {
    out += fmt::format("    rank{} {}: {}\n", who.size() > 1 ? "s" : "", rank_ranges(who), what);
  }
  // Flight recorders: one rank's for each story, the culprits' first (every rank's is in the
  // JSON).
  constexpr size_t kHistoriesShown = 6;
  size_t shown = 0;
  for (const auto& [what, who] : lines) {
    if (shown == kHistoriesShown) break;
    const RankActivity& a = report.ranks[static_cast<size_t>(who.front())].activity;
    const std::vector<CollectiveRecord> records = a.history.records(FlightRecorder::kReportDepth);
    if (records.empty()) continue;
    out += fmt::format(
        "    last {} collectives of rank {}{} (of {}, oldest first):\n", records.size(),
        who.front(), who.size() > 1 ? fmt::format(", the first of ranks {}", rank_ranges(who)) : "",
        a.history.total());
    for (const CollectiveRecord& c : records)
      out += "      " + hang_record_text(report, who.front(), c) + "\n";
    ++shown;
  }
  return out;
}

std::string hang_record_text(const HangReport& report, int64_t rank, const CollectiveRecord& c) {
  const auto label = report.group_labels.find(c.group_id);
  std::string where =
      label == report.group_labels.end() ? std::to_string(c.group_id) : label->second;
  if (c.peer >= 0) {
    const bool sends = c.signature.op == CollectiveOp::kSend;
    where += fmt::format(" p2p {}→{}", sends ? rank : c.peer, sends ? c.peer : rank);
  }
  return fmt::format("{} seq {}: {} at {}, {}", where, c.seq, c.signature.describe(), c.site.text(),
                     record_state_name(c.state));
}

}  // namespace meshsim::sim
